//===- Fuse.cpp - Groups element-wise ops into loop nests -----------------===//
//
// Element-wise chains (bias + GELU, scale + mask, a loss gradient, an
// optimizer update) become graph.fusion ops that a target emits as one loop
// nest. Grouping is greedy and producer-ward from each ungrouped op, latest
// first, like XLA's instruction fusion: a producer joins when it has the
// group's shape and all its other readers come after the group's root, so
// that the fusion can take the root's place without moving any other op
// (collectives and transfers keep their order).
//
//===----------------------------------------------------------------------===//

#include "pcc/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace pcc::graph;

namespace pcc {
#define GEN_PASS_DEF_FUSE
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

namespace {

/// Whether `op` can be computed inside a loop nest over its result.
bool isFusible(Operation *op) {
  if (!op->hasTrait<pcc::graph::OpTrait::Elementwise>() || op->getNumResults() != 1)
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type && type.hasStaticShape();
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

struct Group {
  Operation *root;
  llvm::SetVector<Operation *> ops;
};

/// Grows a group from `root` through the producers of its operands.
void grow(Group &group, const llvm::DenseMap<Operation *, int64_t> &position,
          llvm::DenseSet<Operation *> &grouped) {
  ArrayRef<int64_t> space = shapeOf(group.root->getResult(0));
  int64_t rootPosition = position.lookup(group.root);
  SmallVector<Operation *> worklist{group.root};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || producer->getBlock() != group.root->getBlock() ||
          grouped.contains(producer) || !isFusible(producer) ||
          shapeOf(producer->getResult(0)) != space)
        continue;
      // Readers outside the group must come after the root, where the
      // fusion defines the value.
      bool movable = llvm::all_of(producer->getUsers(), [&](Operation *user) {
        if (group.ops.contains(user))
          return true;
        Operation *ancestor =
            group.root->getBlock()->findAncestorOpInBlock(*user);
        return ancestor && position.lookup(ancestor) > rootPosition;
      });
      if (!movable)
        continue;
      group.ops.insert(producer);
      grouped.insert(producer);
      worklist.push_back(producer);
    }
  }
}

/// Replaces the group's ops by one graph.fusion at the root's place.
void materialize(Group &group,
                 const llvm::DenseMap<Operation *, int64_t> &position) {
  SmallVector<Operation *> ops(group.ops.begin(), group.ops.end());
  llvm::sort(ops, [&](Operation *a, Operation *b) {
    return position.lookup(a) < position.lookup(b);
  });
  llvm::SetVector<Value> inputs;
  SmallVector<Value> outputs;
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      if (!v.getDefiningOp() || !group.ops.contains(v.getDefiningOp()))
        inputs.insert(v);
    Value result = op->getResult(0);
    if (llvm::any_of(result.getUsers(), [&](Operation *user) {
          return !group.ops.contains(user);
        }))
      outputs.push_back(result);
  }
  OpBuilder builder(group.root);
  SmallVector<Type> types;
  for (Value v : outputs)
    types.push_back(v.getType());
  auto fusion = builder.create<FusionOp>(group.root->getLoc(), types,
                                         inputs.getArrayRef());
  Block &body = fusion.getBody().front();
  IRMapping mapping;
  mapping.map(inputs.getArrayRef(), body.getArguments());
  builder.setInsertionPointToStart(&body);
  // Splat constants are copied in, and so are one-element initializers
  // that are not trained (an exporter's scalars: GELU's 0.5 and cube): a
  // target prints them as literals, and sees, say, an integer exponent.
  for (Value v : inputs) {
    if (auto constant = v.getDefiningOp<ConstantOp>()) {
      if (auto value = dyn_cast<DenseElementsAttr>(constant.getValue());
          value && value.isSplat())
        mapping.map(v, builder.clone(*constant)->getResult(0));
    } else if (auto weight = v.getDefiningOp<WeightOp>()) {
      auto value = dyn_cast<DenseElementsAttr>(weight.getValue());
      if (value && value.getNumElements() == 1 && !weight.getTrainable())
        mapping.map(v, builder.create<ConstantOp>(weight.getLoc(), value)
                           .getResult());
    }
  }
  for (Operation *op : ops)
    builder.clone(*op, mapping);
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(mapping.lookup(v));
  builder.create<YieldOp>(group.root->getLoc(), yielded);
  for (auto [old, replacement] : llvm::zip(outputs, fusion.getResults()))
    old.replaceAllUsesWith(replacement);
  for (Operation *op : llvm::reverse(ops))
    op->erase();
}

struct FusePass : pcc::impl::FuseBase<FusePass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      llvm::DenseMap<Operation *, int64_t> position;
      for (auto [i, op] : llvm::enumerate(block))
        position[&op] = int64_t(i);
      llvm::DenseSet<Operation *> grouped;
      SmallVector<Group> groups;
      for (Operation &op : llvm::reverse(block)) {
        if (grouped.contains(&op) || !isFusible(&op))
          continue;
        Group group{&op, {}};
        group.ops.insert(&op);
        grouped.insert(&op);
        grow(group, position, grouped);
        // A lone op is a loop nest already.
        if (group.ops.size() > 1)
          groups.push_back(std::move(group));
      }
      for (Group &group : groups)
        materialize(group, position);
    }
  }
};

} // namespace
