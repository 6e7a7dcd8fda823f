//===- Autodiff.cpp - Reverse-mode differentiation of the loss ------------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace pcc::graph;

namespace pcc {
#define GEN_PASS_DEF_AUTODIFF
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

static bool isFloat(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

LogicalResult pcc::differentiate(func::FuncOp func) {
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  std::optional<unsigned> lossIndex = getLossIndex(func);
  if (!lossIndex)
    return func.emitError("pcc-autodiff: no result marked graph.loss (run "
                          "pcc-attach-loss first)");
  Value loss = ret->getOperand(*lossIndex);
  if (!isFloat(loss) || cast<ShapedType>(loss.getType()).getRank() != 0)
    return func.emitError("pcc-autodiff: the loss must be a float scalar, got ")
           << loss.getType();

  // Values that depend on a trainable parameter through float values...
  SmallVector<WeightOp> params;
  llvm::DenseSet<Value> active;
  for (Operation &op : body.without_terminator()) {
    if (auto w = dyn_cast<WeightOp>(op)) {
      if (w.getTrainable() && isFloat(w.getResult())) {
        params.push_back(w);
        active.insert(w.getResult());
      }
      continue;
    }
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return active.count(v); }))
      for (Value r : op.getResults())
        if (isFloat(r))
          active.insert(r);
  }
  // ...and that the loss depends on.
  llvm::DenseSet<Value> needed{loss};
  SmallVector<Operation *> path;
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    // Parameters are the leaves: their gradients are the results.
    if (op.getNumOperands() == 0)
      continue;
    if (!llvm::any_of(op.getResults(), [&](Value r) {
          return needed.count(r) && active.count(r);
        }))
      continue;
    path.push_back(&op);
    for (Value v : op.getOperands())
      needed.insert(v);
  }

  OpBuilder builder(ret);
  Operation *lastForward = ret->getPrevNode();
  llvm::DenseMap<Value, Value> grads;
  auto lossType = cast<RankedTensorType>(loss.getType());
  grads[loss] = ConstantOp::create(
      builder, loss.getLoc(),
      DenseElementsAttr::get(
          lossType, builder.getFloatAttr(lossType.getElementType(), 1)));
  for (Operation *op : path) {
    SmallVector<Value> resultGrads;
    for (Value r : op->getResults())
      resultGrads.push_back(grads.lookup(r));
    if (llvm::all_of(resultGrads, [](Value g) { return !g; }))
      continue;
    auto diff = dyn_cast<DifferentiableOpInterface>(op);
    if (!diff)
      return op->emitError("reverse mode: '")
             << op->getName() << "' has no derivative";
    SmallVector<Value> operandGrads;
    if (failed(diff.buildVjp(builder, resultGrads, operandGrads)))
      return failure();
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!g || !active.count(operand))
        continue;
      Value &acc = grads[operand];
      acc = acc ? Value(AddOp::create(builder, op->getLoc(), acc, g)) : g;
    }
  }
  for (Operation *op = lastForward ? lastForward->getNextNode() : &body.front();
       op != ret; op = op->getNextNode())
    op->setAttr(kBackwardAttr, builder.getUnitAttr());

  // Each parameter with a gradient becomes a state argument of the step
  // (named and initialized like the weight), and its gradient a result that
  // points at that argument.
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> attrs;
  for (WeightOp w : params) {
    Value g = grads.lookup(w.getResult());
    if (!g)
      continue;
    unsigned index = func.getNumArguments();
    // Layout attributes (`dist.*`: a stated split, vocabulary padding)
    // move with the parameter.
    SmallVector<NamedAttribute> named{
        builder.getNamedAttr(kStateAttr, w.getNameAttr()),
        builder.getNamedAttr(kInitAttr, w.getValue())};
    for (NamedAttribute a : w->getDiscardableAttrs())
      if (a.getName().getValue().starts_with("dist."))
        named.push_back(a);
    DictionaryAttr argAttrs = builder.getDictionaryAttr(named);
    if (failed(func.insertArgument(index, w.getType(), argAttrs, w.getLoc())))
      return failure();
    w.getResult().replaceAllUsesWith(body.getArgument(index));
    w.erase();
    results.push_back(g);
    attrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr(kGradAttr, builder.getI64IntegerAttr(index))));
  }
  if (results.empty())
    return func.emitError("nothing to train: no trainable parameter reaches "
                          "the loss (see the trainable set in report.json; "
                          "--trainable REGEX adds initializers)");
  appendResults(func, results, attrs);
  return success();
}

namespace {
struct AutodiffPass : pcc::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;
  void runOnOperation() override {
    if (failed(pcc::differentiate(getOperation())))
      signalPassFailure();
  }
};
} // namespace
