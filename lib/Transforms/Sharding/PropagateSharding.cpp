//===- PropagateSharding.cpp - Layouts of every value of the step ---------===//
//
// From the parameters' layouts (`dist.sharding` on state arguments and
// graph.weight ops, as the strategy or a user set them), gives every op the
// layouts its operands must arrive in and its results leave in
// (`dist.operands`, `dist.results`), walking the step once in program
// order: forward, backward and optimizer alike. Each op splits the factor
// of its sharding rule that its operands are split along (the cheapest when
// they disagree); a whole operand meeting a split one is cut locally for
// free; partial results are combined where they are first used. Optimizer
// state takes its parameter's layout, and so do the parameter's gradient
// and update, so no optimizer state of a split parameter is ever whole. A
// gradient made in another layout (a table split by rows whose gradient
// comes out split along the hidden dimension) is resharded once, where it
// is made: the optimizer reads that value, which a pipeline accumulates.
//
//===----------------------------------------------------------------------===//

#include "ShardingSolver.h"

#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace pcc {
#define GEN_PASS_DEF_PROPAGATESHARDING
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;
using namespace pcc::sharding;

static int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}

LogicalResult pcc::propagateSharding(func::FuncOp func, StringRef axis,
                                     bool sequenceParallel, bool outputsSplit,
                                     int64_t zeroStage) {
  auto module = func->getParentOfType<ModuleOp>();
  auto mesh = module ? module.lookupSymbol<dist::MeshOp>(kMeshName) : nullptr;
  if (!mesh)
    return success(); // nothing is split
  std::optional<int64_t> tp = mesh.getAxisSize(axis);
  if (!tp || *tp == 1)
    return success();
  Solver solver(func, axis, *tp);
  solver.setSequenceParallel(sequenceParallel);
  solver.setKeepOutputsSplit(outputsSplit);
  solver.setZeroStage(zeroStage);
  if (failed(solver.seedStatedLayouts()))
    return failure();
  Solver::Outcome base = solver.run();

  // Backward adoption: an op that makes a whole value from whole operands
  // which a user then cuts (the adjoint of the label pick, a [batch, seq,
  // vocab] scatter, read by the vocabulary-split log-softmax adjoint; with
  // ZeRO, whatever the update computes from a whole parameter) makes it
  // split instead, when that forces no all-gather and communicates at most
  // what the whole value would have cost in memory.
  Block &body0 = func.getBody().front();
  SmallVector<Operation *> ops;
  for (Operation &op : body0)
    ops.push_back(&op);
  // The layout a user wants `op`'s whole result in, if it is a candidate.
  auto wantedOf = [&](Operation *op) -> std::optional<Layout> {
    if (op->getNumResults() != 1 || isa<WeightOp, ConstantOp>(op) ||
        !isa<ShardingRuleOpInterface>(op))
      return std::nullopt;
    Value r = op->getResult(0);
    if (!solver.getLayout(r).isReplicated() ||
        llvm::any_of(op->getOperands(), [&](Value v) {
          return !solver.getLayout(v).isReplicated();
        }))
      return std::nullopt;
    std::optional<Layout> wanted;
    for (OpOperand &use : r.getUses())
      if (const OpPlan *p = solver.getPlan(use.getOwner()))
        if (p->operands[use.getOperandNumber()].isSplit())
          wanted = p->operands[use.getOperandNumber()];
    return wanted;
  };
  // Whether `trial` keeps every adopted op's result as wanted, forces no
  // more conflicts and communicates within the adopted values' allowance.
  auto acceptable = [&](const Solver::Outcome &trial,
                        ArrayRef<std::pair<Operation *, Layout>> adopted) {
    int64_t allowance = 0;
    for (auto [op, wanted] : adopted) {
      Value r = op->getResult(0);
      if (solver.getLayout(r) != wanted)
        return false;
      allowance += byteSize(r.getType()) / *tp;
    }
    return trial.conflicts <= base.conflicts &&
           trial.commBytes <= base.commBytes + allowance;
  };
  // Adopts `adopted` if a solve with them pinned is acceptable; else
  // unpins them and solves again. Whether it did.
  auto tryAdopt = [&](ArrayRef<std::pair<Operation *, Layout>> adopted) {
    for (auto [op, wanted] : adopted)
      solver.pin(op, wanted);
    Solver::Outcome trial = solver.run();
    if (acceptable(trial, adopted)) {
      base = trial;
      return true;
    }
    for (auto [op, wanted] : adopted)
      solver.unpin(op);
    base = solver.run();
    return false;
  };
  // First in rounds, each adopting every candidate at once with one run
  // (a round's adoptions can make candidates of their operands' makers,
  // hence several): a solve per candidate costs the step's size times the
  // candidates, and ZeRO makes one or more per parameter.
  bool oneByOne = false;
  for (int round = 0; round < 16 && !oneByOne; ++round) {
    SmallVector<std::pair<Operation *, Layout>> adopted;
    for (Operation *op : llvm::reverse(ops))
      if (std::optional<Layout> wanted = wantedOf(op))
        adopted.push_back({op, *wanted});
    if (adopted.empty())
      break;
    oneByOne = !tryAdopt(adopted);
  }
  // Where a round's adoptions together do not pay: halves of them, and
  // halves of a half that does not, down to single ops. Each op is adopted
  // in a group that pays, or tried alone, as one at a time would; but a
  // solve per group rather than per op (ZeRO makes hundreds of
  // candidates, of which few do not pay).
  std::function<void(ArrayRef<Operation *>)> adoptGroup =
      [&](ArrayRef<Operation *> group) {
        SmallVector<std::pair<Operation *, Layout>> still;
        for (Operation *op : group)
          if (std::optional<Layout> wanted = wantedOf(op))
            still.push_back({op, *wanted});
        if (still.empty() || tryAdopt(still) || group.size() == 1)
          return;
        size_t half = group.size() / 2;
        adoptGroup(group.take_front(half));
        adoptGroup(group.drop_front(half));
      };
  if (oneByOne) {
    SmallVector<Operation *> candidates;
    for (Operation *op : llvm::reverse(ops))
      if (wantedOf(op))
        candidates.push_back(op);
    size_t half = candidates.size() / 2;
    adoptGroup(ArrayRef<Operation *>(candidates).take_front(half));
    adoptGroup(ArrayRef<Operation *>(candidates).drop_front(half));
  }

  MLIRContext *ctx = func.getContext();
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    Layout l = solver.getLayout(arg);
    if (l.isSplit())
      func.setArgAttr(arg.getArgNumber(), kShardingAttr,
                      toAttr(ctx, axis, l, rankOf(arg),
                             func.getArgAttrOfType<dist::ShardingAttr>(
                                 arg.getArgNumber(), kShardingAttr)));
  }
  auto toArray = [&](ArrayRef<Layout> layouts, ValueRange values) {
    SmallVector<Attribute> attrs;
    for (auto [l, v] : llvm::zip(layouts, values))
      attrs.push_back(toAttr(ctx, axis, l, rankOf(v)));
    return ArrayAttr::get(ctx, attrs);
  };
  for (Operation &op : body) {
    const OpPlan *plan = solver.getPlan(&op);
    if (!plan)
      continue;
    bool any =
        llvm::any_of(plan->operands,
                     [](const Layout &l) { return !l.isReplicated(); }) ||
        llvm::any_of(plan->results,
                     [](const Layout &l) { return !l.isReplicated(); });
    // Ops that are whole on every rank and read whole values need no
    // annotation; anything else says what it reads and makes.
    bool readsSplit = llvm::any_of(op.getOperands(), [&](Value v) {
      return !solver.getLayout(v).isReplicated();
    });
    if (!any && !readsSplit)
      continue;
    op.setAttr(kOperandsAttr, toArray(plan->operands, op.getOperands()));
    if (op.getNumResults())
      op.setAttr(kResultsAttr, toArray(plan->results, op.getResults()));
  }
  return success();
}

namespace {
struct PropagateShardingPass
    : pcc::impl::PropagateShardingBase<PropagateShardingPass> {
  using PropagateShardingBase::PropagateShardingBase;
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(propagateSharding(func, axis, sequenceParallel, outputsSplit,
                                   zero)))
        return signalPassFailure();
  }
};
} // namespace
