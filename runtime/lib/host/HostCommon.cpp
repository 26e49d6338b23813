//===- HostCommon.cpp - the strided copy of the host kernels --------------===//
//
// Transpose, slice and broadcast on the host: one copy through a strided
// plan (kernels/Checks.h), run in fixed chunks on the pool.
//
//===----------------------------------------------------------------------===//

#include "HostCommon.h"

#include <cstring>

namespace rp::runtime::host::detail {

template <typename U>
static void stridedCopyAs(ThreadPool &pool, const StridedPlan &plan,
                          const U *in, U *out, int64_t total) {
  const int64_t stride = plan.innerStride(0);
  parallelRanges(pool, total, kElementGrain, [&](int64_t begin, int64_t end) {
    forEachRun(plan, begin, end,
               [&](int64_t o, const int64_t *offsets, int64_t count) {
                 const U *src = in + offsets[0];
                 U *dst = out + o;
                 if (stride == 1) {
                   std::memcpy(dst, src, count * sizeof(U));
                 } else if (stride == 0) {
                   std::fill(dst, dst + count, *src);
                 } else {
                   for (int64_t i = 0; i < count; ++i)
                     dst[i] = src[i * stride];
                 }
               });
  });
}

void stridedCopy(ThreadPool &pool, const StridedPlan &plan, size_t elementSize,
                 const void *in, void *out, int64_t total) {
  visitElementSize(elementSize, [&](auto tag) {
    using U = typename decltype(tag)::type;
    stridedCopyAs(pool, plan, static_cast<const U *>(in), static_cast<U *>(out),
                  total);
  });
}

} // namespace rp::runtime::host::detail
