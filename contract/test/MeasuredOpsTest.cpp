//===- MeasuredOpsTest.cpp - measured op times in a profile ---------------===//
//
// A measured profile's "ops" (Measured.h, docs/hardware-profiles.md): per-call
// kernel times keyed by op kind, dtype, shapes and the attributes that change
// a call's work, read in place of the model's estimate for exactly the calls
// they name.
//
//===----------------------------------------------------------------------===//

#include "rp/timing/Hardware.h"
#include "rp/timing/Measured.h"

#include <gtest/gtest.h>

using namespace rp::timing;

namespace {

/// f32 operands of the given shapes.
CallOperands operands(std::vector<std::vector<int64_t>> in,
                      std::vector<std::vector<int64_t>> out) {
  CallOperands c;
  for (auto &s : in)
    c.inputs.push_back({s, 4});
  for (auto &s : out)
    c.outputs.push_back({s, 4});
  return c;
}

} // namespace

/// A measured profile's "ops" change exactly the calls they name: one
/// matmul shape takes its measured time (launches included), a matmul of
/// another shape and every other op keep the model's, and the file reads
/// back what it wrote.
TEST(MeasuredOpsTest, MeasuredOpsChangeOnlyTheCallsTheyName) {
  std::string error;
  std::optional<HardwareModel> hw = loadHardwareModel("rtx4090", error);
  ASSERT_TRUE(hw) << error;
  CallOperands named = operands({{64, 128}, {128, 256}}, {{64, 256}});
  CallOperands other = operands({{64, 128}, {128, 512}}, {{64, 512}});
  MeasuredTimes times;
  MeasuredOpTime t{
      "matmul", "f32", {{64, 128}, {128, 256}}, {{64, 256}}, 7.5, 3, {0, 0, 0}};
  times.ops[measuredOpKey(t.op, t.dtype, t.inputs, t.outputs, t.attrs)] = t;
  uint16_t matmul = uint16_t(kernelOpIndex("matmul"));
  EXPECT_EQ(timedCallMs(*hw, &times, matmul, named, {0, 0}, {}), 7.5);
  EXPECT_EQ(timedCallMs(*hw, &times, matmul, other, {0, 0}, {}),
            callMs(*hw, matmul, other, {0, 0}));
  EXPECT_EQ(timedCallMs(*hw, nullptr, matmul, named, {0, 0}, {}),
            callMs(*hw, matmul, named, {0, 0}));
  int changed = 0;
  for (const char *name : {"add", "mul", "exp", "silu", "matmul", "softmax",
                           "transpose", "cast"}) {
    uint16_t op = uint16_t(kernelOpIndex(name));
    double model = callMs(*hw, op, named, {0, 0});
    double timed = timedCallMs(*hw, &times, op, named, {0, 0}, {});
    changed += model != timed;
    if (op != matmul)
      EXPECT_EQ(model, timed) << kernelOpName(op);
  }
  EXPECT_EQ(changed, 1);
  std::optional<MeasuredTimes> back =
      parseMeasuredTimes(formatMeasuredTimes(times), "t.json", error);
  ASSERT_TRUE(back) << error;
  ASSERT_EQ(back->ops.size(), 1u);
  EXPECT_EQ(back->ops.begin()->second.calls, 3u);
  EXPECT_EQ(formatMeasuredTimes(*back), formatMeasuredTimes(times));
}

/// A malformed "ops" section is refused with what is wrong and where.
TEST(MeasuredOpsTest, MalformedMeasuredOpsAreRefused) {
  const char *op = R"({"op": "matmul", "dtype": "f32", "inputs": [[2, 3]],
                       "outputs": [[2, 3]], "ms": 1, "calls": 2})";
  auto parse = [&](const std::string &text, std::string &error) {
    return parseMeasuredTimes(text, "bad.json", error);
  };
  std::string error;
  ASSERT_TRUE(
      parse(std::string(R"({"ops_format": 2, "ops": [)") + op + "]}", error))
      << error;
  struct Case {
    std::string text, message;
  };
  std::vector<Case> cases = {
      {std::string(R"({"ops": [)") + op + "]}", "needs \"ops_format\": 2"},
      // Format 1's entries may mix calls its key could not tell apart.
      {std::string(R"({"ops_format": 1, "ops": [)") + op + "]}",
       "\"ops_format\" 1 keys calls without their attributes"},
      {std::string(R"({"ops_format": 3, "ops": [)") + op + "]}",
       "\"ops_format\" 3 is not the one this build reads (2)"},
      {R"({"ops_format": 2, "ops": [{"op": "nope", "dtype": "f32"}]})",
       "\"nope\" is not an op kind"},
      {R"({"ops_format": 2, "ops": [{"op": "add", "dtype": "f32",
          "inputs": [[-1]], "outputs": [], "ms": 1, "calls": 1}]})",
       "\"inputs\" must be an array of shapes"},
      {R"({"ops_format": 2, "ops": [{"op": "add", "dtype": "f32",
          "inputs": [], "outputs": [], "ms": -1, "calls": 1}]})",
       "\"ms\" must be a number of milliseconds"},
      {R"({"ops_format": 2, "ops": [{"op": "add", "dtype": "f32",
          "inputs": [], "outputs": [], "ms": 1, "calls": 0}]})",
       "\"calls\" must be how many calls were timed"},
      {R"({"ops_format": 2, "ops": [{"op": "matmul", "dtype": "f32",
          "inputs": [], "outputs": [], "attrs": [0.5], "ms": 1,
          "calls": 1}]})",
       "\"attrs\" must be an array of integers"},
      // An add has no attribute that changes its work.
      {R"({"ops_format": 2, "ops": [{"op": "add", "dtype": "f32",
          "inputs": [], "outputs": [], "attrs": [1], "ms": 1,
          "calls": 1}]})",
       "a add call has no \"attrs\""},
      {std::string(R"({"ops_format": 2, "ops": [)") + op + "," + op + "]}",
       "is listed twice"},
  };
  for (const Case &c : cases) {
    error.clear();
    EXPECT_FALSE(parse(c.text, error)) << c.text;
    EXPECT_NE(error.find(c.message), std::string::npos) << error;
    EXPECT_NE(error.find("bad.json"), std::string::npos) << error;
  }
}

/// Calls that differ only in an attribute that changes their work (a
/// causal mask, a window, a soft-cap, a transposed operand, the reduced
/// axes) get entries of their own: a profile naming one leaves the other
/// at the model's time; attributes that only pick data (a slice's offsets)
/// share one.
TEST(MeasuredOpsTest, MeasuredOpsKeepCallsApartByTheirAttributes) {
  std::string error;
  std::optional<HardwareModel> hw = loadHardwareModel("rtx4090", error);
  ASSERT_TRUE(hw) << error;
  struct Pair {
    const char *op;
    CallOperands call;
    std::vector<int64_t> ints, otherInts;
    std::vector<double> floats, otherFloats;
  };
  CallOperands qkv = operands({{1, 4, 64, 32}, {1, 4, 64, 32}, {1, 4, 64, 32}},
                              {{1, 4, 64, 32}});
  CallOperands square = operands({{64, 64}, {64, 64}}, {{64, 64}});
  CallOperands rows = operands({{64, 64}}, {{64}});
  std::vector<Pair> pairs = {
      {"attention", qkv, {1, 0}, {0, 0}, {0.2}, {0.2}},        // causal
      {"attention", qkv, {1, 0, 16}, {1, 0}, {0.2}, {0.2}},    // window
      {"attention", qkv, {1, 0}, {1, 0}, {0.2, 30}, {0.2}},    // soft-cap
      {"attention_grad", qkv, {1, 0}, {0, 0}, {0.2}, {0.2}},   // causal
      {"matmul", square, {0, 1}, {0, 0}, {}, {}},              // transpose_b
      {"reduce", rows, {0, 0, 1}, {0, 0, 0}, {}, {}},          // axes
      {"norm_grad", rows, {1, 1, 0, 1}, {1, 1, 0, 0}, {}, {}}, // rms
  };
  for (const Pair &p : pairs) {
    uint16_t op = uint16_t(kernelOpIndex(p.op));
    SCOPED_TRACE(std::string(p.op) + " " +
                 measuredOpKey(op, p.call, p.ints, p.floats));
    std::string key = measuredOpKey(op, p.call, p.ints, p.floats);
    std::string otherKey =
        measuredOpKey(op, p.call, p.otherInts, p.otherFloats);
    ASSERT_NE(key, otherKey);
    MeasuredTimes times;
    MeasuredOpTime t{p.op,
                     p.call.dtype,
                     {},
                     {},
                     123.0,
                     2,
                     measuredOpAttrs(op, p.ints, p.floats)};
    for (const Operand &o : p.call.inputs)
      t.inputs.push_back(o.shape);
    for (const Operand &o : p.call.outputs)
      t.outputs.push_back(o.shape);
    ASSERT_EQ(measuredOpKey(t.op, t.dtype, t.inputs, t.outputs, t.attrs), key);
    times.ops[key] = t;
    // The named call takes its time; the other keeps the model's.
    EXPECT_EQ(timedCallMs(*hw, &times, op, p.call, p.ints, p.floats), 123.0);
    EXPECT_EQ(timedCallMs(*hw, &times, op, p.call, p.otherInts, p.otherFloats),
              callMs(*hw, op, p.call, p.otherInts));
    // Both entries written and read back apart.
    MeasuredOpTime u = t;
    u.attrs = measuredOpAttrs(op, p.otherInts, p.otherFloats);
    u.ms = 4.5;
    times.ops[otherKey] = u;
    std::optional<MeasuredTimes> back =
        parseMeasuredTimes(formatMeasuredTimes(times), "t.json", error);
    ASSERT_TRUE(back) << error;
    ASSERT_EQ(back->ops.size(), 2u);
    EXPECT_EQ(back->ops.at(key).ms, 123.0);
    EXPECT_EQ(back->ops.at(otherKey).ms, 4.5);
  }
  // A slice's offsets pick rows, the work is the same: one entry.
  uint16_t slice = uint16_t(kernelOpIndex("slice"));
  CallOperands half = operands({{64, 64}}, {{32, 64}});
  EXPECT_EQ(measuredOpKey(slice, half, {0, 0, 1, 1}, {}),
            measuredOpKey(slice, half, {32, 0, 1, 1}, {}));
  EXPECT_NE(measuredOpKey(slice, half, {0, 0, 1, 1}, {}),
            measuredOpKey(slice, half, {0, 0, 2, 1}, {}));
}

/// Shapes are written on one line, so a large model's profile stays
/// readable; the reader takes the file as before.
TEST(MeasuredOpsTest, MeasuredOpsWriteShapesOnOneLine) {
  MeasuredTimes times;
  MeasuredOpTime t{"matmul",          "f16", {{4, 2048, 2048}, {2048, 6144}},
                   {{4, 2048, 6144}}, 1.5,   7,
                   {0, 0, 0}};
  times.ops[measuredOpKey(t.op, t.dtype, t.inputs, t.outputs, t.attrs)] = t;
  std::string text = formatMeasuredTimes(times);
  EXPECT_NE(text.find(R"(
      "inputs": [
        [4, 2048, 2048],
        [2048, 6144]
      ],
      "outputs": [
        [4, 2048, 6144]
      ],
      "attrs": [0, 0, 0],
      "ms": 1.5,)"),
            std::string::npos)
      << text;
  std::string error;
  std::optional<MeasuredTimes> back = parseMeasuredTimes(text, "t", error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->ops.begin()->second.inputs, t.inputs);
  EXPECT_EQ(formatMeasuredTimes(*back), text);
}
