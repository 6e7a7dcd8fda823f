//===- HoistUpdates.cpp - State updates right after what they read --------===//
//
// The optimizer appends a step's updates after its whole backward. Each
// update moves here to just after the last op it depends on: it then reads
// its gradient while the caches still hold it.
//
//===----------------------------------------------------------------------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace pcc {
#define GEN_PASS_DEF_HOISTUPDATES
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc::graph;

namespace {

/// Whether `op`'s results share its operand's buffer on some target.
static bool mayBeView(Operation *op) {
  return isa<ViewLikeOpInterface, StridedViewOpInterface>(op);
}

/// Adds to `readers` every op that reads `v`, directly or through views.
static void collectReaders(Value v, llvm::SetVector<Operation *> &readers) {
  for (Operation *user : v.getUsers()) {
    if (!readers.insert(user) || !mayBeView(user))
      continue;
    for (Value result : user->getResults())
      collectReaders(result, readers);
  }
}

/// The op of `block` that `op` (nested in it, or the block's) is in.
static Operation *getBlockAncestor(Block &block, Operation *op) {
  return block.findAncestorOpInBlock(*op);
}

struct HoistUpdatesPass
    : public pcc::impl::HoistUpdatesBase<HoistUpdatesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return;
    Block &block = func.getBody().front();
    Operation *ret = block.getTerminator();

    // The results that replace a state, and the states replaced.
    llvm::DenseSet<unsigned> updates;
    llvm::DenseSet<Value> replaced;
    for (unsigned k = 0; k < func.getNumResults(); ++k)
      if (std::optional<unsigned> state = getStateIndex(func, k, kUpdateAttr)) {
        updates.insert(k);
        replaced.insert(func.getArgument(*state));
      }
    if (updates.empty())
      return;

    // The ops that only feed updates, latest first: without side effects,
    // every result read only by such an op or returned as an update (the
    // optimizer's, not the backward's, whose gradients are returned too).
    llvm::SetVector<Operation *> feeds;
    for (Operation &op : llvm::reverse(block.without_terminator())) {
      if (op.getNumResults() == 0 || !isMemoryEffectFree(&op) ||
          op.hasTrait<pcc::graph::OpTrait::UpdatesInPlace>())
        continue;
      bool onlyFeeds = !op.use_empty();
      for (OpOperand &use : op.getUses()) {
        Operation *user = getBlockAncestor(block, use.getOwner());
        if (user == ret ? !updates.contains(use.getOperandNumber())
                        : !feeds.contains(user)) {
          onlyFeeds = false;
          break;
        }
      }
      if (onlyFeeds)
        feeds.insert(&op);
    }

    // Earliest first, each just after the latest op it depends on, after
    // the ops moved there before it.
    llvm::DenseSet<Operation *> moved;
    for (Operation *op : llvm::reverse(feeds)) {
      Operation *after = nullptr;
      auto dependOn = [&](Operation *other) {
        other = other ? getBlockAncestor(block, other) : nullptr;
        if (other && other != op && (!after || after->isBeforeInBlock(other)))
          after = other;
      };
      llvm::SetVector<Value> reads;
      getUsedValuesDefinedAbove(op->getRegions(), reads);
      reads.insert(op->operand_begin(), op->operand_end());
      for (Value v : reads) {
        dependOn(v.getDefiningOp());
        if (!replaced.contains(v))
          continue;
        llvm::SetVector<Operation *> readers;
        collectReaders(v, readers);
        for (Operation *reader : readers)
          dependOn(reader);
      }
      // Only earlier: where something it depends on follows it (a reader
      // of a state it replaces), it stays.
      Operation *at = after ? after->getNextNode() : &block.front();
      while (at != op && moved.contains(at))
        at = at->getNextNode();
      if (at == op || (after && op->isBeforeInBlock(after)))
        continue;
      op->moveBefore(at);
      moved.insert(op);
    }
  }
};

} // namespace
