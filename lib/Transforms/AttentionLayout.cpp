//===- AttentionLayout.cpp - Attention read in its producers' layout ------===//
//
// A projection's rows are tokens: the queries, keys and values it makes are
// [B, T, H, D], which exporters transpose to the [B, H, T, D] that
// graph.attention takes, and attention's [B, H, T, E] output goes back to
// [B, T, H, E] before the output projection. Each of these transposes is a
// copy of a whole activation (49 of GPT-2 124M's forward at 1024 tokens:
// 22 ms of 1.5 s on two cores). The kernels read and write any strides, so
// this pass gives attention the `sequence_first` layout wherever that
// removes more transposes than it adds: operands that a transpose of
// dimensions 1 and 2 makes for attention alone are read before it, and an
// output that only such a transpose reads is that transpose's result; the
// other operands (or the output) get the transpose instead.
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

/// Rewrites `attention` into the sequence-first layout where that removes
/// more transposes than it adds.
void relayout(AttentionOp attention) {
  if (attention.getSequenceFirst() ||
      cast<RankedTensorType>(attention.getQuery().getType()).getRank() != 4)
    return;
  Value operands[] = {attention.getQuery(), attention.getKey(),
                      attention.getValue()};
  TransposeOp before[3];
  int64_t removed = 0;
  for (int i = 0; i < 3; ++i)
    removed += bool(before[i] = swapOnlyFor(operands[i]));
  TransposeOp after = swapOnlyOf(attention.getOutput());
  removed += bool(after);
  // Each transpose not removed is one added.
  if (removed <= 4 - removed)
    return;
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
      attention.getScaleAttr(), attention.getCausalAttr(),
      attention.getSoftcapAttr(), attention.getWindowAttr(), b.getUnitAttr());
  // What other passes noted on the op (its pipeline stage, say).
  for (NamedAttribute attr : attention->getAttrs())
    if (!next->hasAttr(attr.getName()) &&
        attr.getName() != attention.getSequenceFirstAttrName())
      next->setAttr(attr.getName(), attr.getValue());
  attention.getLse().replaceAllUsesWith(next.getLse());
  if (after) {
    after.getOutput().replaceAllUsesWith(next.getOutput());
    after.erase();
  } else {
    attention.getOutput().replaceAllUsesWith(
        TransposeOp::create(b, loc, next.getOutput(), ArrayRef(kSwap)));
  }
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
