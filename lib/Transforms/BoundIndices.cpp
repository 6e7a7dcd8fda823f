//===- BoundIndices.cpp - Bounds the positions a step reads ---------------===//
//
// An index out of range either fails a run far from its cause or, once
// tensor parallelism splits the indexed axis, silently reads a masked
// zero. The step's integer inputs learn here the extent they index, for the
// runtime to check them against before a run; constant indices that can
// never be in range fail the compile.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"

namespace pcc {
#define GEN_PASS_DEF_BOUNDINDICES
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

namespace {

/// The tightest bound found for a value: the extent and the op of it.
struct Bound {
  int64_t extent = 0;
  Operation *op = nullptr;
};

static int64_t getNumElements(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

/// Whether every element of `user`'s operand appears in its result, with
/// its value: a view that drops none (a reshape, a transpose, a
/// broadcast), a concatenation, or a cast to an integer at least as wide.
static bool keepsEveryElement(Operation *user, Value operand) {
  if (user->getNumResults() != 1)
    return false;
  Value result = user->getResult(0);
  if (isa<StridedViewOpInterface>(user))
    return getNumElements(result) >= getNumElements(operand);
  if (isa<ConcatOp>(user))
    return true;
  if (isa<CastOp>(user)) {
    auto from = dyn_cast<IntegerType>(getElementTypeOrSelf(operand));
    auto to = dyn_cast<IntegerType>(getElementTypeOrSelf(result));
    return from && to && to.getWidth() >= from.getWidth();
  }
  return false;
}

/// Tightens `bound` with every op that takes all of `v`'s elements as
/// positions, directly or through ops that keep them.
static void collectBound(Value v, Bound &bound) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (auto indexing = dyn_cast<IndexingOpInterface>(user)) {
      if (&indexing.getIndicesOperand() != &use)
        continue;
      int64_t extent = indexing.getIndexedExtent();
      if (!bound.op || extent < bound.extent)
        bound = {extent, user};
      continue;
    }
    if (keepsEveryElement(user, v))
      collectBound(user->getResult(0), bound);
  }
}

/// Fails naming `op`'s node when its constant indices hold one out of range.
static LogicalResult checkConstantIndices(IndexingOpInterface op) {
  DenseIntElementsAttr values;
  if (!matchPattern(op.getIndicesOperand().get(), m_Constant(&values)))
    return success();
  int64_t extent = op.getIndexedExtent();
  for (const APInt &value : values) {
    int64_t index = value.getSExtValue();
    if (index >= -extent && index < extent)
      continue;
    return op->emitError("constant index ")
           << index << " is out of range of the " << extent
           << " positions it reads (valid: " << -extent << " to " << extent - 1
           << "); is an input longer than the model allows (its position "
              "table)?";
  }
  return success();
}

struct BoundIndicesPass : pcc::impl::BoundIndicesBase<BoundIndicesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    WalkResult checked = func.walk([](IndexingOpInterface op) {
      return failed(checkConstantIndices(op)) ? WalkResult::interrupt()
                                              : WalkResult::advance();
    });
    if (checked.wasInterrupted())
      return signalPassFailure();
    if (func.isExternal())
      return;
    Builder b(&getContext());
    for (BlockArgument arg : func.getArguments()) {
      if (!isa<IntegerType>(getElementTypeOrSelf(arg.getType())))
        continue;
      Bound bound;
      collectBound(arg, bound);
      if (!bound.op)
        continue;
      func.setArgAttr(arg.getArgNumber(), kIndexBoundAttr,
                      b.getI64IntegerAttr(bound.extent));
      // An op of no ONNX node (a test's, a pass's) is named by its kind.
      StringRef node = getNodeName(bound.op->getLoc());
      func.setArgAttr(arg.getArgNumber(), kIndexNodeAttr,
                      b.getStringAttr(node.empty()
                                          ? bound.op->getName().getStringRef()
                                          : node));
    }
  }
};

} // namespace
