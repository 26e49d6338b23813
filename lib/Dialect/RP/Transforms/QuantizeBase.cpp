//===- QuantizeBase.cpp - rp-quantize-base --------------------------------===//
//
// Quantizes the frozen linear and expert weights of a LoRA model once, at
// compile time, into a weights file beside the plan: every later byte count
// (cost model, partition, transfers, memory plan, sim) then sees the
// quantized parameter as it sees any other, and the uploads move the blob.
// The weights are read through an rp.dequantize at the top of each layer
// that uses them, so the device holds the compute-dtype copy only while
// the layer runs (a scratch of the layer's program).
//
//===----------------------------------------------------------------------===//

#include "OutputLayer.h"
#include "rp/Analysis/HostMemory.h"
#include "rp/Dialect/RP/RPPasses.h"
#include "rp/Support/WeightsWriter.h"
#include "rp/contract/Quantize.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

namespace mlir::rp {
#define GEN_PASS_DEF_QUANTIZEBASEPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

/// True when every use of `arg` (a layer's block argument) is the weight
/// of a GEMM whose weight may be quantized: a matmul's right operand (not
/// the output layer's or the router's) for a 2-D weight, an expert GEMM's
/// for a 3-D one.
static bool onlyGemmWeight(BlockArgument arg, int64_t rank) {
  if (arg.use_empty())
    return false;
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    if (auto mm = dyn_cast<MatmulOp>(user)) {
      if (rank != 2 || mm.getRhs() != arg || mm.getLhs() == arg ||
          mm.getTransposeA() || isOutputLayer(mm) ||
          feedsRouter(mm.getResult()))
        return false;
    } else if (auto gm = dyn_cast<MoEGroupedMatmulOp>(user)) {
      if (rank != 3 || gm.getWeight() != arg || gm.getInput() == arg)
        return false;
    } else {
      return false;
    }
  }
  return true;
}

/// A frozen float parameter read only as a GEMM weight in layers.
static bool isQuantizable(ParamOp p) {
  auto type = p.getType();
  if (p.getTrainable() || !isa<FloatType>(type.getElementType()) ||
      (type.getRank() != 2 && type.getRank() != 3) || p->use_empty())
    return false;
  for (OpOperand &use : p->getUses()) {
    auto layer = dyn_cast<LayerOp>(use.getOwner());
    if (!layer ||
        !onlyGemmWeight(layer.getBody().getArgument(use.getOperandNumber()),
                        type.getRank()))
      return false;
  }
  return true;
}

/// The stored values of `p` as f32, or an error on `p`.
static FailureOr<std::vector<float>> readValues(ParamOp p, StringRef irDir) {
  SmallString<256> path(*p.getFile());
  if (llvm::sys::path::is_relative(path)) {
    path = irDir;
    llvm::sys::path::append(path, *p.getFile());
  }
  int64_t bytes = p.getSizeInBytes();
  auto buffer =
      llvm::MemoryBuffer::getFileSlice(path, bytes, p.getOffset().value_or(0));
  if (!buffer || int64_t((*buffer)->getBufferSize()) != bytes) {
    p.emitOpError("cannot read ")
        << bytes << " bytes of its values from '" << path << "' at offset "
        << p.getOffset().value_or(0) << " to quantize them";
    return failure();
  }
  const char *data = (*buffer)->getBufferStart();
  auto type = p.getType();
  Type element = type.getElementType();
  std::vector<float> out(size_t(type.getNumElements()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (element.isF32()) {
      std::memcpy(&out[i], data + 4 * i, 4);
    } else if (element.isBF16()) {
      uint16_t half;
      std::memcpy(&half, data + 2 * i, 2);
      uint32_t bits = uint32_t(half) << 16;
      std::memcpy(&out[i], &bits, 4);
    } else {
      unsigned width = element.getIntOrFloatBitWidth();
      uint64_t raw = 0;
      std::memcpy(&raw, data + width / 8 * i, width / 8);
      APFloat v(cast<FloatType>(element).getFloatSemantics(),
                APInt(width, raw));
      bool lost;
      v.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
      out[i] = v.convertToFloat();
    }
  }
  return out;
}

namespace {

struct QuantizeBasePass
    : mlir::rp::impl::QuantizeBasePassBase<QuantizeBasePass> {
  using QuantizeBasePassBase::QuantizeBasePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("no 'func.func @main' whose weights to quantize");
      return signalPassFailure();
    }
    bool lora = false;
    for (auto p : main.getOps<ParamOp>())
      lora |= p.getTrainable() && p.getName().ends_with(".lora_A");
    if (!lora) {
      main.emitError("--quantize-base ")
          << stringifyQuantKind(kind)
          << " stores the frozen base of a LoRA model quantized, and this "
             "model has no adapters: add them (--lora-rank N); a trained "
             "weight cannot be quantized";
      return signalPassFailure();
    }
    SmallVector<ParamOp> chosen;
    for (auto p : main.getOps<ParamOp>())
      if (isQuantizable(p))
        chosen.push_back(p);
    if (chosen.empty()) {
      main.emitError("--quantize-base: no frozen linear or expert weight "
                     "to quantize");
      return signalPassFailure();
    }
    if (weightsFile.empty()) {
      main.emitError("rp-quantize-base needs weights-file, the file its "
                     "blobs are written to");
      return signalPassFailure();
    }
    std::string file = relativePath(weightsFile, irDir);
    bool written = false;
    main.walk(
        [&](ParamOp p) { written |= p.getFile() && *p.getFile() == file; });
    WeightsWriter writer(weightsFile);
    Location loc = main.getLoc();
    if (failed(written ? writer.openAppend(loc) : writer.open(loc)))
      return signalPassFailure();
    auto format = kind == QuantKind::nf4 ? ::rp::quant::QuantKind::nf4
                                         : ::rp::quant::QuantKind::int8;
    for (ParamOp p : chosen) {
      int64_t n = p.getType().getNumElements();
      int64_t bytes = ::rp::quant::layoutOf(format, n).bytes;
      // A weight without stored values (a weightless graph, rp.shapes: a
      // prediction of the plan's times and bytes) becomes a blob of the
      // same size without values, which a run starts as zeros.
      if (!p.getFile()) {
        replace(p, std::nullopt, 0, bytes);
        ++numQuantized;
        continue;
      }
      FailureOr<std::vector<float>> values = readValues(p, irDir);
      if (failed(values))
        return signalPassFailure();
      std::string blob(size_t(bytes), '\0');
      ::rp::quant::quantize(format, values->data(), n,
                            reinterpret_cast<uint8_t *>(blob.data()));
      int64_t offset = writer.append(blob);
      replace(p, StringRef(file), offset, bytes);
      ++numQuantized;
    }
    if (failed(writer.commit(loc)))
      return signalPassFailure();
    if (module->hasAttr(kWeightFingerprintsAttr))
      recordWeightFingerprints(module, irDir);
  }

  /// `p` becomes an i8 parameter of the same name holding the blob, and
  /// each layer reading it dequantizes it first.
  void replace(ParamOp p, std::optional<StringRef> file, int64_t offset,
               int64_t bytes) {
    OpBuilder b(p);
    auto weightType = p.getType();
    auto blobType = RankedTensorType::get({bytes}, b.getI8Type());
    auto q = ParamOp::create(
        b, p.getLoc(), blobType, p.getName(),
        /*trainable=*/false, file ? b.getStringAttr(*file) : StringAttr(),
        file ? b.getI64IntegerAttr(offset) : IntegerAttr(), FloatAttr());
    for (OpOperand &use : llvm::make_early_inc_range(p->getUses())) {
      auto layer = cast<LayerOp>(use.getOwner());
      BlockArgument arg = layer.getBody().getArgument(use.getOperandNumber());
      use.set(q.getResult());
      arg.setType(blobType);
      OpBuilder inner = OpBuilder::atBlockBegin(arg.getOwner());
      auto w = DequantizeOp::create(inner, p.getLoc(), weightType, arg, kind);
      arg.replaceAllUsesExcept(w.getResult(), w);
    }
    p.erase();
  }
};

} // namespace
