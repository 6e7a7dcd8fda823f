//===- GraphOps.h - The Graph dialect, its ops and interfaces ---*- C++ -*-===//

#ifndef PCC_DIALECT_GRAPH_IR_GRAPHOPS_H
#define PCC_DIALECT_GRAPH_IR_GRAPHOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace pcc {
/// The attribute that carries a value's ONNX name on a function's arguments
/// and results (the importer's, which the runtime's interface keeps).
inline constexpr llvm::StringLiteral kOnnxNameAttr = "onnx.name";

/// The ONNX node an operation was imported from (its location's name, or
/// the first named part of a fused location), or "" when it has none.
llvm::StringRef getNodeName(mlir::Location loc);
} // namespace pcc

namespace pcc::graph {
/// pcc-fuse's decisions for code generation, on the program a target emits:
/// on a graph.gemm or single-product graph.matmul, that the element-wise op
/// reading its result (through views) runs on each block of the product
/// as it is done, inside the product's call, and its result never reaches
/// memory unfused;
inline constexpr llvm::StringLiteral kEpilogueAttr = "graph.epilogue";
/// on a graph.fusion read by a softmax over its last axis, that the
/// softmax computes it row by row (attention's scale and mask never reach
/// memory).
inline constexpr llvm::StringLiteral kRowPrologueAttr = "graph.row_prologue";
/// pcc-bound-indices' finding on an integer argument whose values a step
/// takes as positions (IndexingOpInterface): the smallest extent they
/// index (each must lie in [-extent, extent)), and the ONNX node of that
/// op, which the runtime checks its inputs against before a run.
inline constexpr llvm::StringLiteral kIndexBoundAttr = "graph.index_bound";
inline constexpr llvm::StringLiteral kIndexNodeAttr = "graph.index_node";

/// An attention operand's or output's shape in the other layout: with
/// `swap` (graph.attention's `sequence_first`), dimensions 1 and 2
/// exchanged, [B, H, T, D] <-> [B, T, H, D]; as it is otherwise.
template <typename Range>
llvm::SmallVector<int64_t, 4> swapHeadsSequence(const Range &shape, bool swap) {
  llvm::SmallVector<int64_t, 4> result(shape.begin(), shape.end());
  if (swap && result.size() >= 3)
    std::swap(result[1], result[2]);
  return result;
}
inline llvm::SmallVector<int64_t, 4>
swapHeadsSequence(std::initializer_list<int64_t> shape, bool swap) {
  return swapHeadsSequence(llvm::ArrayRef<int64_t>(shape), swap);
}
} // namespace pcc::graph

namespace pcc::graph {

/// A factor-based sharding rule (GSPMD/Shardy style). Every dimension of
/// every operand and result is indexed by a list of factors, major to minor:
/// one factor usually, several when a reshape splits or merges it (a
/// compound dimension, [B, S, H*D] -> [B, S, H, D] maps H*D to [h, d]), none
/// for a broadcast dimension of extent 1. Dimensions mapped to the same
/// factor must be sharded alike. Each factor has a kind:
///  - Parallel: sharding it needs no communication;
///  - Reduction: used by operands and no result, so sharding it leaves
///    partial results, combined by the factor's ReductionKind (an all-reduce
///    with sum, max, min or mean);
///  - NeedReplication: must stay whole (a softmax axis, normalized
///    dimensions, a dimension a slice cuts unevenly);
///  - Permutation: may be sharded, but the shards of the operands and of
///    the results hold different parts, so data moves between ranks (the
///    parts of a concat or an equal split).
struct ShardingRule {
  enum class FactorKind { Parallel, Reduction, NeedReplication, Permutation };
  enum class ReductionKind { Sum, Max, Min, Mean };
  struct Factor {
    int64_t size;
    FactorKind kind;
    ReductionKind reduction;
  };
  /// The factors indexing one dimension, major to minor.
  using DimFactors = llvm::SmallVector<int64_t, 1>;
  using TensorFactors = llvm::SmallVector<DimFactors>;

  llvm::SmallVector<Factor> factors;
  llvm::SmallVector<TensorFactors> operandFactors;
  llvm::SmallVector<TensorFactors> resultFactors;

  /// Adds a factor of the given extent and kind; returns its index.
  int64_t addFactor(int64_t size, FactorKind kind = FactorKind::Parallel,
                    ReductionKind reduction = ReductionKind::Sum);

  /// Prints the rule in Shardy's notation, factors named i, j, k, ... and a
  /// compound dimension as the names of its factors run together:
  /// `([i, k], [k, j]) -> ([i, j]) {i=2, j=4, k=3} reduction={k}`, with `_`
  /// for a dimension without a factor, `reduction={k:max}` for a reduction
  /// other than a sum, and need_replication={...}, permutation={...}.
  void print(llvm::raw_ostream &os) const;
};

/// What an op's partition hook (ShardingRuleOpInterface::partition) may ask
/// of the pass that partitions it: how many blocks a split factor has, this
/// rank's block, and a combination of the ranks' partial values. Keeps the
/// Graph dialect free of any particular communication dialect.
class PartitionContext {
public:
  virtual ~PartitionContext() = default;
  /// The number of blocks a split factor is cut into.
  virtual int64_t numShards() const = 0;
  /// The groups of the split factor: it is viewed as [groups, n] and each
  /// rank holds its block of every group's n (1: one plain block).
  virtual int64_t numGroups() const = 0;
  /// A rank-0 i64 tensor: this rank's block index.
  virtual mlir::Value shardIndex(mlir::OpBuilder &builder,
                                 mlir::Location loc) = 0;
  /// The combination of `value` over the ranks that share the split.
  virtual mlir::Value allReduce(mlir::OpBuilder &builder, mlir::Location loc,
                                mlir::Value value,
                                ShardingRule::ReductionKind kind) = 0;
};

/// What an operand does in its op, as far as training cares: the
/// trainable-set rule (pcc-select-trainable) follows an initializer through
/// `Movement` ops until it meets the model's activations and judges it by
/// the role it plays there.
enum class OperandRole {
  Other,          ///< none of the roles below (indices, conditions, ...)
  Contraction,    ///< an operand of a matrix product (or Gemm's addend)
  Lookup,         ///< the table a gather reads rows of
  Affine,         ///< the scale or bias of a normalization
  Additive,       ///< added or subtracted, with broadcasting
  Multiplicative, ///< multiplied or divided, with broadcasting
  Elementwise,    ///< combined element by element otherwise
  Select,         ///< a value chosen element by element by a condition
  Movement,       ///< moved, reshaped or converted: values pass through
  SoftmaxInput,   ///< the input of a softmax (attention scores, logits)
};

/// Where the elements of a tensor lie in a buffer: element `i` (one index
/// per dimension) at `offset + sum(i[d] * strides[d])`, in elements. A
/// dense row-major tensor has offset 0 and its contiguous strides; a
/// broadcast dimension has stride 0.
struct StridedLayout {
  int64_t offset = 0;
  llvm::SmallVector<int64_t> strides;

  /// A dense row-major tensor of `shape`.
  static StridedLayout contiguous(llvm::ArrayRef<int64_t> shape);
  /// The layout of the same elements viewed with shape `to` in row-major
  /// order (a reshape) when they have shape `from` and this layout; none
  /// where a dimension of `to` spans dimensions of `from` that are not
  /// evenly spaced in memory.
  std::optional<StridedLayout> reshape(llvm::ArrayRef<int64_t> from,
                                       llvm::ArrayRef<int64_t> to) const;
};

namespace detail {
int64_t defaultFlops(mlir::Operation *op);
/// Whether `op` is a product mixed precision narrows (LowPrecisionProduct).
bool isLowPrecisionProduct(mlir::Operation *op);
int64_t defaultBytesAccessed(mlir::Operation *op);
/// The default partition: `op` cloned on the local operands, its results
/// given the local types.
llvm::LogicalResult
partitionByCloning(mlir::Operation *op, mlir::OpBuilder &builder,
                   mlir::ValueRange operands, mlir::TypeRange resultTypes,
                   llvm::SmallVectorImpl<mlir::Value> &results);
/// Infers the numpy-broadcast result of `operands` with `elementType`.
llvm::LogicalResult inferBroadcastType(std::optional<mlir::Location> loc,
                                       mlir::ValueRange operands,
                                       mlir::Type elementType,
                                       llvm::SmallVectorImpl<mlir::Type> &types,
                                       llvm::StringRef opName,
                                       unsigned firstValue, bool sameType);
} // namespace detail

/// The bytes of `value` as stored, elements in row-major order, little
/// endian: a dense attribute's (neither a splat nor i1) or a resource's (a
/// weight viewing an external data file, which the compiler never copies);
/// none otherwise.
std::optional<llvm::ArrayRef<char>> getStoredBytes(mlir::ElementsAttr value);

/// `value` as a dense attribute: itself, or a resource's bytes copied into
/// one (for the small values a pass reads); null when neither.
mlir::DenseElementsAttr getDenseValue(mlir::ElementsAttr value);

/// Broadcasts two static shapes by numpy rules; fails when incompatible.
llvm::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

} // namespace pcc::graph

#include "pcc/Dialect/Graph/IR/GraphInterfaces.h.inc"

#include "pcc/Dialect/Graph/IR/GraphDialect.h.inc"

namespace pcc::graph::OpTrait {
/// Ops whose result element i depends only on their operands' elements at
/// i (broadcast): see Graph_Elementwise in GraphOps.td.
template <typename ConcreteType>
class Elementwise
    : public mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {};
/// Result 0 is operand 0 updated in place (see Graph_UpdatesInPlace).
template <typename ConcreteType>
class UpdatesInPlace
    : public mlir::OpTrait::TraitBase<ConcreteType, UpdatesInPlace> {};
/// Matrix products that may run on 16-bit float operands with f32
/// accumulation: see Graph_LowPrecisionProduct in GraphOps.td.
template <typename ConcreteType>
class LowPrecisionProduct
    : public mlir::OpTrait::TraitBase<ConcreteType, LowPrecisionProduct> {};
} // namespace pcc::graph::OpTrait

namespace pcc::graph {
/// While alive, the Graph ops' folders on this thread fold results of up
/// to `elements` elements (never fewer than their default, 65536): an
/// import for --generate folds a sequence's [S, S] causal mask, which
/// attention's fusion then recognizes.
class FoldLimit {
public:
  explicit FoldLimit(int64_t elements);
  ~FoldLimit();
  FoldLimit(const FoldLimit &) = delete;
  FoldLimit &operator=(const FoldLimit &) = delete;

private:
  int64_t previous;
};

/// Whether `op` can be computed inside a loop nest over its result: an
/// element-wise op with one result of static shape. pcc-fuse groups such
/// ops, and the cost model charges those it fuses accordingly.
bool isFusibleElementwise(mlir::Operation *op);
} // namespace pcc::graph

#define GET_OP_CLASSES
#include "pcc/Dialect/Graph/IR/GraphOps.h.inc"

#endif // PCC_DIALECT_GRAPH_IR_GRAPHOPS_H
