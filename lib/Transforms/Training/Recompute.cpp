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
// make again are recomputed: at least twice the largest value crossing a
// checkpoint (the residual stream, a shard of it under tensor parallelism), and
// made by no product with a parameter (so from kept values through
// element-wise work, softmax and products of two activations). In a
// transformer these are attention's scores and probabilities ([heads, seq,
// seq], the 5as^2b term of Korthikanti et al.) and the MLP's activation,
// while the products with weights are kept: Megatron's selective
// recomputation, found from sizes and dataflow.
//
// With `auto`, the values recomputed are chosen so that each rank's step
// fits `memory-budget` bytes at the least added work, as Checkmate's or
// torch.compile's partitioner choose, greedily: the step's memory is what
// the rank holds throughout (parameters, state) plus what its forward keeps
// for its backward, times the microbatches a pipeline schedule keeps in
// flight on that stage (1F1B's first stage keeps pp, its last one), so the
// choice differs from stage to stage; unpipelined, the most bytes alive at
// once. While a rank is over its budget, the next value recomputed on it is
// the one that frees the most bytes (its own, less those of its operands
// that would be kept for it instead) per flop of the ops made again. The
// pass runs once the mesh is laid out, so that sizes are a rank's shards,
// and after the stage partition, whose stash bytes and stage costs it
// updates; a block never spans two stages.
//
// The module gets `graph.recompute = {ops, flops, bytes}`: the ops cloned,
// the flops they add to a step, and the bytes of the forward values the
// backward no longer reads from the forward; with stages, `stages` has the
// same per stage, and with `auto`, `budget` the budget and `over` the
// ranks that do not fit it even so.
//
//===----------------------------------------------------------------------===//

#include "pcc/Analysis/BufferPlan.h"
#include "pcc/Analysis/CostModel.h"
#include "pcc/Analysis/StepPhases.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipeline/Schedule.h"

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
  Totals &operator+=(const Totals &other) {
    ops += other.ops;
    flops += other.flops;
    bytes += other.bytes;
    return *this;
  }
};

/// What the pass was asked for and what it found.
struct Request {
  enum class Mode { Selective, Full, Auto } mode = Mode::Full;
  int64_t budget = 0;
  /// With auto, without stages: the bytes the step's buffers plan as it
  /// stands (getPlannedBytes), which the caller has asked already.
  int64_t plannedBytes = 0;
  /// The schedule a pipelined step will run (its stash per stage).
  pipeline::ScheduleSpec schedule;
  const CostModel *cost = nullptr;
};

struct Outcome {
  Totals total;
  /// Per stage, when the step has stages.
  SmallVector<Totals> stages;
  /// With auto: the ranks whose predicted peak stays above the budget, and
  /// that peak.
  SmallVector<std::pair<int64_t, int64_t>> over;
};

std::optional<int64_t> stageOf(Operation *op) {
  auto at = op->getAttrOfType<IntegerAttr>(dist::kStageAttr);
  return at ? std::optional<int64_t>(at.getInt()) : std::nullopt;
}

/// Recomputes the blocks' activations in `func`'s backward.
LogicalResult recompute(func::FuncOp func, const Request &request,
                        Outcome &outcome) {
  Block &body = func.getBody().front();
  StepPhases phases = classifyPhases(func);
  auto activation = [&](Value v) {
    return !phases.isFree(v) && isa<RankedTensorType>(v.getType());
  };
  // A step cut into pipeline stages recomputes within each stage.
  auto numStages = func->getAttrOfType<IntegerAttr>(dist::kNumStagesAttr);
  int64_t stages = numStages ? numStages.getInt() : 0;
  auto stageKey = [&](Operation *op) -> int64_t {
    return stages ? stageOf(op).value_or(-1) : 0;
  };
  outcome.stages.assign(std::max<int64_t>(stages, 1), Totals());

  // The forward's ops in program order, and the bytes crossing each
  // position (the inputs from before the first).
  ForwardOrder order = getForwardOrder(func, phases);
  const llvm::DenseMap<Operation *, size_t> &position = order.position;
  size_t n = order.ops.size();
  if (n < 3)
    return success();
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
    return success();
  llvm::sort(minima);
  double typical = minima[minima.size() / 2];
  // segment[i]: the block of forward[i], counted from the checkpoints and
  // stage boundaries before it; blocks 1..last-1 lie between two
  // checkpoints.
  SmallVector<int64_t> segment(n);
  int64_t current = 0;
  bool previousWasCheckpoint = false;
  for (size_t k = 0; k < n; ++k) {
    bool checkpoint =
        k > 0 && crossing[k] >= 0.99 * typical && crossing[k] <= 1.01 * typical;
    bool newStage =
        k > 0 && stageKey(order.ops[k]) != stageKey(order.ops[k - 1]);
    if ((checkpoint && !previousWasCheckpoint) || newStage)
      ++current;
    previousWasCheckpoint = checkpoint;
    segment[k] = current;
  }
  int64_t lastSegment = current;
  if (lastSegment < 2)
    return success();
  // The largest single value crossing a checkpoint (the residual stream):
  // what selective compares sizes with, the same with or without the small
  // values that cross beside it.
  int64_t stream = 0;
  for (size_t k = 1; k < n && !stream; ++k) {
    if (crossing[k] < 0.99 * typical || crossing[k] > 1.01 * typical)
      continue;
    for (size_t j = 0; j < k; ++j)
      for (Value v : order.ops[j]->getResults())
        if (llvm::any_of(v.getUsers(), [&](Operation *user) {
              auto u = position.find(user);
              return u != position.end() && u->second >= k;
            }))
          stream = std::max(stream, getTensorBytes(v.getType()));
  }

  // A product with a parameter: an op that reads a free tensor of rank 2
  // or more (a weight, or what is made of weights alone) and does more
  // than a few flops per result element (a contraction, not a mask added).
  auto flopsOf = [](Operation *op) -> int64_t {
    auto cost = dyn_cast<graph::CostOpInterface>(op);
    return cost ? cost.getFlops() : 0;
  };
  // Whether `op` does more than a few flops per result element.
  auto contracts = [&](Operation *op) {
    int64_t elements = 0;
    for (Value r : op->getResults())
      if (auto type = dyn_cast<RankedTensorType>(r.getType()))
        elements += type.getNumElements();
    return flopsOf(op) > 16 * elements;
  };
  auto isProductWithParameter = [&](Operation *op) {
    return (!isa<graph::CostOpInterface>(op) || contracts(op)) &&
           llvm::any_of(op->getOperands(), [&](Value operand) {
             auto type = dyn_cast<RankedTensorType>(operand.getType());
             return phases.isFree(operand) && type && type.getRank() >= 2;
           });
  };

  // A value can be recomputed when an inner block makes it, no later
  // block of the forward reads it (those that cross a checkpoint are kept)
  // and the backward reads it on its own stage.
  auto eligible = [&](Value v) {
    Operation *def = v.getDefiningOp();
    auto it = def ? position.find(def) : position.end();
    if (it == position.end() || !activation(v))
      return false;
    int64_t s = segment[it->second];
    if (s == 0 || s == lastSegment)
      return false;
    for (Operation *user : v.getUsers()) {
      if (auto u = position.find(user); u != position.end()) {
        if (segment[u->second] != s)
          return false;
      } else if (phases.of(user) != Phase::Backward ||
                 stageKey(user) != stageKey(def)) {
        return false;
      }
    }
    return true;
  };

  // With auto: the values to recompute, chosen rank by rank.
  llvm::DenseSet<Value> chosen;
  if (request.mode == Request::Mode::Auto) {
    // What the forward keeps for the backward now.
    llvm::DenseSet<Value> kept;
    for (Operation &op : body.without_terminator())
      if (phases.of(&op) == Phase::Backward)
        for (Value v : op.getOperands())
          if (Operation *def = v.getDefiningOp();
              def && position.count(def) && activation(v))
            kept.insert(v);

    // Each rank's predicted peak, and how many microbatches' stash each
    // stage holds at once (1 unpipelined).
    int64_t ranks = stages ? request.schedule.ranks : 1;
    SmallVector<int64_t> peak(ranks, 0);
    // The ranks that run each stage: one, or two under Chimera's two
    // pipelines (the first of two microbatches on one, the second on the
    // other). Recomputing a stage's value frees bytes on each of them.
    int64_t pipelines = stages ? pipeline::getPipelines(request.schedule) : 1;
    SmallVector<SmallVector<int64_t, 2>> stageRanks(
        std::max<int64_t>(stages, 1));
    for (auto [stage, on] : llvm::enumerate(stageRanks))
      for (int64_t k = 0; k < pipelines; ++k)
        if (int64_t r =
                dist::getPipelineRank(int64_t(stage), k, ranks, pipelines);
            !llvm::is_contained(on, r))
          on.push_back(r);
    auto holders = [&](int64_t stage) -> ArrayRef<int64_t> {
      return stageRanks[stage];
    };
    // Per stage and rank, how many microbatches' stash of that stage the
    // rank holds at once (1 unpipelined).
    SmallVector<SmallVector<int64_t>> inFlight(std::max<int64_t>(stages, 1),
                                               SmallVector<int64_t>(ranks, 1));
    if (stages) {
      pipeline::ScheduleSpec spec = request.schedule;
      pipeline::fillSpecFromStep(func, spec);
      FailureOr<pipeline::ScheduleTable> table =
          pipeline::generateSchedule(spec, [&] { return func.emitError(); });
      if (failed(table))
        return failure();
      pipeline::ScheduleTiming timing =
          pipeline::getScheduleTiming(spec, *table);
      pipeline::ScheduleStats stats = pipeline::timeSchedule(*table, timing);
      for (int64_t r = 0; r < ranks; ++r)
        peak[r] = stats.ranks[r].peakBytes;
      // A stage's count: the schedule's peak with one byte stashed there.
      SmallVector<int64_t> unit(stages, 0);
      pipeline::ScheduleTiming counting = timing;
      counting.baseBytes = {};
      counting.transferBytes = {};
      for (int64_t s = 0; s < stages; ++s) {
        unit.assign(stages, 0);
        unit[s] = 1;
        counting.stashBytes = unit;
        pipeline::ScheduleStats counted =
            pipeline::timeSchedule(*table, counting);
        for (int64_t r : holders(s))
          inFlight[s][r] = std::max<int64_t>(1, counted.ranks[r].peakBytes);
      }
    } else {
      peak[0] = request.plannedBytes;
    }

    // What recomputing `def` takes along: `def` and the ops of the values it
    // needs that are neither kept nor chosen yet and could be recomputed,
    // back to kept values; with `cheapOnly`, only those cheap to make again
    // (a few flops per element: no contraction), a contraction's result
    // being kept for the clones instead.
    auto closure = [&](Operation *def, bool cheapOnly,
                       SmallVectorImpl<Operation *> &ops) {
      llvm::SmallPtrSet<Operation *, 8> seen{def};
      ops.assign({def});
      for (size_t i = 0; i < ops.size(); ++i)
        for (Value u : ops[i]->getOperands())
          if (Operation *d = u.getDefiningOp();
              d && !kept.contains(u) && !chosen.contains(u) && eligible(u) &&
              (!cheapOnly || !contracts(d)) && seen.insert(d).second)
            ops.push_back(d);
    };
    // Each rank's bytes above the budget; a choice made for one rank
    // frees bytes on every rank of its stage.
    SmallVector<int64_t> over = llvm::map_to_vector(
        peak, [&](int64_t bytes) { return bytes - request.budget; });
    for (int64_t r = 0; r < ranks; ++r) {
      SmallVector<Operation *> ops, bestOps;
      while (over[r] > 0) {
        // The forward op of this rank whose recomputation, with what it
        // takes along, frees the most bytes per flop.
        double bestRate = -1;
        int64_t bestStage = 0, bestUnit = 0;
        for (Operation *def : order.ops) {
          int64_t stage = stageKey(def);
          if (stage < 0 || !llvm::is_contained(holders(stage), r) ||
              llvm::none_of(def->getResults(), [&](Value result) {
                return kept.contains(result) && eligible(result);
              }))
            continue;
          for (bool cheapOnly : {true, false}) {
            closure(def, cheapOnly, ops);
            int64_t gain = 0, loss = 0, flops = 0;
            llvm::SmallPtrSet<Operation *, 8> inside(ops.begin(), ops.end());
            llvm::SmallPtrSet<Value, 8> counted;
            for (Operation *op : ops) {
              flops += flopsOf(op);
              for (Value result : op->getResults())
                if (kept.contains(result) && eligible(result))
                  gain += getTensorBytes(result.getType());
              // What stays behind for the clones: kept from now on.
              for (Value u : op->getOperands())
                if (Operation *d = u.getDefiningOp();
                    d && position.count(d) && activation(u) &&
                    !inside.contains(d) && !chosen.contains(u) &&
                    !kept.contains(u) && counted.insert(u).second)
                  loss += getTensorBytes(u.getType());
            }
            int64_t freed = (gain - loss) * inFlight[stage][r];
            if (freed <= 0)
              continue;
            double rate = double(freed) / double(std::max<int64_t>(flops, 1));
            if (rate > bestRate) {
              bestRate = rate;
              bestStage = stage;
              bestUnit = gain - loss;
              bestOps = ops;
            }
          }
        }
        if (bestOps.empty())
          break;
        llvm::SmallPtrSet<Operation *, 8> inside(bestOps.begin(),
                                                 bestOps.end());
        for (Operation *op : bestOps) {
          for (Value result : op->getResults())
            if (eligible(result) &&
                (kept.contains(result) ||
                 llvm::any_of(result.getUsers(), [&](Operation *user) {
                   return inside.contains(user);
                 }))) {
              chosen.insert(result);
              kept.erase(result);
            }
          for (Value u : op->getOperands())
            if (Operation *d = u.getDefiningOp();
                d && position.count(d) && activation(u) &&
                !inside.contains(d) && !chosen.contains(u))
              kept.insert(u);
        }
        bestOps.clear();
        for (int64_t on : holders(bestStage))
          over[on] -= bestUnit * inFlight[bestStage][on];
      }
      if (over[r] > 0)
        outcome.over.push_back({r, request.budget + over[r]});
    }
  }

  auto isChosen = [&](Value v) {
    switch (request.mode) {
    case Request::Mode::Full:
      return eligible(v);
    case Request::Mode::Selective:
      // The large values that are cheap to make again (at least twice the
      // stream that crosses a checkpoint, by no product with a parameter).
      return eligible(v) && getTensorBytes(v.getType()) >= 2 * stream &&
             !isProductWithParameter(v.getDefiningOp());
    case Request::Mode::Auto:
      return chosen.contains(v);
    }
    llvm_unreachable("unknown mode");
  };

  // Free values that a collective makes (a ZeRO 3 parameter gathered for
  // its reader) are gathered again for a clone in a step without stages, so
  // that the forward's gathered copy is not kept for the backward (a
  // pipeline's functions make their free values themselves).
  llvm::DenseMap<Operation *, bool> gathered;
  std::function<bool(Operation *)> madeByCollective = [&](Operation *op) {
    if (auto it = gathered.find(op); it != gathered.end())
      return it->second;
    bool result =
        op->getDialect() && op->getDialect()->getNamespace() == "dist";
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && phases.isFree(operand))
        result = result || madeByCollective(def);
    return gathered[op] = result;
  };

  // The backward's reads, in program order: each value to recompute is
  // cloned, with what it needs, before its first reader.
  IRMapping clones;
  llvm::DenseSet<Value> redirected;
  SmallVector<Operation *> made;
  std::function<Value(Value, OpBuilder &)> recomputed =
      [&](Value v, OpBuilder &b) -> Value {
    if (Value c = clones.lookupOrNull(v))
      return c;
    Operation *def = v.getDefiningOp();
    bool again = isChosen(v) ||
                 (!stages && def && phases.isFree(v) && madeByCollective(def));
    if (!again)
      return v;
    // Cloning an operand's op maps it to its clone in `clones`.
    for (Value operand : def->getOperands())
      recomputed(operand, b);
    Operation *copy = b.clone(*def, clones);
    copy->setAttr(graph::kBackwardAttr, b.getUnitAttr());
    made.push_back(copy);
    if (!phases.isFree(v)) {
      Totals &at = outcome.stages[std::max<int64_t>(stageKey(def), 0)];
      ++at.ops;
      at.flops += flopsOf(copy);
    }
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
      if (!isChosen(v))
        continue;
      operand.set(recomputed(v, b));
      if (redirected.insert(v).second)
        outcome.stages[std::max<int64_t>(stageKey(v.getDefiningOp()), 0)]
            .bytes += getTensorBytes(v.getType());
    }
  }
  for (const Totals &at : outcome.stages)
    outcome.total += at;

  // A pipelined step's stages now keep less and their backwards do more.
  if (stages && !made.empty()) {
    MLIRContext *ctx = func.getContext();
    StepPhases now = classifyPhases(func);
    func->setAttr(
        dist::kStashBytesAttr,
        DenseI64ArrayAttr::get(ctx, getStashBytes(func, now, stages, stageOf)));
    if (auto costs =
            func->getAttrOfType<DenseF64ArrayAttr>(dist::kStageCostsAttr);
        costs && int64_t(costs.size()) == 3 * stages && request.cost) {
      SmallVector<double> updated(costs.asArrayRef());
      for (Operation *copy : made)
        if (std::optional<int64_t> s = stageOf(copy); s && *s < stages)
          updated[3 * *s + 1] += request.cost->time(copy);
      func->setAttr(dist::kStageCostsAttr,
                    DenseF64ArrayAttr::get(ctx, updated));
    }
  }
  return success();
}

struct RecomputePass : pcc::impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == "none")
      return;
    Request request;
    if (mode == "full") {
      request.mode = Request::Mode::Full;
    } else if (mode == "selective") {
      request.mode = Request::Mode::Selective;
    } else if (mode == "auto") {
      request.mode = Request::Mode::Auto;
      if (memoryBudget <= 0) {
        module.emitError("--recompute auto chooses what to recompute so that "
                         "each rank fits a memory budget: it needs "
                         "--memory-budget");
        return signalPassFailure();
      }
      request.budget = memoryBudget;
    } else {
      module.emitError() << "--recompute takes none, selective, full or "
                            "auto, got '"
                         << mode << "'";
      return signalPassFailure();
    }
    request.schedule.kind =
        schedule.empty() ? std::string("1f1b") : std::string(schedule);
    request.schedule.microbatches = std::max<int64_t>(microbatches, 1);
    request.schedule.virtualStages = std::max<int64_t>(virtualStages, 1);
    auto mesh = module.lookupSymbol<dist::MeshOp>(dist::kMeshName);
    request.schedule.ranks =
        (mesh ? mesh.getAxisSize(dist::kPipelineAxis) : std::nullopt)
            .value_or(1);
    llvm::Expected<CostModel> cost =
        CostModel::get(target, costTable, machine, dtype);
    if (!cost) {
      module.emitError(llvm::toString(cost.takeError()));
      return signalPassFailure();
    }
    request.cost = &*cost;

    Outcome outcome;
    bool staged = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() ||
          llvm::none_of(llvm::seq(func.getNumResults()), [&](unsigned k) {
            return func.getResultAttr(k, graph::kGradAttr);
          }))
        continue;
      bool hasStages = func->hasAttr(dist::kNumStagesAttr);
      staged |= hasStages;
      bool rounds = request.mode == Request::Mode::Auto && !hasStages;
      Request asked = request;
      if (rounds)
        asked.plannedBytes = getPlannedBytes(func);
      Outcome made;
      if (failed(recompute(func, asked, made)))
        return signalPassFailure();
      // Without stages, auto frees what the step's buffer plan holds beyond
      // the budget, by its own count of what each value frees; while the
      // plan of the step it made is still over (a value freed can leave a
      // buffer that others share), it frees more, in up to three rounds,
      // as long as the last one lowered the plan (the clones' own buffers
      // can outweigh what they free).
      if (rounds) {
        for (int round = 0;; ++round) {
          int64_t planned = getPlannedBytes(func);
          made.over.clear();
          if (planned <= request.budget)
            break;
          made.over.push_back({0, planned});
          if (round == 3 || planned >= asked.plannedBytes)
            break;
          asked.plannedBytes = planned;
          Outcome more;
          if (failed(recompute(func, asked, more)))
            return signalPassFailure();
          if (more.total.ops == 0)
            break;
          made.total += more.total;
          made.stages[0] += more.total;
        }
      }
      outcome.total += made.total;
      outcome.stages = made.stages;
      llvm::append_range(outcome.over, made.over);
    }
    Builder b(module.getContext());
    auto totals = [&](const Totals &t) {
      return SmallVector<NamedAttribute>{
          b.getNamedAttr("ops", b.getI64IntegerAttr(t.ops)),
          b.getNamedAttr("flops", b.getI64IntegerAttr(t.flops)),
          b.getNamedAttr("bytes", b.getI64IntegerAttr(t.bytes))};
    };
    SmallVector<NamedAttribute> entries = totals(outcome.total);
    if (staged) {
      SmallVector<Attribute> perStage;
      for (const Totals &t : outcome.stages)
        perStage.push_back(b.getDictionaryAttr(totals(t)));
      entries.push_back(b.getNamedAttr("stages", b.getArrayAttr(perStage)));
    }
    if (request.mode == Request::Mode::Auto) {
      entries.push_back(
          b.getNamedAttr("budget", b.getI64IntegerAttr(request.budget)));
      SmallVector<Attribute> over;
      for (auto [rank, peak] : outcome.over)
        over.push_back(b.getDictionaryAttr(
            {b.getNamedAttr("rank", b.getI64IntegerAttr(rank)),
             b.getNamedAttr("bytes", b.getI64IntegerAttr(peak))}));
      entries.push_back(b.getNamedAttr("over", b.getArrayAttr(over)));
    }
    module->setAttr(graph::kRecomputeAttr, b.getDictionaryAttr(entries));
  }
};
} // namespace
