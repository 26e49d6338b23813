//===- StatusTest.cpp - rp runtime Status and Expected tests --------------===//
//
// The exit codes are a user-visible contract (DESIGN.md), so each code's
// mapping is pinned here rather than left to the switch in Status.cpp.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Status.h"
#include "rp/runtime/LastResort.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

using namespace rp::runtime;

static Expected<int> parsePositive(int value) {
  if (value <= 0)
    return invalidArgument("expected a positive value but got " +
                           std::to_string(value));
  return value;
}

namespace {

TEST(StatusTest, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.isOk());
  EXPECT_FALSE(status.failed());
  EXPECT_EQ(status.getCode(), StatusCode::Ok);
  EXPECT_EQ(status.getMessage(), "");
  EXPECT_EQ(status.toString(), "ok");
  EXPECT_EQ(status, Status::ok());
}

TEST(StatusTest, FactoriesSetCodeAndMessage) {
  struct Case {
    Status status;
    StatusCode code;
    const char *text;
  };
  const Case cases[] = {
      {invalidArgument("bad --steps"), StatusCode::InvalidArgument,
       "invalid argument: bad --steps"},
      {notFound("no file x.rpplan"), StatusCode::NotFound,
       "not found: no file x.rpplan"},
      {unsupported("op Foo"), StatusCode::Unsupported, "unsupported: op Foo"},
      {resourceExhausted("needs 30 GB"), StatusCode::ResourceExhausted,
       "resource exhausted: needs 30 GB"},
      {invalidFormat("schema 9"), StatusCode::InvalidFormat,
       "invalid format: schema 9"},
      {unavailable("no GPU"), StatusCode::Unavailable, "unavailable: no GPU"},
      {internalError("broken"), StatusCode::Internal, "internal error: broken"},
      {deadlineExceeded("stalled"), StatusCode::DeadlineExceeded,
       "deadline exceeded: stalled"},
  };
  for (const Case &c : cases) {
    EXPECT_TRUE(c.status.failed());
    EXPECT_EQ(c.status.getCode(), c.code);
    EXPECT_EQ(c.status.toString(), c.text);
  }
  EXPECT_EQ(notFound("a").getMessage(), "a");
  EXPECT_NE(notFound("a"), notFound("b"));
  EXPECT_NE(notFound("a"), invalidArgument("a"));
}

TEST(StatusTest, ExitCodes) {
  EXPECT_EQ(exitCode(Status::ok()), 0);
  EXPECT_EQ(exitCode(invalidArgument("x")), 1);
  EXPECT_EQ(exitCode(notFound("x")), 1);
  EXPECT_EQ(exitCode(unsupported("x")), 1);
  EXPECT_EQ(exitCode(resourceExhausted("x")), 1);
  EXPECT_EQ(exitCode(invalidFormat("x")), 1);
  EXPECT_EQ(exitCode(unavailable("x")), 1);
  EXPECT_EQ(exitCode(internalError("x")), 2);
  EXPECT_EQ(exitCode(deadlineExceeded("x")), 2);
}

TEST(StatusTest, ExpectedHoldsValue) {
  Expected<int> result = parsePositive(7);
  ASSERT_TRUE(result);
  EXPECT_TRUE(result.hasValue());
  EXPECT_EQ(*result, 7);
  EXPECT_EQ(result.value(), 7);
  EXPECT_TRUE(result.getStatus().isOk());
}

TEST(StatusTest, ExpectedHoldsError) {
  Expected<int> result = parsePositive(-3);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.getStatus().getCode(), StatusCode::InvalidArgument);
  EXPECT_EQ(result.getStatus().getMessage(),
            "expected a positive value but got -3");
  EXPECT_EQ(exitCode(result.getStatus()), 1);
}

TEST(StatusTest, ExpectedMoveOnlyValue) {
  Expected<std::unique_ptr<std::string>> result =
      std::make_unique<std::string>("plan");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->get()->size(), 4u);
  std::unique_ptr<std::string> taken = std::move(result).value();
  EXPECT_EQ(*taken, "plan");
}

TEST(StatusTest, ExpectedStringValueIsNotAnError) {
  Expected<std::string> result = std::string("text");
  ASSERT_TRUE(result);
  EXPECT_EQ(*result, "text");
}

TEST(StatusTest, ExpectedFromOkStatusIsInternalError) {
  Expected<int> result = Status::ok();
  ASSERT_FALSE(result);
  EXPECT_EQ(result.getStatus().getCode(), StatusCode::Internal);
  EXPECT_EQ(exitCode(result.getStatus()), 2);
}

// The last-resort handler: an exception that escapes (here from a worker
// thread, where main's own try/catch cannot see it) or a bare
// std::terminate ends in DESIGN.md's internal error, exit 2 with a message,
// never an abort.
TEST(LastResortDeathTest, ExceptionEscapingAThreadIsAnInternalError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        installLastResort("rp-test");
        std::thread([] { throw std::runtime_error("boom"); }).join();
      },
      testing::ExitedWithCode(2),
      "rp-test: internal error: uncaught exception: boom \\(a bug in rp");
}

TEST(LastResortDeathTest, TerminateWithoutAnExceptionIsAnInternalError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        installLastResort("rp-test");
        std::terminate();
      },
      testing::ExitedWithCode(2),
      "rp-test: internal error: std::terminate without an exception");
}

} // namespace
