//===- CudnnLibrary.h - libcudnn opened at run time -------------*- C++ -*-===//
//
// The cuda driver never links cuDNN: it opens libcudnn.so.9 with dlopen the
// first time attention asks, as the registry opens the driver itself, so
// that an rp-run built with cuDNN runs on a box without it (attention then
// takes the CUDA-core kernel, said once). No CUDA header here: the loader
// is tested on any machine (CudnnLibraryTest).
//
// Where it looks: RP_CUDNN=off turns cuDNN off; RP_CUDNN_LIBRARY names the
// file (a PyTorch venv's nvidia/cudnn/lib/libcudnn.so.9); otherwise the
// loader's search path (LD_LIBRARY_PATH, the ld cache), then the folder the
// build found cuDNN in.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDNN_CUDNNLIBRARY_H
#define RP_LIB_CUDA_CUDNN_CUDNNLIBRARY_H

#include "rp/runtime/AttentionPath.h"

#include <string>
#include <vector>

namespace rp::runtime::cuda {

struct LoadedCudnn {
  CudnnLibraryInfo info;
  /// dlopen's handle; null when not loaded.
  void *handle = nullptr;
};

/// Tries `off` (RP_CUDNN's value: "off" or "0" turns cuDNN off), then
/// `file` when set, else each of `candidates` in order, and asks the
/// library its version (cudnnGetVersion). Not loaded: `info.where` says
/// why (every file tried and the loader's message).
LoadedCudnn openCudnn(const char *off, const char *file,
                      const std::vector<std::string> &candidates);

/// The process's cuDNN, opened once from the environment (thread-safe).
const LoadedCudnn &processCudnn();

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDNN_CUDNNLIBRARY_H
