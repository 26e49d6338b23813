//===- CheckNumberFlags.cpp - rp-compile's numeric flags, strictly --------===//
//
// Apart from rp-compile.cpp, whose `using namespace mlir` makes `rp` name
// mlir::rp: the parser is the runtime's (::rp::runtime).
//
//===----------------------------------------------------------------------===//

#include "rp/contract/NumberText.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <utility>

using llvm::StringRef;

/// Reads the text of every numeric flag with the one parser of rp's tools
/// (rp/contract/NumberText.h) before LLVM's does: cl reads an empty double
/// as 0 (`--budget-gib ""` planned against the profile's memory), takes
/// "nan", "inf" and hex floats, and integers in any radix ("010" is 8).
/// The ranges are checked after parsing, in main.
bool checkNumberFlags(int argc, char **argv) {
  enum Kind { real, whole, integer };
  static const std::pair<const char *, Kind> flags[] = {
      {"budget-gib", real},        {"lora-alpha", real},
      {"lora-dropout", real},      {"lora-rank", integer},
      {"devices", whole},          {"microbatches", whole},
      {"pass-shift", integer},     {"tail-jobs", whole},
      {"passes-in-flight", whole}, {"arena-copies", whole},
      {"host-budget-gib", real},   {"host-slack-pct", real}};
  for (int i = 1; i < argc; ++i) {
    StringRef arg = argv[i], value;
    if (arg == "--")
      break;
    if (!arg.consume_front("-"))
      continue;
    arg.consume_front("-");
    auto [name, inlineValue] = arg.split('=');
    bool given = arg.contains('=');
    for (auto [flag, kind] : flags) {
      if (name != flag)
        continue;
      if (!given && i + 1 >= argc)
        break; // cl says the value is missing
      value = given ? inlineValue : StringRef(argv[i + 1]);
      std::string_view text(value.data(), value.size());
      bool ok = kind == real ? bool(::rp::numbers::parseRealText(text))
                : kind == integer
                    ? bool(::rp::numbers::parseSignedText(text))
                    : bool(::rp::numbers::parseUnsignedText(text));
      if (ok)
        continue;
      llvm::errs() << "rp-compile: --" << flag << " "
                   << ::rp::numbers::shownText(text) << ": "
                   << (kind == real      ? "give a finite decimal number"
                       : kind == integer ? "give a decimal integer"
                                         : "give a whole number (decimal "
                                           "digits)")
                   << "\n";
      return false;
    }
  }
  return true;
}
