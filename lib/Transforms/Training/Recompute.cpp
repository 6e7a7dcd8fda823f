//===- Recompute.cpp - The backward recomputes the forward's activations --===//
//
// A training step keeps every forward value its backward reads until the
// backward has read it: for a transformer, a dozen tensors of each layer,
// attention's [heads, seq, seq] probabilities among them. With `full`, the
// backward recomputes them from each block's input instead, as Megatron's
// full recomputation does, and the forward keeps only the blocks' inputs.
//
// Blocks are found in the forward's dataflow, not from names: at each
// position of the forward (in program order, a topological order), the
// bytes of the values made before it and read by the forward after it
// cross that position. The positions where about the median of the local
// minima crosses are the checkpoints: the residual stream between a
// transformer's layers (and between attention and MLP), not the token ids
// before the embedding or the loss after the head, where far less crosses. The
// forward between two consecutive checkpoints is a block; the values that cross
// a checkpoint are kept. Any other value of a block that the backward reads is
// recomputed there: its op, and the ops it needs back to kept values, are
// cloned before the first backward op that reads it, marked as backward
// (graph.backward, which also keeps common-subexpression elimination from
// folding a clone into its original; a pipeline places it on the stage of the
// backward that reads it). The forward before the first checkpoint (the
// embedding) and after the last (the head and the loss) is not recomputed: its
// backward follows at once or reads little.
//
// With `selective`, only the values of a block that are large and cheap to
// make again are recomputed: at least twice what crosses a checkpoint, and
// made by no product with a parameter (so from kept values through
// element-wise work, softmax and products of two activations). In a
// transformer these are attention's scores and probabilities ([heads, seq,
// seq], the 5as^2b term of Korthikanti et al.) and the MLP's activation,
// while the products with weights are kept: Megatron's selective
// recomputation, found from sizes and dataflow.
//
// The module gets `graph.recompute = {ops, flops, bytes}`: the ops cloned,
// the flops they add to a step, and the bytes of the forward values the
// backward no longer reads from the forward.
//
//===----------------------------------------------------------------------===//

#include "../Pipeline/Phases.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipeline/CostModel.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace pcc {
#define GEN_PASS_DEF_RECOMPUTE
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::pipeline;

namespace {
struct Totals {
  int64_t ops = 0, flops = 0, bytes = 0;
};

/// Recomputes the blocks' activations in `func`'s backward.
void recompute(func::FuncOp func, bool selective, Totals &totals) {
  Block &body = func.getBody().front();
  StepPhases phases = classifyPhases(func);
  auto activation = [&](Value v) {
    return !phases.isFree(v) && isa<RankedTensorType>(v.getType());
  };

  // The forward's ops in program order, and the bytes crossing each
  // position (the inputs from before the first).
  ForwardOrder order = getForwardOrder(func, phases);
  const llvm::DenseMap<Operation *, size_t> &position = order.position;
  size_t n = order.ops.size();
  if (n < 3)
    return;
  SmallVector<double> crossing =
      getCrossingBytes(func, phases, order, /*arguments=*/true);

  // Checkpoints: the positions where about the median of the local minima
  // (one per plateau) crosses; far less crosses only outside the blocks
  // (the token ids before the embedding, the loss after the head).
  SmallVector<double> minima;
  for (size_t k = 1; k < n;) {
    size_t end = k;
    while (end + 1 < n && crossing[end + 1] == crossing[k])
      ++end;
    if (crossing[k] < crossing[k - 1] &&
        (end + 1 >= n || crossing[k] < crossing[end + 1]))
      minima.push_back(crossing[k]);
    k = end + 1;
  }
  if (minima.size() < 2)
    return;
  llvm::sort(minima);
  double typical = minima[minima.size() / 2];
  // segment[i]: the block of forward[i], counted from the checkpoints
  // before it; blocks 1..last-1 lie between two checkpoints.
  SmallVector<int64_t> segment(n);
  int64_t current = 0;
  bool previousWasCheckpoint = false;
  for (size_t k = 0; k < n; ++k) {
    bool checkpoint =
        k > 0 && crossing[k] >= 0.99 * typical && crossing[k] <= 1.01 * typical;
    if (checkpoint && !previousWasCheckpoint)
      ++current;
    previousWasCheckpoint = checkpoint;
    segment[k] = current;
  }
  int64_t lastSegment = current;
  if (lastSegment < 2)
    return;

  // A product with a parameter: an op that reads a free tensor of rank 2
  // or more (a weight, or what is made of weights alone) and does more
  // than a few flops per result element (a contraction, not a mask added).
  auto isProductWithParameter = [&](Operation *op) {
    auto cost = dyn_cast<graph::CostOpInterface>(op);
    int64_t elements = 0;
    for (Value r : op->getResults())
      if (auto type = dyn_cast<RankedTensorType>(r.getType()))
        elements += type.getNumElements();
    return (!cost || cost.getFlops() > 16 * elements) &&
           llvm::any_of(op->getOperands(), [&](Value operand) {
             auto type = dyn_cast<RankedTensorType>(operand.getType());
             return phases.isFree(operand) && type && type.getRank() >= 2;
           });
  };

  // A value is recomputed when an inner block makes it and no later block
  // of the forward reads it (those that cross a checkpoint are kept).
  auto recomputable = [&](Value v) {
    Operation *def = v.getDefiningOp();
    auto it = def ? position.find(def) : position.end();
    if (it == position.end() || !activation(v))
      return false;
    int64_t s = segment[it->second];
    if (s == 0 || s == lastSegment)
      return false;
    for (Operation *user : v.getUsers())
      if (auto u = position.find(user);
          u != position.end() && segment[u->second] != s)
        return false;
    if (!selective)
      return true;
    // Selective: the large values that are cheap to make again (at least
    // twice what crosses a checkpoint, by no product with a parameter).
    return double(tensorBytes(v.getType())) >= 2 * typical &&
           !isProductWithParameter(def);
  };

  // The backward's reads, in program order: each recomputable value is
  // cloned, with what it needs, before its first reader.
  IRMapping clones;
  llvm::DenseSet<Value> redirected;
  std::function<Value(Value, OpBuilder &)> recomputed =
      [&](Value v, OpBuilder &b) -> Value {
    if (!recomputable(v))
      return v;
    if (Value c = clones.lookupOrNull(v))
      return c;
    // Cloning an operand's op maps it to its clone in `clones`.
    Operation *def = v.getDefiningOp();
    for (Value operand : def->getOperands())
      recomputed(operand, b);
    Operation *copy = b.clone(*def, clones);
    copy->setAttr(graph::kBackwardAttr, b.getUnitAttr());
    ++totals.ops;
    if (auto cost = dyn_cast<graph::CostOpInterface>(copy))
      totals.flops += cost.getFlops();
    return clones.lookup(v);
  };
  SmallVector<Operation *> backward;
  for (Operation &op : body.without_terminator())
    if (phases.of(&op) == Phase::Backward)
      backward.push_back(&op);
  for (Operation *op : backward) {
    OpBuilder b(op);
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      if (!recomputable(v))
        continue;
      operand.set(recomputed(v, b));
      if (redirected.insert(v).second)
        totals.bytes += tensorBytes(v.getType());
    }
  }
}

struct RecomputePass : pcc::impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == "none")
      return;
    if (mode != "full" && mode != "selective") {
      module.emitError() << "--recompute takes none, selective or full, got '"
                         << mode << "'";
      return signalPassFailure();
    }
    Totals totals;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() ||
          llvm::none_of(llvm::seq(func.getNumResults()), [&](unsigned k) {
            return func.getResultAttr(k, graph::kGradAttr);
          }))
        continue;
      recompute(func, mode == "selective", totals);
    }
    Builder b(module.getContext());
    module->setAttr(
        graph::kRecomputeAttr,
        b.getDictionaryAttr({
            b.getNamedAttr("ops", b.getI64IntegerAttr(totals.ops)),
            b.getNamedAttr("flops", b.getI64IntegerAttr(totals.flops)),
            b.getNamedAttr("bytes", b.getI64IntegerAttr(totals.bytes)),
        }));
  }
};
} // namespace
