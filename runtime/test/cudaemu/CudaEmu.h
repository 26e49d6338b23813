//===- CudaEmu.h - cuda kernels run on the CPU, for tests -------*- C++ -*-===//
//
// No GPU is attached where rp is built, so the cuda device's conformance
// suite skips. This header lets a .cu file of lib/cuda, rewritten by
// emulate.py (each `<<<...>>>` launch a call of emuLaunch), compile as host
// C++: every block runs after the one before, each of its threads on its
// own std::thread, so __syncthreads is a real barrier and __shared__ memory
// (a static) is the block's. It checks the kernels' logic - indexing,
// tiling, the order of sums, what they report - not their speed, nor
// anything about the GPU's memory model. Device math is the host's (exp is
// glibc's), so results are bitwise the host kernels' where the order is.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TEST_CUDAEMU_CUDAEMU_H
#define RP_RUNTIME_TEST_CUDAEMU_CUDAEMU_H

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#undef __global__
#undef __device__
#undef __shared__
#define __global__
#define __device__
#define __shared__ static

namespace rp::runtime::cudaemu {

/// A barrier for the threads of one block.
class Barrier {
public:
  explicit Barrier(unsigned count) : count(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    unsigned round = generation;
    if (++arrived == count) {
      arrived = 0;
      ++generation;
      changed.notify_all();
      return;
    }
    changed.wait(lock, [&] { return generation != round; });
  }

private:
  std::mutex mutex;
  std::condition_variable changed;
  unsigned count, arrived = 0, generation = 0;
};

inline thread_local uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim, gridDim;
inline Barrier *blockBarrier = nullptr;
/// Atomics take this lock: the threads of a block run at once.
inline std::mutex atomics;

template <typename F>
void emuLaunch(dim3 grid, dim3 block, size_t, cudaStream_t, F kernel) {
  gridDim = grid;
  blockDim = block;
  const unsigned threads = block.x * block.y * block.z;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        Barrier barrier(threads);
        blockBarrier = &barrier;
        std::vector<std::thread> running;
        for (unsigned t = 0; t < threads; ++t)
          running.emplace_back([&, t] {
            threadIdx = {t % block.x, (t / block.x) % block.y,
                         t / (block.x * block.y)};
            kernel();
          });
        for (std::thread &t : running)
          t.join();
      }
}

} // namespace rp::runtime::cudaemu

using rp::runtime::cudaemu::blockDim;
using rp::runtime::cudaemu::blockIdx;
using rp::runtime::cudaemu::emuLaunch;
using rp::runtime::cudaemu::gridDim;
using rp::runtime::cudaemu::threadIdx;

inline void __syncthreads() { rp::runtime::cudaemu::blockBarrier->wait(); }
inline void __threadfence() {}
inline int atomicCAS(int *p, int expected, int value) {
  std::lock_guard<std::mutex> lock(rp::runtime::cudaemu::atomics);
  int old = *p;
  if (old == expected)
    *p = value;
  return old;
}
inline int atomicAdd(int *p, int value) {
  std::lock_guard<std::mutex> lock(rp::runtime::cudaemu::atomics);
  int old = *p;
  *p += value;
  return old;
}
inline unsigned long long atomicAdd(unsigned long long *p,
                                    unsigned long long value) {
  std::lock_guard<std::mutex> lock(rp::runtime::cudaemu::atomics);
  unsigned long long old = *p;
  *p += value;
  return old;
}
inline unsigned long long atomicMin(unsigned long long *p,
                                    unsigned long long value) {
  std::lock_guard<std::mutex> lock(rp::runtime::cudaemu::atomics);
  unsigned long long old = *p;
  if (value < old)
    *p = value;
  return old;
}

// The intrinsics that round each float operation on its own (CudaQuant.cu:
// nvcc would otherwise fuse a product and a sum into an FMA). The host
// compiler may contract too, so each result passes through memory.
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline float __fdiv_rn(float a, float b) {
  volatile float r = a / b;
  return r;
}

// Enqueued work runs at once, on host memory.
#define cudaMemsetAsync(p, v, n, s)                                            \
  ((void)(s), std::memset(p, v, n), cudaSuccess)
#define cudaGetLastError() cudaSuccess

#endif // RP_RUNTIME_TEST_CUDAEMU_CUDAEMU_H
