//===- Search.cpp - The layout chosen by the compiler ---------------------===//
//
// `pcc plan --devices N` (and `pcc compile --auto`): which dp x tp x pp,
// microbatch count, schedule, virtual stages, sequence parallelism, ZeRO
// stage and recomputation train a model fastest on N devices of a machine.
//
// Planning one layout exactly runs the whole pass pipeline (seconds at
// GPT-3's size), so the search has two tiers:
//
// 1. Profiles. The model is laid out without a pipeline at tensor
//    parallelism 1 and at the smallest tensor-parallel degree T0 the
//    devices allow (with and without sequence parallelism), and each step
//    is profiled as the stage partition sees it (pipeline::profileStep):
//    per forward op, its time and its backward's, its collectives, what
//    the backward keeps of it and the parameters read there. Other degrees
//    are extrapolated: an op either splits over tp (its work and memory
//    fall as 1/T) or does not, so every sum x is x1 + (xT0 - x1) (1 - 1/T)
//    / (1 - 1/T0), and collectives follow their ring traffic (T - 1) / T.
// 2. Estimates. Every layout is estimated from the profiles in
//    microseconds: its stages cut by the same min-max balance the stage
//    partition makes first, scaled to the microbatch (ops are linear in
//    their tokens), the schedule's makespan from its closed form, the
//    data-parallel gradient sums and the optimizer after the flush, and
//    each pipeline rank's memory (what it holds, with ZeRO's splits, and
//    the microbatches its schedule keeps stashed). A layout over the
//    device's memory recomputes (`--recompute auto` at the device's
//    memory) at an estimated cost, or is rejected when even that cannot
//    fit it.
// 3. Exact plans. The best few estimates with different meshes or
//    schedules are planned exactly (pcc plan at that layout, with the
//    machine's prediction); the best of those is the answer.
//
//===----------------------------------------------------------------------===//

#include "pcc/Build/Build.h"
#include "pcc/Planning/Planning.h"

#include "pcc/Analysis/CostModel.h"
#include "pcc/Planning/Plan.h"
#include "pcc/InitAll.h"
#include "pcc/Transforms/Pipeline/Pipeline.h"
#include "pcc/Transforms/Pipeline/Schedule.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cmath>
#include <map>
#include <set>

using namespace mlir;
using namespace pcc;

namespace {

/// One point of the search space.
struct Layout {
  int64_t dp = 1, tp = 1, pp = 1, microbatches = 1, virtualStages = 1;
  std::string schedule = "1f1b";
  bool sequenceParallel = false;
  int64_t zero = 0;
  std::string recompute = "none";

  llvm::json::Object toJson() const {
    return llvm::json::Object{{"dp", dp},
                              {"tp", tp},
                              {"pp", pp},
                              {"microbatches", microbatches},
                              {"schedule", pp > 1 ? schedule : "none"},
                              {"virtual_stages", virtualStages},
                              {"sequence_parallel", sequenceParallel},
                              {"zero", zero},
                              {"recompute", recompute}};
  }
  /// "dp 8 x tp 8 x pp 16, 192 microbatches, interleaved (2 chunks per
  /// rank), sequence parallel, ZeRO 1, recompute auto".
  std::string describe() const {
    std::string text = llvm::formatv("dp {0} x tp {1} x pp {2}, {3} "
                                     "microbatch(es)",
                                     dp, tp, pp, microbatches)
                           .str();
    if (pp > 1) {
      text += ", " + schedule;
      if (virtualStages > 1)
        text += " (" + std::to_string(virtualStages) + " chunks per rank)";
    }
    if (sequenceParallel)
      text += ", sequence parallel";
    if (zero)
      text += ", ZeRO " + std::to_string(zero);
    if (recompute != "none")
      text += ", recompute " + recompute;
    return text;
  }
  /// The compile options of this layout over `base`'s.
  CompileOptions apply(const CompileOptions &base, int64_t memory) const {
    CompileOptions o = base;
    o.dp = dp;
    o.tp = tp;
    o.pp = pp;
    o.microbatches = microbatches;
    o.virtualStages = virtualStages;
    o.schedule = pp > 1 ? schedule : "1f1b";
    o.sequenceParallel = sequenceParallel;
    o.zero = zero;
    o.recompute = recompute;
    o.memoryBudget = recompute == "auto" ? memory : 0;
    return o;
  }
};

/// What a layout is predicted to take.
struct Estimate {
  double step = 0, compute = 0, bubble = 0, tpCommunication = 0,
         dpCommunication = 0, optimizer = 0, recompute = 0;
  int64_t peakBytes = 0;
  double tokensPerSecond = 0, mfu = 0;

  /// The largest of the step's costs, as a user reads it.
  std::string largestCost() const {
    std::pair<double, const char *> costs[] = {
        {compute, "compute"},
        {bubble, "bubble"},
        {tpCommunication, "tp communication"},
        {dpCommunication, "dp communication"},
        {optimizer, "optimizer"},
        {recompute, "recomputation"}};
    return llvm::max_element(costs,
                             [](auto &a, auto &b) { return a.first < b.first; })
        ->second;
  }
  llvm::json::Object toJson() const {
    return llvm::json::Object{{"step_seconds", step},
                              {"tokens_per_second", tokensPerSecond},
                              {"mfu", mfu},
                              {"peak_bytes", peakBytes},
                              {"compute_seconds", compute},
                              {"bubble_seconds", bubble},
                              {"tp_communication_seconds", tpCommunication},
                              {"dp_communication_seconds", dpCommunication},
                              {"optimizer_seconds", optimizer},
                              {"recompute_seconds", recompute},
                              {"largest_cost", largestCost()}};
  }
};

struct Candidate {
  Layout layout;
  Estimate estimate;
  /// Planned exactly: `prediction` is plan.json's.
  bool exact = false;
  llvm::json::Object prediction;
  double stepSeconds() const {
    return exact ? *prediction.getNumber("step_seconds") : estimate.step;
  }
};

/// Per stage of a cut into S stages: a profile's sums, or those
/// extrapolated to another tensor-parallel degree (extrapolateStages).
struct StageModel {
  SmallVector<double> forward, backward, weight, communication, crossing;
  SmallVector<double> forwardOps, backwardOps;
  SmallVector<double> stash, parameters, gradients, state;
  /// The least stage's share of the mean (a stage that does next to
  /// nothing means more stages than the model fills).
  double smallest = 0;
  /// Of the whole step: the optimizer's seconds and the largest value.
  double optimizer = 0, largestValue = 0;
  /// The samples the sums are of.
  int64_t samples = 1;
};

/// A profiled tensor-parallel layout of the whole step at the full batch.
struct Profile {
  int64_t tp = 1;
  /// The samples of the batch the profile's step computes.
  int64_t samples = 1;
  bool sequenceParallel = false;
  pipeline::StepProfile step;
  std::map<int64_t, StageModel> byStages;

  /// Sums over `stages` contiguous stages cut where the slowest stage's
  /// forward and backward (with what crosses its start) are least.
  const StageModel &cut(int64_t stages) {
    auto [it, inserted] = byStages.try_emplace(stages);
    if (!inserted)
      return it->second;
    StageModel &sums = it->second;
    sums.optimizer = step.optimizer;
    sums.largestValue = double(step.largestValue);
    sums.samples = samples;
    size_t n = step.forward.size();
    SmallVector<double> weight(n);
    double total = 0;
    for (size_t k = 0; k < n; ++k)
      total += weight[k] = step.forward[k] + step.backward[k];
    // The greedy cuts under `bound`, or none when they need more stages.
    auto greedy = [&](double bound) -> std::optional<SmallVector<size_t>> {
      SmallVector<size_t> starts{0};
      double load = 0;
      for (size_t k = 0; k < n; ++k) {
        if (load > 0 && load + weight[k] > bound) {
          starts.push_back(k);
          load = 0;
        }
        load += weight[k];
      }
      if (int64_t(starts.size()) > stages)
        return std::nullopt;
      return starts;
    };
    double lo = total / double(stages), hi = total;
    for (int i = 0; i < 50 && hi - lo > 1e-12 * total; ++i) {
      double mid = (lo + hi) / 2;
      (greedy(mid) ? hi : lo) = mid;
    }
    SmallVector<size_t> starts = greedy(hi).value_or(SmallVector<size_t>{0});
    // Fewer stages than asked leave the others empty.
    auto resize = [&](auto &v) { v.assign(stages, 0); };
    resize(sums.forward), resize(sums.backward), resize(sums.weight),
        resize(sums.communication), resize(sums.crossing), resize(sums.stash),
        resize(sums.parameters), resize(sums.gradients), resize(sums.state),
        resize(sums.forwardOps), resize(sums.backwardOps);
    for (size_t s = 0; s < starts.size(); ++s) {
      size_t from = starts[s], to = s + 1 < starts.size() ? starts[s + 1] : n;
      sums.crossing[s] = step.crossing[from];
      for (size_t k = from; k < to; ++k) {
        sums.forward[s] += step.forward[k];
        sums.backward[s] += step.backward[k];
        sums.weight[s] += step.weight[k];
        sums.communication[s] += step.communication[k];
        sums.stash[s] += double(step.stash[k]);
        sums.parameters[s] += double(step.parameters[k]);
        sums.gradients[s] += double(step.gradients[k]);
        sums.state[s] += double(step.state[k]);
        sums.forwardOps[s] += 1;
        sums.backwardOps[s] += double(step.backwardOps[k]);
      }
    }
    double least = std::numeric_limits<double>::infinity();
    for (int64_t s = 0; s < stages; ++s)
      least = std::min(least, sums.forward[s] + sums.backward[s]);
    sums.smallest = total > 0 ? least / (total / double(stages)) : 0;
    return sums;
  }
};

/// Per stage at tensor-parallel degree `tp`, extrapolated between the
/// sums of the profile at 1 (`one`) and those of the profile at T0 (`at`):
/// an op either splits over tp (its work and memory fall as 1/T) or does
/// not, so each sum is x1 + (xT0 - x1) (1 - 1/T) / (1 - 1/T0); the
/// collectives' ring traffic grows as (T - 1) / T, the same factor.
StageModel extrapolateStages(Profile &one, Profile &at, int64_t tp,
                             int64_t stages) {
  const StageModel &a = one.cut(stages);
  const StageModel &b = at.cut(stages);
  StageModel m;
  m.samples = one.samples;
  double k = (1 - 1.0 / double(tp)) / (1 - 1.0 / double(at.tp));
  auto mix = [&](double x1, double x0) {
    return std::max(0.0, x1 + (x0 - x1) * k);
  };
  for (int64_t s = 0; s < stages; ++s) {
    // Computation apart from collectives, which follow their traffic: a
    // third of them in the forward, two thirds in the backward (a
    // collective's conjugate, and the weight gradient's).
    double comm = b.communication[s] * k;
    m.communication.push_back(comm);
    m.forward.push_back(
        mix(a.forward[s], b.forward[s] - b.communication[s] / 3) + comm / 3);
    m.backward.push_back(
        mix(a.backward[s], b.backward[s] - b.communication[s] * 2 / 3) +
        comm * 2 / 3);
    m.weight.push_back(mix(a.weight[s], b.weight[s]));
    m.crossing.push_back(mix(a.crossing[s], b.crossing[s]));
    m.stash.push_back(mix(a.stash[s], b.stash[s]));
    m.parameters.push_back(mix(a.parameters[s], b.parameters[s]));
    m.gradients.push_back(mix(a.gradients[s], b.gradients[s]));
    m.state.push_back(mix(a.state[s], b.state[s]));
    m.forwardOps.push_back(b.forwardOps[s]);
    m.backwardOps.push_back(b.backwardOps[s]);
  }
  m.optimizer = mix(a.optimizer, b.optimizer);
  m.largestValue = mix(a.largestValue, b.largestValue);
  m.smallest = std::min(a.smallest, b.smallest);
  return m;
}

/// Why a layout cannot run, counted by reason.
using Rejections = std::map<std::string, int64_t>;

/// The search's fixed inputs.
struct SearchContext {
  const CompileOptions &base;
  CostModel cost;
  int64_t devices = 1;
  /// The batch (the token input's leading extent) and its tokens.
  int64_t batch = 1, tokens = 1;
  /// The model's flops per step: three times its forward's.
  double modelFlops = 0;
};

/// What the search lets a rank hold: nine tenths of the device's memory,
/// leaving the rest to the runtime (a CUDA context, communication buffers,
/// fragmentation).
int64_t usableBytes(const CostModel &cost) {
  return int64_t(0.9 * double(cost.memoryBytes));
}

/// Estimates `layout` on `model` (its stages, S = pp x virtual stages);
/// fails with a rejection reason.
std::optional<Estimate> estimate(const SearchContext &ctx, Layout &layout,
                                 const StageModel &model, std::string &reason) {
  const CostModel &cost = ctx.cost;
  int64_t p = layout.pp, v = layout.virtualStages, stages = p * v;
  int64_t m = layout.microbatches, dp = layout.dp, tp = layout.tp;
  // The profile's times and bytes, but for size and overheads, are linear
  // in the samples of a microbatch.
  double f = double(ctx.batch) / double(dp * m) / double(model.samples);
  // Ranks of a pipeline neighbour are tp apart; a data-parallel group's
  // pp x tp apart.
  auto crossesNodes = [&](int64_t span) {
    return cost.devicesPerNode > 0 && span > cost.devicesPerNode;
  };
  bool pipelineCrossesNodes = crossesNodes(2 * tp) && p > 1;
  bool dataCrossesNodes = crossesNodes((dp - 1) * p * tp + 1);
  SmallVector<double> fwd(stages), bwd(stages), wgt(stages), stash(stages);
  SmallVector<double> comm(stages);
  for (int64_t s = 0; s < stages; ++s) {
    // A stage receives what crosses its start from the previous one.
    double receive = s > 0 ? cost.transferTime(int64_t(model.crossing[s] * f),
                                               pipelineCrossesNodes)
                           : 0;
    // Each op's fixed overhead does not grow with the microbatch.
    double fixedF = model.forwardOps[s] * cost.opOverheadSeconds,
           fixedB = model.backwardOps[s] * cost.opOverheadSeconds;
    fwd[s] = fixedF + std::max(0.0, model.forward[s] - fixedF) * f + receive;
    bwd[s] = fixedB + std::max(0.0, model.backward[s] - fixedB) * f + receive;
    wgt[s] = model.weight[s] * f;
    comm[s] = model.communication[s] * f;
    stash[s] = model.stash[s] * f;
  }
  // What pipeline rank `rank`'s stages hold of `sums` (parameters,
  // gradients or state).
  // Chimera runs each stage on two ranks, s and p - 1 - s.
  bool chimera = layout.schedule == "chimera";
  auto ofRank = [&](int64_t rank, ArrayRef<double> sums) {
    double bytes = 0;
    for (int64_t s = rank; s < stages; s += p)
      bytes += sums[s];
    if (chimera && p - 1 - rank != rank)
      bytes += sums[p - 1 - rank];
    return bytes;
  };
  // What a rank holds throughout, with ZeRO's splits; 2bw keeps its
  // parameters in two versions.
  double versions = layout.schedule == "2bw" ? 2 : 1;
  auto held = [&](int64_t rank) {
    return versions * ofRank(rank, model.parameters) /
               (layout.zero >= 3 ? dp : 1) +
           ofRank(rank, model.gradients) / (layout.zero >= 2 ? dp : 1) +
           ofRank(rank, model.state) / (layout.zero >= 1 ? dp : 1);
  };
  // ZeRO 3 gathers a stage's parameters for its forward and again for its
  // backward, every microbatch.
  if (layout.zero >= 3)
    for (int64_t s = 0; s < stages; ++s) {
      double gather = cost.collectiveTime(
          "all_gather", int64_t(model.parameters[s]), dp, dataCrossesNodes);
      fwd[s] += gather;
      bwd[s] += gather;
      comm[s] += 2 * gather;
    }
  // Per pipeline rank: the microbatch-chunks its schedule keeps stashed at
  // most (rank 0 the most).
  auto inFlight = [&](int64_t rank) -> double {
    if (p == 1 || layout.schedule == "gpipe")
      return double(m * v);
    if (layout.schedule == "interleaved")
      return double(std::min(m * v, 2 * (p - rank - 1) + (v - 1) * p + 1));
    return double(std::min(m, p - rank));
  };
  int64_t memory = usableBytes(cost);
  Estimate e;
  SmallVector<double> recomputeShare(p, 0);
  for (int64_t r = 0; r < p; ++r) {
    double bytes = held(r);
    // Chimera: each of a rank's two stages, s, keeps 1F1B's p - s chunks
    // at most (Schedule.cpp), of its half of the microbatches.
    double kept = chimera
                      ? stash[r] * double(std::min(m / 2, p - r)) +
                            stash[p - 1 - r] * double(std::min(m / 2, r + 1))
                      : ofRank(r, stash) / double(v) * inFlight(r);
    double peak = bytes + kept + model.largestValue * f;
    if (memory > 0 && peak > double(memory)) {
      // Recomputation frees stashed bytes, at most half of them (what
      // pcc-recompute frees of a transformer's; each block keeps its
      // input and what is costly to make again); its cost is estimated as
      // that share of the forward.
      double over = peak - double(memory);
      if (over > 0.5 * kept) {
        reason = bytes + model.largestValue * f > double(memory)
                     ? "does not fit the device's memory: the parameters, "
                       "gradients and optimizer state alone exceed it"
                     : "does not fit the device's memory even with "
                       "recomputation";
        return std::nullopt;
      }
      recomputeShare[r] = over / kept;
      peak = double(memory);
      layout.recompute = "auto";
    }
    e.peakBytes = std::max(e.peakBytes, int64_t(peak));
  }
  // Per microbatch, each stage's whole time; per rank, its chunks'.
  SmallVector<double> t(stages), load(p, 0), busyComm(p, 0),
      recomputeTime(p, 0);
  double slowest = 0, total = 0, zbBubble = 0;
  for (int64_t s = 0; s < stages; ++s) {
    int64_t r = s % p;
    double again = recomputeShare[r] * (fwd[s] - comm[s] / 3);
    t[s] = fwd[s] + bwd[s] + again;
    // Chimera: each of a stage's two ranks runs half of the microbatches.
    for (int64_t on : chimera ? SmallVector<int64_t, 2>{r, p - 1 - r}
                              : SmallVector<int64_t, 2>{r}) {
      double share = chimera ? 0.5 : 1.0;
      load[on] += share * t[s];
      busyComm[on] += share * comm[s];
      recomputeTime[on] += share * again;
    }
    slowest = std::max(slowest, t[s]);
    total += t[s];
    double inputGradient = bwd[s] - wgt[s];
    zbBubble = std::max(zbBubble, fwd[s] + inputGradient - wgt[s]);
  }
  double busiest = *llvm::max_element(load);
  double makespan;
  if (p == 1)
    makespan = double(m) * total;
  else if (layout.schedule == "interleaved")
    makespan = double(m) * busiest + double(p - 1) * slowest;
  else if (layout.schedule == "zb-h1")
    makespan = double(m) * busiest + double(p - 1) * std::max(0.0, zbBubble);
  else if (chimera)
    // Each pipeline's fill and drain overlap the other's but at the middle
    // ranks (Chimera's bubble, (p - 2) / (2m + p - 2) of equal stages).
    makespan = double(m) * busiest + double(p - 2) * slowest;
  else
    makespan = double(m - 1) * slowest + total;
  // 2bw once full: the forwards that lead into the next step ran during
  // the last one, so a step waits for the chain of backwards alone.
  if (p > 1 && layout.schedule == "2bw")
    for (int64_t s = 0; s + 1 < stages; ++s)
      makespan -= fwd[s];
  makespan = std::max(makespan, double(m) * busiest);
  // After the flush: each rank sums its gradients over dp and updates its
  // share of the parameters.
  double after = 0, dpTime = 0, optimizerTime = 0;
  double totalParameters = 0;
  for (double b : model.parameters)
    totalParameters += b;
  for (int64_t r = 0; r < p; ++r) {
    double reduce =
        cost.collectiveTime("all_reduce", int64_t(ofRank(r, model.gradients)),
                            dp, dataCrossesNodes);
    double update = totalParameters > 0
                        ? model.optimizer * ofRank(r, model.parameters) /
                              totalParameters /
                              double(layout.zero >= 1 ? dp : 1)
                        : 0;
    if (reduce + update > after) {
      after = reduce + update;
      dpTime = reduce;
      optimizerTime = update;
    }
  }
  int64_t critical = std::max_element(load.begin(), load.end()) - load.begin();
  e.step = makespan + after;
  e.tpCommunication = double(m) * busyComm[critical];
  e.recompute = double(m) * recomputeTime[critical];
  e.compute = double(m) * load[critical] - e.tpCommunication - e.recompute;
  e.bubble = makespan - double(m) * load[critical];
  e.dpCommunication = dpTime;
  e.optimizer = optimizerTime;
  e.tokensPerSecond = double(ctx.tokens) / e.step;
  e.mfu = cost.peakFlopsPerSecond > 0
              ? ctx.modelFlops /
                    (e.step * double(ctx.devices) * cost.peakFlopsPerSecond)
              : 0;
  return e;
}

/// How long a search may take before it stops planning layouts exactly
/// (it always plans one that fits). The search checks it between exact
/// plans: one plan that starts within it runs to its end.
constexpr double kSearchSeconds = 25;

/// One search's state, which its tiers share: the model, its profiles and
/// stage sums, the layouts estimated and those planned exactly, and why
/// the others were rejected.
class LayoutSearch {
public:
  LayoutSearch(SearchContext ctx, PlanningSource &planned,
               std::chrono::steady_clock::time_point started)
      : ctx(std::move(ctx)), options(this->ctx.base), context(planned.context),
        source(*planned.module), what(planned.what), started(started) {}

  /// Tier 1: profiles at tp 1 and at the smallest degree above it. Fails,
  /// diagnosed, where the model cannot be laid out.
  LogicalResult profileModel();
  /// Tier 2: every layout, estimated, and the feasible ones ranked.
  void estimateLayouts();
  /// Tier 3: the best few of different meshes and schedules, planned
  /// exactly. A layout whose tensor-parallel degree was extrapolated has
  /// that degree profiled first, and every layout of it estimated again.
  void planBest();
  /// The search's answer: the best exact plan, the ranking, the rejections
  /// and the summary. Fails, diagnosed, where no layout was found to fit.
  FailureOr<SearchResult> getResult();

private:
  /// The seconds since the search started.
  double elapsed() const;
  /// The profile of the step laid out at tensor parallelism `tp` (with
  /// sequence parallelism `sp`); nullopt with the reason in `error`. A
  /// profile is of one microbatch of a single sample, where the model
  /// allows it, so that the layouts' sharding is that of small
  /// microbatches (no batch to split over tp); else of the whole batch.
  std::optional<Profile> profile(int64_t tp, bool sp, std::string &error);
  /// The sums of `stages` stages at (`tp`, `sp`): the profile's, or
  /// extrapolated from those at 1 and T0 until that degree is profiled.
  StageModel &modelOf(int64_t tp, bool sp, int64_t stages);
  /// Estimates `layout` (its recomputation decided anew); fails with the
  /// reason.
  std::optional<Estimate> evaluate(Layout &layout, std::string &reason);
  /// Estimates each schedule, microbatch count and ZeRO stage of the mesh
  /// dp x tp x pp (`sp`: with sequence parallelism).
  void estimateMesh(int64_t dp, int64_t tp, int64_t pp, bool sp);
  /// Fastest first; as fast, the least ZeRO, then the least memory.
  void rankFeasible();
  /// Profiles the tensor-parallel degree `degree` (with sequence
  /// parallelism or not) and estimates its layouts again, or rejects them.
  void profileDegree(std::pair<int64_t, bool> degree);
  /// Plans `c` exactly and keeps it where it fits. Returns whether the
  /// feasible layouts changed, so that the walk starts again from the best.
  bool planCandidate(const Candidate &c);
  /// Scales the estimates of the other layouts of `c`'s degree by `ratio`
  /// (the exact plan's step over the estimate's) where it is over 1.25,
  /// and rejects the other layouts of `c`'s mesh that rely on
  /// recomputation where `c` relied on it and did not fit (`fits`).
  void reviseEstimates(const Candidate &c, double ratio, bool fits);
  /// The ranking: the exact plans by their prediction, then the other
  /// estimates.
  std::vector<const Candidate *> rankCandidates() const;
  /// Writes the summary to `summary`: the top layouts of `ranked`, then
  /// why the others were rejected.
  void writeSummary(std::string &summary, ArrayRef<const Candidate *> ranked,
                    double seconds, int64_t rejectedCount,
                    StringRef description) const;

  SearchContext ctx;
  const CompileOptions &options;
  MLIRContext &context;
  ModuleOp source;
  const std::string &what;
  std::chrono::steady_clock::time_point started;

  Rejections rejected;
  /// The tensor-parallel degrees the devices allow, and T0, the smallest
  /// above 1 (0 where there is none).
  SmallVector<int64_t> tpDegrees;
  int64_t t0 = 0;
  /// Profiles by (tp, sequence parallel), why a degree has none, and the
  /// stage sums by (tp, sequence parallel, stages).
  std::map<std::pair<int64_t, bool>, Profile> profiles;
  std::map<std::pair<int64_t, bool>, std::string> unprofitable;
  std::map<std::tuple<int64_t, bool, int64_t>, StageModel> models;
  /// The layouts estimated to fit, ranked, and how many were searched.
  std::vector<Candidate> feasible;
  int64_t searched = 0;
  /// The layouts planned exactly: those that failed or did not fit, those
  /// that fit (fastest first), and the fastest's plan.
  std::set<std::string> rejectedExactly;
  std::vector<Candidate> exact;
  std::optional<PlannedLayout> bestPlan;
};

/// A candidate as the search's JSON lists it: its layout and prediction,
/// and its estimate beside an exact plan's.
llvm::json::Object candidateJson(const Candidate &c) {
  llvm::json::Object o = c.layout.toJson();
  llvm::json::Object prediction =
      c.exact ? llvm::json::Object(c.prediction) : c.estimate.toJson();
  o["prediction"] = std::move(prediction);
  o["exact"] = c.exact;
  if (c.exact)
    o["estimate"] = c.estimate.toJson();
  return o;
}

} // namespace

double LayoutSearch::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       started)
      .count();
}

std::optional<Profile> LayoutSearch::profile(int64_t tp, bool sp,
                                             std::string &error) {
  Layout layout;
  layout.tp = tp;
  layout.sequenceParallel = sp;
  for (int64_t m : {ctx.batch, int64_t(1)}) {
    if (m == ctx.batch && m == 1)
      continue;
    layout.microbatches = m;
    CompileOptions o = layout.apply(options, 0);
    o.lowerSchedule = false;
    o.fuse = false;
    OwningOpRef<ModuleOp> module = source.clone();
    PassManager pm(&context);
    buildCompilePipeline(pm, o);
    ErrorCapture capture(context);
    if (failed(pm.run(*module))) {
      error = capture.first.empty() ? "the layout failed" : capture.first;
      continue;
    }
    func::FuncOp step = getStepFunction(*module);
    if (!step) {
      error = "the model has no step function";
      return std::nullopt;
    }
    Profile result;
    result.tp = tp;
    result.sequenceParallel = sp;
    result.samples = ctx.batch / m;
    result.step = pipeline::profileStep(step, ctx.cost);
    if (tp == 1)
      ctx.modelFlops = 3.0 * result.step.forwardFlops * double(m);
    return result;
  }
  return std::nullopt;
}

LogicalResult LayoutSearch::profileModel() {
  const CostModel &cost = ctx.cost;
  int64_t devices = ctx.devices;
  // The batch: the leading extent of the step's first input (token ids),
  // which microbatches and data parallelism divide.
  if (func::FuncOp step = getStepFunction(source))
    if (RankedTensorType type = getTokenInputType(step)) {
      ctx.tokens = type.getNumElements();
      ctx.batch = type.getRank() > 0 ? type.getDimSize(0) : 1;
    }
  std::string error;
  std::optional<Profile> one = profile(1, false, error);
  if (!one)
    return printError("cannot lay out " + what + ": " + error);
  if (one->step.forward.empty())
    return printError(what + " has no forward to lay out");
  for (int64_t t = 1; t <= devices; ++t)
    if (devices % t == 0) {
      if (cost.devicesPerNode > 0 && t > cost.devicesPerNode) {
        ++rejected["tensor parallelism beyond a node's " +
                   std::to_string(cost.devicesPerNode) + " devices"];
        continue;
      }
      tpDegrees.push_back(t);
    }
  // Profiles by (tp, sequence parallel): at 1 and T0 now, at other
  // degrees once a layout of theirs is among the best (extrapolated until
  // then).
  profiles.emplace(std::make_pair(int64_t(1), false), std::move(*one));
  t0 = tpDegrees.size() > 1 ? tpDegrees[1] : 0;
  if (t0)
    for (bool sp : {false, true}) {
      std::string reason;
      if (std::optional<Profile> at = profile(t0, sp, reason))
        profiles.emplace(std::make_pair(t0, sp), std::move(*at));
      else
        unprofitable[{t0, sp}] = reason;
    }
  return success();
}

StageModel &LayoutSearch::modelOf(int64_t tp, bool sp, int64_t stages) {
  auto key = std::make_tuple(tp, sp, stages);
  auto it = models.find(key);
  if (it != models.end())
    return it->second;
  StageModel model = profiles.count({tp, sp})
                         ? profiles.at({tp, sp}).cut(stages)
                         : extrapolateStages(profiles.at({1, false}),
                                             profiles.at({t0, sp}), tp, stages);
  return models.emplace(key, std::move(model)).first->second;
}

std::optional<Estimate> LayoutSearch::evaluate(Layout &layout,
                                               std::string &reason) {
  layout.recompute = "none";
  const StageModel &model = modelOf(layout.tp, layout.sequenceParallel,
                                    layout.pp * layout.virtualStages);
  if (layout.pp > 1 && model.smallest < 0.05) {
    reason = "more pipeline stages than the model fills";
    return std::nullopt;
  }
  return estimate(ctx, layout, model, reason);
}

void LayoutSearch::estimateLayouts() {
  int64_t devices = ctx.devices;
  for (int64_t tp : tpDegrees) {
    for (bool sp : {false, true}) {
      if (sp && tp == 1)
        continue;
      if (tp > 1 && !profiles.count({t0, sp})) {
        ++searched;
        ++rejected[(sp ? "sequence parallelism: " : "tensor parallelism: ") +
                   unprofitable[{t0, sp}]];
        continue;
      }
      for (int64_t pp = 1; pp <= devices / tp; ++pp) {
        if ((devices / tp) % pp)
          continue;
        int64_t dp = devices / (tp * pp);
        if (ctx.batch % dp) {
          ++searched;
          ++rejected["the batch (" + std::to_string(ctx.batch) +
                     ") does not divide over the data-parallel degree"];
          continue;
        }
        estimateMesh(dp, tp, pp, sp);
      }
    }
  }
  rankFeasible();
}

void LayoutSearch::estimateMesh(int64_t dp, int64_t tp, int64_t pp, bool sp) {
  const int64_t maxVirtual = 8;
  const Profile &base = profiles.at({1, false});
  int64_t perReplica = ctx.batch / dp;
  SmallVector<std::pair<std::string, int64_t>> schedules;
  schedules.push_back({"1f1b", 1});
  if (pp > 1) {
    schedules.push_back({"gpipe", 1});
    schedules.push_back({"zb-h1", 1});
    for (int64_t v = 2; v <= maxVirtual; ++v)
      schedules.push_back({"interleaved", v});
    if (pp % 2 == 0)
      schedules.push_back({"chimera", 1});
    // A schedule that changes what the training computes, only when asked.
    if (options.allowAsync)
      schedules.push_back({"2bw", 1});
  }
  for (auto [schedule, v] : schedules) {
    if (pp * v > int64_t(base.step.forward.size())) {
      ++searched;
      ++rejected["more pipeline stages than the model has ops"];
      continue;
    }
    for (int64_t m = 1; m <= perReplica; ++m) {
      if (perReplica % m)
        continue;
      for (int64_t zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
        ++searched;
        Layout layout;
        layout.dp = dp, layout.tp = tp, layout.pp = pp;
        layout.microbatches = m, layout.virtualStages = v;
        layout.schedule = schedule, layout.sequenceParallel = sp;
        layout.zero = zero;
        if (pp > 1 && schedule == "2bw" && zero > 1) {
          ++rejected["2bw keeps its weights whole: ZeRO 2 and 3 shard them"];
          continue;
        }
        if (pp > 1) {
          pipeline::ScheduleSpec spec;
          spec.kind = schedule;
          spec.ranks = pp;
          spec.microbatches = m;
          spec.virtualStages = v;
          if (std::optional<std::string> shape =
                  pipeline::getScheduleShapeError(spec)) {
            // By kind of reason, not by its numbers.
            ++rejected["the schedule does not fit: " +
                       StringRef(*shape).split(" (").first.str()];
            continue;
          }
          if (m < pp) {
            ++rejected["fewer microbatches than pipeline ranks"];
            continue;
          }
        }
        std::string reason;
        std::optional<Estimate> e = evaluate(layout, reason);
        if (!e) {
          ++rejected[reason];
          continue;
        }
        feasible.push_back({layout, *e});
      }
    }
  }
}

void LayoutSearch::rankFeasible() {
  llvm::stable_sort(feasible, [](const Candidate &a, const Candidate &b) {
    if (std::abs(a.estimate.step - b.estimate.step) >
        1e-9 * std::max(a.estimate.step, b.estimate.step))
      return a.estimate.step < b.estimate.step;
    // ZeRO's splits add collectives the estimate does not see.
    if (a.layout.zero != b.layout.zero)
      return a.layout.zero < b.layout.zero;
    return a.estimate.peakBytes < b.estimate.peakBytes;
  });
}

void LayoutSearch::planBest() {
  const int64_t exactWanted = 3, attemptsAtMost = 12;
  int64_t attempts = 0;
  std::set<std::tuple<int64_t, int64_t, int64_t, std::string, int64_t>> tried;
  for (size_t i = 0; i < feasible.size(); ++i) {
    if (int64_t(exact.size()) >= exactWanted || attempts >= attemptsAtMost)
      break;
    Candidate c = feasible[i];
    std::pair<int64_t, bool> degree{c.layout.tp, c.layout.sequenceParallel};
    if (!profiles.count(degree)) {
      profileDegree(degree);
      // Start again from the best not yet planned.
      i = size_t(-1);
      continue;
    }
    // At most one exact plan per mesh and schedule.
    auto key = std::make_tuple(c.layout.dp, c.layout.tp, c.layout.pp,
                               c.layout.schedule, c.layout.virtualStages);
    if (!tried.insert(key).second)
      continue;
    // Past the time the search may take, one exact plan that fits is
    // enough; until one does, the search plans on.
    if (!exact.empty() && elapsed() >= kSearchSeconds)
      break;
    ++attempts;
    if (planCandidate(c))
      i = size_t(-1);
  }
}

void LayoutSearch::profileDegree(std::pair<int64_t, bool> degree) {
  std::string reason;
  std::optional<Profile> at = profile(degree.first, degree.second, reason);
  // Its layouts leave the list, estimated again or rejected.
  std::vector<Candidate> kept, again;
  for (Candidate &other : feasible) {
    bool same = other.layout.tp == degree.first &&
                other.layout.sequenceParallel == degree.second;
    (same ? again : kept).push_back(std::move(other));
  }
  if (at) {
    profiles.emplace(degree, std::move(*at));
    // Its stages' extrapolated sums give way to the profile's.
    for (auto it = models.begin(); it != models.end();) {
      auto here = it++;
      if (std::get<0>(here->first) == degree.first &&
          std::get<1>(here->first) == degree.second)
        models.erase(here);
    }
  }
  for (Candidate &other : again) {
    std::string why =
        "tensor parallelism " + std::to_string(degree.first) + ": " + reason;
    std::optional<Estimate> e = at ? evaluate(other.layout, why) : std::nullopt;
    if (!e) {
      ++rejected[why];
      continue;
    }
    other.estimate = *e;
    kept.push_back(std::move(other));
  }
  feasible = std::move(kept);
  rankFeasible();
}

bool LayoutSearch::planCandidate(const Candidate &c) {
  const CostModel &cost = ctx.cost;
  CompileOptions o = c.layout.apply(options, usableBytes(cost));
  std::string error;
  std::optional<PlannedLayout> planned = planExactly(source, o, what, error);
  llvm::json::Object *prediction =
      planned ? planned->json.getObject("prediction") : nullptr;
  if (!prediction) {
    ++rejected["planned exactly: " +
               (error.empty() ? std::string("failed") : error)];
    rejectedExactly.insert(c.layout.describe());
    return false;
  }
  // What the exact plan says of the estimates: a degree whose step took
  // much longer than estimated (a split the extrapolation missed) has
  // its other layouts' estimates scaled as much, and a mesh that
  // recomputation could not bring under the memory has its other layouts
  // that rely on it rejected.
  double ratio = *prediction->getNumber("step_seconds") / c.estimate.step;
  bool fits = *prediction->getInteger("peak_bytes") <= usableBytes(cost);
  if (!fits) {
    ++rejected["planned exactly, does not fit the device's memory"];
    rejectedExactly.insert(c.layout.describe());
  }
  bool changed = false;
  if (ratio > 1.25 || (!fits && c.layout.recompute == "auto")) {
    reviseEstimates(c, ratio, fits);
    changed = true;
  }
  if (!fits)
    return changed;
  Candidate done = c;
  done.exact = true;
  done.prediction = *prediction;
  done.prediction["largest_cost"] = c.estimate.largestCost();
  if (exact.empty() || done.stepSeconds() < exact.front().stepSeconds())
    bestPlan = std::move(*planned);
  exact.push_back(std::move(done));
  llvm::stable_sort(exact, [](const Candidate &a, const Candidate &b) {
    return a.stepSeconds() < b.stepSeconds();
  });
  return changed;
}

void LayoutSearch::reviseEstimates(const Candidate &c, double ratio,
                                   bool fits) {
  std::vector<Candidate> kept;
  for (Candidate &other : feasible) {
    const Layout &l = other.layout;
    if (!fits && c.layout.recompute == "auto" && l.recompute == "auto" &&
        l.dp == c.layout.dp && l.tp == c.layout.tp && l.pp == c.layout.pp &&
        l.describe() != c.layout.describe()) {
      ++rejected["planned exactly, recomputation does not bring the "
                 "mesh under the device's memory"];
      continue;
    }
    if (ratio > 1.25 && l.tp == c.layout.tp &&
        l.sequenceParallel == c.layout.sequenceParallel &&
        l.describe() != c.layout.describe()) {
      other.estimate.step *= ratio;
      other.estimate.compute *= ratio;
      other.estimate.tokensPerSecond /= ratio;
      other.estimate.mfu /= ratio;
    }
    kept.push_back(std::move(other));
  }
  feasible = std::move(kept);
  rankFeasible();
}

std::vector<const Candidate *> LayoutSearch::rankCandidates() const {
  std::vector<const Candidate *> ranked;
  for (const Candidate &c : exact)
    ranked.push_back(&c);
  for (const Candidate &c : feasible) {
    if (ranked.size() >= 100)
      break;
    if (llvm::none_of(exact,
                      [&](const Candidate &e) {
                        return e.layout.describe() == c.layout.describe();
                      }) &&
        !rejectedExactly.count(c.layout.describe()))
      ranked.push_back(&c);
  }
  return ranked;
}

FailureOr<SearchResult> LayoutSearch::getResult() {
  const CostModel &cost = ctx.cost;
  int64_t devices = ctx.devices;
  if (exact.empty()) {
    std::string reasons;
    for (auto &[reason, count] : rejected)
      reasons += "; " + std::to_string(count) + " " + reason;
    return printError("no layout of " + what + " on " +
                      std::to_string(devices) + " device(s) of " +
                      cost.machine + " was found to fit" + reasons);
  }
  std::vector<const Candidate *> ranked = rankCandidates();
  const Candidate &best = exact.front();
  SearchResult result;
  result.best = best.layout.apply(options, usableBytes(cost));
  result.description = best.layout.describe();
  result.plan = std::move(*bestPlan);
  llvm::json::Array candidates;
  for (const Candidate *c : ranked)
    candidates.push_back(candidateJson(*c));
  llvm::json::Object rejections;
  int64_t rejectedCount = 0;
  for (auto &[reason, count] : rejected) {
    rejections[reason] = count;
    rejectedCount += count;
  }
  double seconds = elapsed();
  result.json = llvm::json::Object{{"model", what},
                                   {"devices", devices},
                                   {"machine", cost.machine},
                                   {"seconds", seconds},
                                   {"searched", searched},
                                   {"feasible", int64_t(feasible.size())},
                                   {"planned_exactly", int64_t(exact.size())},
                                   {"best", candidateJson(best)},
                                   {"candidates", std::move(candidates)},
                                   {"rejected", std::move(rejections)}};
  writeSummary(result.summary, ranked, seconds, rejectedCount,
               result.description);
  return result;
}

void LayoutSearch::writeSummary(std::string &summary,
                                ArrayRef<const Candidate *> ranked,
                                double seconds, int64_t rejectedCount,
                                StringRef description) const {
  llvm::raw_string_ostream os(summary);
  os << llvm::formatv("pcc: searched {0} layouts of {1} on {2} x {3} in "
                      "{4:F1} s: {5} fit, {6} rejected; the best {7} "
                      "planned exactly\n",
                      searched, what, ctx.devices, ctx.cost.machine, seconds,
                      feasible.size(), rejectedCount, exact.size());
  os << "     dp  tp  pp  microbatches  schedule        sp   zero  recompute"
        "  step        tokens/s  MFU     peak/device  largest cost\n";
  for (auto [i, c] : llvm::enumerate(ranked)) {
    if (i >= 8)
      break;
    const Layout &l = c->layout;
    std::string schedule =
        l.pp == 1 ? "-"
                  : l.schedule + (l.virtualStages > 1
                                      ? ":" + std::to_string(l.virtualStages)
                                      : "");
    double step = c->stepSeconds();
    double tokens =
        c->exact ? c->prediction.getNumber("tokens_per_second").value_or(0)
                 : c->estimate.tokensPerSecond;
    double mfu =
        c->exact ? c->prediction.getNumber("mfu").value_or(0) : c->estimate.mfu;
    int64_t peak = c->exact ? c->prediction.getInteger("peak_bytes").value_or(0)
                            : c->estimate.peakBytes;
    os << llvm::formatv(
        "  {0,-2} {1,3} {2,3} {3,3} {4,13}  {5,-14}  {6,-3}  "
        "{7,4}  {8,-9}  {9,-10}  {10,8:F0}  {11,5:F1}%  "
        "{12,11}  {13}{14}\n",
        i + 1, l.dp, l.tp, l.pp, l.microbatches, schedule,
        l.sequenceParallel ? "yes" : "no", l.zero, l.recompute,
        formatSeconds(step), tokens, 100 * mfu,
        peak >= 1e9 ? llvm::formatv("{0:F2} GB", peak / 1e9).str()
                    : llvm::formatv("{0:F2} MB", peak / 1e6).str(),
        c->estimate.largestCost(), c->exact ? "" : " (estimate)");
  }
  for (auto &[reason, count] : rejected)
    os << "  rejected " << count << ": " << reason << "\n";
  os << "  best: " << description << "\n";
}

FailureOr<SearchResult> pcc::searchLayouts(const CompileOptions &options,
                                           StringRef modelSpec,
                                           int64_t devices) {
  auto started = std::chrono::steady_clock::now();
  if (!options.train)
    return printError("--devices searches the layout of a training step: "
                      "it needs --train");
  if (devices < 1)
    return printError("--devices must be at least 1");
  llvm::Expected<CostModel> machine =
      CostModel::forMachine(options.machine, options.dtype);
  if (!machine)
    return printError(llvm::toString(machine.takeError()));
  SearchContext ctx{options, std::move(*machine), devices};

  std::unique_ptr<PlanningSource> planned =
      PlanningSource::load(options, modelSpec);
  if (!planned)
    return failure();
  LayoutSearch search(std::move(ctx), *planned, started);
  if (failed(search.profileModel()))
    return failure();
  search.estimateLayouts();
  search.planBest();
  return search.getResult();
}
