//===- Fuse.cpp - Groups element-wise ops into loop nests -----------------===//
//
// Element-wise chains (bias + GELU, scale + mask, a loss gradient, an
// optimizer update) become graph.fusion ops that a target emits as one loop
// nest. Grouping is greedy and producer-ward from each ungrouped op, latest
// first, like XLA's instruction fusion: a producer joins when it has the
// group's shape and all its other readers come after the group's root, so
// that the fusion can take the root's place without moving any other op
// (collectives and transfers keep their order). An add that a scatter of a
// few rows can accumulate into (a tied embedding's gradient) joins no group,
// and the scatter moves after the add's other operand.
//
//===----------------------------------------------------------------------===//

#include "pcc/Analysis/BufferPlan.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GemmOperands.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace pcc::graph;

namespace pcc {
#define GEN_PASS_DEF_FUSE
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

int64_t getNumElements(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
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
          grouped.contains(producer) || !isFusibleElementwise(producer))
        continue;
      // A scalar computation (of an exporter's constants, say) is repeated
      // per element; the C++ compiler hoists or folds it. Anything else of
      // another shape stays out.
      bool scalar = getNumElements(producer->getResult(0)) == 1 &&
                    llvm::all_of(producer->getUsers(), [&](Operation *user) {
                      return group.ops.contains(user);
                    });
      if (!scalar && shapeOf(producer->getResult(0)) != space)
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

/// The value of `v` when it is a constant that a fusion body copies in: a
/// splat constant, or a one-element initializer that is not trained (an
/// exporter's scalars, GELU's 0.5 and cube). A target prints it as a
/// literal, and sees, say, an integer exponent.
DenseElementsAttr getInlinedConstant(Value v) {
  if (auto constant = v.getDefiningOp<ConstantOp>()) {
    auto value = dyn_cast<DenseElementsAttr>(constant.getValue());
    return value && value.isSplat() ? value : DenseElementsAttr();
  }
  if (auto weight = v.getDefiningOp<WeightOp>()) {
    if (weight.getValue().getNumElements() != 1 || weight.getTrainable())
      return {};
    return getDenseValue(weight.getValue());
  }
  return {};
}

/// Whether `v` is a one-element function of inlined constants (an
/// exporter's `3 - 1` for the GELU gradient's exponent), which each fusion
/// that reads it computes from literals.
bool isConstantExpression(Value v, int depth = 0) {
  if (getInlinedConstant(v))
    return true;
  Operation *op = v.getDefiningOp();
  if (!op || depth > 4 || !isFusibleElementwise(op) || getNumElements(v) != 1)
    return false;
  return llvm::all_of(op->getOperands(), [&](Value operand) {
    return isConstantExpression(operand, depth + 1);
  });
}

/// Builds constant expression `v` (isConstantExpression) at `builder`'s
/// place, its constants as graph.constant ops.
Value cloneConstantExpression(OpBuilder &builder, Value v,
                              IRMapping &mapping) {
  if (Value done = mapping.lookupOrNull(v))
    return done;
  Value copy;
  if (DenseElementsAttr value = getInlinedConstant(v)) {
    copy = ConstantOp::create(builder, v.getLoc(), cast<ElementsAttr>(value))
               .getResult();
  } else {
    Operation *op = v.getDefiningOp();
    SmallVector<Attribute> operands;
    for (Value operand : op->getOperands()) {
      Attribute value;
      matchPattern(cloneConstantExpression(builder, operand, mapping),
                   m_Constant(&value));
      operands.push_back(value);
    }
    Operation *clone = builder.clone(*op, mapping);
    copy = clone->getResult(0);
    // Folded where the op's folder can: the target then sees the value.
    SmallVector<OpFoldResult> folded;
    if (succeeded(clone->fold(operands, folded)) && folded.size() == 1)
      if (auto value = dyn_cast_if_present<DenseElementsAttr>(
              dyn_cast_if_present<Attribute>(folded[0]))) {
        clone->erase();
        copy =
            ConstantOp::create(builder, v.getLoc(), cast<ElementsAttr>(value))
                .getResult();
      }
  }
  mapping.map(v, copy);
  return copy;
}

/// Replaces the group's ops by one graph.fusion at the root's place.
void materialize(Group &group,
                 const llvm::DenseMap<Operation *, int64_t> &position) {
  SmallVector<Operation *> ops(group.ops.begin(), group.ops.end());
  llvm::sort(ops, [&](Operation *a, Operation *b) {
    return position.lookup(a) < position.lookup(b);
  });
  llvm::SetVector<Value> inputs, constants;
  SmallVector<Value> outputs;
  for (Operation *op : ops) {
    for (Value v : op->getOperands()) {
      if (v.getDefiningOp() && group.ops.contains(v.getDefiningOp()))
        continue;
      if (isConstantExpression(v))
        constants.insert(v);
      else
        inputs.insert(v);
    }
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
  auto fusion = FusionOp::create(builder, group.root->getLoc(), types,
                                 inputs.getArrayRef());
  // A loop nest that does a backward op's work is the backward's: what it
  // reads of the forward is kept for it.
  if (llvm::any_of(ops, [](Operation *op) {
        return op->hasAttr(pcc::graph::kBackwardAttr);
      }))
    fusion->setAttr(pcc::graph::kBackwardAttr, builder.getUnitAttr());
  Block &body = fusion.getBody().front();
  IRMapping mapping;
  mapping.map(inputs.getArrayRef(), body.getArguments());
  builder.setInsertionPointToStart(&body);
  for (Value v : constants)
    cloneConstantExpression(builder, v, mapping);
  for (Operation *op : ops)
    builder.clone(*op, mapping);
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(mapping.lookup(v));
  YieldOp::create(builder, group.root->getLoc(), yielded);
  for (auto [old, replacement] : llvm::zip(outputs, fusion.getResults()))
    old.replaceAllUsesWith(replacement);
  for (Operation *op : llvm::reverse(ops))
    op->erase();
}

/// Whether `v` is an inlined float constant equal to `value`.
bool isFloatConstant(Value v, double value) {
  DenseElementsAttr c = getInlinedConstant(v);
  return c && isa<FloatType>(c.getElementType()) &&
         c.getValues<APFloat>()[0].convertToDouble() == value;
}

/// Cheaper equal forms of element-wise expressions, before grouping:
///  - 1 + tanh(z) = 2 sigmoid(2z) (tanh-approximated GELU's factor): one
///    exponential and one division instead of tanh's two branches, and no
///    cancellation where tanh(z) nears -1. Only where nothing else reads
///    the tanh (a training step's backward does).
///  - s - x = s + (-x) where s is a scatter into zeros that puts at most
///    one update in each element (a cross-entropy's gradient: one label a
///    row), read only there: the scatter then adds its few elements into
///    -x, which x's loop computes, instead of writing zeros over a whole
///    result that the loop reads again (accumulatesRows). Equal bits: -x
///    plus the one update is s's element minus x.
void rewriteCheaperForms(Block &block) {
  // One constant 2 per element type, at the top with the others, so that
  // nothing comes between a product and the element-wise op after it.
  llvm::DenseMap<Type, Value> twos;
  auto two = [&](Type et, Location loc) {
    Value &c = twos[et];
    if (!c) {
      OpBuilder top = OpBuilder::atBlockBegin(&block);
      c = ConstantOp::create(
          top, loc,
          cast<ElementsAttr>(DenseElementsAttr::get(
              RankedTensorType::get({}, et), FloatAttr::get(et, 2.0))));
    }
    return c;
  };
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (auto sub = dyn_cast<SubOp>(op)) {
      auto scatter = sub.getLhs().getDefiningOp<ScatterElementsAddOp>();
      if (scatter && scatter->hasOneUse() &&
          scatter.getType() == sub.getType() &&
          sub.getRhs().getType() == sub.getType() &&
          shapeOf(scatter.getIndices())[scatter.getAxis()] == 1) {
        OpBuilder builder(sub);
        auto negated = NegOp::create(builder, sub.getLoc(), sub.getRhs());
        auto sum = AddOp::create(builder, sub.getLoc(), scatter, negated);
        // (Still the backward's, where the subtraction was.)
        for (Operation *made : {negated.getOperation(), sum.getOperation()})
          made->setDiscardableAttrs(sub->getDiscardableAttrDictionary());
        sub.replaceAllUsesWith(sum.getResult());
        sub->erase();
      }
      continue;
    }
    auto add = dyn_cast<AddOp>(op);
    if (!add)
      continue;
    for (unsigned k = 0; k < 2; ++k) {
      auto tanh = add->getOperand(k).getDefiningOp<TanhOp>();
      if (!tanh || !tanh->hasOneUse() || tanh.getType() != add.getType() ||
          !isFloatConstant(add->getOperand(1 - k), 1.0))
        continue;
      Location loc = add.getLoc();
      Value c = two(tanh.getType().getElementType(), loc);
      OpBuilder builder(add);
      Value doubled = MulOp::create(builder, loc, tanh.getInput(), c);
      Value sigmoid = SigmoidOp::create(builder, loc, doubled);
      Value result = MulOp::create(builder, loc, sigmoid, c);
      add.replaceAllUsesWith(result);
      add->erase();
      tanh->erase();
      break;
    }
  }
}

/// Scatters that add a few rows into a large sum (pcc::accumulatesRows: a
/// tied embedding's gradient, added to its head's) move to just before
/// their add, after the partial sum's op, so that each adds its rows into
/// the partial sum's buffer instead of writing zeros over a whole result
/// that a fused add then reads. Returns the adds, which stay out of
/// fusions, where the buffer plan could not make them in place.
llvm::SmallVector<Operation *> sinkSparseAccumulations(Block &block) {
  llvm::SmallVector<Operation *> sums;
  // Each scatter once, and none before a scatter moved here: of two
  // scatters added together, the first moves after the second, which stays.
  SmallVector<Operation *> scatters;
  for (Operation &op : block)
    if (isa<ScatterAddOp, ScatterElementsAddOp>(op))
      scatters.push_back(&op);
  llvm::DenseSet<Operation *> moved;
  for (Operation *scatter : scatters) {
    if (!pcc::accumulatesRows(scatter))
      continue;
    auto [sum, partial] = pcc::getAccumulatingSum(scatter);
    Operation *made = partial.getDefiningOp();
    if (scatter->isBeforeInBlock(made) && !moved.contains(made))
      scatter->moveBefore(sum.getDefiningOp());
    moved.insert(scatter);
    sums.push_back(sum.getDefiningOp());
  }
  return sums;
}

/// A softmax (or log-softmax) over the last axis of a fusion's only result
/// that nothing else reads: the softmax can compute the fusion per row.
FusionOp getRowPrologue(Operation *softmax) {
  Value input = softmax->getOperand(0);
  auto fusion = input.getDefiningOp<FusionOp>();
  auto axis = softmax->getAttrOfType<IntegerAttr>("axis");
  ArrayRef<int64_t> shape = shapeOf(input);
  if (!fusion || fusion->getNumResults() != 1 || !input.hasOneUse() || !axis ||
      shape.empty() || axis.getInt() != int64_t(shape.size()) - 1 ||
      shape.back() < 2)
    return {};
  return fusion;
}

/// The element-wise op (a graph.fusion or a single element-wise op) that
/// the single product `product` (graph.gemm, or graph.matmul of one
/// product) can run as its epilogue, on each block of C as it is done,
/// else null: the only reader of the product's result (through views),
/// right after the product (only views or data movement that products
/// read in place between), over the product's elements in their order,
/// every operand read at an offset affine in C's row and column, no
/// collective to wait for first, no softmax computing it per row, and none
/// of its results a result of the function.
Operation *findEpilogueConsumer(Operation *product,
                                const pcc::GemmOperands &operands) {
  if (!isa<GemmOp, MatMulOp>(product) || product->getNumResults() != 1)
    return nullptr;
  Value result = product->getResult(0);
  ArrayRef<int64_t> shape = shapeOf(result);
  if (shape.size() < 2)
    return nullptr;
  if (auto m = dyn_cast<MatMulOp>(product))
    if (shapeOf(m.getLhs()).size() < 2 || shapeOf(m.getRhs()).size() < 2 ||
        !operands.getProductRows(m))
      return nullptr;
  int64_t n = shape.back(), mn = ShapedType::getNumElements(shape);
  if (mn == 0)
    return nullptr;
  // Through the views of the result to its one reader, an element-wise op
  // of one loop nest.
  llvm::SmallPtrSet<Value, 4> views;
  Operation *consumer = pcc::getViewChain(result, views);
  if (!consumer || consumer->getBlock() != product->getBlock() ||
      consumer->getNumResults() == 0 || consumer->hasAttr(kRowPrologueAttr))
    return nullptr;
  if (!isa<FusionOp>(consumer) &&
      (consumer->getNumResults() != 1 ||
       !consumer->hasTrait<pcc::graph::OpTrait::Elementwise>()))
    return nullptr;
  // A reader that waits for a collective first would run, inside the
  // product, before that wait.
  for (Operation *op = product->getNextNode(); op != consumer;
       op = op->getNextNode())
    if ((!isa<ViewLikeOpInterface>(op) && !operands.isReadInPlace(op)) ||
        isa<pcc::dist::WaitOp>(op))
      return nullptr;
  ArrayRef<int64_t> space = shapeOf(consumer->getResult(0));
  if (ShapedType::getNumElements(space) != mn)
    return nullptr;
  // A result the function writes back into a state argument may share that
  // argument's buffer, which the product may still read.
  auto func = product->getParentOfType<func::FuncOp>();
  auto writesBack = [&](OpOperand &use) {
    return isa<func::ReturnOp>(use.getOwner()) &&
           (!func || func.getResultAttr(use.getOperandNumber(),
                                        pcc::graph::kUpdateAttr));
  };
  for (Value r : consumer->getResults())
    if (shapeOf(r) != space || llvm::any_of(r.getUses(), writesBack))
      return nullptr;
  std::optional<unsigned> t = pcc::getRowDims(space, n);
  if (!t)
    return nullptr;
  for (Value in : consumer->getOperands()) {
    auto strides = pcc::getRowColumnStrides(
        pcc::getBroadcastStrides(shapeOf(in), space), space, *t);
    if (!strides ||
        (views.contains(in) && *strides != std::make_pair(n, int64_t(1))))
      return nullptr;
  }
  return consumer;
}

struct FusePass : pcc::impl::FuseBase<FusePass> {
  using FuseBase::FuseBase;

  void runOnOperation() override {
    for (Block &block : getOperation().getBody())
      rewriteCheaperForms(block);
    for (Block &block : getOperation().getBody()) {
      // Sums that a scatter accumulates into join no group.
      llvm::DenseSet<Operation *> grouped;
      for (Operation *sum : sinkSparseAccumulations(block))
        grouped.insert(sum);
      llvm::DenseMap<Operation *, int64_t> position;
      for (auto [i, op] : llvm::enumerate(block))
        position[&op] = int64_t(i);
      SmallVector<Group> groups;
      for (Operation &op : llvm::reverse(block)) {
        if (grouped.contains(&op) || !isFusibleElementwise(&op))
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
    markFusedCode();
  }

  /// Records what the target computes inside another op's loop: a
  /// softmax's prologue first (an epilogue may not be one), then the
  /// products' epilogues.
  void markFusedCode() {
    func::FuncOp func = getOperation();
    if (!func.getBody().hasOneBlock())
      return;
    Block &block = func.getBody().front();
    UnitAttr unit = UnitAttr::get(&getContext());
    block.walk([&](Operation *op) {
      if (isa<SoftmaxOp, LogSoftmaxOp>(op))
        if (FusionOp f = getRowPrologue(op))
          f->setAttr(kRowPrologueAttr, unit);
    });
    if (!epilogues)
      return;
    pcc::GemmOperands operands(func);
    for (Operation &op : block)
      if (findEpilogueConsumer(&op, operands))
        op.setAttr(kEpilogueAttr, unit);
  }
};

} // namespace
