//===- Importer.cpp - ONNX models into the rp graph -----------------------===//
//
// Loads the model, checks what rp supports, turns graph inputs into function
// arguments, initializers into rp.param (or small constants), and nodes into
// rp ops through the handler table. See Importer.h for the contract.
//
//===----------------------------------------------------------------------===//

#include "rp/Import/ONNX/Importer.h"
#include "AttributeTypes.h"
#include "BandEval.h"
#include "ConstantEvaluator.h"
#include "GraphImporter.h"
#include "MoEBlocks.h"
#include "NodeImporter.h"
#include "rp/Support/ToolGuards.h"
#include "rp/Support/WeightsWriter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cstring>
#include <fstream>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

static constexpr int64_t kMinOpset = 13, kMaxOpset = 21;

LogicalResult mlir::rp::parseShapeOption(StringRef text,
                                         ONNXImportOptions &options,
                                         std::string &error) {
  auto [name, dims] = text.rsplit('=');
  if (name.empty() || dims.empty()) {
    error = "expected --shape NAME=DIMS (for example tokens=2x2048), got '" +
            text.str() + "'";
    return failure();
  }
  SmallVector<int64_t> shape;
  SmallVector<StringRef> parts;
  dims.split(parts, 'x');
  for (StringRef p : parts) {
    int64_t d;
    if (p.getAsInteger(10, d) || d < 1) {
      error = "bad dimension '" + p.str() + "' in --shape " + text.str() +
              ": dimensions are positive integers joined by 'x'";
      return failure();
    }
    shape.push_back(d);
  }
  options.shapes[name] = shape;
  return success();
}

/// What exporters emit for a mixture-of-experts block's routing: inside a
/// block rp-import recognises (MoEBlocks.cpp) these ops never reach a
/// handler, so one that does is outside such a block.
static std::string moeRoutingHint(StringRef opType) {
  if (!llvm::is_contained(
          {"TopK", "OneHot", "NonZero", "ScatterElements", "ScatterND"},
          opType))
    return "";
  return "; rp-import maps a mixture-of-experts block's OneHot, NonZero "
         "and ScatterElements only as part of a whole block it recognises "
         "(docs/moe.md), and a router's TopK op by op only along the last "
         "axis: trace the model with rp.trace, which maps more forms to the "
         "rp.moe ops";
}

Location GraphImporter::nodeLoc(const onnx::NodeProto &node, int index) {
  std::string name = node.name().empty()
                         ? node.op_type() + "_" + std::to_string(index)
                         : node.name();
  return NameLoc::get(StringAttr::get(context, name),
                      FileLineColLoc::get(context, path, 0, 0));
}

LogicalResult GraphImporter::importNode(const onnx::NodeProto &node,
                                        int index) {
  if (overrides.empty())
    return importNodeImpl(node, index);
  // After --shape changed a fixed dimension, a node that fails most likely
  // holds the exported size in a constant: it pins that dimension.
  bool noted = false;
  ScopedDiagnosticHandler pinned(context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && !noted) {
      noted = true;
      Diagnostic &note = diag.attachNote();
      note << "--shape changed " << llvm::join(overrides, ", ")
           << "; this node pins it (it, or a constant it reads, was "
              "computed for the exported size): re-export with that "
              "dimension dynamic (dynamic_axes in torch.onnx.export) or at "
              "the size you want";
    }
    return failure(); // the tool's handler prints it
  });
  return importNodeImpl(node, index);
}

LogicalResult GraphImporter::importNodeImpl(const onnx::NodeProto &node,
                                            int index) {
  Location loc = nodeLoc(node, index);
  NodeImporter importer(node, opset, builder, loc, values, modelDir);
  importer.sequences = &sequences;
  bool moe = node.domain() == kMoEDomain && node.op_type() == "MoE";
  // rp.onnx_forms.exportable's marker of a value a torch.no_grad() region
  // returns to the gradient: rp.stop_gradient, as rp.trace emits it.
  bool stop = node.domain() == "rp" && node.op_type() == "StopGradient";
  if (!moe && !stop && !node.domain().empty() && node.domain() != "ai.onnx")
    return importer.error() << "operator domain '" << node.domain()
                            << "' is not supported; rp imports the default "
                               "ONNX domain (and rp's StopGradient) only";
  for (const std::string &in : node.input())
    if (!in.empty() && !values.count(in) && !foldedValues.count(in)) {
      lookupInitializer(in);
      if (initializerFailed)
        return failure();
    }
  if (moe)
    return importMoENode(importer);
  if (stop) {
    if (node.input_size() != 1 || node.output_size() != 1)
      return importer.error() << "rp's StopGradient takes one input and "
                                 "gives one output; re-export the model";
    Value x = importer.input(0);
    if (!x)
      return failure();
    importer.setOutput(0, importer.create<StopGradientOp>(x));
    return success();
  }
  // Before folding too: a node folded into a constant reads its attributes
  // like one a handler imports.
  if (failed(checkAttributeTypes(importer)))
    return failure();
  auto folded = tryEvaluate(importer);
  if (failed(folded))
    return failure();
  if (*folded)
    return success();
  for (const std::string &in : node.input())
    if (auto narrow = foldedValues.find(in); narrow != foldedValues.end())
      return importer.error()
             << "input '" << in << "' is a constant of "
             << narrow->second.getElementType()
             << " elements, a type rp folds at import but has no tensors of; "
                "this node cannot be folded (not every input is constant, or "
                "rp does not evaluate "
             << node.op_type()
             << "): re-export with the value cast to int64, int32 or bool";
  auto it = handlers.find(node.op_type());
  if (it == handlers.end() && canEvaluate(node.op_type())) {
    InFlightDiagnostic diag = importer.error()
                              << "operator " << node.op_type()
                              << " is supported on input-independent values "
                                 "only (rp folds it into a constant at "
                                 "import), but";
    for (const std::string &in : node.input())
      if (!in.empty() && failed(constantValue(values.lookup(in)))) {
        diag << " input '" << in << "'";
        break;
      }
    diag << " is computed at run time from the model's inputs; rp has no "
            "kernel for it (rp-import --list-ops lists the ops it runs)"
         << moeRoutingHint(node.op_type());
    return diag;
  }
  if (it == handlers.end())
    return importer.error() << "operator " << node.op_type()
                            << " is not supported by rp-import (rp-import "
                               "--list-ops lists the ops it handles); "
                               "re-export the model without it"
                            << moeRoutingHint(node.op_type());
  Operation *before = entry->empty() ? nullptr : &entry->back();
  if (failed(it->second(importer)))
    return failure();
  // Input types the handler did not check surface here, at the node, rather
  // than at the end of the import without it.
  Operation *first = before           ? before->getNextNode()
                     : entry->empty() ? nullptr
                                      : &entry->front();
  for (Operation *op = first; op; op = op->getNextNode())
    if (failed(verify(op)))
      return importer.error() << "its inputs have types this operator does "
                                 "not accept in rp (see the error above)";
  if (node.op_type() == "Gather" && node.input_size() == 2 &&
      options.paddingIdx.count(node.input(0)))
    return applyPaddingIdx(node, loc);
  return success();
}

FailureOr<DenseElementsAttr> GraphImporter::constantValue(Value v) {
  DenseElementsAttr attr;
  if (!v)
    return failure();
  if (matchPattern(v, m_Constant(&attr)))
    return attr;
  auto param = v.getDefiningOp<ParamOp>();
  if (!param || !buffers.contains(param.getName()))
    return failure();
  auto it = bufferValues.find(param);
  if (it != bufferValues.end())
    return it->second;
  const onnx::TensorProto *tensor = initializers.lookup(param.getName());
  if (!tensor)
    return failure();
  auto data = readTensor(*tensor, cast<RankedTensorType>(param.getType()),
                         modelDir, param.getLoc());
  if (failed(data))
    return failure();
  bufferValues[param] = *data;
  return *data;
}

FailureOr<bool> GraphImporter::tryEvaluate(NodeImporter &importer) {
  const onnx::NodeProto &node = importer.node;
  if (!canEvaluate(node.op_type()))
    return false;
  SmallVector<BandOperand> operands;
  for (const std::string &in : node.input()) {
    if (in.empty()) {
      operands.push_back({});
      continue;
    }
    if (auto narrow = foldedValues.find(in); narrow != foldedValues.end()) {
      operands.push_back({narrow->second, nullptr});
      continue;
    }
    Value v = values.lookup(in);
    auto band = bands.find(v);
    if (band != bands.end()) {
      operands.push_back({{}, &band->second});
      continue;
    }
    auto value = constantValue(v);
    if (failed(value))
      return false;
    operands.push_back({*value, nullptr});
  }
  auto lazy = evaluateBand(importer, operands);
  if (failed(lazy))
    return failure();
  if (*lazy) {
    if ((*lazy)->dense) {
      importer.setOutput(0, importer.constant((*lazy)->dense));
    } else {
      Value v = emitBand(importer, *(*lazy)->band);
      bands[v] = *(*lazy)->band;
      importer.setOutput(0, v);
    }
    return true;
  }
  // A band this node cannot fold through: its elements, when they fit.
  SmallVector<DenseElementsAttr> inputs;
  for (auto [i, o] : llvm::enumerate(operands)) {
    if (o.band && o.band->type.getNumElements() > kMaxEvalElements)
      return importer.error()
             << "input '" << node.input(i) << "' is " << describe(*o.band)
             << ", which rp folds without its elements through elementwise "
                "ops with uniform operands, Expand, Reshape, Squeeze and "
                "Unsqueeze; this node needs its "
             << o.band->type.getNumElements()
             << " elements, too many to fold at import: export with rp.trace, "
                "or with fewer tokens";
    inputs.push_back(o.band ? materialize(*o.band) : o.dense);
  }
  auto outputs = evaluateNode(importer, inputs);
  if (failed(outputs))
    return failure();
  if (static_cast<int>(outputs->size()) < node.output_size())
    return importer.error()
           << "produces " << outputs->size() << " outputs, but the node names "
           << node.output_size();
  for (auto [i, attr] : llvm::enumerate(*outputs)) {
    if (!foldedOnly(attr.getElementType()))
      importer.setOutput(i, importer.constant(attr));
    else if (importer.hasOutput(i))
      foldedValues[node.output(i)] = attr;
  }
  return true;
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  registerElementwiseHandlers(handlers);
  registerShapeHandlers(handlers);
  registerNNHandlers(handlers);
  registerScatterHandlers(handlers);
  registerComposedHandlers(handlers);
  for (const auto &t : graph.initializer())
    initializers[t.name()] = &t;
  if (failed(checkFoldedParameters()))
    return nullptr;
  for (auto &p : options.paddingIdx)
    if (!initializers.count(p.first()))
      return emitError(FileLineColLoc::get(context, path, 0, 0))
                 << "--padding-idx names '" << p.first()
                 << "', which is not an initializer of the model",
             nullptr;
  if (graph.sparse_initializer_size())
    return emitError(FileLineColLoc::get(context, path, 0, 0))
               << "sparse initializers are not supported",
           nullptr;

  for (auto &shape : options.shapes) {
    bool found = llvm::any_of(graph.input(), [&](const auto &in) {
      return in.name() == shape.first();
    });
    if (!found) {
      InFlightDiagnostic diag =
          emitError(FileLineColLoc::get(context, path, 0, 0))
          << "--shape names '" << shape.first()
          << "', which is not an input of the model (inputs:";
      for (const auto &in : graph.input())
        if (!initializers.count(in.name()))
          diag << " " << in.name();
      diag << ")";
      return nullptr;
    }
  }

  SmallVector<std::string> argNames;
  SmallVector<Type> argTypes;
  for (const auto &in : graph.input()) {
    if (initializers.count(in.name()))
      continue; // an initializer listed as an input by older exporters
    auto type = inputType(in);
    if (failed(type))
      return nullptr;
    argNames.push_back(in.name());
    argTypes.push_back(*type);
  }

  Location fileLoc = FileLineColLoc::get(context, path, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(builder, fileLoc, "main",
                                   builder.getFunctionType(argTypes, {}));
  entry = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    values[name] = entry->getArgument(i);
    func.setArgAttr(i, "rp.name", builder.getStringAttr(name));
  }
  builder.setInsertionPointToEnd(entry);

  for (auto [i, node] : llvm::enumerate(graph.node()))
    if (failed(importNode(node, i)))
      return nullptr;

  SmallVector<Value> results;
  for (const auto &out : graph.output()) {
    Value v = values.lookup(out.name());
    if (!v)
      v = lookupInitializer(out.name());
    if (!v)
      return emitError(fileLoc) << "graph output '" << out.name()
                                << "' is not produced by any node",
             nullptr;
    results.push_back(v);
  }
  func::ReturnOp::create(builder, fileLoc, results);
  func.setType(
      builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, out] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, "rp.name", builder.getStringAttr(out.name()));
  if (weights && failed(weights->commit(fileLoc)))
    return nullptr;
  return module;
}

/// onnx.checker's single assignment: each value is defined once, by a
/// graph input, an initializer or one node's output. A second definition
/// used to win silently (the graph computed with the later node's value).
static LogicalResult checkSingleAssignment(const onnx::GraphProto &graph,
                                           Location loc) {
  llvm::StringMap<std::string> definedBy;
  for (const auto &in : graph.input())
    definedBy.try_emplace(in.name(), "it is an input of the graph");
  for (const auto &t : graph.initializer())
    definedBy.try_emplace(t.name(), "it is an initializer");
  for (auto [i, node] : llvm::enumerate(graph.node())) {
    std::string self =
        node.op_type() + " node '" +
        (node.name().empty() ? node.op_type() + "_" + std::to_string(i)
                             : node.name()) +
        "'";
    for (const std::string &out : node.output()) {
      if (out.empty())
        continue; // an optional output left out
      auto [it, fresh] = definedBy.try_emplace(out, "");
      if (!fresh)
        return emitError(loc)
               << self << " defines '" << out << "', but "
               << (it->second.empty() ? "it is defined before" : it->second)
               << "; an ONNX graph defines each value once (onnx.checker "
                  "refuses it too): re-export the model";
      it->second = self + " defines it too";
    }
  }
  return success();
}

std::vector<std::string> mlir::rp::supportedONNXOps() {
  llvm::StringMap<Handler> table;
  registerElementwiseHandlers(table);
  registerShapeHandlers(table);
  registerNNHandlers(table);
  registerScatterHandlers(table);
  registerComposedHandlers(table);
  std::vector<std::string> ops;
  for (auto &entry : table)
    ops.push_back(entry.first().str());
  llvm::sort(ops);
  return ops;
}

std::vector<std::string> mlir::rp::foldedONNXOps() { return evaluatedOps(); }

OwningOpRef<ModuleOp>
mlir::rp::importONNXModel(StringRef path, MLIRContext *context,
                          const ONNXImportOptions &options) {
  context->loadDialect<RPDialect, func::FuncDialect>();
  Location loc = FileLineColLoc::get(context, path, 0, 0);
  if (std::string why =
          checkRegularInput(path, "the ONNX model", kMaxOnnxInputBytes);
      !why.empty())
    return emitError(loc) << why, nullptr;
  std::ifstream in(path.str(), std::ios::binary);
  if (!in)
    return emitError(loc) << "cannot open '" << path
                          << "': " << std::strerror(errno),
           nullptr;
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in) || !model.has_graph() ||
      model.opset_import_size() == 0)
    return emitError(loc) << "'" << path
                          << "' is not a valid ONNX model (truncated, or not "
                             "an ONNX file); re-export it with "
                             "torch.onnx.export or check the download",
           nullptr;
  int64_t opset = -1;
  for (const auto &op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx")
      opset = op.version();
  if (opset < kMinOpset)
    return emitError(loc) << "opset " << opset
                          << " is not supported: rp imports opsets "
                          << kMinOpset << " to " << kMaxOpset
                          << "; re-export with opset_version between "
                          << kMinOpset << " and " << kMaxOpset,
           nullptr;
  if (opset > kMaxOpset) {
    // Any op may have changed meaning after the newest opset rp knows, so
    // the first node is named and the model is refused.
    std::string what = "the model";
    if (model.graph().node_size()) {
      const onnx::NodeProto &node = model.graph().node(0);
      what = node.op_type() + " node '" +
             (node.name().empty() ? node.op_type() + "_0" : node.name()) + "'";
    }
    return emitError(loc) << what << " (opset " << opset << "): opset " << opset
                          << " is newer than rp knows: rp imports "
                          << "opsets " << kMinOpset << " to " << kMaxOpset
                          << "; re-export with opset_version=" << kMaxOpset
                          << " (torch.onnx.export(..., opset_version="
                          << kMaxOpset << ")) or convert the model with "
                          << "onnx.version_converter.convert_version(model, "
                          << kMaxOpset << ")",
           nullptr;
  }
  if (failed(checkSingleAssignment(model.graph(), loc)))
    return nullptr;
  // Mixture-of-experts blocks become one node each before the graph is
  // imported node by node (MoEBlocks.cpp says why).
  if (failed(recognizeMoEBlocks(*model.mutable_graph(), loc)))
    return nullptr;
  return GraphImporter(model, path, opset, context, options).run();
}
