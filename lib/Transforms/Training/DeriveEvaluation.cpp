//===- DeriveEvaluation.cpp - An evaluation step beside the training step -===//
//
// A training run evaluates held-out batches at the parameters it has
// trained so far. The evaluation is the part of the training step that its
// loss depends on: the forward and the loss, at the same inputs and the
// same state arguments (the parameters, as the optimizer left them at the
// last step). This pass copies that part into a second public function,
// so that one program holds both steps and they share the parameters'
// buffers: nothing is copied between builds or between runs.
//
//===----------------------------------------------------------------------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Target/CallGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace pcc {
#define GEN_PASS_DEF_DERIVEEVALUATION
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

namespace {

/// The public function with a loss result, which the module must have
/// exactly one of.
FailureOr<func::FuncOp> findTrainingStep(ModuleOp module) {
  func::FuncOp step;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isPrivate() || func.isExternal() || !getLossIndex(func))
      continue;
    if (step)
      return func.emitError("an evaluation step is derived from one training "
                            "step, but '")
             << step.getSymName() << "' also has a loss";
    step = func;
  }
  if (!step)
    return module.emitError("an evaluation step is derived from a training "
                            "step: no public function returns a loss"),
           failure();
  return step;
}

struct DeriveEvaluationPass
    : public pcc::impl::DeriveEvaluationBase<DeriveEvaluationPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> found = findTrainingStep(module);
    if (failed(found))
      return signalPassFailure();
    func::FuncOp train = *found;
    Block &body = train.getBody().front();
    Operation *terminator = body.getTerminator();
    unsigned lossIndex = *getLossIndex(train);
    Value loss = terminator->getOperand(lossIndex);

    // What the loss depends on: ops (in the step's order) and arguments.
    llvm::SetVector<Operation *> needed;
    llvm::SmallVector<Value> work{loss};
    llvm::DenseSet<Value> seen{loss};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def || !needed.insert(def))
        continue;
      for (Value operand : def->getOperands())
        if (seen.insert(operand).second)
          work.push_back(operand);
      llvm::SetVector<Value> above;
      for (Region &region : def->getRegions())
        getUsedValuesDefinedAbove(region, above);
      for (Value operand : above)
        if (seen.insert(operand).second)
          work.push_back(operand);
    }
    SmallVector<BlockArgument> arguments;
    for (BlockArgument arg : body.getArguments())
      if (seen.contains(arg))
        arguments.push_back(arg);

    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(train);
    SmallVector<Type> argTypes;
    for (BlockArgument arg : arguments)
      argTypes.push_back(arg.getType());
    auto eval = func::FuncOp::create(
        b, train.getLoc(), "eval",
        b.getFunctionType(argTypes, {loss.getType()}));
    SymbolTable(module).insert(eval);
    // What earlier passes said of the step (its microbatches, the pieces
    // of its loss) holds for its forward too.
    eval->setDiscardableAttrs(train->getDiscardableAttrDictionary());
    // The same attributes (name, state, initial value), but none that
    // holds an argument index of the training step.
    for (auto [i, arg] : llvm::enumerate(arguments)) {
      eval.setArgAttrs(i, train.getArgAttrDict(arg.getArgNumber()));
      eval.removeArgAttr(i, kStateOfAttr);
    }
    eval.setResultAttrs(0, train.getResultAttrDict(lossIndex));
    train->setAttr(kEntryPointAttr, b.getStringAttr("train"));
    eval->setAttr(kEntryPointAttr, b.getStringAttr("eval"));

    Block *evalBody = eval.addEntryBlock();
    IRMapping mapping;
    for (auto [arg, copy] : llvm::zip(arguments, evalBody->getArguments()))
      mapping.map(arg, copy);
    b.setInsertionPointToStart(evalBody);
    for (Operation &op : body.without_terminator())
      if (needed.contains(&op))
        b.clone(op, mapping);
    func::ReturnOp::create(b, train.getLoc(), mapping.lookup(loss));
  }
};

} // namespace
