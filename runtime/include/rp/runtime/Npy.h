//===- Npy.h - numpy .npy files in and out ----------------------*- C++ -*-===//
//
// rp-run's inputs, labels and dumps are .npy files (numpy's format, version
// 1.0 to 3.0, little-endian, C order). Reading takes regular files only
// (FileIO.h) and validates every header field and the data size before it
// allocates; writing is atomic and durable (FileIO.h).
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_NPY_H
#define RP_RUNTIME_NPY_H

#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"

#include <string>
#include <string_view>
#include <vector>

namespace rp::runtime {

struct NpyArray {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<uint8_t> data;
};

/// The most dimensions an .npy header may declare.
constexpr size_t kMaxNpyRank = 32;

/// Reads an .npy holding f32, f64, f16, i32, i64 or bool data.
Expected<NpyArray> readNpy(const std::string &path);

/// Parses the bytes of an .npy file; `path` names it in messages.
Expected<NpyArray> parseNpy(std::string_view bytes, const std::string &path);

/// Writes `data` (row-major, `dtype`, `shape`) as an .npy file.
Status writeNpy(const std::string &path, DType dtype, const Shape &shape,
                const void *data);

} // namespace rp::runtime

#endif // RP_RUNTIME_NPY_H
