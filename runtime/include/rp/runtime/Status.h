//===- Status.h - rp runtime status and expected values ---------*- C++ -*-===//
//
// Errors cross the runtime's API as values, never as exceptions: the runtime
// is driven from tools that must turn every failure into a message and an
// exit code (DESIGN.md: 1 for user errors, 2 for internal ones), and from
// worker threads where an escaping exception would terminate the process.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_STATUS_H
#define RP_RUNTIME_STATUS_H

#include <cassert>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace rp::runtime {

/// What went wrong, coarse enough that a tool can pick its exit code from it.
/// Every code except `Internal` and `DeadlineExceeded` describes something
/// the user can fix.
enum class StatusCode {
  Ok,
  /// A bad flag, value or argument.
  InvalidArgument,
  /// A file, parameter, input or device that was named does not exist.
  NotFound,
  /// A model or construct rp does not handle.
  Unsupported,
  /// The plan does not fit its memory budget.
  ResourceExhausted,
  /// A file that is malformed, corrupted, or of another schema version.
  InvalidFormat,
  /// Something the run needs is absent on this machine (e.g. no GPU).
  Unavailable,
  /// A bug in rp: a broken invariant, never the user's fault.
  Internal,
  /// Work stopped making progress (the executor's watchdog): a plan that
  /// passed validation and still stalls is a bug in rp, as Internal.
  DeadlineExceeded,
};

/// A short lowercase name ("invalid argument") for messages.
std::string_view statusCodeName(StatusCode code);

/// The outcome of an operation: ok, or a code plus a message for the user.
class [[nodiscard]] Status {
public:
  /// The default status is ok, so `return {};` reads as success.
  Status() = default;
  Status(StatusCode code, std::string message)
      : code(code), message(std::move(message)) {}

  static Status ok() { return Status(); }

  bool isOk() const { return code == StatusCode::Ok; }
  bool failed() const { return !isOk(); }
  StatusCode getCode() const { return code; }
  const std::string &getMessage() const { return message; }

  /// "invalid argument: <message>", or "ok".
  std::string toString() const;

  friend bool operator==(const Status &a, const Status &b) {
    return a.code == b.code && a.message == b.message;
  }
  friend bool operator!=(const Status &a, const Status &b) { return !(a == b); }

private:
  StatusCode code = StatusCode::Ok;
  std::string message;
};

Status invalidArgument(std::string message);
Status notFound(std::string message);
Status unsupported(std::string message);
Status resourceExhausted(std::string message);
Status invalidFormat(std::string message);
Status unavailable(std::string message);
Status internalError(std::string message);
Status deadlineExceeded(std::string message);

/// The process exit code DESIGN.md assigns to a status: 0 ok, 2 internal,
/// 1 for everything the user can fix.
int exitCode(const Status &status);

/// Either a value or a failed Status. Like llvm::Expected it converts to true
/// when it holds a value, but it need not be checked before destruction.
template <typename T> class [[nodiscard]] Expected {
  static_assert(!std::is_same_v<std::decay_t<T>, Status>,
                "Expected<Status> is ambiguous; return Status instead");

public:
  Expected(T value) : storage(std::in_place_index<0>, std::move(value)) {}
  /// An ok status carries no value, so it is a caller bug; it is kept as an
  /// internal error rather than asserted so release builds stay defined.
  Expected(Status status)
      : storage(std::in_place_index<1>,
                status.isOk()
                    ? internalError("Expected<T> built from an ok Status")
                    : std::move(status)) {}

  bool hasValue() const { return storage.index() == 0; }
  explicit operator bool() const { return hasValue(); }

  T &value() & {
    assert(hasValue() && "value() on an Expected holding an error");
    return *std::get_if<0>(&storage);
  }
  const T &value() const & {
    assert(hasValue() && "value() on an Expected holding an error");
    return *std::get_if<0>(&storage);
  }
  T &&value() && {
    assert(hasValue() && "value() on an Expected holding an error");
    return std::move(*std::get_if<0>(&storage));
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

  /// The error, or an ok Status when a value is held.
  Status getStatus() const {
    if (const Status *status = std::get_if<1>(&storage))
      return *status;
    return Status::ok();
  }

private:
  std::variant<T, Status> storage;
};

} // namespace rp::runtime

#endif // RP_RUNTIME_STATUS_H
