//===- Annotations.h - host/device function annotation ----------*- C++ -*-===//
//
// The math of every kernel is written once, in kernels/*.h, and compiled both
// by the host compiler (the host device) and by nvcc (the cuda device).
// `RP_HD` marks those functions as callable from both sides; host-only code
// never needs it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_ANNOTATIONS_H
#define RP_RUNTIME_KERNELS_ANNOTATIONS_H

#ifdef __CUDACC__
#define RP_HD __host__ __device__
#else
#define RP_HD
#endif

#endif // RP_RUNTIME_KERNELS_ANNOTATIONS_H
