//===- UnitText.h - sizes and times as the passes' messages say them ------===//
//
// The partition policy, rp-choose-loss-fusion and rp-plan-memory compare
// budgets, peaks and step times in their messages; one spelling keeps a
// figure in one message the same as in the next.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_UNITTEXT_H
#define RP_ANALYSIS_UNITTEXT_H

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace mlir::rp {

/// `bytes` in GiB to three significant digits ("1.5 GiB").
inline std::string gibText(int64_t bytes) {
  std::string s;
  llvm::raw_string_ostream(s)
      << llvm::format("%.3g GiB", bytes / double(1ull << 30));
  return s;
}

/// A time in milliseconds to the microsecond ("12.345 ms").
inline std::string msText(double ms) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.3f ms", ms);
  return s;
}

} // namespace mlir::rp

#endif // RP_ANALYSIS_UNITTEXT_H
