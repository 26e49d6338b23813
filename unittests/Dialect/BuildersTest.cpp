//===- BuildersTest.cpp - rp op builders infer result types ---------------===//
//
// The importer and the tracer build ops through these builders, so a wrong
// inferred type would surface only as a verifier error far from its cause.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::rp;

namespace {

class BuildersTest : public ::testing::Test {
protected:
  BuildersTest() : builder(&context) {
    context.loadDialect<RPDialect, func::FuncDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
  }

  Value param(StringRef name, ArrayRef<int64_t> shape, Type element = {}) {
    auto type =
        RankedTensorType::get(shape, element ? element : builder.getF32Type());
    return ParamOp::create(builder, builder.getUnknownLoc(), type, name,
                           /*trainable=*/false, nullptr, nullptr, nullptr);
  }

  ArrayRef<int64_t> shapeOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
};

TEST(BroadcastShapes, FollowsNumpyRules) {
  auto r = broadcastShapes({2, 1, 4}, {3, 1});
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(*r, (SmallVector<int64_t>{2, 3, 4}));
  EXPECT_EQ(*broadcastShapes({}, {5}), (SmallVector<int64_t>{5}));
  EXPECT_TRUE(failed(broadcastShapes({2, 3}, {4})));
}

TEST_F(BuildersTest, BinaryOpInfersBroadcastShape) {
  Value a = param("a", {2, 1, 8}), b = param("b", {3, 8});
  auto add = AddOp::create(builder, builder.getUnknownLoc(), a, b);
  EXPECT_EQ(shapeOf(add), (ArrayRef<int64_t>{2, 3, 8}));
  auto cmp =
      CmpOp::create(builder, builder.getUnknownLoc(), CmpPredicate::lt, a, b);
  EXPECT_TRUE(cmp.getType().getElementType().isInteger(1));
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(BuildersTest, MatmulInfersBatchAndTransposes) {
  Value x = param("x", {4, 1, 16, 32}), w = param("w", {3, 64, 32});
  auto mm = MatmulOp::create(builder, builder.getUnknownLoc(), x, w,
                             /*transposeA=*/false, /*transposeB=*/true);
  EXPECT_EQ(shapeOf(mm), (ArrayRef<int64_t>{4, 3, 16, 64}));
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(BuildersTest, MismatchedMatmulIsReportedByTheVerifier) {
  Value x = param("x", {16, 32}), w = param("w", {16, 64});
  MatmulOp::create(builder, builder.getUnknownLoc(), x, w);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_NE(message.find("contraction sizes differ"), std::string::npos)
      << message;
}

TEST_F(BuildersTest, ShapeOpsInferResults) {
  Location loc = builder.getUnknownLoc();
  Value x = param("x", {2, 8, 4, 16});
  auto t = TransposeOp::create(builder, loc, x, {0, 2, 1, 3});
  EXPECT_EQ(shapeOf(t), (ArrayRef<int64_t>{2, 4, 8, 16}));
  auto r = ReduceOp::create(builder, loc, ReduceKind::mean, x, {1, 3},
                            /*keepDims=*/true);
  EXPECT_EQ(shapeOf(r), (ArrayRef<int64_t>{2, 1, 4, 1}));
  Value table = param("wte", {100, 16});
  Value ids = param("ids", {2, 8}, builder.getI64Type());
  auto g = GatherOp::create(builder, loc, table, ids, 0);
  EXPECT_EQ(shapeOf(g), (ArrayRef<int64_t>{2, 8, 16}));
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(BuildersTest, LayerBindsInputsToBlockArguments) {
  Location loc = builder.getUnknownLoc();
  Value x = param("x", {2, 8}), w = param("w", {8, 8});
  auto layer = LayerOp::create(builder, loc, "h.0", TypeRange{x.getType()},
                               ValueRange{x, w});
  Block &body = layer.getBody().front();
  ASSERT_EQ(body.getNumArguments(), 2u);
  OpBuilder inner = OpBuilder::atBlockEnd(&body);
  Value y =
      MatmulOp::create(inner, loc, body.getArgument(0), body.getArgument(1));
  YieldOp::create(inner, loc, ValueRange{y});
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(BuildersTest, ParamSizeCountsStoredBytes) {
  auto p =
      cast<ParamOp>(param("w", {3, 5}, builder.getBF16Type()).getDefiningOp());
  EXPECT_EQ(p.getSizeInBytes(), 30);
  auto m = cast<ParamOp>(param("m", {7}, builder.getI1Type()).getDefiningOp());
  EXPECT_EQ(m.getSizeInBytes(), 7);
}

} // namespace
