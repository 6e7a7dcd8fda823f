//===- AttentionLayout.cpp - Attention read in its producers' layout ------===//
//
// A projection's rows are tokens: the queries, keys and values it makes are
// [B, T, H, D], which exporters transpose to the [B, H, T, D] that
// graph.attention takes, and attention's [B, H, T, E] output goes back to
// [B, T, H, E] before the output projection. The kernels read their
// operands at any strides, so a transpose that only attention reads is a
// view (GemmOperands) and costs nothing; the one back from the output is a
// copy of a whole activation (12 of GPT-2 124M's forward). Where a
// transpose of dimensions 1 and 2 is the output's only reader, this pass
// gives attention the `sequence_first` layout, which the kernels write in
// place: that transpose's result is the op's output, operands that such
// transposes make for attention alone are read before them, and the others
// get one (a view: a rotary embedding applied in [B, H, T, D], say).
//
// Code generation's choice: it runs after reverse mode, generation and the
// layout passes, which take attention as [B, H, T, D]. In a training step
// attention_grad reads the same operands and output, so their transposes
// stay and attention keeps its layout.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace pcc {
#define GEN_PASS_DEF_ATTENTIONLAYOUT
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

namespace {

constexpr int64_t kSwap[] = {0, 2, 1, 3};

/// The transpose of dimensions 1 and 2 that defines `v` for one read,
/// if any.
TransposeOp swapOnlyFor(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  if (!t || !v.hasOneUse() || t.getPerm() != ArrayRef<int64_t>(kSwap))
    return {};
  return t;
}

/// The transpose of dimensions 1 and 2 that is the only reader of `v`, if
/// any.
TransposeOp swapOnlyOf(Value v) {
  if (!v.hasOneUse())
    return {};
  auto t = dyn_cast<TransposeOp>(*v.getUsers().begin());
  if (!t || t.getPerm() != ArrayRef<int64_t>(kSwap))
    return {};
  return t;
}

/// Rewrites `attention` into the sequence-first layout where its output's
/// only reader is the transpose back to [B, T, H, E].
void relayout(AttentionOp attention) {
  if (attention.getSequenceFirst() ||
      cast<RankedTensorType>(attention.getQuery().getType()).getRank() != 4)
    return;
  Value operands[] = {attention.getQuery(), attention.getKey(),
                      attention.getValue()};
  // Only the transpose back from the output is a copy to save: one on an
  // operand that attention alone reads is a view (GemmOperands), the
  // exporters' or one this puts there alike.
  TransposeOp after = swapOnlyOf(attention.getOutput());
  if (!after)
    return;
  TransposeOp before[3];
  for (int i = 0; i < 3; ++i)
    before[i] = swapOnlyFor(operands[i]);
  OpBuilder b(attention);
  Location loc = attention.getLoc();
  Value relaid[3];
  for (int i = 0; i < 3; ++i)
    relaid[i] =
        before[i]
            ? before[i].getInput()
            : Value(TransposeOp::create(b, loc, operands[i], ArrayRef(kSwap)));
  auto next = AttentionOp::create(
      b, loc, relaid[0], relaid[1], relaid[2], attention.getBias(),
      attention.getSinks(), attention.getScaleAttr(), attention.getCausalAttr(),
      attention.getSoftcapAttr(), attention.getWindowAttr(), b.getUnitAttr());
  // What other passes noted on the op (its pipeline stage, say).
  for (NamedAttribute attr : attention->getAttrs())
    if (!next->hasAttr(attr.getName()) &&
        attr.getName() != attention.getSequenceFirstAttrName())
      next->setAttr(attr.getName(), attr.getValue());
  attention.getLse().replaceAllUsesWith(next.getLse());
  after.getOutput().replaceAllUsesWith(next.getOutput());
  after.erase();
  attention.erase();
  for (TransposeOp t : before)
    if (t)
      t.erase();
}

struct AttentionLayoutPass
    : public pcc::impl::AttentionLayoutBase<AttentionLayoutPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> attentions;
    getOperation().walk([&](AttentionOp a) { attentions.push_back(a); });
    for (AttentionOp a : attentions)
      relayout(a);
  }
};

} // namespace
