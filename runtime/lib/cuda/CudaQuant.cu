//===- CudaQuant.cu - dequantizing a frozen weight on the GPU -------------===//
//
// One thread per value, the host kernel's arithmetic (contract/include/rp/
// contract/Quantize.h) with every product and sum rounded on its own
// (__fmul_rn, __fadd_rn: nvcc would otherwise fuse them into an FMA and
// differ from the host in the last bit), then rounded once to the compute
// dtype: the same bits as the host on every device.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "CudaQuant.h"
#include "rp/runtime/kernels/Cast.h"

namespace rp::runtime::cuda {

using namespace kernels;

namespace {

template <typename T>
__global__ void dequantizeNF4Kernel(DequantTables tables, const uint8_t *blob,
                                    quant::Layout layout, T *out, int64_t n) {
  float offset;
  memcpy(&offset, blob + layout.offset, 4);
  const float *absmax2 = reinterpret_cast<const float *>(blob + layout.scales2);
  RP_GRID_LOOP(i, n) {
    int64_t b = i / quant::kBlock;
    float scale = __fadd_rn(__fmul_rn(tables.dynamic[blob[layout.scales + b]],
                                      absmax2[b / quant::kScaleBlock]),
                            offset);
    uint8_t pair = blob[layout.codes + i / 2];
    float level = tables.nf4[(i % 2 ? pair : pair >> 4) & 15];
    out[i] = castValue<T>(__fmul_rn(level, scale));
  }
}

template <typename T>
__global__ void dequantizeInt8Kernel(const uint8_t *blob, quant::Layout layout,
                                     T *out, int64_t n) {
  const float *absmax = reinterpret_cast<const float *>(blob + layout.scales);
  RP_GRID_LOOP(i, n) {
    float scale = __fdiv_rn(absmax[i / quant::kBlock], 127.0f);
    float level = float(int8_t(blob[layout.codes + i]));
    out[i] = castValue<T>(__fmul_rn(level, scale));
  }
}

} // namespace

DequantTables dequantTables() {
  DequantTables t;
  memcpy(t.nf4, quant::nf4Levels(), sizeof(t.nf4));
  memcpy(t.dynamic, quant::dynamicMap(), sizeof(t.dynamic));
  return t;
}

cudaError_t launchDequantize(const LaunchContext &ctx, int kind,
                             const DequantTables &tables, const void *blob,
                             DType dtype, void *out, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  auto format = static_cast<quant::QuantKind>(kind);
  quant::Layout layout = quant::layoutOf(format, n);
  const auto *bytes = static_cast<const uint8_t *>(blob);
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (format == quant::QuantKind::nf4)
      dequantizeNF4Kernel<T><<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
          tables, bytes, layout, static_cast<T *>(out), n);
    else
      dequantizeInt8Kernel<T>
          <<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
              bytes, layout, static_cast<T *>(out), n);
  });
  return lastLaunchError();
}

} // namespace rp::runtime::cuda
