//===- StagePartition.cpp - Which pipeline stage runs each op -------------===//
//
// Cuts a step into S = pp x virtual-stages contiguous stages. The forward's
// ops (those that compute the outputs and the loss, in program order, which
// is a topological order) are cut where the cost model balances the
// stages' times, each stage paying for receiving the tensors that cross
// its start; so cuts fall where the boundary is small (between layers
// rather than inside attention) unless balance wins. The backward follows:
// an op of the backward runs on the latest stage that has the forward
// values it reads and precedes the stages whose backward values it reads,
// so gradients flow from the last stage to the first. Optimizer ops run on
// every stage that holds their parameter: a parameter used on several
// stages (a tied embedding and LM head) keeps a copy, and its optimizer,
// on each. Free ops (computed from parameters and constants alone) get no
// stage: every stage that needs their value recomputes it.
//
//===----------------------------------------------------------------------===//

#include "pcc/Analysis/BufferPlan.h"
#include "pcc/Analysis/CostModel.h"
#include "pcc/Analysis/StepPhases.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GemmOperands.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipeline/Pipeline.h"
#include "pcc/Transforms/Pipeline/Schedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <limits>
#include <map>

namespace pcc {
#define GEN_PASS_DEF_PIPELINESTAGES
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::pipeline;


/// Cut positions (the index of each stage's first op, stage 0 excluded)
/// for `stages` contiguous stages of the ops whose times add up to
/// `prefix` (prefix[i]: ops [0, i)), a stage starting at op k also paying
/// crossing[k] to receive what crosses its start. First the slowest stage
/// is made as fast as possible; then, among the cuts that keep it so, the
/// sum of the squared stage times is made least, so that the stages that
/// are not the slowest are as even as they can be (the min-max cut alone
/// may pile the work on a few and leave others empty, and a rank holding
/// an interleaved schedule's empty chunk idles while the others work).
static SmallVector<size_t> balance(ArrayRef<double> prefix,
                                   ArrayRef<double> crossing, int64_t stages) {
  size_t n = prefix.size() - 1;
  const double inf = std::numeric_limits<double>::infinity();
  auto time = [&](size_t k, size_t i) {
    return prefix[i] - prefix[k] + crossing[k];
  };
  // Pass 1: the least possible time of the slowest stage. A stage's time
  // is at least its ops' (crossing is not negative), so the scan back from
  // i stops where the ops of [k, i) alone take as long as the best found:
  // about one stage's width of ops, not all before i (a GPT-3's 16 stages
  // of 2000 ops planned several times over otherwise spent seconds here).
  std::vector<double> worst(n + 1, inf), next(n + 1, inf);
  for (size_t i = 1; i <= n; ++i)
    worst[i] = prefix[i];
  for (int64_t j = 2; j <= stages; ++j) {
    std::fill(next.begin(), next.end(), inf);
    for (size_t i = j; i <= n; ++i)
      for (size_t k = i; k-- > size_t(j - 1);) {
        if (prefix[i] - prefix[k] >= next[i])
          break;
        next[i] = std::min(next[i], std::max(worst[k], time(k, i)));
      }
    std::swap(worst, next);
  }
  // A relative slack for the rounding of sums taken in other orders.
  double bound = worst[n] * (1 + 1e-9);
  // Per end i, the first start k whose ops [k, i) alone fit the bound:
  // none before it can start a stage ending at i.
  std::vector<size_t> first(n + 1, 0);
  for (size_t i = 1, k = 0; i <= n; ++i) {
    while (prefix[i] - prefix[k] > bound)
      ++k;
    first[i] = k;
  }
  // Pass 2: within that bound, the least sum of squares; ties go to the
  // smaller boundary.
  std::vector<std::vector<double>> best(stages + 1,
                                        std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> from(stages + 1,
                                        std::vector<size_t>(n + 1, 0));
  for (size_t i = 1; i <= n; ++i)
    if (prefix[i] <= bound)
      best[1][i] = prefix[i] * prefix[i];
  for (int64_t j = 2; j <= stages; ++j)
    for (size_t i = j; i <= n; ++i)
      for (size_t k = std::max<size_t>(j - 1, first[i]); k < i; ++k) {
        double t = time(k, i);
        if (t > bound || best[j - 1][k] == inf)
          continue;
        double total = best[j - 1][k] + t * t;
        if (total < best[j][i] ||
            (total == best[j][i] && crossing[k] < crossing[from[j][i]])) {
          best[j][i] = total;
          from[j][i] = k;
        }
      }
  SmallVector<size_t> cuts(stages - 1);
  size_t i = n;
  for (int64_t j = stages; j >= 2; --j) {
    i = from[j][i];
    cuts[j - 2] = i;
  }
  return cuts;
}

/// Calls `visit` on `v` and, where it returns true and `v` is a free op's
/// result, on that op's operands in turn, depth first: the walk from what a
/// stage's op reads back to the weights and state it is computed from
/// (through a transposed or narrowed weight), which `visit` stops where its
/// question is answered.
static void walkFreeValues(const StepPhases &phases, Value v,
                           llvm::function_ref<bool(Value)> visit) {
  if (!visit(v))
    return;
  if (Operation *def = v.getDefiningOp(); def && phases.isFree(v))
    for (Value o : def->getOperands())
      walkFreeValues(phases, o, visit);
}

/// Calls `fn` on each block argument (a parameter or other state) that the
/// free value `v` is computed from, through free ops (a transposed weight).
static void forEachParameter(const StepPhases &phases, Value v,
                             llvm::function_ref<void(BlockArgument)> fn) {
  walkFreeValues(phases, v, [&](Value u) {
    auto arg = dyn_cast<BlockArgument>(u);
    if (arg)
      fn(arg);
    return !arg;
  });
}

/// Calls `fn` with the name of each weight (graph.weight) and state
/// argument (graph.state) that `v` is, or comes from through free ops.
static void forEachHeld(const StepPhases &phases, func::FuncOp func, Value v,
                        llvm::function_ref<void(StringRef)> fn) {
  walkFreeValues(phases, v, [&](Value u) {
    if (auto arg = dyn_cast<BlockArgument>(u)) {
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        graph::kStateAttr))
        fn(name.getValue());
      return false;
    }
    if (auto weight = u.getDefiningOp<graph::WeightOp>()) {
      fn(weight.getName());
      return false;
    }
    return true;
  });
}

llvm::StringMap<SmallVector<int64_t>> pcc::getHolderStages(func::FuncOp func) {
  StepPhases phases = classifyPhases(func);
  llvm::StringMap<SmallVector<int64_t>> holders;
  for (Operation &op : func.getBody().front().without_terminator()) {
    auto stage = op.getAttrOfType<IntegerAttr>(kStageAttr);
    if (!stage || phases.of(&op) != Phase::Forward)
      continue;
    for (Value v : op.getOperands())
      forEachHeld(phases, func, v, [&](StringRef name) {
        SmallVector<int64_t> &at = holders[name];
        if (!llvm::is_contained(at, stage.getInt()))
          at.insert(llvm::upper_bound(at, stage.getInt()), stage.getInt());
      });
  }
  return holders;
}

/// The cuts of `forward` that put each op on a stage holding what it reads
/// (StageOptions::holders): each stage starts at the first op that reads
/// something no earlier stage holds.
static FailureOr<SmallVector<size_t>>
followHolders(func::FuncOp func, const StepPhases &phases,
              ArrayRef<Operation *> forward,
              const llvm::StringMap<SmallVector<int64_t>> &holders,
              int64_t stages) {
  SmallVector<size_t> cuts;
  int64_t current = 0;
  for (auto [i, op] : llvm::enumerate(forward)) {
    std::optional<SmallVector<int64_t>> allowed;
    std::string unknown, last;
    for (Value v : op->getOperands())
      forEachHeld(phases, func, v, [&](StringRef name) {
        auto it = holders.find(name);
        if (it == holders.end()) {
          unknown = name.str();
          return;
        }
        last = name.str();
        if (!allowed) {
          allowed = it->second;
          return;
        }
        llvm::erase_if(*allowed, [&](int64_t s) {
          return !llvm::is_contained(it->second, s);
        });
      });
    if (!unknown.empty())
      return op->emitError("'")
             << unknown << "' is read by no stage of the step that the "
             << "others' stages follow";
    if (!allowed)
      continue;
    const int64_t *next = llvm::find_if(
        *allowed, [&](int64_t s) { return s >= current; });
    if (next == allowed->end() || *next > current + 1)
      return op->emitError("this step reads '")
             << last << "' where the other steps' stages cannot hold it "
             << "(after stage " << current << "): its stages cannot follow "
             << "theirs";
    if (*next > current) {
      cuts.push_back(i);
      current = *next;
    }
  }
  if (current != stages - 1)
    return func.emitError("the stages of the other steps leave stage ")
           << current + 1 << " of this one without ops";
  return cuts;
}

/// A backward op's place: starting from `at`, the latest place not after it
/// where each of its forward operands is `available` (a list of places per
/// operand; one with none so early is passed over). The stage assignment
/// places ops by stage with it, the balance attributes their time by
/// forward op position.
template <typename T>
static T latestAvailable(ArrayRef<SmallVector<T>> available, T at) {
  for (bool changed = true; changed;) {
    changed = false;
    for (ArrayRef<T> places : available) {
      std::optional<T> latest;
      for (T p : places)
        if (p <= at)
          latest = std::max(latest.value_or(p), p);
      if (latest && *latest < at) {
        at = *latest;
        changed = true;
      }
    }
  }
  return at;
}

namespace {
/// A part of a gradient summed from parts: a leaf of the sum's tree of
/// adds, and the views of sums (transposes, reshapes) above it.
struct SumPart {
  Value value;
  SmallVector<Operation *> views; ///< outermost first
};
} // namespace

/// Whether `v` is an add of two `type`s into a `type`, by an op `placed`
/// accepts (one on a stage, or of the backward).
static bool isPlacedSum(Value v, Type type,
                        llvm::function_ref<bool(Operation *)> placed) {
  auto add = v.getDefiningOp<graph::AddOp>();
  return add && placed(add) && add.getType() == type &&
         add.getLhs().getType() == type && add.getRhs().getType() == type;
}

/// Collects into `parts` the leaves of the tree of adds that `v` sums
/// (through transposes and reshapes of sums), each with the views above it
/// (`views` holds those above `v`), and into `sums` the adds and views of
/// the tree, all ops that `placed` accepts. `root`: `v` is the gradient,
/// which may have other users.
static void collectSumParts(Value v, bool root,
                            llvm::function_ref<bool(Operation *)> placed,
                            SmallVector<Operation *> &views,
                            SmallVector<SumPart> &parts,
                            SmallVector<Operation *> &sums) {
  Operation *def = v.getDefiningOp();
  if ((root || v.hasOneUse()) && isPlacedSum(v, v.getType(), placed)) {
    sums.push_back(def);
    for (Value operand : def->getOperands())
      collectSumParts(operand, false, placed, views, parts, sums);
    return;
  }
  if ((root || v.hasOneUse()) && def &&
      isa<graph::TransposeOp, graph::ReshapeOp>(def) && placed(def) &&
      def->getOperand(0).hasOneUse() &&
      isPlacedSum(def->getOperand(0), def->getOperand(0).getType(), placed)) {
    sums.push_back(def);
    views.push_back(def);
    collectSumParts(def->getOperand(0), false, placed, views, parts, sums);
    views.pop_back();
    return;
  }
  parts.push_back({v, views});
}

/// The gradients returned by `func` that only the return and the optimizer
/// read: a sum of parts made on different stages is split per stage
/// (splitGradientSums) rather than summed per microbatch.
static SmallVector<Value> getSplittableGradients(func::FuncOp func,
                                                 const StepPhases &phases) {
  SmallVector<Value> gradients;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (func.getResultAttr(k, graph::kGradAttr) &&
        llvm::all_of(v.getUsers(), [&](Operation *user) {
          return isa<func::ReturnOp>(user) ||
                 phases.of(user) == Phase::Optimizer;
        }))
      gradients.push_back(v);
  return gradients;
}

/// The time of adding each microbatch's gradient `gradient` (a result of
/// the step) to the earlier ones' (pcc-lower-schedule's accumulation): an
/// add over it in all but the first microbatch, none where the product or
/// scatter that makes it adds itself into the partial sum (its cost is the
/// same), or where it is a sum whose terms do so one after the other
/// (getAccumulatedTerms: a tied weight's product and scatter), and for a
/// sum of several stages' parts (dist.grad_sum), the parts' own.
static double accumulationTime(Value gradient, int64_t microbatches,
                               const CostModel &cost) {
  if (microbatches <= 1)
    return 0;
  Operation *def = gradient.getDefiningOp();
  while (auto view = dyn_cast_or_null<ViewLikeOpInterface>(def))
    def = view.getViewSource().getDefiningOp();
  if (def && canAccumulateInPlace(def))
    return 0;
  if (def && def->hasAttr(kGradSumAttr))
    return accumulationTime(def->getOperand(0), microbatches, cost) +
           accumulationTime(def->getOperand(1), microbatches, cost);
  SmallVector<Value> terms = getAccumulatedTerms(gradient);
  if (!terms.empty() && llvm::all_of(terms, [](Value term) {
        Operation *made = term.getDefiningOp();
        return made && (canAccumulateInPlace(made) || accumulatesRows(made));
      }))
    return 0;
  auto type = cast<RankedTensorType>(gradient.getType());
  double later = double(microbatches - 1) / double(microbatches);
  return later * cost.time(graph::AddOp::getOperationName(),
                           double(type.getNumElements()),
                           3.0 * double(getTensorBytes(type)));
}

/// The time of the whole step that each forward op accounts for: its own,
/// and that of the backward ops that will run on its stage, which are
/// attributed as the stage assignment below places them (the latest
/// forward op whose value they read, no later than the backward values
/// they read), so that stages are balanced on forward, input gradient and
/// weight gradient together; with `microbatches` above one, the
/// accumulation of each gradient where the op that makes it runs.
namespace {
/// Per forward op: its time, and that of the backward it accounts for
/// (per microbatch), and that of the products deferred to once a step
/// that it accounts for.
struct StepTimes {
  SmallVector<double> forward, backward, deferred;
  double total(size_t i) const { return forward[i] + backward[i]; }
};
} // namespace

static StepTimes
stepTimes(Block &body, const StepPhases &phases, ArrayRef<Operation *> forward,
          const llvm::DenseMap<Operation *, size_t> &position,
          const CostModel &cost, int64_t microbatches = 1,
          llvm::DenseMap<Operation *, size_t> *placed = nullptr) {
  StepTimes times;
  for (Operation *op : forward)
    times.forward.push_back(cost.time(op));
  times.backward.assign(forward.size(), 0);
  times.deferred.assign(forward.size(), 0);
  if (forward.empty())
    return times;
  // Where each forward value is available: its op and its forward users.
  auto availableAt = [&](Value v) {
    SmallVector<size_t> at;
    if (auto it = position.find(v.getDefiningOp()); it != position.end())
      at.push_back(it->second);
    for (Operation *user : v.getUsers())
      if (auto it = position.find(user); it != position.end())
        at.push_back(it->second);
    return at;
  };
  // Where each parameter is: the forward ops that read it, through free
  // ops (a transposed weight); a backward op that reads it runs there.
  llvm::DenseMap<Value, SmallVector<size_t>> paramAt;
  for (auto [i, op] : llvm::enumerate(forward))
    for (Value v : op->getOperands())
      if (phases.isFree(v))
        forEachParameter(phases, v,
                         [&, i = i](BlockArgument p) { paramAt[p].push_back(i); });
  // The adds (and views of sums) of a gradient summed from parts: each
  // stage sums its own parts (splitGradientSums), so the sum's time is
  // spread over the places of its parts (the cost model may charge a
  // fused sum's whole time to one add), once they are all placed.
  auto inBackward = [&](Operation *op) {
    return phases.of(op) == Phase::Backward && !phases.isFree(op);
  };
  struct PartSum {
    SmallVector<Operation *> sums;
    SmallVector<SumPart> parts;
  };
  SmallVector<PartSum> partSums;
  llvm::DenseSet<Operation *> inPartSum;
  for (Value g :
       getSplittableGradients(cast<func::FuncOp>(body.getParentOp()), phases)) {
    SmallVector<Operation *> views;
    PartSum sum;
    collectSumParts(g, true, inBackward, views, sum.parts, sum.sums);
    inPartSum.insert(sum.sums.begin(), sum.sums.end());
    partSums.push_back(std::move(sum));
  }
  llvm::DenseMap<Operation *, size_t> backwardAt;
  for (Operation &op : body.without_terminator()) {
    if (!inBackward(&op) || inPartSum.contains(&op))
      continue;
    size_t at = forward.size() - 1;
    SmallVector<SmallVector<size_t>> available;
    for (Value v : op.getOperands()) {
      if (phases.isFree(v)) {
        forEachParameter(phases, v, [&](BlockArgument p) {
          if (auto it = paramAt.find(p); it != paramAt.end())
            available.push_back(it->second);
        });
        continue;
      }
      Operation *def = v.getDefiningOp();
      if (!def)
        continue;
      if (position.count(def))
        available.push_back(availableAt(v));
      else if (auto it = backwardAt.find(def); it != backwardAt.end())
        at = std::min(at, it->second);
    }
    // As late as every forward operand is available, as the stages are.
    at = latestAvailable<size_t>(available, at);
    backwardAt[&op] = at;
    // A data-parallel gradient sum runs once per step, after the flush.
    if (!isDataParallelReduction(&op))
      times.backward[at] += cost.time(&op);
  }
  for (const PartSum &sum : partSums) {
    if (sum.sums.empty())
      continue;
    SmallVector<size_t> places;
    for (const SumPart &part : sum.parts)
      if (auto it = backwardAt.find(part.value.getDefiningOp());
          it != backwardAt.end())
        places.push_back(it->second);
    if (places.empty())
      places.push_back(forward.size() - 1);
    double time = 0;
    for (Operation *op : sum.sums)
      time += cost.time(op);
    for (size_t at : places)
      times.backward[at] += time / double(places.size());
    for (Operation *op : sum.sums)
      backwardAt[op] = *llvm::max_element(places);
  }
  auto func = cast<func::FuncOp>(body.getParentOp());
  for (auto [k, v] : llvm::enumerate(body.getTerminator()->getOperands())) {
    if (!graph::getStateIndex(func, k, graph::kGradAttr))
      continue;
    // Where the gradient is made: its op, or the op its views start from.
    Operation *def = v.getDefiningOp();
    auto it = backwardAt.end();
    while (def && (it = backwardAt.find(def)) == backwardAt.end()) {
      auto view = dyn_cast<ViewLikeOpInterface>(def);
      def = view ? view.getViewSource().getDefiningOp() : nullptr;
    }
    if (it != backwardAt.end())
      times.backward[it->second] += accumulationTime(v, microbatches, cost);
  }
  if (placed)
    *placed = std::move(backwardAt);
  return times;
}

/// The input gradient among the backward ops `backward` (in program
/// order), each placed by `placeOf` (a stage, or a forward op's position;
/// none for an op outside them): the ops whose results another place's
/// backward needs, directly or through its place's own input gradient. The
/// rest is the weight gradient (W), which zero-bubble schedules run apart.
static llvm::DenseSet<Operation *> findInputGradient(
    ArrayRef<Operation *> backward,
    llvm::function_ref<std::optional<int64_t>(Operation *)> placeOf) {
  llvm::DenseSet<Operation *> inputGradient;
  for (Operation *op : llvm::reverse(backward)) {
    std::optional<int64_t> at = placeOf(op);
    if (llvm::any_of(op->getUsers(), [&](Operation *user) {
          std::optional<int64_t> there = placeOf(user);
          return there && (*there != at || inputGradient.contains(user));
        }))
      inputGradient.insert(op);
  }
  return inputGradient;
}

StepProfile pipeline::profileStep(func::FuncOp step, const CostModel &cost) {
  StepProfile profile;
  if (step.isExternal())
    return profile;
  Block &body = step.getBody().front();
  StepPhases phases = classifyPhases(step);
  ForwardOrder order = getForwardOrder(step, phases);
  size_t n = order.ops.size();
  llvm::DenseMap<Operation *, size_t> backwardAt;
  StepTimes times =
      stepTimes(body, phases, order.ops, order.position, cost,
                /*microbatches=*/1, &backwardAt);
  profile.forward = times.forward;
  profile.backward = times.backward;
  profile.weight.assign(n, 0);
  profile.communication.assign(n, 0);
  profile.stash.assign(n, 0);
  profile.parameters.assign(n, 0);
  profile.gradients.assign(n, 0);
  profile.state.assign(n, 0);
  profile.backwardOps.assign(n, 0);
  profile.crossing = getCrossingBytes(step, phases, order, false);
  if (n == 0)
    return profile;
  auto isCommunication = [](Operation *op) {
    return op->getDialect() && op->getDialect()->getNamespace() == "dist";
  };
  for (auto [i, op] : llvm::enumerate(order.ops)) {
    if (auto flops = dyn_cast<graph::CostOpInterface>(op))
      profile.forwardFlops += double(flops.getFlops());
    if (isCommunication(op))
      profile.communication[i] += cost.time(op);
    for (Value r : op->getResults())
      profile.largestValue =
          std::max(profile.largestValue, getTensorBytes(r.getType()));
  }
  // The weight gradient as the stage partition would split it with a stage
  // per forward op: backward ops that no other op's input gradient needs.
  SmallVector<Operation *> backward;
  for (Operation &op : body.without_terminator())
    if (backwardAt.count(&op))
      backward.push_back(&op);
  llvm::DenseSet<Operation *> inputGradient =
      findInputGradient(backward, [&](Operation *op) -> std::optional<int64_t> {
        auto it = backwardAt.find(op);
        return it == backwardAt.end() ? std::nullopt
                                      : std::optional<int64_t>(it->second);
      });
  llvm::DenseSet<Value> kept;
  for (Operation *op : backward) {
    size_t at = backwardAt[op];
    double time = isDataParallelReduction(op) ? 0 : cost.time(op);
    if (time > 0)
      ++profile.backwardOps[at];
    if (!inputGradient.contains(op))
      profile.weight[at] += time;
    if (isCommunication(op))
      profile.communication[at] += time;
    // What the backward reads of the forward, by the forward op that made
    // it.
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        if (auto it = order.position.find(def);
            it != order.position.end() && kept.insert(v).second)
          profile.stash[it->second] += getTensorBytes(v.getType());
  }
  // Where each parameter is first read, through free ops; its gradient and
  // its optimizer state go with it, state of no parameter to the start.
  llvm::DenseMap<unsigned, size_t> firstRead;
  for (auto [i, op] : llvm::enumerate(order.ops))
    for (Value v : op->getOperands())
      if (phases.isFree(v))
        forEachParameter(phases, v, [&, i = i](BlockArgument p) {
          firstRead.try_emplace(p.getArgNumber(), i);
        });
  llvm::DenseMap<unsigned, int64_t> gradientBytes;
  for (unsigned k = 0; k < step.getNumResults(); ++k)
    if (std::optional<unsigned> arg =
            graph::getStateIndex(step, k, graph::kGradAttr))
      gradientBytes[*arg] += getTensorBytes(step.getResultTypes()[k]);
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (!step.getArgAttr(i, graph::kStateAttr))
      continue;
    unsigned param = i;
    if (auto of = step.getArgAttrOfType<IntegerAttr>(i, graph::kStateOfAttr))
      param = of.getInt();
    auto it = firstRead.find(param);
    size_t at = it == firstRead.end() ? 0 : it->second;
    int64_t bytes = getTensorBytes(arg.getType());
    if (param != i || !gradientBytes.count(i)) {
      profile.state[at] += bytes;
      continue;
    }
    profile.parameters[at] += bytes;
    profile.gradients[at] += gradientBytes[i];
  }
  for (Operation &op : body.without_terminator())
    if (phases.of(&op) == Phase::Optimizer && !phases.isFree(&op))
      profile.optimizer += cost.time(&op);
  return profile;
}

namespace {
/// A schedule timed on some cuts: its makespan, the busiest rank's time
/// (which decides the makespan once enough microbatches flow), and the
/// slowest stage's.
struct CutTiming {
  double makespan = 0, busiest = 0, slowest = 0;
  /// Shorter, or as short with a less loaded busiest rank.
  bool betterThan(const CutTiming &o) const {
    if (makespan < o.makespan * (1 - 1e-9))
      return true;
    return makespan <= o.makespan * (1 + 1e-9) &&
           busiest < o.busiest * (1 - 1e-9);
  }
};
} // namespace

namespace {
/// What the cut search times stages by, per forward op as prefix sums
/// (entry i: ops [0, i)): the forward, the backward it accounts for (per
/// microbatch) and the products deferred to once a step; per position,
/// the time of receiving what crosses a cut there.
struct CutCosts {
  SmallVector<double> forward{0}, backward{0}, deferred{0}, crossing;
  /// Ops: the prefixes' length less one.
  size_t size() const { return forward.size() - 1; }
  /// Forward and backward of ops [0, i).
  double total(size_t i) const { return forward[i] + backward[i]; }
};
} // namespace

/// The schedule `spec` names, timed on the stages that `cuts` make. A
/// stage's forward pays for receiving what crosses its start, and so does
/// its backward for sending the gradient back; its deferred products run
/// after its rank's last action.
static CutTiming timeCuts(ArrayRef<size_t> cuts, const CutCosts &c,
                          const pipeline::ScheduleSpec &spec) {
  size_t n = c.size();
  SmallVector<double> costs, deferred;
  double slowest = 0;
  for (size_t s = 0; s <= cuts.size(); ++s) {
    size_t from = s == 0 ? 0 : cuts[s - 1], to = s == cuts.size() ? n : cuts[s];
    double f = c.forward[to] - c.forward[from] + c.crossing[from];
    double b = c.backward[to] - c.backward[from] + c.crossing[from];
    costs.append({f, b, 0.0});
    deferred.push_back(c.deferred[to] - c.deferred[from]);
    slowest = std::max(slowest, f + b - c.crossing[from]);
  }
  pipeline::ScheduleSpec timed = spec;
  timed.costs = costs;
  FailureOr<pipeline::ScheduleTable> table =
      pipeline::generateSchedule(timed, []() -> InFlightDiagnostic {
        llvm_unreachable("the spec was checked before");
      });
  pipeline::ScheduleTiming timing;
  timing.costs = costs;
  if (c.deferred.back() > 0)
    timing.deferredCosts = deferred;
  pipeline::ScheduleStats stats = pipeline::timeSchedule(*table, timing);
  CutTiming result;
  result.makespan = stats.makespan;
  result.slowest = slowest;
  for (const pipeline::RankStats &rank : stats.ranks)
    result.busiest = std::max(result.busiest, rank.busy);
  return result;
}

/// Cuts where each chunk ends nearest to `targets`' running sum (chunk
/// times), on `boundaries`, leaving each later cut a boundary of its own.
static std::optional<SmallVector<size_t>>
cutsNear(ArrayRef<double> targets, ArrayRef<double> prefix,
         ArrayRef<size_t> boundaries) {
  SmallVector<size_t> cuts;
  double sum = 0;
  size_t next = 0, count = targets.size() - 1;
  for (size_t k = 0; k < count; ++k) {
    sum += targets[k];
    size_t last = boundaries.size() - (count - k);
    if (next > last)
      return std::nullopt;
    size_t best = next;
    for (size_t i = next; i <= last; ++i) {
      if (std::abs(prefix[boundaries[i]] - sum) <
          std::abs(prefix[boundaries[best]] - sum))
        best = i;
      if (prefix[boundaries[i]] > sum)
        break;
    }
    cuts.push_back(boundaries[best]);
    next = best + 1;
  }
  return cuts;
}

/// Interleaved stages balanced chunk by chunk can leave the ranks
/// uneven: a rank runs V chunks, and when one op outweighs a mean chunk
/// (an LM head over a large vocabulary) its chunk makes its rank the
/// slowest, while 1F1B's larger stages absorb it. Tries cuts that even
/// the ranks' loads instead: the rank holding the heavy chunk gets its
/// other chunks smaller (x each), every other rank's chunks the rank's
/// fair share over V, and the heavy chunk the rest; for x from none to a
/// full chunk, and the heavy chunk where the balanced cuts put the
/// heaviest op or next to it. Sets `cuts` to the shortest of these in the
/// simulated schedule whose slowest chunk is within `bound`, and returns
/// its timing; none when none is.
static std::optional<CutTiming>
evenRanks(SmallVector<size_t> &cuts, ArrayRef<size_t> boundaries,
          const CutCosts &c, double bound, int64_t p, int64_t v,
          const pipeline::ScheduleSpec &spec) {
  size_t n = c.size();
  int64_t chunks = p * v;
  SmallVector<double> prefix;
  for (size_t i = 0; i <= n; ++i)
    prefix.push_back(c.total(i));
  double fair = prefix[n] / p, share = fair / v;
  size_t heaviestOp = 0;
  for (size_t i = 0; i < n; ++i)
    if (prefix[i + 1] - prefix[i] > prefix[heaviestOp + 1] - prefix[heaviestOp])
      heaviestOp = i;
  int64_t at = llvm::upper_bound(cuts, heaviestOp) - cuts.begin();
  std::optional<SmallVector<size_t>> best;
  std::optional<CutTiming> current;
  for (int64_t heavy : {at, at - 1, at + 1}) {
    if (heavy < 0 || heavy >= chunks)
      continue;
    for (int step = 0; step <= 8; ++step) {
      double x = share * step / 8;
      SmallVector<double> targets(chunks, share);
      for (int64_t c = heavy % p; c < chunks; c += p)
        targets[c] = x;
      targets[heavy] = fair - (v - 1) * x;
      std::optional<SmallVector<size_t>> tried =
          cutsNear(targets, prefix, boundaries);
      if (!tried || *tried == cuts || (best && *tried == *best))
        continue;
      CutTiming t = timeCuts(*tried, c, spec);
      if (t.slowest <= bound && (!current || t.betterThan(*current))) {
        current = t;
        best = *tried;
      }
    }
  }
  if (best)
    cuts = *best;
  return current;
}

/// Moves the cuts of `balance`, one boundary at a time (a cut, or a run of
/// consecutive cuts together), while the schedule's simulated makespan
/// shrinks. Balanced stages are not yet a short
/// schedule: a rank of an interleaved schedule runs several chunks, and
/// when one op outweighs a mean chunk (an LM head over a large
/// vocabulary) the rank holding it carries its chunk and another, while
/// 1F1B's larger stages absorb it; moving cuts toward a shorter makespan
/// (or, as short, a less busy busiest rank) evens the ranks' loads as far
/// as single moves reach. The slowest stage may grow, within 1.09 x the
/// least any cut allows (the larger of the mean stage and the heaviest
/// op), so that stages stay balanced. Boundaries are those where no more
/// crosses than at the balanced cuts (between blocks, on the residual
/// stream). Schedules that order their actions by the stage costs (zb-h1)
/// keep the balanced cut.
static void refineCuts(SmallVector<size_t> &cuts, const CutCosts &costs,
                       double heaviest, const StageOptions &options) {
  int64_t p = options.ranks, stages = options.stages;
  int64_t v = stages / std::max<int64_t>(1, p), m = options.microbatches;
  pipeline::ScheduleSpec spec;
  spec.kind = options.schedule;
  spec.ranks = p;
  spec.virtualStages = v;
  spec.microbatches = m;
  if (cuts.empty() || p < 2 || pipeline::splitsBackward(options.schedule) ||
      pipeline::getScheduleShapeError(spec))
    return;
  // The makespan's shape shows at a few rounds of microbatches; more only
  // lengthen the simulation. A deferred product stacks every
  // microbatch's operands, so the simulated ones weigh their share of it.
  spec.microbatches = std::min(m, 4 * p);
  CutCosts c = costs;
  for (double &deferred : c.deferred)
    deferred *= double(spec.microbatches) / double(m);
  size_t n = c.size();
  bool interleaved = spec.kind == "interleaved";
  double total = c.total(n);
  double bound = 1.09 * std::max(total / stages, heaviest);
  // Boundaries: those where no more crosses than at the balanced cuts'
  // median, the residual stream between blocks in a transformer (not the
  // least crossing anywhere: that is the token ids before the embedding).
  SmallVector<double> atCuts;
  for (size_t cut : cuts)
    atCuts.push_back(c.crossing[cut]);
  llvm::sort(atCuts);
  double typical = atCuts[atCuts.size() / 2];
  SmallVector<size_t> boundaries;
  for (size_t k = 1; k < n; ++k)
    if (c.crossing[k] <= 1.01 * typical || llvm::is_contained(cuts, k))
      boundaries.push_back(k);
  CutTiming current = timeCuts(cuts, c, spec);
  bound = std::max(bound, current.slowest);
  // Steepest descent over moves of a run of consecutive cuts j..k by one
  // boundary each, in the same direction: a single cut trades work between
  // two neighbouring stages, a run moves it from the stage after the run to
  // the one before, which may sit on any other rank. Bounded in
  // evaluations, since a run of S stages has S^2 such moves.
  auto shifted = [&](size_t cut, bool right) -> std::optional<size_t> {
    auto at = llvm::lower_bound(boundaries, cut);
    if (right) {
      auto after = at != boundaries.end() && *at == cut ? std::next(at) : at;
      return after == boundaries.end() ? std::nullopt
                                       : std::optional<size_t>(*after);
    }
    return at == boundaries.begin() ? std::nullopt
                                    : std::optional<size_t>(*std::prev(at));
  };
  auto descend = [&](SmallVector<size_t> &cuts, CutTiming &current) {
    int64_t budget = 1000;
    SmallVector<size_t> candidate;
    while (budget > 0) {
      std::optional<SmallVector<size_t>> bestCuts;
      CutTiming best = current;
      for (size_t j = 0; j < cuts.size() && budget > 0; ++j)
        for (size_t k = j; k < cuts.size() && budget > 0; ++k)
          for (bool right : {false, true}) {
            candidate = cuts;
            bool valid = true;
            for (size_t i = j; i <= k && valid; ++i) {
              std::optional<size_t> to = shifted(cuts[i], right);
              valid = to.has_value();
              if (valid)
                candidate[i] = *to;
            }
            for (size_t i = 0; i < candidate.size() && valid; ++i)
              valid = candidate[i] > (i == 0 ? 0 : candidate[i - 1]) &&
                      candidate[i] < n;
            if (!valid)
              continue;
            --budget;
            CutTiming t = timeCuts(candidate, c, spec);
            if (t.slowest <= bound && t.betterThan(best)) {
              best = t;
              bestCuts = candidate;
            }
          }
      if (!bestCuts)
        break;
      cuts = *bestCuts;
      current = best;
    }
  };
  // From the balanced cuts, and for interleaved also from cuts that even
  // the ranks' loads: the better of the two descents wins.
  SmallVector<size_t> balanced = cuts;
  descend(cuts, current);
  if (interleaved) {
    SmallVector<size_t> even = balanced;
    std::optional<CutTiming> evenTiming =
        evenRanks(even, boundaries, c, bound, p, v, spec);
    if (evenTiming) {
      descend(even, *evenTiming);
      if (evenTiming->betterThan(current)) {
        cuts = even;
        current = *evenTiming;
      }
    }
  }
}

/// Interleaving exists to shrink the bubble; where an op no cut splits (an
/// LM head over a large vocabulary) outweighs several chunks, the rank
/// holding it holds the schedule up and 1F1B's larger stages do better.
/// Said, with both simulated steps, rather than left to find.
static void warnIfFlushIsFaster(func::FuncOp func, ArrayRef<size_t> cuts,
                                ArrayRef<double> prefix, const CutCosts &c,
                                double heaviest, const StageOptions &options) {
  int64_t p = options.ranks, stages = options.stages;
  pipeline::ScheduleSpec spec;
  spec.kind = "interleaved";
  spec.ranks = p;
  spec.virtualStages = stages / std::max<int64_t>(1, p);
  spec.microbatches = options.microbatches;
  if (options.schedule != "interleaved" || p < 2 ||
      pipeline::getScheduleShapeError(spec))
    return;
  SmallVector<size_t> flush = balance(prefix, c.crossing, p);
  StageOptions flushOptions = options;
  flushOptions.schedule = "1f1b";
  flushOptions.stages = p;
  refineCuts(flush, c, heaviest, flushOptions);
  double mine = timeCuts(cuts, c, spec).makespan;
  spec.kind = "1f1b";
  spec.virtualStages = 1;
  double theirs = timeCuts(flush, c, spec).makespan;
  if (mine > theirs * (1 + 1e-9))
    func.emitWarning()
        << "the interleaved schedule's step takes "
        << llvm::formatv("{0:F1}%", 100 * (mine / theirs - 1)).str()
        << " longer than 1F1B's would on " << p
        << " stages (simulated): its heaviest op, which no cut splits, "
           "weighs "
        << llvm::formatv("{0:F1}", heaviest / (prefix.back() / stages)).str()
        << " mean chunks, and the rank holding it holds the schedule "
           "up; --schedule 1f1b, or fewer virtual stages, is faster here";
}

namespace {
/// What the phases of one step's stage assignment share: the step, the
/// phase of each of its ops and the stage of each op placed so far.
struct StageAssignment {
  StageAssignment(func::FuncOp func, const StageOptions &options)
      : func(func), options(options), ctx(func.getContext()),
        body(func.getBody().front()), phases(classifyPhases(func)),
        stages(options.stages) {}

  /// The 64-bit integer attribute `v`.
  IntegerAttr i64(int64_t v) const {
    return IntegerAttr::get(IntegerType::get(ctx, 64), v);
  }
  /// The step's return: its outputs, gradients and updates.
  func::ReturnOp getReturn() const {
    return cast<func::ReturnOp>(body.getTerminator());
  }

  func::FuncOp func;
  const StageOptions &options;
  MLIRContext *ctx;
  Block &body;
  StepPhases phases;
  int64_t stages;
  /// The stage of each forward and backward op that runs on one.
  llvm::DenseMap<Operation *, int64_t> stageOf;
};
} // namespace

/// The cuts --pp-split names (`split`, comma-separated ONNX nodes): each
/// stage but the first starts after the last forward op of its node.
static FailureOr<SmallVector<size_t>>
cutAfterNodes(func::FuncOp func, ArrayRef<Operation *> forward, StringRef split,
              int64_t stages) {
  SmallVector<size_t> cuts;
  SmallVector<StringRef> names;
  split.split(names, ',', -1, false);
  if (int64_t(names.size()) != stages - 1)
    return func.emitError("--pp-split names ")
           << names.size() << " node(s); " << stages << " stages need "
           << stages - 1;
  for (StringRef name : names) {
    name = name.trim();
    size_t after = 0;
    bool found = false;
    for (auto [i, op] : llvm::enumerate(forward))
      if (getNodeName(op->getLoc()) == name) {
        after = i + 1;
        found = true;
      }
    if (!found)
      return func.emitError("--pp-split: no forward node named '")
             << name << "'";
    if ((!cuts.empty() && after <= cuts.back()) || after >= forward.size())
      return func.emitError("--pp-split: the cut after '")
             << name << "' leaves a stage without ops; name the nodes in "
             << "program order";
    cuts.push_back(after);
  }
  return cuts;
}

/// The cuts that balance the stages' times (`times`, each stage also
/// paying for receiving what crosses its start), refined on the
/// schedule's simulated step; warns where 1F1B would beat interleaving.
static SmallVector<size_t> balanceCuts(const StageAssignment &sa,
                                       const ForwardOrder &order,
                                       const StepTimes &times,
                                       double heaviest) {
  const StageOptions &options = sa.options;
  ArrayRef<Operation *> forward = order.ops;
  SmallVector<double> prefix{0};
  CutCosts c;
  for (size_t i = 0; i < forward.size(); ++i) {
    prefix.push_back(prefix.back() + times.total(i));
    c.forward.push_back(c.forward.back() + times.forward[i]);
    c.backward.push_back(c.backward.back() + times.backward[i]);
    c.deferred.push_back(c.deferred.back() + times.deferred[i]);
  }
  // What crossing each cut costs: receiving the values made before it
  // and used after it.
  c.crossing = getCrossingBytes(sa.func, sa.phases, order, /*arguments=*/false);
  for (double &bytes : c.crossing)
    bytes = options.cost.transferTime(int64_t(bytes));
  SmallVector<size_t> cuts = balance(prefix, c.crossing, sa.stages);
  refineCuts(cuts, c, heaviest, options);
  warnIfFlushIsFaster(sa.func, cuts, prefix, c, heaviest, options);
  return cuts;
}

/// Where the forward is cut into stages: where the other steps hold what
/// it reads (StageOptions::holders), after the nodes --pp-split names, or
/// where the stages' times balance.
static FailureOr<SmallVector<size_t>> chooseCuts(const StageAssignment &sa,
                                                 const ForwardOrder &order,
                                                 const StepTimes &times,
                                                 double heaviest) {
  const StageOptions &options = sa.options;
  if (options.holders)
    return followHolders(sa.func, sa.phases, order.ops, *options.holders,
                         sa.stages);
  if (!options.split.empty())
    return cutAfterNodes(sa.func, order.ops, options.split, sa.stages);
  return balanceCuts(sa, order, times, heaviest);
}

/// Places the forward ops on the stages `cuts` make of `forward`, and the
/// backward ops after them.
static void placeOps(StageAssignment &sa, ArrayRef<Operation *> forward,
                     ArrayRef<size_t> cuts) {
  const StepPhases &phases = sa.phases;
  llvm::DenseMap<Operation *, int64_t> &stageOf = sa.stageOf;
  // Forward stages, and where each forward value is available: its stage
  // and those of its forward users.
  for (auto [i, op] : llvm::enumerate(forward))
    stageOf[op] = llvm::upper_bound(cuts, i) - cuts.begin();
  auto forwardUsers = [&](Value v) {
    SmallVector<int64_t> at;
    if (Operation *def = v.getDefiningOp())
      at.push_back(stageOf.lookup(def));
    for (Operation *user : v.getUsers())
      if (phases.of(user) == Phase::Forward && stageOf.count(user))
        at.push_back(stageOf[user]);
    return at;
  };

  // The stages whose forward reads each parameter (through free ops).
  llvm::DenseMap<Value, SmallVector<int64_t>> paramStages;
  for (Operation *op : forward)
    for (Value v : op->getOperands())
      if (phases.isFree(v))
        forEachParameter(phases, v, [&](BlockArgument p) {
          if (!llvm::is_contained(paramStages[p], stageOf[op]))
            paramStages[p].push_back(stageOf[op]);
        });

  // Backward: no later than the stages of the backward values it reads,
  // and as late as the forward values and parameters it reads allow (the
  // stage of the forward op it differentiates, in practice).
  for (Operation &op : sa.body.without_terminator()) {
    if (phases.of(&op) != Phase::Backward || phases.isFree(&op))
      continue;
    int64_t hi = sa.stages - 1;
    SmallVector<SmallVector<int64_t>> available;
    for (Value v : op.getOperands()) {
      if (phases.isFree(v)) {
        forEachParameter(phases, v, [&](BlockArgument p) {
          if (auto it = paramStages.find(p); it != paramStages.end())
            available.push_back(it->second);
        });
        continue;
      }
      if (isa<BlockArgument>(v))
        continue;
      Operation *def = v.getDefiningOp();
      if (phases.of(def) == Phase::Backward)
        hi = std::min(hi, stageOf.lookup(def));
      else
        available.push_back(forwardUsers(v));
    }
    stageOf[&op] = latestAvailable<int64_t>(available, hi);
  }

  // A view of backward values runs where its readers do, not where its
  // operand is made: across a cut, the gradient of a linear layer's output
  // and its rows flattened for the weight's gradient would otherwise both
  // be sent, where the one is the other; and a transpose sent is a copy
  // that its readers, products, would read in place (the logits' gradient
  // of an LM head's piece whose weight gradient an earlier stage
  // computes). Not a view that reads part of its operand (a slice), which
  // would send more, nor one that is a copy where it runs (the transposed
  // weight gradient of a tied head, which the embedding's stage adds).
  // Readers first, so that a chain of views moves as one.
  auto movesToReaders = [](Operation &op) {
    if (isa<ViewLikeOpInterface>(op))
      return true;
    if (!isa<graph::StridedViewOpInterface>(op) || op.getNumResults() != 1 ||
        op.getNumOperands() != 1 || !GemmOperands::isReadInPlaceAlone(&op))
      return false;
    auto in = dyn_cast<RankedTensorType>(op.getOperand(0).getType());
    auto out = dyn_cast<RankedTensorType>(op.getResult(0).getType());
    return in && out && in.hasStaticShape() && out.hasStaticShape() &&
           out.getNumElements() >= in.getNumElements();
  };
  for (Operation &op : llvm::reverse(sa.body.without_terminator())) {
    if (!movesToReaders(op) || phases.of(&op) != Phase::Backward ||
        !stageOf.count(&op))
      continue;
    bool ofBackward = llvm::all_of(op.getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && phases.of(def) == Phase::Backward && stageOf.count(def);
    });
    std::optional<int64_t> latest;
    for (Operation *user : op.getUsers()) {
      auto it = stageOf.find(user);
      if (it == stageOf.end() || phases.of(user) != Phase::Backward) {
        ofBackward = false;
        break;
      }
      latest = std::max(latest.value_or(it->second), it->second);
    }
    if (ofBackward && latest && *latest < stageOf[&op])
      stageOf[&op] = *latest;
  }
}

/// Replaces the gradient `g`, where different stages compute its parts, by
/// a sum per stage of that stage's parts, the stages' sums added by
/// `dist.grad_sum` adds.
static void splitGradientSum(StageAssignment &sa, Value g) {
  llvm::DenseMap<Operation *, int64_t> &stageOf = sa.stageOf;
  StepPhases &phases = sa.phases;
  auto stageOfValue = [&](Value v) -> int64_t {
    Operation *def = v.getDefiningOp();
    return def && stageOf.count(def) ? stageOf[def] : -1;
  };
  SmallVector<Operation *> views, sums;
  SmallVector<SumPart> parts;
  collectSumParts(
      g, true, [&](Operation *op) { return stageOf.count(op) > 0; }, views,
      parts, sums);
  std::map<int64_t, SmallVector<const SumPart *>> byStage;
  for (const SumPart &part : parts) {
    int64_t stage = stageOfValue(part.value);
    if (stage < 0)
      return;
    byStage[stage].push_back(&part);
  }
  if (byStage.size() < 2)
    return;
  Operation *root = g.getDefiningOp();
  OpBuilder b(root);
  DictionaryAttr attrs = root->getDiscardableAttrDictionary();
  auto add = [&](Value lhs, Value rhs) {
    auto sum = graph::AddOp::create(b, root->getLoc(), lhs, rhs);
    sum->setDiscardableAttrs(attrs);
    phases.phase[sum] = Phase::Backward;
    return sum;
  };
  Value total;
  for (auto &[stage, stageParts] : byStage) {
    // Parts under the same views are summed, then viewed, once.
    SmallVector<std::pair<ArrayRef<Operation *>, Value>> groups;
    for (const SumPart *part : stageParts) {
      auto *it = llvm::find_if(groups, [&](auto &group) {
        return group.first == ArrayRef<Operation *>(part->views);
      });
      if (it == groups.end()) {
        groups.push_back({part->views, part->value});
        continue;
      }
      auto sum = add(it->second, part->value);
      stageOf[sum] = stage;
      it->second = sum;
    }
    Value stageSum;
    for (auto &[groupViews, value] : groups) {
      for (Operation *view : llvm::reverse(groupViews)) {
        Operation *copy = b.clone(*view);
        copy->setOperand(0, value);
        stageOf[copy] = stage;
        phases.phase[copy] = Phase::Backward;
        value = copy->getResult(0);
      }
      if (stageSum) {
        auto sum = add(stageSum, value);
        stageOf[sum] = stage;
        value = sum;
      }
      stageSum = value;
    }
    if (total) {
      auto sum = add(total, stageSum);
      sum->setAttr(kGradSumAttr, UnitAttr::get(sa.ctx));
      stageSum = sum;
    }
    total = stageSum;
  }
  g.replaceAllUsesWith(total);
  for (Operation *op : sums) {
    stageOf.erase(op);
    phases.phase.erase(op);
    op->erase();
  }
}

/// A gradient summed from parts that different stages compute (a tied
/// embedding and LM head, an LM head computed in pieces of the sequence)
/// is not summed per microbatch: each stage sums its own parts and
/// accumulates that over the microbatches, and the stages' sums are
/// added once after the flush (`dist.grad_sum`). The parts are the
/// leaves of a tree of adds, through transposes and reshapes of sums
/// (a tied head's gradient is the transpose of its pieces' sum): each
/// stage applies them to its own sum.
static void splitGradientSums(StageAssignment &sa) {
  for (Value g : getSplittableGradients(sa.func, sa.phases))
    splitGradientSum(sa, g);
}

/// Marks the weight gradient (W, which zero-bubble schedules run apart
/// from the input gradient B): backward ops whose results no other
/// stage's backward needs, directly or through the stage's own input
/// gradient.
static void markWeightGradient(const StageAssignment &sa) {
  const StepPhases &phases = sa.phases;
  const llvm::DenseMap<Operation *, int64_t> &stageOf = sa.stageOf;
  SmallVector<Operation *> backward;
  for (Operation &op : sa.body.without_terminator())
    if (stageOf.count(&op) && phases.of(&op) == Phase::Backward)
      backward.push_back(&op);
  llvm::DenseSet<Operation *> inputGradient =
      findInputGradient(backward, [&](Operation *op) -> std::optional<int64_t> {
        auto it = stageOf.find(op);
        if (it == stageOf.end() || phases.of(op) != Phase::Backward)
          return std::nullopt;
        return it->second;
      });
  for (Operation *op : backward)
    if (!inputGradient.contains(op))
      op->setAttr(kWeightGradAttr, UnitAttr::get(sa.ctx));
}

/// Whether result `k` of `func` is a parameter's gradient.
static auto isGradientResult(func::FuncOp func) {
  return [func](unsigned k) {
    return bool(graph::getStateIndex(func, k, graph::kGradAttr));
  };
}

/// The time of `product` deferred to once a step: one product over every
/// microbatch's positions, its operands stacked, its result written once.
static double deferredTime(Operation *product, int64_t microbatches,
                           const CostModel &cost) {
  auto c = cast<graph::CostOpInterface>(product);
  int64_t operands = getTensorBytes(product->getOperand(0).getType()) +
                     getTensorBytes(product->getOperand(1).getType());
  return cost.time(product->getName().getStringRef(),
                   double(microbatches) * double(c.getFlops()),
                   double(c.getBytesAccessed() + (microbatches - 1) * operands),
                   c.runsOnMatrixUnits());
}

/// The weight-gradient products that the lowering of the step's schedule
/// defers to one product a step over every microbatch, with their stages.
/// The backward that the lowering defers a product of reads an operand
/// made on another stage as a buffer of its own (received, row-major): the
/// product's views of it must then be reshapes, and read it as B (K its
/// rows), not A.
static SmallVector<std::pair<DeferredProduct, int64_t>>
getStageDeferredProducts(const StageAssignment &sa) {
  SmallVector<std::pair<DeferredProduct, int64_t>> found;
  func::FuncOp func = sa.func;
  if (sa.options.schedule.empty() || !defersProducts(sa.options.schedule))
    return found;
  for (const DeferredProduct &d :
       getDeferredProducts(func, sa.options.microbatches,
                           isGradientResult(func), /*inParts=*/true)) {
    auto at = sa.stageOf.find(d.product);
    if (at == sa.stageOf.end())
      continue;
    bool deferred = true;
    for (auto [i, operand] : llvm::enumerate(d.product->getOperands())) {
      bool reshapes = true;
      for (Operation *def = operand.getDefiningOp();
           def && isa<ViewLikeOpInterface, graph::StridedViewOpInterface>(def);
           def = def->getOperand(0).getDefiningOp()) {
        auto it = sa.stageOf.find(def);
        if (it != sa.stageOf.end() && it->second != at->second) {
          deferred &= i == 1 && reshapes;
          break;
        }
        reshapes &= isa<ViewLikeOpInterface>(def);
      }
    }
    if (deferred)
      found.push_back({d, at->second});
  }
  return found;
}

/// What the schedule's timeline and memory need per stage: the time of
/// its forward, input gradient and weight gradient, and the bytes one
/// microbatch keeps from its forward until its backward. Sets both on the
/// step and returns the times (three a stage).
static SmallVector<double> setStageCosts(const StageAssignment &sa) {
  const StageOptions &options = sa.options;
  const llvm::DenseMap<Operation *, int64_t> &stageOf = sa.stageOf;
  func::FuncOp func = sa.func;
  SmallVector<double> costs(3 * sa.stages, 0);
  // In program order: sums of doubles in a map's order would differ from
  // run to run.
  for (Operation &opRef : sa.body) {
    Operation *op = &opRef;
    auto at = stageOf.find(op);
    if (at == stageOf.end())
      continue;
    // A data-parallel gradient sum runs once per step, after the flush.
    if (isDataParallelReduction(op))
      continue;
    Phase phase = sa.phases.of(op);
    int column = phase == Phase::Forward        ? 0
                 : op->hasAttr(kWeightGradAttr) ? 2
                                                : 1;
    costs[3 * at->second + column] += options.cost.time(op);
  }
  // Each microbatch's gradients are added to those of the earlier ones.
  for (auto [k, v] : llvm::enumerate(sa.getReturn().getOperands())) {
    if (!graph::getStateIndex(func, k, graph::kGradAttr))
      continue;
    if (auto at = stageOf.find(v.getDefiningOp()); at != stageOf.end())
      costs[3 * at->second + 2] +=
          accumulationTime(v, options.microbatches, options.cost);
  }
  // The products the lowering defers run once a step, over every
  // microbatch's rows, after the rank's last action: out of their
  // backward's time, into the stage's deferred time.
  SmallVector<double> deferred(sa.stages, 0);
  bool defers = false;
  for (const auto &[d, stage] : getStageDeferredProducts(sa)) {
    Operation *op = d.product;
    int column = op->hasAttr(kWeightGradAttr) ? 2 : 1;
    double &inBackward = costs[3 * stage + column];
    inBackward = std::max(0.0, inBackward - options.cost.time(op));
    deferred[stage] += deferredTime(op, options.microbatches, options.cost);
    defers = true;
  }
  if (defers)
    func->setAttr(kDeferredCostsAttr, DenseF64ArrayAttr::get(sa.ctx, deferred));
  else
    func->removeAttr(kDeferredCostsAttr);
  SmallVector<int64_t> stash = getStashBytes(
      func, sa.phases, sa.stages, [&](Operation *op) -> std::optional<int64_t> {
        auto it = stageOf.find(op);
        return it == stageOf.end() ? std::nullopt
                                   : std::optional<int64_t>(it->second);
      });
  func->setAttr(kStageCostsAttr, DenseF64ArrayAttr::get(sa.ctx, costs));
  func->setAttr(kStashBytesAttr, DenseI64ArrayAttr::get(sa.ctx, stash));
  return costs;
}

/// What each stage sends per microbatch: activations to the next stage
/// (relayed by the stages between when a value skips some) and input
/// gradients to the previous, each at the latency and bandwidth of the
/// link between the two pipeline ranks' devices. Sets the times and the
/// bytes on the step.
static void setTransfers(const StageAssignment &sa) {
  const StageOptions &options = sa.options;
  const StepPhases &phases = sa.phases;
  const llvm::DenseMap<Operation *, int64_t> &stageOf = sa.stageOf;
  int64_t stages = sa.stages;
  SmallVector<int64_t> actBytes(stages, 0), gradBytes(stages, 0);
  for (auto &[op, stage] : stageOf) {
    bool isForward = phases.of(op) == Phase::Forward;
    for (Value r : op->getResults()) {
      int64_t bytes = getTensorBytes(r.getType()), reach = stage;
      for (Operation *user : r.getUsers()) {
        auto it = stageOf.find(user);
        if (it == stageOf.end())
          continue;
        if (isForward && phases.of(user) == Phase::Forward)
          reach = std::max(reach, it->second);
        else if (!isForward)
          reach = std::min(reach, it->second);
      }
      for (int64_t s = stage; s < reach; ++s)
        actBytes[s] += bytes;
      for (int64_t s = stage; s > reach; --s)
        gradBytes[s] += bytes;
    }
  }
  int64_t pipelineRanks = std::max<int64_t>(1, options.ranks);
  auto linkTime = [&](int64_t from, int64_t to, int64_t bytes) {
    int64_t per = std::max<int64_t>(1, options.ranksPerStage);
    return options.cost.transferTime(
        bytes, options.cost.betweenNodes((from % pipelineRanks) * per,
                                         (to % pipelineRanks) * per));
  };
  SmallVector<double> transfers(2 * stages, 0);
  SmallVector<int64_t> transferBytes(2 * stages, 0);
  for (int64_t s = 0; s < stages; ++s) {
    if (s + 1 < stages && (s + 1) % pipelineRanks != s % pipelineRanks) {
      transfers[2 * s] = linkTime(s, s + 1, actBytes[s]);
      transferBytes[2 * s] = actBytes[s];
    }
    if (s > 0 && (s - 1) % pipelineRanks != s % pipelineRanks) {
      transfers[2 * s + 1] = linkTime(s, s - 1, gradBytes[s]);
      transferBytes[2 * s + 1] = gradBytes[s];
    }
  }
  sa.func->setAttr(kTransferCostsAttr,
                   DenseF64ArrayAttr::get(sa.ctx, transfers));
  sa.func->setAttr(kTransferBytesAttr,
                   DenseI64ArrayAttr::get(sa.ctx, transferBytes));
}

/// A stage may be small, but stages that do next to nothing mean more
/// stages than the model fills: their ranks mostly wait. Said once, from
/// the stages' `costs` (three a stage) and a microbatch's share of their
/// deferred products.
static void warnIfStagesIdle(func::FuncOp func, ArrayRef<double> costs,
                             int64_t stages, int64_t microbatches) {
  if (stages <= 1)
    return;
  // A microbatch's share of the products deferred to once a step counts.
  auto deferred = func->getAttrOfType<DenseF64ArrayAttr>(kDeferredCostsAttr);
  SmallVector<double> work(stages, 0);
  double total = 0;
  for (int64_t s = 0; s < stages; ++s) {
    work[s] = costs[3 * s] + costs[3 * s + 1] + costs[3 * s + 2];
    if (deferred && int64_t(deferred.size()) == stages)
      work[s] += deferred[s] / double(std::max<int64_t>(1, microbatches));
    total += work[s];
  }
  double mean = total / stages;
  SmallVector<int64_t> idle;
  for (int64_t s = 0; s < stages; ++s)
    if (work[s] < 0.05 * mean)
      idle.push_back(s);
  if (!idle.empty())
    func.emitWarning()
        << idle.size() << " of the " << stages
        << " pipeline stages do less than 5% of a mean stage's work "
        << "(stage " << idle.front() << ": "
        << llvm::formatv("{0:F1}%", 100 * work[idle.front()] / mean).str()
        << "): the model has too little to fill " << stages
        << " stages, and their ranks mostly wait; fewer stages would "
           "waste less";
}

/// Optimizer: on every stage that holds the parameter it updates. A
/// state's holders are the stages whose forward or backward reads it; a
/// state of a parameter (a previous version of its weights, which the
/// forward reads in its place) makes them the parameter's.
static void placeOptimizer(const StageAssignment &sa) {
  func::FuncOp func = sa.func;
  const StepPhases &phases = sa.phases;
  MLIRContext *ctx = sa.ctx;
  SmallVector<llvm::SmallDenseSet<int64_t, 2>> holders(
      sa.body.getNumArguments());
  for (auto &[op, stage] : sa.stageOf)
    for (Value v : op->getOperands())
      if (phases.isFree(v))
        forEachParameter(phases, v, [&, stage = stage](BlockArgument p) {
          unsigned held = p.getArgNumber();
          if (auto of = func.getArgAttrOfType<IntegerAttr>(
                  held, graph::kStateOfAttr))
            held = unsigned(of.getInt());
          holders[held].insert(stage);
        });
  for (auto [i, at] : llvm::enumerate(holders))
    if (!at.empty()) {
      SmallVector<int64_t> sorted(at.begin(), at.end());
      llvm::sort(sorted);
      func.setArgAttr(i, kStagesAttr, DenseI64ArrayAttr::get(ctx, sorted));
    }
  // Each update is made on the stages that hold its state.
  llvm::DenseMap<Value, llvm::SmallDenseSet<int64_t, 2>> wanted;
  for (auto [k, v] : llvm::enumerate(sa.getReturn().getOperands()))
    if (std::optional<unsigned> state =
            graph::getStateIndex(func, k, graph::kUpdateAttr))
      for (int64_t s : stateStages(func, *state, sa.stages))
        wanted[v].insert(s);
  for (Operation &op : llvm::reverse(sa.body.without_terminator())) {
    if (phases.of(&op) != Phase::Optimizer)
      continue;
    llvm::SmallDenseSet<int64_t, 2> at;
    for (Value r : op.getResults())
      if (auto it = wanted.find(r); it != wanted.end())
        at.insert(it->second.begin(), it->second.end());
    for (Value v : op.getOperands())
      wanted[v].insert(at.begin(), at.end());
    if (phases.isFree(&op))
      continue;
    SmallVector<int64_t> sorted(at.begin(), at.end());
    llvm::sort(sorted);
    op.setAttr(kStagesAttr, DenseI64ArrayAttr::get(ctx, sorted));
  }
}

/// Gradient clipping's squared norm: each part, the square of one
/// gradient, is made once, on the first stage holding its parameter (a
/// tied embedding and head count once), not on every stage that reads the
/// norm; the outlining sums each rank's parts and all-reduces them over
/// the pipeline.
static LogicalResult placeGradientNormParts(const StageAssignment &sa) {
  func::FuncOp func = sa.func;
  const StepPhases &phases = sa.phases;
  llvm::DenseMap<Value, unsigned> gradientOf;
  for (auto [k, v] : llvm::enumerate(sa.getReturn().getOperands()))
    if (std::optional<unsigned> param =
            graph::getStateIndex(func, k, graph::kGradAttr))
      gradientOf[v] = *param;
  for (Operation &root : sa.body.without_terminator()) {
    if (!root.hasAttr(graph::kGradientNormAttr))
      continue;
    SmallVector<Operation *> adds;
    SmallVector<Value> parts;
    getGradientNormSum(&root, adds, parts);
    for (Value part : parts) {
      // The part's own ops, back to the gradient they read.
      SmallVector<Operation *> chain;
      std::optional<unsigned> param;
      SmallVector<Value> work{part};
      llvm::DenseSet<Operation *> seen;
      while (!work.empty()) {
        Value v = work.pop_back_val();
        if (auto it = gradientOf.find(v); it != gradientOf.end())
          param = it->second;
        Operation *def = v.getDefiningOp();
        if (!def || phases.isFree(def) || phases.of(def) != Phase::Optimizer ||
            !seen.insert(def).second)
          continue;
        chain.push_back(def);
        llvm::append_range(work, def->getOperands());
      }
      if (!param)
        return root.emitError("gradient clipping: a part of the gradients' "
                              "norm reads no gradient");
      auto at = DenseI64ArrayAttr::get(
          sa.ctx, stateStages(func, *param, sa.stages).front());
      for (Operation *op : chain)
        op->setAttr(kStagesAttr, at);
    }
  }
  return success();
}

SmallVector<SmallVector<Operation *>>
pcc::getOncePerStepCopies(func::FuncOp step, int64_t ranks) {
  StepPhases phases = classifyPhases(step);
  SmallVector<SmallVector<Operation *>> copies(std::max<int64_t>(1, ranks));
  llvm::DenseSet<std::pair<Operation *, int64_t>> seen;
  for (Operation &op : step.getBody().front().without_terminator())
    if (auto stage = op.getAttrOfType<IntegerAttr>(kStageAttr))
      for (int64_t rank : getStageRanks(step, stage.getInt(), copies.size()))
        for (Value v : op.getOperands())
          walkFreeValues(phases, v, [&](Value u) {
            Operation *def = u.getDefiningOp();
            if (!def || !phases.isFree(u) || !seen.insert({def, rank}).second)
              return false;
            if (!isMadeOncePerStep(u))
              return true;
            copies[rank].push_back(def);
            return false;
          });
  return copies;
}

/// What each rank holds throughout: its state (a moment where its
/// parameter is, state of no parameter everywhere), its weights, and the
/// narrowed copies of them that the step makes once (isMadeOncePerStep).
/// Sets the bytes on the step.
static void setBaseBytes(const StageAssignment &sa) {
  func::FuncOp func = sa.func;
  const StepPhases &phases = sa.phases;
  int64_t ranks = std::max<int64_t>(1, sa.options.ranks);
  SmallVector<int64_t> base(ranks, 0);
  for (BlockArgument arg : sa.body.getArguments()) {
    if (!func.getArgAttr(arg.getArgNumber(), graph::kStateAttr))
      continue;
    for (int64_t r = 0; r < ranks; ++r)
      if (holdsState(func, arg.getArgNumber(), r, ranks))
        base[r] += getTensorBytes(arg.getType());
  }
  // A copy counts beside the weight it is made from.
  llvm::DenseSet<std::pair<Operation *, int64_t>> weightOn;
  for (auto &[op, stage] : sa.stageOf)
    for (int64_t rank : getStageRanks(func, stage, ranks))
      for (Value v : op->getOperands())
        walkFreeValues(phases, v, [&](Value u) {
          Operation *def = u.getDefiningOp();
          if (!def || !phases.isFree(u))
            return false;
          bool weight = isa<graph::WeightOp>(def);
          if ((weight || isMadeOncePerStep(u)) &&
              weightOn.insert({def, rank}).second)
            base[rank] += getTensorBytes(u.getType());
          return !weight;
        });
  // The operands of the weight-gradient products the lowering defers to
  // one product a step, stacked over the microbatches, held until that
  // product runs (counted as held throughout).
  for (const auto &[d, stage] : getStageDeferredProducts(sa))
    for (int64_t rank : getStageRanks(func, stage, ranks))
      base[rank] += d.bytes;
  func->setAttr(kBaseBytesAttr, DenseI64ArrayAttr::get(sa.ctx, base));
}

LogicalResult pcc::assignStages(func::FuncOp func,
                                const StageOptions &options) {
  StageAssignment sa(func, options);
  int64_t stages = sa.stages;
  func->setAttr(kNumStagesAttr, sa.i64(stages));
  // Chimera's two pipelines: every stage on two ranks (getStageRanks).
  if (pipeline::getPipelines({options.schedule}) == 2)
    func->setAttr(dist::kPipelinesAttr, sa.i64(2));

  // The forward's work, in program order.
  ForwardOrder order = getForwardOrder(func, sa.phases);
  ArrayRef<Operation *> forward = order.ops;
  if (int64_t(forward.size()) < stages)
    return func.emitError("the forward has ")
           << forward.size() << " ops, too few for " << stages
           << " pipeline stages";

  // What each forward op costs with its backward: no stage can be faster
  // than the heaviest (an LM head over a large vocabulary), which plans
  // report beside the stages.
  llvm::DenseMap<Operation *, size_t> placed;
  StepTimes times =
      stepTimes(sa.body, sa.phases, forward, order.position, options.cost,
                options.microbatches, &placed);
  // The products the schedule's lowering defers run once a step, after
  // their rank's last action, not in each microbatch's backward. (Where
  // the cuts leave one's operand made on another stage, read as A, the
  // lowering keeps it in the backward: setStageCosts knows.)
  if (!options.schedule.empty() && defersProducts(options.schedule))
    for (const DeferredProduct &d :
         getDeferredProducts(func, options.microbatches, isGradientResult(func),
                             /*inParts=*/true))
      if (auto it = placed.find(d.product); it != placed.end()) {
        double &backward = times.backward[it->second];
        backward = std::max(0.0, backward - options.cost.time(d.product));
        times.deferred[it->second] +=
            deferredTime(d.product, options.microbatches, options.cost);
      }
  double heaviest = 0;
  for (size_t i = 0; i < forward.size(); ++i)
    heaviest = std::max(heaviest, times.total(i));
  func->setAttr(kHeaviestOpTimeAttr,
                FloatAttr::get(Float64Type::get(sa.ctx), heaviest));
  FailureOr<SmallVector<size_t>> cuts = chooseCuts(sa, order, times, heaviest);
  if (failed(cuts))
    return failure();

  placeOps(sa, forward, *cuts);
  splitGradientSums(sa);
  for (auto &[op, stage] : sa.stageOf)
    op->setAttr(kStageAttr, sa.i64(stage));
  markWeightGradient(sa);

  SmallVector<double> costs = setStageCosts(sa);
  setTransfers(sa);
  warnIfStagesIdle(func, costs, stages, options.microbatches);

  placeOptimizer(sa);
  if (failed(placeGradientNormParts(sa)))
    return failure();
  setBaseBytes(sa);
  return success();
}

namespace {
struct PipelineStagesPass : pcc::impl::PipelineStagesBase<PipelineStagesPass> {
  using PipelineStagesBase::PipelineStagesBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    StageOptions options;
    options.stages = pp * virtualStages;
    options.ranks = pp;
    options.split = split;
    options.schedule = schedule;
    options.microbatches = microbatches;
    llvm::Expected<CostModel> cost =
        CostModel::get(target, costTable, machine, dtype);
    if (!cost) {
      module.emitError(llvm::toString(cost.takeError()));
      return signalPassFailure();
    }
    options.cost = std::move(*cost);
    // The mesh gains its pipeline axis, outside tensor parallelism's: a
    // stage's tensor-parallel ranks are neighbours.
    if (pp == 1) {
      for (auto func : module.getOps<func::FuncOp>())
        if (failed(assignStages(func, options)))
          return signalPassFailure();
      return;
    }
    FailureOr<dist::MeshOp> mesh =
        dist::getOrAddMeshAxis(module, dist::kPipelineAxis, pp);
    if (failed(mesh))
      return signalPassFailure();
    // Each pipeline rank is a block of the mesh's other axes: its devices
    // are numbered consecutively, which decides what crosses nodes.
    options.ranksPerStage = 1;
    bool minor = false;
    for (auto [name, size] :
         llvm::zip(mesh->getAxisNames(), mesh->getShape())) {
      if (minor)
        options.ranksPerStage *= size;
      minor |= cast<StringAttr>(name).getValue() == dist::kPipelineAxis;
    }
    // Several steps (a generation build's prefill and decode) share the
    // weights and state: the first is cut by its costs, the others follow
    // where it holds them.
    std::optional<llvm::StringMap<SmallVector<int64_t>>> holders;
    for (auto func : module.getOps<func::FuncOp>()) {
      StageOptions step = options;
      if (holders)
        step.holders = &*holders;
      if (failed(assignStages(func, step)))
        return signalPassFailure();
      if (!holders)
        holders = getHolderStages(func);
    }
  }
};
} // namespace
