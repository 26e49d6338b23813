//===- CudaRowLanes.cuh - one row reduced by orderedSum's lanes -*- CUDA
//-*-===//
//
// Row kernels whose sums must have the host's bits (norms, softmax) give a
// row kRowLanes threads: thread l folds elements l, l + kRowLanes, ... in
// order, as the host's lane l does, and the lanes meet in orderedSum's tree.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_CUDA_CUDAROWLANES_CUH
#define RP_RUNTIME_CUDA_CUDAROWLANES_CUH

#include "CudaCommon.cuh"

#include "rp/runtime/kernels/Numeric.h"

namespace rp::runtime::cuda {

/// Threads per row: orderedSum's lanes.
constexpr int kRowLanes = kernels::kSumLanes;

/// Blocks for `rows` rows of kRowLanes threads, `rowsPerBlock` a block
/// (capped: the kernels loop over the rows left).
inline unsigned rowLaneBlocks(int64_t rows, int rowsPerBlock) {
  int64_t blocks = (rows + rowsPerBlock - 1) / rowsPerBlock;
  return static_cast<unsigned>(blocks < (1 << 16) ? blocks : (1 << 16));
}

/// orderedSum(n, f) of one row by the row's kRowLanes threads (`lane` is
/// this thread's); `lanes` is the row's kRowLanes slots of shared memory.
/// Every thread of the block calls it together (it holds two barriers);
/// `active` is false past the last row.
template <typename Acc, typename F>
__device__ Acc rowSum(Acc *lanes, int lane, bool active, int64_t n,
                      const F &f) {
  static_assert(kRowLanes == 8, "the final combination assumes 8 lanes");
  Acc acc = Acc(0);
  if (active)
    for (int64_t i = lane; i < n; i += kRowLanes)
      acc += f(i);
  lanes[lane] = acc;
  __syncthreads();
  Acc sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
            ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  __syncthreads();
  return sum;
}

} // namespace rp::runtime::cuda

#endif // RP_RUNTIME_CUDA_CUDAROWLANES_CUH
