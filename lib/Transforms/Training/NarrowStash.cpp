//===- NarrowStash.cpp - The backward reads activations in 16 bits --------===//
//
// With `--dtype bf16`, pcc-mixed-precision narrows the products' operands
// and widens their results, so the forward holds many activations twice: an
// f32 value and the 16-bit copy a product reads, or a 16-bit product result
// and the f32 value cast up from it. The backward derived afterwards reads
// whichever its VJPs name, and every f32 value it reads is kept from the
// forward until the backward has read it.
//
// This pass makes the backward read the 16-bit copy instead, widened where
// it reads it (a cast marked graph.backward, placed before the first
// backward op that reads it, so that folding does not merge it with the
// forward's and a pipeline places it on that reader's stage):
//
//  - an f32 value cast up from a 16-bit forward value carries no more than
//    that value, so reading the widened copy changes nothing;
//  - an f32 value the forward also casts down (for a product) is read as
//    that copy widened: the element-wise backward (an activation
//    function's derivative) sees its input rounded to 16 bits, as it does
//    under torch.autocast, where the activation itself is 16-bit.
//
// The forward then keeps half the bytes of each such value for its backward
// (the MLP's activation of a transformer, read by its derivative and by the
// second product, is kept once, in 16 bits). Values the forward holds only
// in f32 (the residual stream, a normalization's input) stay f32.
//
//===----------------------------------------------------------------------===//

#include "pcc/Analysis/StepPhases.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace pcc {
#define GEN_PASS_DEF_NARROWSTASH
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::pipeline;

namespace {
/// The width of `type`'s floating-point elements, or 0.
unsigned floatBits(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  auto element =
      tensor ? dyn_cast<FloatType>(tensor.getElementType()) : FloatType();
  return element ? element.getWidth() : 0;
}

struct NarrowStashPass : pcc::impl::NarrowStashBase<NarrowStashPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() ||
        llvm::none_of(llvm::seq(func.getNumResults()), [&](unsigned k) {
          return func.getResultAttr(k, graph::kGradAttr);
        }))
      return;
    StepPhases phases = classifyPhases(func);
    auto isActivation = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && phases.of(def) == Phase::Forward && !phases.isFree(v);
    };
    // The narrowest 16-bit forward copy of the f32 activation `v`: the
    // value it was cast up from, or a cast of it down.
    auto narrowCopy = [&](Value v) -> Value {
      unsigned bits = floatBits(v.getType());
      if (bits != 32 || !isActivation(v))
        return Value();
      if (auto up = v.getDefiningOp<graph::CastOp>();
          up && floatBits(up.getInput().getType()) == 16 &&
          isActivation(up.getInput()))
        return up.getInput();
      for (Operation *user : v.getUsers())
        if (auto down = dyn_cast<graph::CastOp>(user);
            down && phases.of(down) == Phase::Forward &&
            floatBits(down.getType()) == 16)
          return down.getResult();
      return Value();
    };

    llvm::DenseMap<Value, Value> widened;
    Block &body = func.getBody().front();
    for (Operation &op :
         llvm::make_early_inc_range(body.without_terminator())) {
      Phase phase = phases.of(&op);
      if (phase != Phase::Backward && phase != Phase::Optimizer)
        continue;
      for (OpOperand &use : op.getOpOperands()) {
        Value v = use.get();
        Value narrow = narrowCopy(v);
        if (!narrow)
          continue;
        Value &copy = widened[v];
        if (!copy) {
          OpBuilder b(&op);
          auto cast = graph::CastOp::create(b, v.getLoc(), v.getType(), narrow);
          cast->setAttr(graph::kBackwardAttr, b.getUnitAttr());
          copy = cast.getResult();
        }
        use.set(copy);
      }
    }
  }
};
} // namespace
