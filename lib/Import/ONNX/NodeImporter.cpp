//===- NodeImporter.cpp - per-node import helpers -------------------------===//

#include "NodeImporter.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

Type onnx_import::convertElementType(int32_t onnxType, MLIRContext *context) {
  Builder b(context);
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  default:
    return {};
  }
}

Type onnx_import::foldedElementType(int32_t onnxType, MLIRContext *context) {
  auto integer = [&](unsigned width, IntegerType::SignednessSemantics sign) {
    return IntegerType::get(context, width, sign);
  };
  switch (onnxType) {
  case onnx::TensorProto::INT8:
    return integer(8, IntegerType::Signed);
  case onnx::TensorProto::UINT8:
    return integer(8, IntegerType::Unsigned);
  case onnx::TensorProto::INT16:
    return integer(16, IntegerType::Signed);
  case onnx::TensorProto::UINT16:
    return integer(16, IntegerType::Unsigned);
  case onnx::TensorProto::UINT32:
    return integer(32, IntegerType::Unsigned);
  default:
    return convertElementType(onnxType, context);
  }
}

std::string onnx_import::elementTypeName(int32_t onnxType) {
  if (onnx::TensorProto::DataType_IsValid(onnxType))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(onnxType));
  return "type #" + std::to_string(onnxType);
}

std::optional<ExternalData>
onnx_import::externalDataOf(const onnx::TensorProto &tensor) {
  if (tensor.data_location() != onnx::TensorProto::EXTERNAL)
    return std::nullopt;
  ExternalData ext;
  for (const auto &kv : tensor.external_data()) {
    // A malformed number reads as a bad offset or length, which the size
    // checks then report with the tensor's name.
    int64_t value = -1;
    StringRef(kv.value()).getAsInteger(10, value);
    if (kv.key() == "location")
      ext.location = kv.value();
    else if (kv.key() == "offset")
      ext.offset = value;
    else if (kv.key() == "length")
      ext.length = value;
  }
  return ext;
}

FailureOr<std::string>
onnx_import::externalDataPath(const onnx::TensorProto &tensor,
                              const ExternalData &ext, StringRef modelDir,
                              Location loc) {
  StringRef location = ext.location;
  auto refuse = [&](const Twine &why) {
    return emitError(loc) << "tensor '" << tensor.name()
                          << "': external data location '" << location << "' "
                          << why
                          << "; the data must be a file in the model's "
                             "folder (onnxruntime refuses it too)";
  };
  if (location.empty() || location == ".")
    return refuse("names no file");
  if (location.contains('\0'))
    return refuse("holds a NUL byte");
  if (llvm::sys::path::is_absolute(location))
    return refuse("is an absolute path");
  for (StringRef part : llvm::make_range(llvm::sys::path::begin(location),
                                         llvm::sys::path::end(location)))
    if (part == "..")
      return refuse("leaves the model's folder ('..')");
  SmallString<256> path(modelDir);
  llvm::sys::path::append(path, location);
  // Symbolic links resolved on both sides: the file must lie below the
  // folder, as onnxruntime checks with its canonical paths.
  SmallString<256> realDir, realFile;
  if (llvm::sys::fs::real_path(path, realFile))
    return path.str().str();
  if (llvm::sys::fs::real_path(modelDir.empty() ? StringRef(".") : modelDir,
                               realDir))
    return refuse("cannot be checked: the model's folder cannot be resolved");
  StringRef file = realFile;
  if (!file.consume_front(realDir) || !file.starts_with("/"))
    return refuse("resolves to '" + realFile +
                  "', outside the model's folder (a symbolic link?)");
  if (!llvm::sys::fs::is_regular_file(realFile))
    return refuse("is not a regular file");
  return path.str().str();
}

FailureOr<std::string>
onnx_import::readTensorBytes(const onnx::TensorProto &tensor,
                             StringRef modelDir, Location loc) {
  if (auto ext = externalDataOf(tensor)) {
    auto resolved = externalDataPath(tensor, *ext, modelDir, loc);
    if (failed(resolved))
      return failure();
    StringRef path = *resolved;
    int64_t length = ext->length;
    auto file = llvm::MemoryBuffer::getFileSlice(
        path, length < 0 ? 0 : length, ext->offset, /*IsVolatile=*/false);
    if (!file || length < 0)
      return emitError(loc)
             << "cannot read external data of tensor '" << tensor.name()
             << "' from '" << path << "'"
             << (file ? ": no length given" : ": " + file.getError().message());
    return std::string((*file)->getBuffer());
  }
  if (tensor.has_raw_data())
    return tensor.raw_data();
  std::string out;
  auto append = [&](const auto &field, auto cast) {
    for (auto v : field) {
      auto x = cast(v);
      out.append(reinterpret_cast<const char *>(&x), sizeof(x));
    }
  };
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    append(tensor.float_data(), [](float v) { return v; });
    break;
  case onnx::TensorProto::DOUBLE:
    append(tensor.double_data(), [](double v) { return v; });
    break;
  case onnx::TensorProto::INT64:
    append(tensor.int64_data(), [](int64_t v) { return v; });
    break;
  case onnx::TensorProto::INT32:
    append(tensor.int32_data(), [](int32_t v) { return v; });
    break;
  case onnx::TensorProto::BOOL:
    append(tensor.int32_data(), [](int32_t v) { return uint8_t(v != 0); });
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    // 16-bit floats travel as their bit patterns in int32_data.
    append(tensor.int32_data(), [](int32_t v) { return uint16_t(v); });
    break;
  default:
    break;
  }
  return out;
}

LogicalResult onnx_import::checkTensorSize(const onnx::TensorProto &tensor,
                                           StringRef bytes,
                                           RankedTensorType type,
                                           Location loc) {
  int64_t need = type.getNumElements() * getElementSizeInBytes(type);
  if (static_cast<int64_t>(bytes.size()) != need)
    return emitError(loc) << "tensor '" << tensor.name() << "' holds "
                          << bytes.size() << " bytes but its shape and type "
                          << type << " need " << need;
  return success();
}

FailureOr<DenseElementsAttr>
onnx_import::readTensor(const onnx::TensorProto &tensor, RankedTensorType type,
                        StringRef modelDir, Location loc) {
  auto bytes = readTensorBytes(tensor, modelDir, loc);
  if (failed(bytes) || failed(checkTensorSize(tensor, *bytes, type, loc)))
    return failure();
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> bits;
    for (char c : *bytes)
      bits.push_back(c != 0);
    return DenseElementsAttr::get(type, bits);
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(bytes->data(), bytes->size()));
}

//===----------------------------------------------------------------------===//
// NodeImporter
//===----------------------------------------------------------------------===//

InFlightDiagnostic NodeImporter::error() {
  // A node without a name goes by its first output, or without outputs by
  // the name of its location (op type and index).
  std::string name = node.name();
  if (name.empty() && node.output_size())
    name = node.output(0);
  else if (auto nameLoc = dyn_cast<NameLoc>(loc); name.empty() && nameLoc)
    name = nameLoc.getName().str();
  return emitError(loc) << node.op_type() << " node '" << name << "' (opset "
                        << opset << "): ";
}

Value NodeImporter::input(int i) {
  if (!hasInput(i)) {
    (void)(error() << "input #" << i << " is missing");
    return {};
  }
  auto it = values.find(node.input(i));
  if (it == values.end()) {
    (void)(error() << "input '" << node.input(i)
                   << "' is not produced by any earlier node, input or "
                      "initializer");
    return {};
  }
  return it->second;
}

FailureOr<DenseElementsAttr> NodeImporter::constantInput(int i,
                                                         StringRef what) {
  Value v = input(i);
  if (!v)
    return failure();
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return error() << "input '" << node.input(i) << "' (" << what
                   << ") must be a constant once shapes are static, but it "
                      "is computed at run time; rp needs it at compile time, "
                      "so it may depend only on constants, initializers and "
                      "input shapes";
  return attr;
}

FailureOr<SmallVector<int64_t>> NodeImporter::constantInts(int i,
                                                           StringRef what) {
  auto attr = constantInput(i, what);
  if (failed(attr))
    return failure();
  if (!attr->getElementType().isInteger(64) &&
      !attr->getElementType().isInteger(32))
    return error() << "input '" << node.input(i) << "' (" << what
                   << ") must hold integers";
  SmallVector<int64_t> out;
  for (const APInt &v : attr->getValues<APInt>())
    out.push_back(v.getSExtValue());
  return out;
}

void NodeImporter::setOutput(int i, Value v) {
  if (hasOutput(i))
    values[node.output(i)] = v;
}

LogicalResult NodeImporter::onlyFirstOutput() {
  for (int i = 1; i < node.output_size(); ++i)
    if (hasOutput(i))
      return error() << "output #" << i << " ('" << node.output(i)
                     << "') is not supported: rp computes only the first "
                        "output; re-export so that the others are not used";
  return success();
}

const onnx::AttributeProto *NodeImporter::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeImporter::intAttr(StringRef name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

float NodeImporter::floatAttr(StringRef name, float dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}

std::optional<SmallVector<int64_t>>
NodeImporter::intsAttr(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

std::string NodeImporter::stringAttr(StringRef name, StringRef dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt.str();
}

FailureOr<int64_t> NodeImporter::normalizeAxis(int64_t axis, int64_t rank,
                                               StringRef what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return error() << what << " " << axis << " is out of range for rank "
                   << rank;
  return a;
}

Value NodeImporter::i64Constant(ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                    builder.getI64Type());
  return constant(DenseElementsAttr::get(type, values));
}

Value NodeImporter::reshape(Value v, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  return create<ReshapeOp>(RankedTensorType::get(shape, type.getElementType()),
                           v);
}

Value NodeImporter::castTo(Value v, Type elementType) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getElementType() == elementType)
    return v;
  return create<CastOp>(type.clone(elementType), v);
}
