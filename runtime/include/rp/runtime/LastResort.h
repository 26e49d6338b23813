//===- LastResort.h - no exception escapes a tool's main --------*- C++ -*-===//
//
// The runtime reports failures as Status values; an exception that still
// escapes (a bug: a library call that throws where none was expected) would
// end the process in std::terminate's abort, a crash with no message. Every
// tool installs this handler first thing in main, so such a bug ends as
// DESIGN.md's internal error instead: a message on stderr and exit code 2.
// It also catches exceptions escaping worker threads, which main's own
// try/catch could not.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_LASTRESORT_H
#define RP_RUNTIME_LASTRESORT_H

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace rp::runtime {

namespace detail {
inline const char *&lastResortTool() {
  static const char *tool = "rp";
  return tool;
}

[[noreturn]] inline void lastResort() {
  const char *what = "an unknown exception";
  std::exception_ptr error = std::current_exception();
  try {
    if (error)
      std::rethrow_exception(error);
    what = "std::terminate without an exception";
  } catch (const std::exception &e) {
    std::fprintf(stderr,
                 "%s: internal error: uncaught exception: %s (a bug in rp; "
                 "please report it with the command that ran)\n",
                 lastResortTool(), e.what());
    std::_Exit(2);
  } catch (...) {
  }
  std::fprintf(stderr,
               "%s: internal error: %s (a bug in rp; please report it with "
               "the command that ran)\n",
               lastResortTool(), what);
  std::_Exit(2);
}
} // namespace detail

/// Makes any exception that escapes `tool`'s main or a thread an internal
/// error (exit 2 with a message) rather than an abort.
inline void installLastResort(const char *tool) {
  detail::lastResortTool() = tool;
  std::set_terminate(detail::lastResort);
}

} // namespace rp::runtime

#endif // RP_RUNTIME_LASTRESORT_H
