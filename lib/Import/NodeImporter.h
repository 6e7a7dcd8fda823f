//===- NodeImporter.h - Shared state for importing one ONNX node -*- C++
//-*-===//
//
// Every op family's importer (Elementwise.cpp, Math.cpp, Movement.cpp,
// ShapeOps.cpp) receives a NodeImporter: the node, its operands as Graph
// values, typed attribute accessors and a `create` that infers result types,
// verifies and folds, reporting errors at the node's location.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_LIB_IMPORT_NODEIMPORTER_H
#define PCC_LIB_IMPORT_NODEIMPORTER_H

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <cstdio>
#include <string>

namespace pcc::import {

class NodeImporter;
using ImportFn = llvm::LogicalResult (*)(NodeImporter &);

/// Registry of op importers by ONNX op type.
using ImporterMap = llvm::StringMap<ImportFn>;
void registerElementwiseImporters(ImporterMap &map);
void registerMathImporters(ImporterMap &map);
void registerMovementImporters(ImporterMap &map);
void registerShapeImporters(ImporterMap &map);

/// Converts an ONNX TensorProto data type to an MLIR element type, or null.
mlir::Type convertElementType(mlir::MLIRContext *ctx, int32_t onnxType);

/// An ONNX TensorProto data type for a diagnostic: its name and number
/// ("FLOAT8E4M3FN (ONNX type 17)").
std::string describeElementType(int32_t onnxType);

/// Converts a TensorProto to a dense attribute. External data is read from
/// `modelDir` only. Emits an error at `loc` and returns null on failure.
mlir::DenseElementsAttr convertTensor(const onnx::TensorProto &tensor,
                                      llvm::StringRef modelDir,
                                      mlir::Location loc);

/// Converts an initializer: as `convertTensor`, except that a float tensor
/// in an external data file becomes a resource attribute viewing the file,
/// mapped once and never copied (the weights of a large model).
mlir::ElementsAttr convertInitializer(const onnx::TensorProto &tensor,
                                      llvm::StringRef modelDir,
                                      mlir::Location loc);

class NodeImporter {
public:
  /// ONNX sequences (SplitToSequence, SequenceAt) are resolved at import:
  /// a sequence is a list of tensors held here by value name.
  using SequenceMap = llvm::StringMap<llvm::SmallVector<mlir::Value>>;

  NodeImporter(const onnx::NodeProto &node, int64_t opset, mlir::Location loc,
               mlir::OpBuilder &builder, llvm::ArrayRef<mlir::Value> inputs,
               llvm::StringRef modelDir, SequenceMap &sequences)
      : node(node), opset(opset), loc(loc), b(builder), inputs(inputs),
        modelDir(modelDir), sequences(sequences) {}

  const onnx::NodeProto &node;
  const int64_t opset;
  const mlir::Location loc;
  mlir::OpBuilder &b;

  /// Operand `i`, or null when absent or given as "".
  mlir::Value input(size_t i) const {
    return i < inputs.size() ? inputs[i] : mlir::Value();
  }
  size_t numInputs() const { return inputs.size(); }
  mlir::RankedTensorType inputType(size_t i) const {
    return mlir::cast<mlir::RankedTensorType>(input(i).getType());
  }
  /// Requires operands [0, n) to be present.
  llvm::LogicalResult requireInputs(size_t n);

  /// The constant elements of operand `i` as int64 (for axes, shapes,
  /// bounds); fails with a diagnostic when it is not a compile-time
  /// constant. `what` names the operand in the message.
  llvm::FailureOr<llvm::SmallVector<int64_t>> constInts(size_t i,
                                                        llvm::StringRef what);
  /// The constant value of `v`, when it is one.
  static mlir::DenseElementsAttr constantOf(mlir::Value v);

  // Attributes.
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t attrInt(llvm::StringRef name, int64_t dflt) const;
  float attrFloat(llvm::StringRef name, float dflt) const;
  std::string attrString(llvm::StringRef name, llvm::StringRef dflt) const;
  std::optional<llvm::SmallVector<int64_t>>
  attrInts(llvm::StringRef name) const;

  /// Fails with "<op>: result of N elements exceeds pcc's limit of M" when
  /// `shape` holds more than `limit` elements (or a negative extent).
  llvm::LogicalResult checkElements(llvm::ArrayRef<int64_t> shape,
                                    int64_t limit);

  /// Normalizes a possibly negative axis against `rank`.
  llvm::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank);

  /// Creates a Graph op whose result types are inferred, verifies it and
  /// folds it when possible. Returns its results (folded values included).
  template <typename OpTy>
  llvm::FailureOr<llvm::SmallVector<mlir::Value>>
  create(mlir::ValueRange operands,
         llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    llvm::SmallVector<mlir::Type> types;
    mlir::DictionaryAttr dict = b.getDictionaryAttr(attrs);
    if (failed(OpTy::inferReturnTypes(b.getContext(), loc, operands, dict,
                                      mlir::OpaqueProperties(nullptr), {},
                                      types)))
      return mlir::failure();
    return createWithTypes(OpTy::getOperationName(), types, operands, attrs);
  }
  /// Same, with the result types given.
  llvm::FailureOr<llvm::SmallVector<mlir::Value>>
  createWithTypes(llvm::StringRef opName, mlir::TypeRange types,
                  mlir::ValueRange operands,
                  llvm::ArrayRef<mlir::NamedAttribute> attrs = {});

  /// Single-result conveniences.
  template <typename OpTy>
  mlir::FailureOr<mlir::Value>
  create1(mlir::ValueRange operands,
          llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    auto r = create<OpTy>(operands, attrs);
    if (failed(r))
      return mlir::failure();
    return (*r)[0];
  }
  mlir::FailureOr<mlir::Value> create1WithType(llvm::StringRef opName,
                                               mlir::Type type,
                                               mlir::ValueRange operands);
  /// A constant of the given values.
  mlir::Value constant(mlir::DenseElementsAttr value);
  /// A rank-0 constant of `elementType` (a float or an integer type, whose
  /// value is `value` truncated).
  mlir::Value scalar(mlir::Type elementType, double value);

  /// Results of the node, in output order.
  llvm::SmallVector<mlir::Value> results;

  /// Takes the outcome of a `create` as the node's results.
  llvm::LogicalResult
  setResults(llvm::FailureOr<llvm::SmallVector<mlir::Value>> r) {
    if (failed(r))
      return mlir::failure();
    results = std::move(*r);
    return mlir::success();
  }
  llvm::LogicalResult setResult(mlir::FailureOr<mlir::Value> r) {
    if (failed(r))
      return mlir::failure();
    results = {*r};
    return mlir::success();
  }

  llvm::StringRef getModelDir() const { return modelDir; }

  /// The sequence that input `i` names, or null with a diagnostic.
  const llvm::SmallVector<mlir::Value> *sequenceInput(size_t i);
  /// Makes output `i` the sequence `elements` (a node without that output
  /// produces nothing anyone can read).
  void setSequenceOutput(size_t i, llvm::SmallVector<mlir::Value> elements) {
    if (int(i) < node.output_size() && !node.output(i).empty())
      sequences[node.output(i)] = std::move(elements);
  }

private:
  llvm::ArrayRef<mlir::Value> inputs;
  llvm::StringRef modelDir;
  SequenceMap &sequences;
};

/// Upper bound on the elements of a constant the importer computes from a
/// few numbers (Range): a small model must not make the compiler allocate
/// gigabytes.
inline constexpr int64_t kMaxMaterializedElements = int64_t(1) << 24;
/// Upper bound on the elements of a tensor an op makes from a few numbers
/// (Expand, Tile, ConstantOfShape): the program would allocate it when run.
inline constexpr int64_t kMaxTensorElements = int64_t(1) << 31;

/// An element count for a diagnostic, in three significant digits.
inline std::string formatCount(double n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", n);
  return buf;
}

} // namespace pcc::import

#endif // PCC_LIB_IMPORT_NODEIMPORTER_H
