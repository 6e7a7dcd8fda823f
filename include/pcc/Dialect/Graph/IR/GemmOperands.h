//===- GemmOperands.h - Product operands read in place ----------*- C++ -*-===//
//
// A matrix product reads each operand as a matrix through a leading
// dimension, possibly transposed, and a batch of them through one stride
// per batch dimension; fused attention reads its queries, keys and values
// through a stride per dimension, the features contiguous. A chain of
// data-movement ops between a buffer and a product (StridedViewOpInterface: the
// split of a fused QKV projection, attention's head transposes, a slice, a
// broadcast, reshapes) then needs no copy wherever the layout it composes is
// such a matrix (or such an attention operand): the product reads the buffer
// the chain starts from.
//
// This analysis finds the data-movement ops that every reader takes that
// way, through any further such ops and reshapes, and gives each product
// or attention operand its buffer and layout. Those ops have no code and no
// buffer of their own: for BufferPlan they are views of their input. The same
// for every target; only how a target calls its product differs.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_DIALECT_GRAPH_IR_GEMMOPERANDS_H
#define PCC_DIALECT_GRAPH_IR_GEMMOPERANDS_H

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace pcc {

/// An operand of a product (the first two of graph.matmul or graph.gemm)
/// as the product reads it: the matrices (the last two dimensions; a
/// vector operand of matmul is one row or one column) are row-major, or
/// the transposes of row-major matrices, `ld` elements apart, in `buffer`
/// from element `offset`, and `batchStrides` step between the matrices
/// along each dimension before them.
struct MatrixOperand {
  mlir::Value buffer;
  int64_t offset = 0;
  bool transposed = false;
  int64_t ld = 1;
  llvm::SmallVector<int64_t> batchStrides;
};

/// A query, key or value operand of fused attention (graph.attention,
/// graph.attention_grad) as its kernels read it: in `buffer` from element
/// `offset`, each of its four dimensions `strides` apart, the features'
/// (the last) contiguous. The split of a fused QKV projection and the
/// head transposes before the op then cost nothing.
struct AttentionOperand {
  mlir::Value buffer;
  int64_t offset = 0;
  llvm::SmallVector<int64_t, 4> strides;
};

class GemmOperands {
public:
  /// Analyzes `func`, a function of one block.
  explicit GemmOperands(mlir::func::FuncOp func);

  /// Whether `op`'s results are read in place by products only: it has no
  /// code, and its results live in its input's buffer.
  bool isReadInPlace(mlir::Operation *op) const { return inPlace.contains(op); }

  /// Whether the analysis of `op`'s function would find `op` read in place,
  /// judged from the data-movement ops around it alone: those that make its
  /// input and those that read its results, through reshapes. The cost of
  /// one op (CostModel) asks this, where analyzing the whole function per
  /// op would be quadratic. It differs from the whole function's answer
  /// only where a producer of `op`'s input is read in place by further
  /// data-movement ops off `op`'s path (taken here as copied).
  static bool isReadInPlaceAlone(mlir::Operation *op);

  /// Operand `operand` of a product as the product reads it.
  MatrixOperand get(mlir::OpOperand &operand) const;

  /// Whether `operand` is an operand that a product reads as a matrix.
  static bool isMatrixOperand(mlir::OpOperand &operand);

  /// Whether `operand` is a query, key or value that fused attention
  /// reads at any strides.
  static bool isAttentionOperand(mlir::OpOperand &operand);

  /// Query, key or value `operand` of fused attention as its kernels read
  /// it.
  AttentionOperand getAttention(mlir::OpOperand &operand) const;

  /// The rows of C where `op` runs as one product, else none. A batch of
  /// products whose B is one matrix shared by the whole batch (a linear
  /// layer over [batch, tokens, features]), and whose A's matrices follow
  /// each other row after row, is one product of all of A's rows: B is
  /// read once, and the product is as tall as the batch.
  std::optional<int64_t> getProductRows(graph::MatMulOp op) const;

private:
  GemmOperands() = default;
  /// Drops the candidates in `inPlace` whose readers do not all read them
  /// in place, until none is left to drop.
  void dropCopiedCandidates(llvm::ArrayRef<mlir::Operation *> order);

  /// The buffer `v` is read in and its layout there: through the
  /// reshapes and read-in-place ops that produce it, else `v` itself,
  /// dense. None where a reshape of a strided layout has no strided form.
  std::optional<std::pair<mlir::Value, graph::StridedLayout>>
  compose(mlir::Value v) const;
  /// compose's result where no stride is negative (the kernels read
  /// forward), else none.
  std::optional<std::pair<mlir::Value, graph::StridedLayout>>
  composeForward(mlir::Value v) const;
  std::optional<MatrixOperand> getMatrix(mlir::OpOperand &operand) const;
  std::optional<AttentionOperand>
  getAttentionLayout(mlir::OpOperand &operand) const;
  /// Whether every reader of `op`'s results, through reshapes and
  /// read-in-place ops, is a product operand it can read as a matrix or
  /// an attention operand it can read at its strides.
  bool onlyStridedReadersRead(mlir::Operation *op) const;

  llvm::DenseSet<mlir::Operation *> inPlace;
};

/// The strides of a dense tensor of `shape` read in the iteration space
/// `space` with numpy broadcasting (trailing alignment; extent-1
/// dimensions repeat, with stride 0).
llvm::SmallVector<int64_t> getBroadcastStrides(llvm::ArrayRef<int64_t> shape,
                                               llvm::ArrayRef<int64_t> space);

/// The number of leading dimensions of `space` that flatten into the rows
/// of an M x `n` matrix, the others flattening into its `n` columns; none
/// where no trailing dimensions make up exactly n.
std::optional<unsigned> getRowDims(llvm::ArrayRef<int64_t> space, int64_t n);

/// The steps along the row and the column of C of an access with `strides`
/// over `space` whose first `t` dimensions flatten into C's rows and the
/// others into its columns, where each group is one stride; else none.
std::optional<std::pair<int64_t, int64_t>>
getRowColumnStrides(llvm::ArrayRef<int64_t> strides,
                    llvm::ArrayRef<int64_t> space, unsigned t);

/// The values of the chain of views that starts at `v` and in which each
/// value has one reader (into `chain`), and the reader that ends it (null
/// if none).
mlir::Operation *getViewChain(mlir::Value v,
                              llvm::SmallPtrSetImpl<mlir::Value> &chain);

} // namespace pcc

#endif // PCC_DIALECT_GRAPH_IR_GEMMOPERANDS_H
