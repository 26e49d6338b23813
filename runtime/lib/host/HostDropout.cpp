//===- HostDropout.cpp - dropout from a counter-based generator -----------===//
//
// Each element's keep bit is Philox4x32-10 of its global index
// (kernels/Philox.h), so the result does not depend on the thread count, on
// how the batch is split into microbatches or across devices, or on the
// backend; the backward applies the same call to the gradient (dropout is
// linear in x with the mask fixed).
//
//===----------------------------------------------------------------------===//

#include "HostCommon.h"

#include "rp/runtime/host/Kernels.h"
#include "rp/runtime/kernels/Philox.h"

#include <type_traits>

namespace rp::runtime::host {

using namespace detail;
using namespace kernels;

Status dropoutKeyOf(const TensorRef &row, int64_t elements, int64_t tensor,
                    double p, DropoutKey &key, bool &on) {
  if (row.dtype != DType::i64 || row.size() != 4)
    return invalidArgument("dropout: the key " + describe(row) +
                           " is not the 4 i64 values (seed, step, "
                           "microbatch, on) of a dropout_key row");
  if (tensor < 0 || tensor > int64_t(UINT32_MAX))
    return invalidArgument("dropout: tensor number " + std::to_string(tensor) +
                           " is not a 32-bit unsigned number");
  const int64_t *words = row.as<const int64_t>();
  key = dropoutKeyOfRow(words, uint32_t(tensor), float(p), uint64_t(elements));
  on = words[3] != 0;
  return Status::ok();
}

Status dropout(ThreadPool &pool, const DropoutKey &key, const TensorRef &x,
               const TensorRef &out) {
  const char *op = "dropout";
  if (Status s = checkUnaryOutput(op, x, out); s.failed())
    return s;
  if (!isFloat(x.dtype))
    return unsupportedDType(op, x.dtype, "dropout");
  if (!(key.p >= 0.0f && key.p < 1.0f))
    return invalidArgument("dropout: the drop probability " +
                           std::to_string(key.p) + " is not in [0, 1)");
  uint64_t threshold = dropoutThreshold(key.p);
  float scale = dropoutScale(key.p);
  visitDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<Compute<T>>) {
      const T *in = x.as<const T>();
      T *y = out.as<T>();
      forEachElement(pool, x.size(), [&](int64_t i) {
        bool keep = dropoutBits(key, key.offset + uint64_t(i)) >= threshold;
        y[i] = store<T>(keep ? float(load(in[i])) * scale : 0.0f);
      });
    }
  });
  return Status::ok();
}

} // namespace rp::runtime::host
