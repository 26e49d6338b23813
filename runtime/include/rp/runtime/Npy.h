//===- Npy.h - numpy .npy files in and out ----------------------*- C++ -*-===//
//
// rp-run's inputs, labels and dumps are .npy files (numpy's format, version
// 1.0 to 3.0, little-endian, C order). Reading validates the header and the
// data size; writing is atomic (temporary file, then rename).
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_NPY_H
#define RP_RUNTIME_NPY_H

#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"

#include <string>
#include <vector>

namespace rp::runtime {

struct NpyArray {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<uint8_t> data;
};

/// Reads an .npy holding f32, f64, f16, i32, i64 or bool data.
Expected<NpyArray> readNpy(const std::string &path);

/// Writes `data` (row-major, `dtype`, `shape`) as an .npy file.
Status writeNpy(const std::string &path, DType dtype, const Shape &shape,
                const void *data);

} // namespace rp::runtime

#endif // RP_RUNTIME_NPY_H
