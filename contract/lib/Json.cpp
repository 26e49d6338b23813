//===- Json.cpp - reading the contract's JSON files -----------------------===//

#include "Json.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

using namespace rp::contract;
using json = nlohmann::json;

namespace {

/// Profiles are a few KiB; anything this large is not one.
constexpr long long kMaxBytes = 64ll << 20;

/// Records where a parse failed. nlohmann's DOM parser without exceptions
/// says only that it failed; its SAX parser says where and why.
struct ErrorFinder : nlohmann::json_sax<json> {
  size_t position = 0;
  std::string why;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t &) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t at, const std::string &,
                   const nlohmann::detail::exception &e) override {
    position = at;
    why = e.what();
    return false;
  }
};

} // namespace

bool rp::contract::readJsonFile(const std::string &path,
                                const std::string &what,
                                const std::string &readWhat, std::string &text,
                                std::string &error) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      const char *kind = S_ISDIR(st.st_mode)    ? "a folder"
                         : S_ISFIFO(st.st_mode) ? "a FIFO"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)
                             ? "a device"
                             : "not a regular file";
      error = what + " '" + path + "' is " + kind +
              ", not a regular file; give the path of a file";
      return false;
    }
    if (st.st_size > kMaxBytes) {
      error = what + " '" + path + "' is over 64 MiB; give a " + what +
              "'s JSON file";
      return false;
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error =
        "cannot read " + readWhat + " '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::ostringstream s;
  s << in.rdbuf();
  text = s.str();
  return true;
}

bool rp::contract::parseJson(const std::string &text, const std::string &what,
                             const std::string &source, json &out,
                             std::string &error) {
  out = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!out.is_discarded())
    return true;
  ErrorFinder finder;
  (void)json::sax_parse(text, &finder);
  // nlohmann counts the character it failed at from 1.
  size_t byte =
      std::min(finder.position ? finder.position - 1 : 0, text.size());
  size_t lineStart = text.rfind('\n', byte ? byte - 1 : 0);
  lineStart = lineStart == std::string::npos || byte == 0 ? 0 : lineStart + 1;
  size_t line = 1;
  for (size_t i = 0; i < lineStart; ++i)
    line += text[i] == '\n';
  // "[json.exception.parse_error.101] parse error at line 2, column 1:
  // syntax error ..." keeps what follows the position.
  std::string why = finder.why;
  if (size_t colon = why.find(": "); colon != std::string::npos)
    why = why.substr(colon + 2);
  error = what + " '" + source + "' is not valid JSON: [" +
          std::to_string(line) + ":" + std::to_string(byte - lineStart) +
          ", byte=" + std::to_string(byte) + "]: " + why;
  return false;
}
