//===- Json.h - reading the contract's JSON files ---------------*- C++ -*-===//
//
// What the hardware and measured profile readers share: a file is read
// only when it is a regular file of a sane size (a FIFO without a writer
// would block the read forever, /dev/zero would fill memory), and a JSON
// syntax error says where it is, as [line:column, byte=offset] (line from
// 1, column and byte from 0).
//
//===----------------------------------------------------------------------===//

#ifndef RP_CONTRACT_LIB_JSON_H
#define RP_CONTRACT_LIB_JSON_H

#include <nlohmann/json.hpp>

#include <string>

namespace rp::contract {

/// Reads `path` into `text`. `what` names the file in messages ("hardware
/// profile"), `readWhat` in the one for an unreadable file ("the measured
/// profile").
bool readJsonFile(const std::string &path, const std::string &what,
                  const std::string &readWhat, std::string &text,
                  std::string &error);

/// Parses `text`; on a syntax error, `error` is "<what> '<source>' is not
/// valid JSON: [line:column, byte=offset]: <why>".
bool parseJson(const std::string &text, const std::string &what,
               const std::string &source, nlohmann::json &out,
               std::string &error);

} // namespace rp::contract

#endif // RP_CONTRACT_LIB_JSON_H
