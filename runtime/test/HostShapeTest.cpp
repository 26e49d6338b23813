//===- HostShapeTest.cpp - data movement host kernel tests ----------------===//
//
// copy, transpose, slice, concat, broadcast and gather move values without
// computing, so every test is exact, and runs over all seven dtypes.
//
//===----------------------------------------------------------------------===//

#include "HostKernelsTestUtil.h"

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;

namespace {

const DType kAllTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64,
                           DType::i32, DType::i64, DType::i1};

std::vector<int64_t> strides(const Shape &shape) {
  std::vector<int64_t> s(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = stride;
    stride *= shape[d];
  }
  return s;
}

/// Multi-index of position `linear` in `shape`.
std::vector<int64_t> unravel(int64_t linear, const Shape &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = linear % shape[d];
    linear /= shape[d];
  }
  return index;
}

TEST(HostShapeTest, CopyReshapes) {
  ThreadPool pool(3);
  Rng rng(10);
  for (DType dtype : kAllTypes) {
    Buffer x = randomBuffer(dtype, {17, 33, 70}, rng, -50, 50);
    Buffer out(dtype, {33, 1190});
    ASSERT_TRUE(copy(pool, x.ref(), out.ref()).isOk());
    EXPECT_EQ(out.values(), x.values());
    Buffer wrong(dtype, {33, 17});
    EXPECT_FALSE(copy(pool, x.ref(), wrong.ref()).isOk());
  }
}

TEST(HostShapeTest, TransposeMatchesReference) {
  ThreadPool pool(2);
  Rng rng(11);
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {
      {{7, 3}, {1, 0}},
      {{3, 7, 17}, {2, 0, 1}},
      {{2, 3, 1, 5}, {0, 2, 1, 3}}, // Mergeable dimensions.
      {{3, 1, 7, 2}, {3, 1, 0, 2}},
      {{33, 40, 33}, {1, 2, 0}}, // Several chunks.
      {{5}, {0}},
  };
  for (DType dtype : kAllTypes) {
    for (const Case &c : cases) {
      Buffer x = randomBuffer(dtype, c.shape, rng, -50, 50);
      Shape outShape;
      for (int64_t p : c.perm)
        outShape.push_back(c.shape[p]);
      Buffer out(dtype, outShape);
      ASSERT_TRUE(transpose(pool, x.ref(), c.perm, out.ref()).isOk());
      std::vector<int64_t> inStrides = strides(c.shape);
      std::vector<double> ref(out.size());
      for (int64_t i = 0; i < out.size(); ++i) {
        std::vector<int64_t> index = unravel(i, outShape);
        int64_t src = 0;
        for (size_t d = 0; d < index.size(); ++d)
          src += index[d] * inStrides[c.perm[d]];
        ref[i] = x.get(src);
      }
      EXPECT_EQ(out.values(), ref) << dtypeName(dtype);
    }
  }
  Buffer x(DType::f32, {2, 3}), out(DType::f32, {3, 2});
  EXPECT_FALSE(transpose(pool, x.ref(), {0, 0}, out.ref()).isOk());
  EXPECT_FALSE(transpose(pool, x.ref(), {0, 1}, out.ref()).isOk());
}

TEST(HostShapeTest, SliceMatchesReference) {
  ThreadPool pool(3);
  Rng rng(12);
  struct Case {
    Shape in, offsets, steps, out;
  };
  const Case cases[] = {
      {{2, 8, 192}, {0, 0, 64}, {1, 1, 1}, {2, 8, 64}},
      {{17, 33}, {1, 2}, {3, 5}, {6, 7}},
      {{7}, {6}, {1}, {1}},
      {{3, 7, 17}, {0, 6, 0}, {1, 1, 2}, {3, 1, 9}},
      {{300, 301}, {1, 0}, {2, 1}, {149, 301}},
  };
  for (DType dtype : kAllTypes) {
    for (const Case &c : cases) {
      Buffer x = randomBuffer(dtype, c.in, rng, -50, 50);
      Buffer out(dtype, c.out);
      ASSERT_TRUE(slice(pool, x.ref(), c.offsets, c.steps, out.ref()).isOk());
      std::vector<int64_t> inStrides = strides(c.in);
      std::vector<double> ref(out.size());
      for (int64_t i = 0; i < out.size(); ++i) {
        std::vector<int64_t> index = unravel(i, c.out);
        int64_t src = 0;
        for (size_t d = 0; d < index.size(); ++d)
          src += (c.offsets[d] + index[d] * c.steps[d]) * inStrides[d];
        ref[i] = x.get(src);
      }
      EXPECT_EQ(out.values(), ref) << dtypeName(dtype);
    }
  }
  Buffer x(DType::f32, {7}), out(DType::f32, {3});
  EXPECT_FALSE(slice(pool, x.ref(), {5}, {1}, out.ref()).isOk()); // 5..7
  EXPECT_FALSE(slice(pool, x.ref(), {1}, {3}, out.ref()).isOk()); // 1,4,7
  EXPECT_TRUE(slice(pool, x.ref(), {0}, {3}, out.ref()).isOk());  // 0,3,6
  EXPECT_FALSE(slice(pool, x.ref(), {0}, {0}, out.ref()).isOk());
}

TEST(HostShapeTest, ConcatMatchesReference) {
  ThreadPool pool(2);
  Rng rng(13);
  for (DType dtype : kAllTypes) {
    for (int64_t dim : {0, 1, 2}) {
      Shape base = {3, 7, 5};
      std::vector<Buffer> inputs;
      std::vector<TensorRef> refs;
      Shape outShape = base;
      outShape[dim] = 0;
      for (int64_t size : {int64_t(1), int64_t(4), int64_t(0), int64_t(17)}) {
        Shape s = base;
        s[dim] = size;
        inputs.push_back(randomBuffer(dtype, s, rng, -50, 50));
        outShape[dim] += size;
      }
      refs.reserve(inputs.size());
      for (const Buffer &b : inputs)
        refs.push_back(b.ref());
      Buffer out(dtype, outShape);
      ASSERT_TRUE(concat(pool, refs, dim, out.ref()).isOk());
      std::vector<double> ref(out.size());
      for (int64_t i = 0; i < out.size(); ++i) {
        std::vector<int64_t> index = unravel(i, outShape);
        size_t which = 0;
        while (index[dim] >= inputs[which].shape[dim])
          index[dim] -= inputs[which++].shape[dim];
        std::vector<int64_t> s = strides(inputs[which].shape);
        int64_t src = 0;
        for (size_t d = 0; d < index.size(); ++d)
          src += index[d] * s[d];
        ref[i] = inputs[which].get(src);
      }
      EXPECT_EQ(out.values(), ref) << dtypeName(dtype) << " dim " << dim;
    }
  }
  Buffer a(DType::f32, {2, 3}), b(DType::f32, {3, 3}), out(DType::f32, {5, 3});
  EXPECT_FALSE(concat(pool, {a.ref(), b.ref()}, 1, out.ref()).isOk());
  EXPECT_TRUE(concat(pool, {a.ref(), b.ref()}, 0, out.ref()).isOk());
  Buffer i(DType::i32, {3, 3});
  EXPECT_FALSE(concat(pool, {a.ref(), i.ref()}, 0, out.ref()).isOk());
}

// The checks are the kernels' shared ones (kernels::checkConcat), which the
// cuda dispatch runs too: the messages name what is wrong.
TEST(HostShapeTest, ConcatRefusesWhatDoesNotFitTheOutput) {
  ThreadPool pool(2);
  Buffer a(DType::f32, {2, 3}), b(DType::f32, {3, 3}), out(DType::f32, {5, 3});
  auto message = [&](const std::vector<TensorRef> &in, int64_t dim,
                     const TensorRef &o) {
    Status s = concat(pool, in, dim, o);
    return s.failed() ? s.getMessage() : std::string("ok");
  };
  EXPECT_NE(message({a.ref(), b.ref()}, 1, out.ref())
                .find("does not match output f32[5, 3] outside dimension 1"),
            std::string::npos);
  EXPECT_NE(message({}, 0, out.ref()).find("needs at least one input"),
            std::string::npos);
  EXPECT_NE(message({a.ref(), b.ref()}, 2, out.ref()).find("got dim 2"),
            std::string::npos);
  EXPECT_NE(message({a.ref(), a.ref()}, 0, out.ref())
                .find("inputs add up to 4 along dimension 0 but the output "
                      "f32[5, 3] has 5"),
            std::string::npos);
  Buffer i(DType::i32, {3, 3});
  EXPECT_NE(message({a.ref(), i.ref()}, 0, out.ref())
                .find("should have element type f32"),
            std::string::npos);
}

TEST(HostShapeTest, BroadcastMatchesReference) {
  ThreadPool pool(3);
  Rng rng(14);
  const std::pair<Shape, Shape> cases[] = {
      {{1, 64}, {16, 64}},     {{}, {3, 7}},     {{7, 1}, {2, 7, 33}},
      {{3, 1, 5}, {3, 17, 5}}, {{1, 1}, {1, 1}}, {{33}, {40, 30, 33}},
  };
  for (DType dtype : kAllTypes) {
    for (const auto &[in, outShape] : cases) {
      Buffer x = randomBuffer(dtype, in, rng, -50, 50);
      Buffer out(dtype, outShape);
      ASSERT_TRUE(broadcast(pool, x.ref(), out.ref()).isOk());
      std::vector<double> ref(out.size());
      for (int64_t i = 0; i < out.size(); ++i)
        ref[i] = x.get(broadcastIndex(outShape, in, i));
      EXPECT_EQ(out.values(), ref) << dtypeName(dtype);
    }
  }
  Buffer x(DType::f32, {3}), out(DType::f32, {4});
  EXPECT_FALSE(broadcast(pool, x.ref(), out.ref()).isOk());
}

TEST(HostShapeTest, GatherMatchesReference) {
  ThreadPool pool(2);
  Rng rng(15);
  for (DType dtype : kAllTypes) {
    for (DType indexType : {DType::i32, DType::i64}) {
      for (int64_t axis : {0, 1, 2}) {
        Shape in = {7, 5, 3};
        Shape indexShape = {2, 3};
        Buffer x = randomBuffer(dtype, in, rng, -50, 50);
        Buffer indices =
            randomBuffer(indexType, indexShape, rng, -in[axis], in[axis] - 1);
        Shape outShape(in.begin(), in.begin() + axis);
        outShape.insert(outShape.end(), indexShape.begin(), indexShape.end());
        outShape.insert(outShape.end(), in.begin() + axis + 1, in.end());
        Buffer out(dtype, outShape);
        ASSERT_TRUE(
            gather(pool, x.ref(), indices.ref(), axis, out.ref()).isOk());
        std::vector<int64_t> s = strides(in);
        std::vector<double> ref(out.size());
        for (int64_t i = 0; i < out.size(); ++i) {
          std::vector<int64_t> index = unravel(i, outShape);
          int64_t flatIndex = index[axis] * indexShape[1] + index[axis + 1];
          auto picked = static_cast<int64_t>(indices.get(flatIndex));
          if (picked < 0)
            picked += in[axis];
          std::vector<int64_t> src(index.begin(), index.begin() + axis);
          src.push_back(picked);
          src.insert(src.end(), index.begin() + axis + 2, index.end());
          int64_t offset = 0;
          for (size_t d = 0; d < src.size(); ++d)
            offset += src[d] * s[d];
          ref[i] = x.get(offset);
        }
        EXPECT_EQ(out.values(), ref) << dtypeName(dtype) << " axis " << axis;
      }
    }
  }
}

TEST(HostShapeTest, GatherEmbeddingLookup) {
  ThreadPool pool(3);
  Rng rng(16);
  Buffer table = randomBuffer(DType::bf16, {50, 33}, rng);
  Buffer tokens = randomBuffer(DType::i64, {3, 17}, rng, 0, 49);
  Buffer out(DType::bf16, {3, 17, 33});
  ASSERT_TRUE(gather(pool, table.ref(), tokens.ref(), 0, out.ref()).isOk());
  for (int64_t t = 0; t < 3 * 17; ++t)
    for (int64_t c = 0; c < 33; ++c)
      ASSERT_EQ(out.get(t * 33 + c),
                table.get(static_cast<int64_t>(tokens.get(t)) * 33 + c));
}

TEST(HostShapeTest, GatherOutOfRangeIsAnError) {
  ThreadPool pool(2);
  Buffer x(DType::f32, {5, 3});
  Buffer out(DType::f32, {2, 3});
  for (double bad : {5.0, -6.0, 1e9}) {
    Buffer indices = fromValues(DType::i64, {2}, {0, bad});
    Status s = gather(pool, x.ref(), indices.ref(), 0, out.ref());
    EXPECT_EQ(s.getCode(), StatusCode::InvalidArgument);
    EXPECT_NE(s.getMessage().find("out of range"), std::string::npos)
        << s.toString();
    EXPECT_NE(s.getMessage().find(std::to_string(int64_t(bad))),
              std::string::npos)
        << s.toString();
  }
  Buffer ok = fromValues(DType::i32, {2}, {-5, 4});
  EXPECT_TRUE(gather(pool, x.ref(), ok.ref(), 0, out.ref()).isOk());
  Buffer floatIndices(DType::f32, {2});
  EXPECT_FALSE(gather(pool, x.ref(), floatIndices.ref(), 0, out.ref()).isOk());
}

} // namespace
