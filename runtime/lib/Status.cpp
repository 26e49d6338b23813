//===- Status.cpp - rp runtime status and expected values -----------------===//
//
// Names and exit codes live here, in one switch each, so that adding a code
// forces a decision about how the tools report it.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Status.h"

namespace rp::runtime {

std::string_view statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::Ok:
    return "ok";
  case StatusCode::InvalidArgument:
    return "invalid argument";
  case StatusCode::NotFound:
    return "not found";
  case StatusCode::Unsupported:
    return "unsupported";
  case StatusCode::ResourceExhausted:
    return "resource exhausted";
  case StatusCode::InvalidFormat:
    return "invalid format";
  case StatusCode::Unavailable:
    return "unavailable";
  case StatusCode::Internal:
    return "internal error";
  case StatusCode::DeadlineExceeded:
    return "deadline exceeded";
  }
  return "unknown status";
}

std::string Status::toString() const {
  std::string text(statusCodeName(code));
  if (!message.empty()) {
    text += ": ";
    text += message;
  }
  return text;
}

Status invalidArgument(std::string message) {
  return Status(StatusCode::InvalidArgument, std::move(message));
}
Status notFound(std::string message) {
  return Status(StatusCode::NotFound, std::move(message));
}
Status unsupported(std::string message) {
  return Status(StatusCode::Unsupported, std::move(message));
}
Status resourceExhausted(std::string message) {
  return Status(StatusCode::ResourceExhausted, std::move(message));
}
Status invalidFormat(std::string message) {
  return Status(StatusCode::InvalidFormat, std::move(message));
}
Status unavailable(std::string message) {
  return Status(StatusCode::Unavailable, std::move(message));
}
Status internalError(std::string message) {
  return Status(StatusCode::Internal, std::move(message));
}
Status deadlineExceeded(std::string message) {
  return Status(StatusCode::DeadlineExceeded, std::move(message));
}

int exitCode(const Status &status) {
  switch (status.getCode()) {
  case StatusCode::Ok:
    return 0;
  case StatusCode::Internal:
  case StatusCode::DeadlineExceeded:
    return 2;
  case StatusCode::InvalidArgument:
  case StatusCode::NotFound:
  case StatusCode::Unsupported:
  case StatusCode::ResourceExhausted:
  case StatusCode::InvalidFormat:
  case StatusCode::Unavailable:
    return 1;
  }
  // A code outside the enum is memory corruption or a bug, not user error.
  return 2;
}

} // namespace rp::runtime
