//===- StepPhases.cpp - Forward, backward and optimizer of a step --------===//

#include "pcc/Analysis/StepPhases.h"

#include "pcc/Analysis/CostModel.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Pipeline/Pipeline.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::pipeline;

bool StepPhases::isFree(Operation *op) const {
  return op->getNumResults() > 0 &&
         llvm::all_of(op->getResults(), [&](Value r) { return isFree(r); });
}

StepPhases pcc::pipeline::classifyPhases(func::FuncOp func) {
  StepPhases result;
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // What each value is needed for: outputs and the loss (forward),
  // gradients (backward), updates (optimizer), as a mask.
  enum : unsigned { F = 1, B = 2, O = 4 };
  llvm::DenseMap<Value, unsigned> need;
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    unsigned bit = F;
    if (func.getResultAttr(k, graph::kGradAttr))
      bit = B;
    else if (func.getResultAttr(k, graph::kUpdateAttr))
      bit = O;
    need[v] |= bit;
  }
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    unsigned mask = 0;
    for (Value r : op.getResults())
      mask |= need.lookup(r);
    if (!mask)
      continue;
    result.phase[&op] = (mask & F)   ? Phase::Forward
                        : (mask & B) ? Phase::Backward
                                     : Phase::Optimizer;
    for (Value v : op.getOperands())
      need[v] |= mask;
  }

  // State (parameters, moments) is held by every stage that uses it; the
  // inputs are per microbatch, and what is computed from them is work.
  for (BlockArgument arg : body.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), graph::kStateAttr))
      result.free.insert(arg);
  for (Operation &op : body.without_terminator())
    if (llvm::all_of(op.getOperands(),
                     [&](Value v) { return result.free.contains(v); }))
      for (Value r : op.getResults())
        result.free.insert(r);
  return result;
}

ForwardOrder pcc::pipeline::getForwardOrder(func::FuncOp func,
                                            const StepPhases &phases) {
  ForwardOrder forward;
  for (Operation &op : func.getBody().front().without_terminator())
    if (phases.of(&op) == Phase::Forward && !phases.isFree(&op)) {
      forward.position[&op] = forward.ops.size();
      forward.ops.push_back(&op);
    }
  return forward;
}

SmallVector<double> pcc::pipeline::getCrossingBytes(func::FuncOp func,
                                                    const StepPhases &phases,
                                                    const ForwardOrder &forward,
                                                    bool arguments) {
  size_t n = forward.ops.size();
  // Each value adds its bytes from after its maker to its last forward
  // reader: a difference array, summed below.
  SmallVector<double> delta(n + 2, 0.0);
  auto cross = [&](Value v, int64_t madeAt) {
    int64_t last = madeAt;
    for (Operation *user : v.getUsers())
      if (auto it = forward.position.find(user); it != forward.position.end())
        last = std::max<int64_t>(last, int64_t(it->second));
    if (last <= madeAt)
      return;
    double bytes = double(getTensorBytes(v.getType()));
    delta[madeAt + 1] += bytes;
    delta[last + 1] -= bytes;
  };
  if (arguments)
    for (BlockArgument arg : func.getBody().front().getArguments())
      if (!phases.isFree(arg))
        cross(arg, -1);
  for (auto [i, op] : llvm::enumerate(forward.ops))
    for (Value r : op->getResults())
      cross(r, int64_t(i));
  SmallVector<double> crossing(n + 1, 0.0);
  double running = 0;
  for (size_t k = 0; k <= n; ++k)
    crossing[k] = running += delta[k];
  return crossing;
}

SmallVector<int64_t> pcc::pipeline::stateStages(func::FuncOp step, unsigned arg,
                                                int64_t numStages) {
  unsigned param = arg;
  if (auto of = step.getArgAttrOfType<IntegerAttr>(arg, graph::kStateOfAttr))
    param = of.getInt();
  if (auto stages =
          step.getArgAttrOfType<DenseI64ArrayAttr>(param, kStagesAttr))
    return SmallVector<int64_t>(stages.asArrayRef());
  return llvm::to_vector(llvm::seq<int64_t>(0, numStages));
}

SmallVector<int64_t, 2> pcc::pipeline::getStageRanks(func::FuncOp step,
                                                     int64_t stage,
                                                     int64_t ranks) {
  // The rank of an even and of an odd microbatch: one rank, or two.
  auto attr = step->getAttrOfType<IntegerAttr>(dist::kPipelinesAttr);
  int64_t pipelines = attr && stage < ranks ? attr.getInt() : 1;
  SmallVector<int64_t, 2> on{dist::getPipelineRank(stage, 0, ranks, pipelines)};
  int64_t odd = dist::getPipelineRank(stage, 1, ranks, pipelines);
  if (odd != on[0])
    on.push_back(odd);
  llvm::sort(on);
  return on;
}

bool pcc::pipeline::holdsState(func::FuncOp step, unsigned arg, int64_t rank,
                               int64_t ranks) {
  // Without a marked parameter every stage holds it, and with it so does
  // every rank: no stage count is needed to answer for a rank.
  return llvm::any_of(stateStages(step, arg, ranks), [&](int64_t s) {
    return llvm::is_contained(getStageRanks(step, s, ranks), rank);
  });
}

bool pcc::pipeline::isUpdatedInPlace(func::FuncOp step, unsigned k) {
  std::optional<unsigned> state =
      graph::getStateIndex(step, k, graph::kUpdateAttr);
  if (!state)
    return false;
  Value v = step.getBody().front().getTerminator()->getOperand(k);
  while (Operation *def = v.getDefiningOp()) {
    if (!def->hasTrait<graph::OpTrait::UpdatesInPlace>())
      return false;
    v = def->getOperand(0);
  }
  return v == step.getArgument(*state);
}

std::string pcc::pipeline::describeState(func::FuncOp step, unsigned arg) {
  StringRef name = graph::getStateName(step, arg);
  std::string text =
      name.empty() ? std::string("state") : ("'" + name + "'").str();
  return text + " (state argument " + std::to_string(arg) + ")";
}

void pcc::pipeline::getGradientNormSum(Operation *root,
                                       SmallVectorImpl<Operation *> &adds,
                                       SmallVectorImpl<Value> &parts) {
  if (!isa<graph::AddOp>(root)) {
    parts.push_back(root->getResult(0));
    return;
  }
  SmallVector<Operation *> work{root};
  while (!work.empty()) {
    Operation *add = work.pop_back_val();
    adds.push_back(add);
    for (Value operand : add->getOperands()) {
      auto inner = operand.getDefiningOp<graph::AddOp>();
      if (inner && operand.hasOneUse())
        work.push_back(inner);
      else
        parts.push_back(operand);
    }
  }
}

SmallVector<int64_t> pipeline::getStashBytes(
    func::FuncOp func, const StepPhases &phases, int64_t stages,
    function_ref<std::optional<int64_t>(Operation *)> stageOf) {
  SmallVector<int64_t> stash(stages, 0);
  llvm::DenseSet<std::pair<Value, int64_t>> kept;
  for (Operation &op : func.getBody().front()) {
    std::optional<int64_t> stage = stageOf(&op);
    if (!stage || *stage < 0 || *stage >= stages ||
        phases.of(&op) != Phase::Backward)
      continue;
    for (Value v : op.getOperands()) {
      Operation *def = v.getDefiningOp();
      if (def && stageOf(def) && phases.of(def) == Phase::Forward &&
          kept.insert({v, *stage}).second)
        stash[*stage] += getTensorBytes(v.getType());
    }
  }
  return stash;
}

bool pipeline::isDataParallelReduction(Operation *op) {
  if (!isa<dist::AllReduceOp, dist::ReduceScatterOp>(op))
    return false;
  auto axes = op->getAttrOfType<ArrayAttr>("axes");
  return axes && llvm::any_of(axes, [](Attribute axis) {
           auto name = dyn_cast<StringAttr>(axis);
           return name && name.getValue() == dist::kDataAxis;
         });
}

int64_t pipeline::getForwardFlops(func::FuncOp step) {
  if (step.isExternal())
    return 0;
  StepPhases phases = classifyPhases(step);
  int64_t flops = 0;
  for (Operation &op : step.getBody().front())
    if (phases.of(&op) == Phase::Forward && !phases.isFree(&op))
      if (auto cost = dyn_cast<graph::CostOpInterface>(&op))
        flops += cost.getFlops();
  return flops;
}
