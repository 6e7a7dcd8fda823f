//===- DelayWeights.cpp - PipeDream-2BW's one-step-old weights -----------===//
//
// PipeDream-2BW (Narayanan et al., 2021) keeps two versions of each stage's
// weights so that its pipeline never flushes: a step's forward and backward
// use the weights one update old, and their gradients update the newest,
//
//   W(t+1) = W(t) - lr * grad f_t(W(t-1)),   W(-1) = W(0).
//
// This pass makes a training step compute that rule: each trained parameter
// gets a second state argument, its previous version, which the forward and
// the backward read instead of the parameter, and which the step sets to
// the parameter as it was before this step's update. The optimizer, which
// runs after, updates the parameter itself from the gradient taken at the
// previous version. Both versions are state, so checkpoints hold them and
// a resumed run continues exactly.
//
//===----------------------------------------------------------------------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

namespace pcc {
#define GEN_PASS_DEF_DELAYWEIGHTS
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

LogicalResult pcc::delayWeights(func::FuncOp func) {
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  OpBuilder b(ret);
  // The trained parameters: the state arguments with a gradient result.
  SmallVector<unsigned> trained;
  for (unsigned k = 0; k < func.getNumResults(); ++k)
    if (std::optional<unsigned> arg = getStateIndex(func, k, kGradAttr))
      trained.push_back(*arg);
  for (unsigned k = 0; k < func.getNumResults(); ++k)
    if (std::optional<unsigned> arg = getStateIndex(func, k, kUpdateAttr))
      if (llvm::is_contained(trained, *arg))
        return func.emitError("pcc-delay-weights: parameter '")
               << getStateName(func, *arg)
               << "' already has an update: the weights are delayed before "
                  "the optimizer runs";
  if (trained.empty())
    return func.emitError("pcc-delay-weights: no gradients (run pcc-autodiff "
                          "first)");
  SmallVector<Value> previous;
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned index : trained) {
    BlockArgument param = body.getArgument(index);
    auto init = func.getArgAttrOfType<ElementsAttr>(index, kInitAttr);
    if (!init)
      return func.emitError("pcc-delay-weights: parameter '")
             << getStateName(func, index) << "' has no " << kInitAttr
             << " value";
    std::string name = (getStateName(func, index) + ".2bw.previous").str();
    unsigned at = func.getNumArguments();
    BlockArgument older = addStateArgument(
        func, name, init, index, param.getLoc(),
        {b.getNamedAttr(kPreviousVersionAttr, b.getUnitAttr())});
    // Every reader so far is the forward or the backward.
    param.replaceAllUsesExcept(older, ret);
    previous.push_back(param);
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kUpdateAttr, b.getI64IntegerAttr(at))));
  }
  appendResults(func, previous, resultAttrs);
  return success();
}

namespace {
struct DelayWeightsPass : pcc::impl::DelayWeightsBase<DelayWeightsPass> {
  void runOnOperation() override {
    if (failed(pcc::delayWeights(getOperation())))
      signalPassFailure();
  }
};
} // namespace
