//===- AttributeTypes.h - ONNX attributes checked against the schema -*- C++
//-*-===//
//
// An ONNX attribute stored with another type than its operator's schema
// declares (Gemm's alpha as INT, Softmax's axis as STRING) reads as 0 in a
// handler that asks for the declared type: a silent wrong answer.
// onnx.checker and onnxruntime refuse such models; so does the importer,
// for every node, before its handler runs, against libonnx's OpSchema for
// the model's opset. An attribute name the schema does not declare (a
// misspelling, another opset's attribute), which the handler would ignore,
// and a name given twice are refused the same way.
//
//===----------------------------------------------------------------------===//

#ifndef RP_IMPORT_ONNX_ATTRIBUTETYPES_H
#define RP_IMPORT_ONNX_ATTRIBUTETYPES_H

#include "NodeImporter.h"

namespace mlir::rp::onnx_import {

/// Checks every attribute of `importer`'s node against the schema of its
/// operator at its opset: declared there (as onnx.checker, names starting
/// with "__" excepted), given once, of the declared type, with the field of
/// that type set. An error names the node and the attribute.
LogicalResult checkAttributeTypes(NodeImporter &importer);

} // namespace mlir::rp::onnx_import

#endif // RP_IMPORT_ONNX_ATTRIBUTETYPES_H
