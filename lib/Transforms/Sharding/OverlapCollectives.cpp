//===- OverlapCollectives.cpp - Start collectives early -------------------===//
//
// Moves each collective that the targets start apart from its wait up to
// just after its operand is computed, never above an earlier op that
// communicates or calls, and completes it with a `dist.wait` just before
// the first op that needs its result (views of the result, which compute
// nothing, follow the wait) or that keeps communication order with it (a
// later collective, a call). The ops in between run while it travels.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace pcc {
#define GEN_PASS_DEF_OVERLAPCOLLECTIVES
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

namespace {
struct OverlapCollectivesPass
    : pcc::impl::OverlapCollectivesBase<OverlapCollectivesPass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      sinkParameterGathers(block);
      // The last ordered op, in the new order.
      Operation *fence = nullptr;
      for (Operation &op :
           llvm::make_early_inc_range(block.without_terminator())) {
        if (pcc::dist::isStartedCollective(&op) && !gathersArgument(&op))
          hoist(block, fence, &op);
        if (pcc::dist::keepsCommunicationOrder(&op))
          fence = &op;
      }
      for (Operation &op : llvm::make_early_inc_range(block))
        if (pcc::dist::isStartedCollective(&op) &&
            !pcc::dist::completesAtWait(&op))
          placeWait(&op);
    }
  }

  /// An all-gather of a function argument: a parameter held split (ZeRO
  /// 3), whose whole copy should live only while it is read.
  static bool gathersArgument(Operation *op) {
    return isa<pcc::dist::AllGatherOp>(op) &&
           isa<BlockArgument>(op->getOperand(0));
  }

  /// Moves each gather of an argument, with the ops computed from its
  /// result alone (and constants or arguments: a transposed weight), to
  /// just before the first op that reads them otherwise, so that the
  /// gathered copy is made where the step needs it rather than where the
  /// program happened to compute its views. Then each gather but the first
  /// starts where the one before it was placed, before that one's readers:
  /// it travels while they compute (the earlier gather completes first, as
  /// a later collective follows it), and at most two gathered copies are
  /// alive beyond those still read, as FSDP's prefetch of one.
  static void sinkParameterGathers(Block &block) {
    SmallVector<Operation *> gathers;
    for (Operation &op : block.without_terminator())
      if (gathersArgument(&op))
        gathers.push_back(&op);
    for (Operation *gather : gathers) {
      llvm::SmallPtrSet<Operation *, 8> chain{gather};
      SmallVector<Operation *> ordered{gather};
      Operation *consumer = nullptr;
      for (Operation *op = gather->getNextNode();
           op && !op->hasTrait<OpTrait::IsTerminator>();
           op = op->getNextNode()) {
        bool readsChain = llvm::any_of(op->getOperands(), [&](Value v) {
          return v.getDefiningOp() && chain.contains(v.getDefiningOp());
        });
        if (!readsChain)
          continue;
        bool onlyChain = isMemoryEffectFree(op) && op->getNumRegions() == 0 &&
                         !isa<pcc::dist::DistDialect>(op->getDialect()) &&
                         llvm::all_of(op->getOperands(), [&](Value v) {
                           Operation *def = v.getDefiningOp();
                           return !def || chain.contains(def) ||
                                  def->hasTrait<OpTrait::ConstantLike>();
                         });
        if (!onlyChain) {
          consumer = op;
          break;
        }
        chain.insert(op);
        ordered.push_back(op);
      }
      if (!consumer)
        continue;
      for (Operation *op : ordered)
        op->moveBefore(consumer);
    }
    // The prefetch: where each gather is now, the first op after it that is
    // no gather of an argument; the next gather moves before that op.
    SmallVector<Operation *> sunk, anchors;
    for (Operation &op : block.without_terminator())
      if (gathersArgument(&op))
        sunk.push_back(&op);
    for (Operation *gather : sunk) {
      Operation *anchor = gather->getNextNode();
      while (gathersArgument(anchor))
        anchor = anchor->getNextNode();
      anchors.push_back(anchor);
    }
    for (size_t k = 1; k < sunk.size(); ++k)
      if (!anchors[k - 1]->hasTrait<OpTrait::IsTerminator>())
        sunk[k]->moveBefore(anchors[k - 1]);
  }

  /// Completes `collective` where its result is first needed.
  static void placeWait(Operation *collective) {
    Value result = collective->getResult(0);
    llvm::SmallPtrSet<Value, 4> viewed{result};
    SmallVector<Operation *> views;
    Operation *at = collective->getNextNode();
    for (; !at->hasTrait<OpTrait::IsTerminator>(); at = at->getNextNode()) {
      bool reads = llvm::any_of(at->getOperands(),
                                [&](Value v) { return viewed.contains(v); });
      if (reads && isa<ViewLikeOpInterface>(at) &&
          !isa<pcc::dist::WaitOp>(at)) {
        views.push_back(at);
        viewed.insert(at->result_begin(), at->result_end());
        continue;
      }
      if (reads || pcc::dist::keepsCommunicationOrder(at))
        break;
    }
    OpBuilder b(at);
    auto wait = pcc::dist::WaitOp::create(b, collective->getLoc(),
                                          result.getType(), result);
    result.replaceAllUsesExcept(wait, wait);
    for (Operation *view : views)
      view->moveBefore(at);
  }

  /// Moves `collective`, and the ops since `fence` that it depends on (in
  /// their order), to just after `fence`: the other ops since `fence` now
  /// follow it and run while it travels.
  static void hoist(Block &block, Operation *fence, Operation *collective) {
    SmallVector<Operation *> window;
    for (Operation *op = fence ? fence->getNextNode() : &block.front();
         op != collective; op = op->getNextNode())
      window.push_back(op);
    llvm::SmallPtrSet<Value, 16> needed(collective->operand_begin(),
                                        collective->operand_end());
    SmallVector<Operation *> slice;
    for (Operation *op : llvm::reverse(window)) {
      if (llvm::none_of(op->getResults(),
                        [&](Value r) { return needed.contains(r); }))
        continue;
      slice.push_back(op);
      needed.insert(op->operand_begin(), op->operand_end());
    }
    Operation *after = fence;
    auto place = [&](Operation *op) {
      if (after)
        op->moveAfter(after);
      else
        op->moveBefore(&block.front());
      after = op;
    };
    for (Operation *op : llvm::reverse(slice))
      place(op);
    place(collective);
  }
};
} // namespace
