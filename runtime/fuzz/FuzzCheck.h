//===- FuzzCheck.h - what every rp fuzz target counts as a finding -*- C++
//-*-===//
//
// A reader under fuzzing may refuse its input (a user error, exit 1 in the
// tools); anything else is a finding and aborts, so libFuzzer saves the
// input: an internal error (exit 2 in the tools), an exception, or a result
// that contradicts itself (a silent wrong answer). Crashes, leaks and
// undefined behaviour are the sanitizers' findings; hangs libFuzzer's
// -timeout.
//
//===----------------------------------------------------------------------===//

#ifndef RP_FUZZ_FUZZCHECK_H
#define RP_FUZZ_FUZZCHECK_H

#include "rp/runtime/Status.h"

#include <cstdio>
#include <cstdlib>

namespace rp::fuzz {

/// Aborts with `what` when `ok` is false.
inline void require(bool ok, const char *what) {
  if (ok)
    return;
  std::fprintf(stderr, "rp fuzz finding: %s\n", what);
  std::abort();
}

/// A refusal is fine; an internal error is a finding.
inline void requireUserError(const runtime::Status &status) {
  if (status.isOk())
    return;
  if (runtime::exitCode(status) != 1)
    std::fprintf(stderr, "%s\n", status.toString().c_str());
  require(runtime::exitCode(status) == 1,
          "an internal error (the tools would exit 2)");
}

} // namespace rp::fuzz

#endif // RP_FUZZ_FUZZCHECK_H
