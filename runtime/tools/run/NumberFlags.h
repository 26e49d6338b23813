//===- NumberFlags.h - rp-run's numeric flags, read strictly ----*- C++ -*-===//
//
// CLI11 reads an empty value as 0 (`--lr ""` trained nothing, `--eps ""`
// gave NaN from step 2), takes hex and leading spaces, and wraps `--seed
// -1`. rp-run's numeric flags are therefore taken as text and read by
// NumberText.h's parser once the command line is parsed, each against its
// range; a refusal names the flag, the value as given and the range.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TOOLS_RUN_NUMBERFLAGS_H
#define RP_RUNTIME_TOOLS_RUN_NUMBERFLAGS_H

#include "rp/contract/NumberText.h"
#include "rp/runtime/Status.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <deque>
#include <functional>
#include <limits>
#include <string>

namespace rp::runtime::run {

class NumberFlags {
public:
  /// A whole-number flag from `lo` to `hi`; `range` says it in words when
  /// the range is checked later, against the plan (else lo and hi do).
  template <typename T>
  CLI::Option *whole(CLI::App &app, const char *flag, T &target, uint64_t lo,
                     uint64_t hi, const char *description,
                     const char *range = nullptr) {
    static_assert(std::is_unsigned_v<T>, "whole numbers are unsigned");
    Entry &e = entries.emplace_back();
    e.flag = flag;
    e.read = [&target, lo, hi, flag, range](const std::string &text) {
      std::optional<uint64_t> v = ::rp::numbers::parseUnsignedText(text);
      if (v && *v >= lo && *v <= hi) {
        target = T(*v);
        return Status::ok();
      }
      return invalidArgument(
          std::string(flag) + " " + ::rp::numbers::shownText(text) + ": " +
          (range ? std::string(range)
                 : "give a whole number from " + std::to_string(lo) + " to " +
                       std::to_string(hi)));
    };
    return app.add_option(flag, e.text, description)->type_name("UINT");
  }

  /// A finite real flag from `lo` up to `hi` (`hi` excluded when
  /// `hiOpen`); `range` says it in words.
  CLI::Option *real(CLI::App &app, const char *flag, double &target, double lo,
                    double hi, bool hiOpen, const char *range,
                    const char *description) {
    Entry &e = entries.emplace_back();
    e.flag = flag;
    e.read = [&target, lo, hi, hiOpen, flag, range](const std::string &text) {
      std::optional<double> v = ::rp::numbers::parseRealText(text);
      if (v && *v >= lo && (hiOpen ? *v < hi : *v <= hi)) {
        target = *v;
        return Status::ok();
      }
      return invalidArgument(std::string(flag) + " " +
                             ::rp::numbers::shownText(text) + ": " + range);
    };
    return app.add_option(flag, e.text, description)->type_name("FLOAT");
  }

  /// Reads every flag that was given, in the order they were added; the
  /// first refusal.
  Status read(const CLI::App &app) const {
    for (const Entry &e : entries)
      if (app.count(e.flag) > 0)
        if (Status s = e.read(e.text); s.failed())
          return s;
    return Status::ok();
  }

private:
  struct Entry {
    std::string flag, text;
    std::function<Status(const std::string &)> read;
  };
  /// A deque: CLI11 keeps a pointer to each entry's text.
  std::deque<Entry> entries;
};

} // namespace rp::runtime::run

#endif // RP_RUNTIME_TOOLS_RUN_NUMBERFLAGS_H
