//===- ImportInitializers.cpp - graph inputs and initializers -------------===//
//
// A graph input's type (with the user's --shape changes) and an
// initializer as an rp.param (weights, written to the weights file or
// referenced in place) or an rp.constant (small integer and bool tensors,
// scalars), created on first use at the top of the function.
//
//===----------------------------------------------------------------------===//

#include "AttributeTypes.h"
#include "GraphImporter.h"

#include "llvm/Support/FileSystem.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

FailureOr<RankedTensorType>
GraphImporter::inputType(const onnx::ValueInfoProto &info) {
  Location loc = NameLoc::get(StringAttr::get(context, info.name()),
                              FileLineColLoc::get(context, path, 0, 0));
  if (!info.type().has_tensor_type())
    return emitError(loc) << "input '" << info.name()
                          << "' is not a tensor; rp imports tensor inputs only";
  const auto &tt = info.type().tensor_type();
  Type element = convertElementType(tt.elem_type(), context);
  if (!element)
    return emitError(loc) << "input '" << info.name() << "' has data type "
                          << elementTypeName(tt.elem_type())
                          << ", which rp does not support (FLOAT, FLOAT16, "
                             "BFLOAT16, DOUBLE, INT64, INT32, BOOL)";
  SmallVector<int64_t> shape;
  for (const auto &d : tt.shape().dim())
    shape.push_back(d.has_dim_value() ? d.dim_value() : ShapedType::kDynamic);
  auto it = options.shapes.find(info.name());
  if (it != options.shapes.end()) {
    ArrayRef<int64_t> given = it->second;
    if (given.size() != shape.size())
      return emitError(loc)
             << "--shape " << info.name() << " gives " << given.size()
             << " dimensions but the input has " << shape.size();
    // A dimension fixed at export is re-specialised: what reads it through
    // Shape follows; a node that baked the exported size into a constant
    // fails, and its error names the override (see importNode).
    for (auto [d, g] : llvm::enumerate(given))
      if (shape[d] != ShapedType::kDynamic && shape[d] != g)
        overrides.push_back("dimension " + std::to_string(d) + " of '" +
                            info.name() + "' (exported as " +
                            std::to_string(shape[d]) + ") to " +
                            std::to_string(g));
    shape.assign(given.begin(), given.end());
  }
  for (auto [d, size] : llvm::enumerate(shape))
    if (size == ShapedType::kDynamic) {
      const auto &dim = tt.shape().dim(d);
      InFlightDiagnostic diag = emitError(loc)
                                << "input '" << info.name()
                                << "' has dynamic dimension " << d;
      if (dim.has_dim_param())
        diag << " ('" << dim.dim_param() << "')";
      diag << "; set every dimension with --shape " << info.name() << "=";
      for (size_t k = 0; k < shape.size(); ++k)
        diag << (k ? "x" : "")
             << (shape[k] == ShapedType::kDynamic ? "N"
                                                  : std::to_string(shape[k]));
      return diag;
    }
  // onnx.checker's rule for dims: a size is 0 or more. An input too large
  // for any buffer (or whose element count overflows) is refused here, not
  // by rp-run as an "invalid shape" after a whole compile.
  uint64_t elements = 1;
  for (auto [d, size] : llvm::enumerate(shape)) {
    if (size < 0)
      return emitError(loc) << "input '" << info.name() << "' has dimension "
                            << d << " of size " << size
                            << "; sizes are 0 or more (onnx.checker refuses "
                               "it too): re-export the model";
    if (size > 0 && elements > kMaxInputElements / uint64_t(size))
      return emitError(loc)
             << "input '" << info.name() << "' has dimension " << d
             << " of size " << size << ", which makes it more than 2^40 "
             << "elements; give its real sizes (--shape " << info.name()
             << "=...) or re-export the model";
    elements *= uint64_t(size);
  }
  return RankedTensorType::get(shape, element);
}

FailureOr<Value>
GraphImporter::importInitializer(const onnx::TensorProto &tensor) {
  Location loc = NameLoc::get(StringAttr::get(context, tensor.name()),
                              FileLineColLoc::get(context, path, 0, 0));
  Type element = convertElementType(tensor.data_type(), context);
  if (!element)
    return emitError(loc) << "initializer '" << tensor.name()
                          << "' has data type "
                          << elementTypeName(tensor.data_type())
                          << ", which rp does not support";
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  // Checked before any size is computed from them (a fuzz finding: a
  // dimension of -2^63 overflowed the byte count).
  int64_t count = 1, bytesBound;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(count, d, &count) ||
        __builtin_mul_overflow(count, int64_t(8), &bytesBound))
      return emitError(loc) << "initializer '" << tensor.name()
                            << "' has dimensions [" << shape
                            << "] whose size is negative or overflows; "
                               "re-export the model";
  auto type = RankedTensorType::get(shape, element);
  OpBuilder::InsertionGuard guard(builder);
  if (lastInitializerOp)
    builder.setInsertionPointAfter(lastInitializerOp);
  else
    builder.setInsertionPointToStart(entry);

  bool isFloat = isa<FloatType>(element);
  int64_t n = type.getNumElements();
  // A float scalar (rank 0: an exporter's constant, a module's scalar
  // buffer) is a constant; a one-element float of rank 1 or more is
  // kept as a parameter: nn.Parameter(tensor([x])) is how a module holds
  // a trained scalar (XIELU's alpha_p and alpha_n in Apertus).
  if ((!isFloat && n <= kMaxConstantElements) ||
      (isFloat && n == 1 && shape.empty())) {
    auto data = readTensor(tensor, type, modelDir, loc);
    if (failed(data))
      return failure();
    lastInitializerOp = ConstantOp::create(builder, loc, *data);
    return lastInitializerOp->getResult(0);
  }

  int64_t bytes = n * getElementSizeInBytes(type);
  std::string file;
  int64_t offset = 0;
  bool constantMask = false;
  if (auto ext = externalDataOf(tensor)) {
    offset = ext->offset;
    int64_t length = ext->length;
    auto resolved = externalDataPath(tensor, *ext, modelDir, loc);
    if (failed(resolved))
      return failure();
    SmallString<256> dataPath(*resolved);
    uint64_t size = 0;
    if (ext->location.empty() || offset < 0 ||
        llvm::sys::fs::file_size(dataPath, size))
      return emitError(loc) << "initializer '" << tensor.name()
                            << "' refers to external data file '" << dataPath
                            << "', which cannot be read";
    if (length >= 0 && length != bytes)
      return emitError(loc)
             << "initializer '" << tensor.name() << "' stores " << length
             << " bytes but " << type << " needs " << bytes;
    if (static_cast<uint64_t>(offset + bytes) > size)
      return emitError(loc)
             << "initializer '" << tensor.name() << "' needs bytes [" << offset
             << ", " << offset + bytes << ") of '" << dataPath
             << "', which holds only " << size << " bytes";
    file = relativePath(dataPath, options.irDir);
  } else {
    if (!weights) {
      weights = std::make_unique<WeightsWriter>(options.weightsPath);
      if (failed(weights->open(loc)))
        return failure();
    }
    auto data = readTensorBytes(tensor, modelDir, loc);
    if (failed(data) || failed(checkTensorSize(tensor, *data, type, loc)))
      return failure();
    offset = weights->append(*data);
    file = relativePath(options.weightsPath, options.irDir);
    constantMask = isFloat && holdsMaskValue(*data, element);
  }
  // ONNX does not tell parameters from buffers; a float initializer holding
  // a masking value (a causal mask buffer, or one an exporter's constant
  // folding made from finfo.min) is not a weight, so it is a frozen
  // parameter and, like the buffers named as such, may be folded. Other
  // buffers need --frozen.
  bool trainable = isFloat && !constantMask &&
                   !matchesAny(tensor.name(), options.frozenPatterns);
  if (!isFloat || constantMask ||
      matchesAny(tensor.name(), ONNXImportOptions::defaultFrozenPatterns()))
    buffers.insert(tensor.name());
  lastInitializerOp = ParamOp::create(
      builder, loc, type, tensor.name(), trainable, builder.getStringAttr(file),
      builder.getI64IntegerAttr(offset), FloatAttr());
  return lastInitializerOp->getResult(0);
}

Value GraphImporter::lookupInitializer(StringRef name) {
  auto it = initializers.find(name);
  if (it == initializers.end())
    return {};
  auto v = importInitializer(*it->second);
  if (failed(v)) {
    initializerFailed = true;
    return {};
  }
  values[name] = *v;
  return *v;
}
