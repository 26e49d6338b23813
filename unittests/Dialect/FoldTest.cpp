//===- FoldTest.cpp - rp folders through the C++ API ----------------------===//
//
// createOrFold is how the importer folds shape arithmetic as it builds, so
// folds are checked here through that path as well as in canonicalize.mlir.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::rp;

namespace {

class FoldTest : public ::testing::Test {
protected:
  FoldTest() : builder(&context) {
    context.loadDialect<RPDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
  }

  Value constant(ArrayRef<int64_t> shape, ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get(shape, builder.getI64Type());
    return ConstantOp::create(builder, builder.getUnknownLoc(),
                              DenseElementsAttr::get(type, values));
  }

  SmallVector<int64_t> valuesOf(Value v) {
    DenseElementsAttr attr;
    EXPECT_TRUE(matchPattern(v, m_Constant(&attr)));
    SmallVector<int64_t> out;
    if (attr)
      for (const APInt &x : attr.getValues<APInt>())
        out.push_back(x.getSExtValue());
    return out;
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
};

TEST_F(FoldTest, ShapeArithmeticFoldsToConstants) {
  Location loc = builder.getUnknownLoc();
  Value a = constant({3}, {2, 16, 64}), b = constant({3}, {1, 1, 4});
  Value prod = builder.createOrFold<MulOp>(loc, a, b);
  EXPECT_EQ(valuesOf(prod), (SmallVector<int64_t>{2, 16, 256}));
  Value quot = builder.createOrFold<DivOp>(loc, prod, b);
  EXPECT_EQ(valuesOf(quot), (SmallVector<int64_t>{2, 16, 64}));
  Value eq = builder.createOrFold<CmpOp>(loc, CmpPredicate::eq, quot, a);
  DenseElementsAttr mask;
  ASSERT_TRUE(matchPattern(eq, m_Constant(&mask)));
  EXPECT_TRUE(llvm::all_of(mask.getValues<bool>(), [](bool x) { return x; }));
}

TEST_F(FoldTest, IntegerDivisionByZeroIsNotFolded) {
  Location loc = builder.getUnknownLoc();
  Value a = constant({2}, {4, 6}), z = constant({2}, {2, 0});
  Value q = builder.createOrFold<DivOp>(loc, a, z);
  EXPECT_TRUE(isa<DivOp>(q.getDefiningOp()));
}

TEST_F(FoldTest, ReshapeOfConstantKeepsValues) {
  Location loc = builder.getUnknownLoc();
  Value a = constant({2, 2}, {1, 2, 3, 4});
  auto flat = RankedTensorType::get({4}, builder.getI64Type());
  Value r = builder.createOrFold<ReshapeOp>(loc, flat, a);
  EXPECT_EQ(valuesOf(r), (SmallVector<int64_t>{1, 2, 3, 4}));
}

} // namespace
