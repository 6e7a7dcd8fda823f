//===- BufferPlan.h - Where each value of a function lives ------*- C++ -*-===//
//
// Every tensor is statically shaped, so a function's memory is planned at
// compile time, the same way for every target: one workspace, in which each
// computed value gets a block by first fit when its op runs and gives it
// back after its last reader (liveness per buffer, 64-byte blocks). A view
// (ViewLikeOpInterface: graph.reshape) takes no block and aliases the
// buffer of its source, which lives as long as any of its views; so does
// the result of an update in place (graph::OpTrait::UpdatesInPlace: a KV
// cache's write), unless its operand is a constant the target holds. A result
// of the function is computed in place in the buffer the caller provides
// for it where it can be, and otherwise copied there at the end. A product
// or scatter whose result is only added to a partial sum that is updated in
// place adds itself into that buffer and takes no block of its own; the
// inputs of a concatenation that can be made in place (a bucket of
// gradients) are computed in their parts of its block.
//
// The plan is a pure analysis: the target decides which values it holds
// outside the workspace (constants in the code, weights in the weights
// table) and prints the plan.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_ANALYSIS_BUFFERPLAN_H
#define PCC_ANALYSIS_BUFFERPLAN_H

#include "pcc/Analysis/TensorBytes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

namespace pcc {

struct BufferPlanOptions {
  /// Values the target holds outside the workspace (constants in the code,
  /// weights-table entries): they get no block, and are never computed in
  /// place in a result. Null: none.
  llvm::function_ref<bool(mlir::Value)> isExternal;
  /// Per result of the function: the argument whose buffer the result is
  /// written back into once everything else is done (a training step's
  /// state update), or -1. Such results are never computed in place, and a
  /// result that reads another written-back argument gets a snapshot. Empty:
  /// none.
  llvm::ArrayRef<int64_t> writeBack;
  /// Operands whose buffers an op keeps reading after it ran, until the
  /// end of the function (a non-blocking send, which the function waits for
  /// before it returns): their buffers stay alive to the end, like results.
  /// Null: none.
  llvm::function_ref<bool(mlir::OpOperand &)> readsUntilEnd;
  /// Ops whose results the target reads in their operand's buffer, as
  /// views (data movement that only products read, GemmOperands): the
  /// operand, or null. Null: only ViewLikeOpInterface ops.
  llvm::function_ref<mlir::Value(mlir::Operation *)> getViewSource;
  /// Ops that may fail and return early (gathers, scatters, calls):
  /// once a state is updated in place, no such op may follow, so that a
  /// failed step leaves the state as it was. Null: no state is updated in
  /// place.
  llvm::function_ref<bool(mlir::Operation *)> mayFail;
  /// Values an op reads besides its operands (a softmax that computes its
  /// input's producer on the fly reads that producer's operands): they stay
  /// alive until the op ran. Null: none.
  llvm::function_ref<void(mlir::Operation *,
                          llvm::SmallVectorImpl<mlir::Value> &)>
      getExtraReads;
  /// Ops that can add their result into a partial sum instead of writing
  /// it (a product with beta 1, a scatter that accumulates): the sum that
  /// reads the result and the partial sum it adds, or nulls
  /// (getAccumulatingSum). Where the plan computes that sum in place in the
  /// partial sum's buffer, the op's result and its views live there too
  /// (isAccumulated). Null: none.
  llvm::function_ref<std::pair<mlir::Value, mlir::Value>(mlir::Operation *)>
      getAccumulation;
  /// Whether a concatenation along its outermost dimension (a bucket of
  /// gradients) is made in place where it can be: each input, a buffer
  /// that only the concatenation reads, lives in its part of the result's
  /// block, allocated when the first input is computed, so that nothing is
  /// copied (isConcatenatedInPlace). The target then runs no code for it.
  /// So is the source of an insert_slice that is one block of its result
  /// (getInsertSliceOffset), which then only writes the zeros around it.
  bool concatInPlace = false;
  /// Collectives that can reduce in place (their result in their
  /// operand's buffer, as the targets' all-reduce does): each does where
  /// nothing but its wait reads the operand after it. Null: none.
  llvm::function_ref<bool(mlir::Operation *)> reducesInPlace;
  /// Whether an element-wise op (graph's Elementwise trait) computes its
  /// result in the buffer of an operand of the result's type that nothing
  /// reads after it (a sum of gradient parts, into the part made here):
  /// each element is read before it is written, at the same place. Not an
  /// op that reads more than its operands (getExtraReads: a product's
  /// epilogue).
  bool elementwiseInPlace = false;
  /// Whether a slice that is one block of a buffer computed here (steps
  /// 1, the dimensions before its first sliced one of extent 1, those
  /// after it whole: getSliceOffset) is a view of that part of it
  /// (getViewOffset), with no code.
  bool sliceViews = false;
  /// Results the caller may leave out (a training step's gradients, which
  /// only a dump reads): none is computed in its result's buffer, which
  /// may be missing; each is copied there at the end where it is given.
  /// Null: none.
  llvm::function_ref<bool(unsigned)> isOptionalResult;
  /// Whether the op computing `v`, returned as optional result k, runs
  /// only where the caller gives result k its buffer: then `v` is computed
  /// in that buffer. Null: none.
  llvm::function_ref<bool(unsigned k, mlir::Value v)> runsOnlyWhenAsked;
  /// The alignment (and granularity) of workspace blocks, in bytes.
  int64_t alignment = 64;
};

class BufferPlan {
public:
  /// Plans `func`, a function of one block whose ops all take and give
  /// statically shaped tensors.
  BufferPlan(mlir::func::FuncOp func, const BufferPlanOptions &options);

  /// The value whose buffer `v` lives in: `v` itself, or the source its
  /// chain of views starts from.
  mlir::Value getRoot(mlir::Value v) const {
    auto it = roots.find(v);
    return it == roots.end() ? v : it->second;
  }
  bool isView(mlir::Value v) const { return roots.count(v); }
  /// Whether `v` is computed in place in the buffer of an operand that its
  /// element-wise op reads at the same elements (which it is then a view
  /// of): a written-back result in its argument's, or an op's result in
  /// its operand's (BufferPlanOptions::elementwiseInPlace).
  bool isUpdatedInPlace(mlir::Value v) const {
    return updatedInPlace.contains(v);
  }
  /// Whether `v`, the result of an op that options.getAccumulation names,
  /// lives in its partial sum's buffer: the op adds itself there, and the
  /// sum has no code of its own.
  bool isAccumulated(mlir::Value v) const { return accumulated.contains(v); }
  /// Whether `v`, a graph.concat's result, is made in place
  /// (BufferPlanOptions::concatInPlace): its inputs are computed in it.
  bool isConcatenatedInPlace(mlir::Value v) const {
    return concatenatedInPlace.contains(v);
  }
  /// Where a view lives in its root's buffer: a byte offset, 0 for all but
  /// slices (BufferPlanOptions::sliceViews) and what views them.
  int64_t getViewOffset(mlir::Value v) const;
  /// The byte offset of `v`'s block in the workspace, if it has one.
  std::optional<int64_t> getWorkspaceOffset(mlir::Value v) const;
  /// The result `v` is computed in place for (its buffer is that result's),
  /// if any.
  std::optional<unsigned> getResultSlot(mlir::Value v) const;
  /// The workspace block that holds the value of write-back result
  /// `result` from before any write-back lands until its own, if it needs
  /// one (it reads an argument that another write-back overwrites).
  std::optional<int64_t> getSnapshotOffset(unsigned result) const;
  /// The workspace the function needs, in bytes (a multiple of the
  /// alignment).
  int64_t getWorkspaceBytes() const { return workspaceBytes; }

private:
  llvm::DenseMap<mlir::Value, mlir::Value> roots;
  llvm::DenseMap<mlir::Value, int64_t> viewOffsets;
  llvm::DenseSet<mlir::Value> updatedInPlace;
  llvm::DenseSet<mlir::Value> accumulated;
  llvm::DenseSet<mlir::Value> concatenatedInPlace;
  llvm::DenseMap<mlir::Value, int64_t> offsets;
  llvm::DenseMap<mlir::Value, unsigned> resultSlots;
  llvm::DenseMap<unsigned, int64_t> snapshots;
  int64_t workspaceBytes = 0;
};

/// Whether `op`'s code may fail and return early, after which the step's
/// caller may go on with the state as it was: the index checks of gathers
/// and scatters, and calls (whose callees may hold them). Not an index
/// check that an earlier op of the block made already, on the same indices
/// against the same extent (an embedding's backward scatter after its
/// gather, a loss's after the one that read the labels): that op would
/// have failed first. A state updated in place must not be followed by one
/// (BufferPlanOptions::mayFail).
/// Communication is not: a collective, send or wait that fails leaves the
/// group's ranks out of step, which ends the run on every rank whatever
/// the state (so a data-parallel step's updates, which follow the waits
/// of their buckets, are made in place).
bool mayReturnEarly(mlir::Operation *op);
/// No op: for a function whose written-back results are no state (a
/// called function's partial sums, dist.accumulates).
bool neverFails(mlir::Operation *op);

/// The results of `call` that its callee writes into the buffer of an
/// argument (dist.accumulates), each with the call's operand there: the
/// result lives in that operand's buffer.
llvm::SmallVector<std::pair<unsigned, mlir::Value>>
getAccumulatedOperands(mlir::func::CallOp call);

/// Whether `call` may write its result k into the buffer of `operand`,
/// one of its operands (dist.accumulates): nothing reads the operand after
/// the call. The operand is either an op's result that only the call reads
/// (a partial sum the previous call made), or an argument of the calling
/// function that the call reads once, that no later op reads, and that the
/// caller returns result k as the update of (graph.update: a state that a
/// pipeline rank's optimizer updates).
bool mayWriteIntoOperand(mlir::func::CallOp call, unsigned k,
                         mlir::Value operand);

/// Where the result of `op`, a graph.slice, starts in its input, in bytes,
/// if it is one block of it (steps 1, the dimensions before the first
/// sliced one of extent 1, those after it whole); else none.
std::optional<int64_t> getSliceOffset(mlir::Operation *op);

/// Where the source of `op`, a graph.insert_slice, starts in its result,
/// in bytes, if it is one block of it (its first dimension of extent over
/// 1 stepped by 1, every dimension after it whole); else none.
std::optional<int64_t> getInsertSliceOffset(mlir::Operation *op);

/// The op result `value` names, through views (ViewLikeOpInterface), if an
/// op computes it: null for a block argument, a constant or a weight,
/// which the target holds.
mlir::Value getComputedRoot(mlir::Value value);

/// Whether `op` is a collective that every target can run in place, its
/// result in its operand's buffer (dist.all_reduce):
/// BufferPlanOptions::reducesInPlace.
bool isReducedInPlace(mlir::Operation *op);

/// Whether `op` can add its result into a partial sum where that sum is
/// computed in place, instead of writing the result: a product
/// (graph.matmul, graph.gemm without C) with beta 1, a graph.scatter_add or
/// graph.scatter_elements_add that accumulates.
bool canAccumulateInPlace(mlir::Operation *op);

/// The sum an op that canAccumulateInPlace could add its result into, and
/// that sum's partial
/// sum: the result, through a chain of views each read once, is read only
/// by a graph.add that adds it (of the add's type) to another value of that
/// type, which nothing else reads. Else nulls. (Whether the sum is computed in
/// the partial sum's buffer is the buffer plan's to say.)
std::pair<mlir::Value, mlir::Value> getAccumulatingSum(mlir::Operation *op);

/// The op that makes `v` through a chain of views each read once; null
/// where a view's source has other readers, or `v` is an argument.
mlir::Operation *getViewedOp(mlir::Value v);

/// The terms of `sum`, a tree of graph.adds of one type whose inner adds
/// are each read once, in the order in which adding them one at a time to
/// a partial sum computes every one in that sum's buffer where it can: the
/// products (canAccumulateInPlace) first, each with beta 1, then the
/// scatters (accumulatesRows: they add their rows to what the products
/// made), then the rest. Empty where `sum` is not an add or no term is a
/// product: adding `sum` itself is then as cheap. A term is the value the
/// add reads (a view of a product stands for the product).
llvm::SmallVector<mlir::Value> getAccumulatedTerms(mlir::Value sum);

/// Whether `op` is a graph.scatter_add or graph.scatter_elements_add that
/// adds its rows (or elements) into a partial sum computed in the same
/// block (a tied embedding's rows into its head's gradient, a
/// cross-entropy's labels into its logits' gradient): fewer updates than
/// its result's elements, its result read
/// only by the graph.add of getAccumulatingSum. pcc-fuse moves it after the
/// partial sum's op and keeps the add out of fusions, so that the buffer
/// plan accumulates it; it then writes only its rows, and the add has no
/// code (CostModel::time).
bool accumulatesRows(mlir::Operation *op);

/// Whether `op` is a graph.concat that a buffer plan with concatInPlace may
/// make in place: along its outermost dimension (or after dimensions of 1),
/// each input the whole of an op's result (through views) that only the
/// concatenation reads, no two the same. (The plan also asks that the
/// inputs are workspace buffers, neither returned nor held by the target.)
bool canConcatenateInPlace(mlir::Operation *op);

/// The bytes a rank holds to run `func` (one block of statically shaped
/// tensors): its arguments (the parameters, the state, the inputs), its
/// results but the state updates (written back over their state,
/// graph.update), and the workspace of its buffer plan, in which an
/// element-wise op that pcc-fuse computes inside its readers' loop
/// (CostModel::isFusedIntoReaders) has no buffer and its readers read its
/// operands instead, as the compiled step does.
int64_t getPlannedBytes(mlir::func::FuncOp func);

} // namespace pcc

#endif // PCC_ANALYSIS_BUFFERPLAN_H
