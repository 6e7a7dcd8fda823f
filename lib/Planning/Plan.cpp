//===- Plan.cpp - What a pipeline compile decided, for people -------------===//

#include "pcc/Planning/Plan.h"

#include "pcc/Build/Build.h"
#include "pcc/Planning/Planning.h"

#include "pcc/Analysis/CostModel.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Driver/Driver.h"
#include "pcc/InitAll.h"
#include "pcc/Transforms/Pipeline/Pipeline.h"
#include "pcc/Transforms/Pipeline/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <limits>
#include <map>

using namespace mlir;
using namespace pcc;
using namespace pcc::pipeline;

/// "F3" for microbatch 3, "F3.1" for its chunk 1 on an interleaved rank.
static std::string actionName(const Action &a, int64_t ranks,
                              int64_t virtualStages, int64_t microbatches) {
  // A microbatch of the next step (a schedule without a flush) has a `+`.
  bool next = a.microbatch >= microbatches;
  std::string name =
      (stringifyPhase(a.phase) +
       std::to_string(next ? a.microbatch - microbatches : a.microbatch))
          .str();
  if (virtualStages > 1)
    name += "." + std::to_string(a.stage / ranks);
  if (next)
    name += "+";
  return name;
}

/// "11.44 GB".
std::string pcc::formatBytes(double bytes) {
  const char *unit[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int i = 0;
  while (bytes >= 1000 && i < 5)
    bytes /= 1000, ++i;
  return llvm::formatv("{0:F2} {1}", bytes, unit[i]).str();
}

static std::string renderSvg(dist::ScheduleOp schedule,
                             const ScheduleStats &stats) {
  int64_t p = schedule.getRanks(), v = schedule.getVirtualStages();
  const double width = 960, row = 28, left = 70, top = 40;
  double height = top + row * p + 30;
  double scale = stats.makespan > 0 ? (width - left - 10) / stats.makespan : 0;
  std::string svg;
  llvm::raw_string_ostream os(svg);
  os << llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" "
                      "width=\"{0}\" height=\"{1}\" font-family=\"monospace\" "
                      "font-size=\"11\">\n",
                      width, height);
  os << llvm::formatv("<text x=\"{0}\" y=\"18\">{1} schedule, {2} ranks, {3} "
                      "microbatches{4}; bubble {5:F1}%; F blue, B orange, W "
                      "green, idle grey</text>\n",
                      left, schedule.getKind(), p, schedule.getMicrobatches(),
                      v > 1 ? llvm::formatv(", {0} chunks per rank", v).str()
                            : std::string(),
                      100 * stats.bubbleFraction);
  // A span of a rank's row, from `start` to `end` (seconds), with a title.
  auto drawSpan = [&](double y, double start, double end, StringRef color,
                      StringRef title) {
    os << llvm::formatv(
        "<rect x=\"{0:F2}\" y=\"{1}\" width=\"{2:F2}\" "
        "height=\"{3}\" fill=\"{4}\" stroke=\"white\" "
        "stroke-width=\"0.5\"><title>{5}</title></rect>\n",
        left + start * scale, y + 2, std::max(0.5, (end - start) * scale),
        row - 4, color, title);
  };
  for (auto [r, rank] : llvm::enumerate(stats.ranks)) {
    double y = top + row * r;
    os << llvm::formatv("<text x=\"4\" y=\"{0}\">rank {1}</text>\n",
                        y + row / 2 + 4, r);
    // The row's background is its idle time.
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" "
                        "height=\"{3}\" fill=\"#e6e6e6\"/>\n",
                        left, y + 2, stats.makespan * scale, row - 4);
    for (const RankStats::Span &span : rank.timeline) {
      const char *color = span.action.phase == dist::Phase::F   ? "#4c78a8"
                          : span.action.phase == dist::Phase::B ? "#f58518"
                                                                : "#54a24b";
      std::string name =
          actionName(span.action, p, v, schedule.getMicrobatches());
      drawSpan(y, span.start, span.end, color, name);
      if ((span.end - span.start) * scale > 18)
        os << llvm::formatv(
            "<text x=\"{0:F2}\" y=\"{1}\" fill=\"white\">"
            "{2}</text>\n",
            left + span.start * scale + 2, y + row / 2 + 4, name);
    }
    // The deferred products, once a step after the rank's last action.
    if (rank.deferredEnd > rank.deferredStart)
      drawSpan(y, rank.deferredStart, rank.deferredEnd, "#54a24b",
               "deferred weight-gradient products");
  }
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\">time (cost model): {2:E2} "
                      "s per step</text>\n",
                      left, height - 8, stats.makespan);
  os << "</svg>\n";
  return svg;
}

FailureOr<std::optional<PipelinePlan>>
pcc::describePipeline(ModuleOp module) {
  auto schedules = module.getOps<dist::ScheduleOp>();
  if (schedules.empty())
    return std::optional<PipelinePlan>();
  dist::ScheduleOp schedule = *schedules.begin();
  FailureOr<ScheduleStats> stats = verifySchedule(schedule);
  if (failed(stats))
    return failure();
  int64_t p = schedule.getRanks(), v = schedule.getVirtualStages();
  int64_t stages = p * v;
  ArrayRef<double> costs = schedule.getCosts().value_or(ArrayRef<double>());
  ArrayRef<int64_t> stash =
      schedule.getStashBytes().value_or(ArrayRef<int64_t>());
  ArrayRef<double> transfers =
      schedule.getTransferCosts().value_or(ArrayRef<double>());
  ArrayRef<int64_t> sent =
      schedule.getTransferBytes().value_or(ArrayRef<int64_t>());
  ArrayRef<double> deferred =
      schedule.getDeferredCosts().value_or(ArrayRef<double>());

  // Ops per stage: those of its outlined functions once the schedule is
  // lowered, else those the step marks with the stage (`pcc plan`).
  std::vector<int64_t> ops(stages, 0);
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto stage = fn->getAttrOfType<IntegerAttr>(kStageAttr);
    if (stage && fn->hasAttr(kPhaseAttr) && stage.getInt() < stages)
      fn.walk([&](Operation *op) {
        if (!isa<func::FuncOp, func::ReturnOp>(op))
          ++ops[stage.getInt()];
      });
    if (fn->hasAttr(kNumStagesAttr))
      fn.walk([&](Operation *op) {
        auto at = op->getAttrOfType<IntegerAttr>(kStageAttr);
        if (at && at.getInt() >= 0 && at.getInt() < stages)
          ++ops[at.getInt()];
      });
  }
  // The ranks that run a stage: one, or with two pipelines the stage's
  // rank each way (the even and the odd microbatches).
  auto stageRanks = [&](int64_t s) {
    llvm::json::Array on{schedule.getRankOf(s, 0)};
    if (schedule.getNumPipelines() > 1 &&
        schedule.getRankOf(s, 1) != schedule.getRankOf(s, 0))
      on.push_back(schedule.getRankOf(s, 1));
    return on;
  };
  llvm::json::Array stageArray;
  double slowest = 0, total = 0;
  for (int64_t s = 0; s < stages; ++s) {
    double f = costs.size() == size_t(3 * stages) ? costs[3 * s] : 0;
    double b = costs.size() == size_t(3 * stages) ? costs[3 * s + 1] : 0;
    double w = costs.size() == size_t(3 * stages) ? costs[3 * s + 2] : 0;
    slowest = std::max(slowest, f + b + w);
    total += f + b + w;
    llvm::json::Object entry{
        {"stage", s},        {"rank", s % p},     {"ranks", stageRanks(s)},
        {"time", f + b + w}, {"forward_time", f}, {"backward_time", b + w},
        {"ops", ops[s]}};
    if (!stash.empty())
      entry["stash_bytes"] = stash[s];
    if (!transfers.empty()) {
      entry["send_activations_time"] = transfers[2 * s];
      entry["send_gradient_time"] = transfers[2 * s + 1];
    }
    if (!sent.empty()) {
      entry["send_activations_bytes"] = sent[2 * s];
      entry["send_gradient_bytes"] = sent[2 * s + 1];
    }
    // Once a step, not per microbatch: not in `time`.
    if (!deferred.empty() && deferred[s] > 0)
      entry["deferred_time"] = deferred[s];
    stageArray.push_back(std::move(entry));
  }
  llvm::json::Array ranks;
  std::string summary;
  llvm::raw_string_ostream os(summary);
  int64_t pieces = 1;
  for (auto fn : module.getOps<func::FuncOp>())
    if (auto n = fn->getAttrOfType<IntegerAttr>(graph::kLossPiecesAttr))
      pieces = n.getInt();
  os << llvm::formatv("  pipeline: {0} schedule, {1} stage(s) on {2} "
                      "pipeline rank(s), {3} microbatch(es), bubble {4:F1}% "
                      "{5}(cost model)\n",
                      schedule.getKind(), stages, p, schedule.getMicrobatches(),
                      100 * stats->bubbleFraction,
                      schedule.getNumSteps() > 1
                          ? "a step once full, no flush between steps: each "
                            "rank runs the next step's first forwards while "
                            "the step drains "
                      : schedule.getNumPipelines() > 1
                          ? "with two pipelines in opposite directions (the "
                            "odd microbatches up), each stage's weights on "
                            "two ranks "
                          : "");
  if (pieces > 1)
    os << llvm::formatv("    LM head and loss in {0} pieces of the sequence "
                        "(--head-pieces), the logits not returned\n",
                        pieces);
  for (auto [r, rank] : llvm::enumerate(stats->ranks)) {
    llvm::json::Array actions, timeline, sends;
    for (const RankStats::Span &span : rank.timeline) {
      actions.push_back(
          actionName(span.action, p, v, schedule.getMicrobatches()));
      timeline.push_back(llvm::json::Array{
          actionName(span.action, p, v, schedule.getMicrobatches()), span.start,
          span.end});
    }
    // Sends by what they carry: "F3>1" is microbatch 3's activations to
    // rank 1, "B3>0" its gradient to rank 0; from start to arrival.
    for (const RankStats::Span &span : rank.transfers) {
      Action carried = span.action;
      carried.phase = carried.payload == dist::Payload::Act ? dist::Phase::F
                                                            : dist::Phase::B;
      sends.push_back(llvm::json::Array{
          actionName(carried, p, v, schedule.getMicrobatches()) + ">" +
              std::to_string(span.action.peer),
          span.start, span.end});
    }
    llvm::json::Object entry{{"rank", int64_t(r)},
                             {"actions", std::move(actions)},
                             {"timeline", std::move(timeline)},
                             {"sends", std::move(sends)},
                             {"busy", rank.busy},
                             {"peak_stashed", rank.peakStashed},
                             {"peak_bytes", rank.peakBytes},
                             {"peak_send_bytes", rank.peakSendBytes}};
    // The deferred products' span, where the rank runs any.
    if (rank.deferredEnd > rank.deferredStart)
      entry["deferred"] =
          llvm::json::Array{rank.deferredStart, rank.deferredEnd};
    ranks.push_back(std::move(entry));
    // The schedule's memory: the workspace's other buffers come from the
    // emitter's plan, which the compile summary gives beside it.
    os << llvm::formatv("    pipeline rank {0}: {1} actions, at most {2} "
                        "microbatch(es) stashed, weights, state and stash "
                        "at most {3}",
                        r, rank.timeline.size(), rank.peakStashed,
                        formatBytes(rank.peakBytes));
    if (rank.peakSendBytes)
      os << " (sends in flight at most " << formatBytes(rank.peakSendBytes)
         << ")";
    os << "\n";
  }
  PipelinePlan plan;
  plan.json = llvm::json::Object{
      {"stages", std::move(stageArray)},
      {"schedule",
       llvm::json::Object{{"kind", schedule.getKind()},
                          {"microbatches", int64_t(schedule.getMicrobatches())},
                          {"virtual_stages", v},
                          {"bubble_fraction", stats->bubbleFraction},
                          {"head_pieces", pieces},
                          {"makespan", stats->makespan},
                          {"steps_without_flush", schedule.getNumSteps()},
                          {"ranks", std::move(ranks)}}}};
  // How even the stages are: the slowest against the mean, and the
  // heaviest single op (with its backward), below which no cut can go.
  if (costs.size() == size_t(3 * stages)) {
    llvm::json::Object balance{{"slowest_stage_time", slowest},
                               {"mean_stage_time", total / stages}};
    for (auto fn : module.getOps<func::FuncOp>())
      if (auto heaviest = fn->getAttrOfType<FloatAttr>(kHeaviestOpTimeAttr))
        balance["heaviest_op_time"] = heaviest.getValueAsDouble();
    plan.json["balance"] = std::move(balance);
  }
  plan.svg = renderSvg(schedule, *stats);
  plan.summary = summary;
  return std::optional<PipelinePlan>(std::move(plan));
}

namespace {
/// What a rank holds throughout the step: its blocks of the trained
/// parameters, of their gradients and of the optimizer state.
struct HeldBytes {
  int64_t parameters = 0, gradients = 0, state = 0;
};
} // namespace

/// Per pipeline rank (one when the step is not pipelined), from the step's
/// state arguments and gradient results as partitioning left them.
static SmallVector<HeldBytes> heldBytes(ModuleOp module, int64_t pp) {
  SmallVector<HeldBytes> held(pp);
  for (auto step : module.getOps<func::FuncOp>()) {
    llvm::DenseMap<unsigned, Type> gradients;
    for (unsigned i = 0; i < step.getNumResults(); ++i)
      if (std::optional<unsigned> arg =
              graph::getStateIndex(step, i, graph::kGradAttr))
        gradients[*arg] = step.getResultTypes()[i];
    bool pipelined = step->hasAttr(kNumStagesAttr);
    for (auto [i, t] : llvm::enumerate(step.getArgumentTypes())) {
      if (!step.getArgAttr(i, graph::kStateAttr) ||
          step.getArgAttr(i, graph::kCacheAttr))
        continue;
      for (int64_t r = 0; r < pp; ++r) {
        if (pipelined && !pipeline::holdsState(step, i, r, pp))
          continue;
        // A parameter one update old (2bw) is a second version of it.
        if (step.getArgAttr(i, graph::kPreviousVersionAttr)) {
          held[r].parameters += getTensorBytes(t);
          continue;
        }
        auto it = gradients.find(i);
        if (it == gradients.end()) {
          held[r].state += getTensorBytes(t);
          continue;
        }
        held[r].parameters += getTensorBytes(t);
        held[r].gradients += getTensorBytes(it->second);
      }
    }
  }
  return held;
}

/// A generation step's weights and KV cache per rank (the first entry
/// point's, with its cache arguments as partitioning left them), and the
/// tokens that fit in options.memoryBudget beside the weights; `line`
/// receives the summary's line.
static llvm::json::Object describeGenerationPlan(ModuleOp module,
                                                 const CompileOptions &options,
                                                 std::string &line) {
  // The largest rank's: a pipeline rank holds its stages' weights and
  // cache.
  ServingMemory memory = getServingMemory(module, options.pp);
  int64_t weights = *llvm::max_element(memory.weights);
  int64_t cache = *llvm::max_element(memory.cache);
  int64_t blocks = memory.blocks, blockSize = memory.blockSize;
  int64_t perToken = memory.kvBytesPerToken();
  llvm::json::Object json{{"weights_bytes", weights},
                          {"kv_cache_bytes", cache},
                          {"kv_bytes_per_token", perToken},
                          {"kv_block", blockSize},
                          {"kv_blocks", blocks}};
  if (options.pp > 1) {
    json["weights_bytes_per_pipeline_rank"] = llvm::json::Array(memory.weights);
    json["kv_cache_bytes_per_pipeline_rank"] = llvm::json::Array(memory.cache);
  }
  llvm::raw_string_ostream os(line);
  os << "  generation: per rank, weights " << formatBytes(double(weights))
     << ", KV cache " << formatBytes(double(cache)) << " ("
     << formatBytes(double(perToken)) << " per token, " << blocks * blockSize
     << " tokens)";
  if (options.memoryBudget > 0 && perToken > 0) {
    int64_t fit = std::max<int64_t>(0, options.memoryBudget - weights) /
                  (perToken * blockSize) * blockSize;
    json["budget_bytes"] = options.memoryBudget;
    json["tokens_that_fit"] = fit;
    os << "; " << fit << " tokens fit in "
       << formatBytes(double(options.memoryBudget))
       << " beside the weights (workspace not counted)";
  }
  os << "\n";
  return json;
}

std::string pcc::formatSeconds(double seconds) {
  if (seconds >= 1)
    return llvm::formatv("{0:F2} s", seconds).str();
  if (seconds >= 1e-3)
    return llvm::formatv("{0:F2} ms", seconds * 1e3).str();
  return llvm::formatv("{0:F2} us", seconds * 1e6).str();
}

/// The time of a step without stages as its program runs: its ops one
/// after another, but a collective that completes at its waits
/// (pcc-overlap-collectives) runs on the links from when it is reached
/// until it is done, one collective at a time, while the ops up to its
/// first wait compute.
double pcc::getStepSeconds(func::FuncOp step, const CostModel &cost) {
  double computing = 0, linksFree = 0;
  llvm::DenseMap<Operation *, double> done;
  for (Operation &op : step.getBody().front()) {
    double time = cost.time(&op);
    if (dist::completesAtWait(&op)) {
      double start = std::max(computing, linksFree);
      linksFree = done[&op] = start + time;
      continue;
    }
    if (auto wait = dyn_cast<dist::WaitOp>(&op)) {
      computing =
          std::max(computing, done.lookup(wait.getInput().getDefiningOp()));
      continue;
    }
    if (op.getDialect() && op.getDialect()->getNamespace() == "dist") {
      // A blocking collective waits for the links, then holds both.
      computing = linksFree = std::max(computing, linksFree) + time;
      continue;
    }
    computing += time;
  }
  return std::max(computing, linksFree);
}

/// With --machine: the step's time on that machine, its throughput, its
/// model flops utilization and the largest rank's planned memory
/// (plan.json's `prediction`), and the line that says so.
///
/// A pipelined step takes the schedule's simulated makespan (its stages
/// timed by the machine's cost model, transfers included), the start that
/// the weights' narrowed copies (made once per step) hold back, then on the
/// slowest pipeline rank the data-parallel gradient sums (once, of the
/// accumulated gradients) and the optimizer; a step without stages, the
/// time of its ops one after another. Collectives do not overlap the
/// computation in this model. MFU counts the model's flops as three times
/// its forward's (the backward's are twice; recomputation does not count),
/// over every rank, against the devices' peak.
static llvm::json::Object predictStep(ModuleOp module,
                                      const CompileOptions &options,
                                      const CostModel &cost,
                                      const llvm::json::Object &plan,
                                      int64_t heldPeak, std::string &line) {
  func::FuncOp step = getStepFunction(module);
  int64_t devices = options.dp * options.tp * options.pp;
  auto microbatches = step->getAttrOfType<IntegerAttr>(kMicrobatchesAttr);
  int64_t m = microbatches ? microbatches.getInt() : 1;
  const llvm::json::Object *schedule = plan.getObject("schedule");
  double seconds = 0, reductions = 0, optimizer = 0, bubble = 0, copies = 0;
  int64_t peak = heldPeak;
  if (schedule) {
    seconds = schedule->getNumber("makespan").value_or(0);
    bubble = schedule->getNumber("bubble_fraction").value_or(0);
    // Per pipeline rank: its gradient sums and its optimizer.
    SmallVector<double> after(options.pp, 0);
    step.walk([&](Operation *op) {
      if (auto stage = op->getAttrOfType<IntegerAttr>(kStageAttr)) {
        if (isDataParallelReduction(op)) {
          double time = cost.time(op);
          after[stage.getInt() % options.pp] += time;
          reductions += time;
        }
      } else if (auto stages =
                     op->getAttrOfType<DenseI64ArrayAttr>(kStagesAttr)) {
        llvm::SmallDenseSet<int64_t> ranks;
        for (int64_t s : stages.asArrayRef())
          for (int64_t r : pipeline::getStageRanks(step, s, options.pp))
            if (ranks.insert(r).second)
              after[r] += cost.time(op);
      }
    });
    // A parameter held on several pipeline ranks (a tied embedding and
    // head, or every stage's under Chimera): each holder receives the
    // others' parts of its gradient after the flush.
    for (unsigned k = 0; k < step.getNumResults(); ++k) {
      std::optional<unsigned> param =
          graph::getStateIndex(step, k, graph::kGradAttr);
      if (!param || options.pp == 1)
        continue;
      SmallVector<int64_t> holders;
      for (int64_t r = 0; r < options.pp; ++r)
        if (pipeline::holdsState(step, *param, r, options.pp))
          holders.push_back(r);
      int64_t bytes = getTensorBytes(step.getResultTypes()[k]);
      for (int64_t r : holders)
        after[r] += double(holders.size() - 1) * cost.transferTime(bytes);
    }
    // The weights one update old (2bw) are the weights before the update,
    // copied to their version each step.
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (step.getArgAttr(i, graph::kPreviousVersionAttr))
        for (int64_t r = 0; r < options.pp; ++r)
          if (options.pp == 1 || pipeline::holdsState(step, i, r, options.pp))
            after[r] += cost.time(
                "graph.copy", 0,
                2.0 * double(getTensorBytes(step.getArgumentTypes()[i])),
                /*matrix=*/false);
    // The weights' narrowed copies (--dtype bf16), made once per step on
    // each rank before its first action: they hold back the rank's start
    // where the schedule would have it start sooner (every rank but the
    // first waits for activations anyway). Under 2BW the next step's
    // forwards read copies of the newer weights, made after the update.
    // Each rank's largest memory and the start of its first action.
    SmallVector<double> firstStart(options.pp, 0);
    if (const llvm::json::Array *ranks = schedule->getArray("ranks"))
      for (auto [r, rank] : llvm::enumerate(*ranks)) {
        const llvm::json::Object *stats = rank.getAsObject();
        peak = std::max(peak, stats->getInteger("peak_bytes").value_or(0));
        const llvm::json::Array *timeline = stats->getArray("timeline");
        if (r < firstStart.size() && timeline && !timeline->empty())
          if (const llvm::json::Array *span = (*timeline)[0].getAsArray())
            firstStart[r] = (*span)[1].getAsNumber().value_or(0);
      }
    bool twoVersions = false;
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      twoVersions |= bool(step.getArgAttr(i, graph::kPreviousVersionAttr));
    for (auto [r, ops] :
         llvm::enumerate(getOncePerStepCopies(step, options.pp))) {
      double time = 0;
      for (Operation *op : ops)
        time += cost.time(op);
      copies = std::max(copies, time - firstStart[r]);
      if (twoVersions)
        after[r] += time;
    }
    seconds += copies;
    double slowest = *llvm::max_element(after);
    seconds += slowest;
    optimizer = slowest;
  } else {
    seconds = getStepSeconds(step, cost);
  }
  // Tokens: the first input's elements (a batch of token ids) per
  // microbatch, replica and step.
  RankedTensorType tokenInput = getTokenInputType(step);
  int64_t tokens =
      tokenInput ? tokenInput.getNumElements() * m * options.dp : 0;
  double modelFlops = 3.0 * double(getForwardFlops(step)) * double(m) *
                      double(options.tp * options.dp);
  double mfu =
      seconds > 0
          ? modelFlops / (seconds * double(devices) * cost.peakFlopsPerSecond)
          : 0;
  double throughput = seconds > 0 ? double(tokens) / seconds : 0;
  line = llvm::formatv(
             "  prediction ({0}, {1} device(s)): step {2}, {3:F0} "
             "tokens/s, MFU {4:F1}%, peak {5} GB per device "
             "(of {6} GB)\n",
             cost.machine, devices, formatSeconds(seconds), throughput,
             100 * mfu, llvm::formatv("{0:F2}", double(peak) / 1e9).str(),
             llvm::formatv("{0:F0}", double(cost.memoryBytes) / 1e9).str())
             .str();
  return llvm::json::Object{{"machine", cost.machine},
                            {"step_seconds", seconds},
                            {"tokens_per_second", throughput},
                            {"mfu", mfu},
                            {"peak_bytes", peak},
                            {"fits", peak <= cost.memoryBytes},
                            {"bubble_fraction", bubble},
                            {"data_parallel_reduction_seconds", reductions},
                            {"after_flush_seconds", optimizer},
                            {"weight_copies_seconds", copies},
                            {"model_flops", modelFlops}};
}

OwningOpRef<ModuleOp> pcc::loadPlannedModel(MLIRContext &context,
                                            const CompileOptions &options,
                                            StringRef modelSpec) {
  if (modelSpec.empty())
    return loadModel(context, options);
  std::string error;
  FailureOr<std::string> source = describedModelSource(
      modelSpec, error, options.generate ? options.maxSeq : 0);
  if (failed(source)) {
    (void)printError("--model: " + error);
    return nullptr;
  }
  // Diagnostics name the description, as they name a model's file.
  return parseSourceString<ModuleOp>(*source, ParserConfig(&context),
                                     modelSpec);
}

static DialectRegistry allDialects() {
  DialectRegistry registry;
  registerAllDialects(registry);
  return registry;
}

PlanningSource::PlanningSource() : context(allDialects()) {
  context.disableMultithreading();
}

std::unique_ptr<PlanningSource>
PlanningSource::load(const CompileOptions &options, StringRef modelSpec) {
  auto source = std::make_unique<PlanningSource>();
  {
    auto printer = installDiagnosticPrinter(source->context);
    source->module = loadPlannedModel(source->context, options, modelSpec);
  }
  if (!source->module)
    return nullptr;
  source->what = modelSpec.empty() ? options.model : modelSpec.str();
  return source;
}

FailureOr<PlannedLayout> pcc::planLayout(OwningOpRef<ModuleOp> module,
                                         const CompileOptions &options,
                                         StringRef what, bool quiet) {
  PassManager pm(module->getContext());
  CompileOptions planning = options;
  planning.lowerSchedule = false;
  planning.fuse = false;
  buildCompilePipeline(pm, planning);
  if (failed(pm.run(*module)))
    return failure();
  FailureOr<std::optional<PipelinePlan>> described = describePipeline(*module);
  if (failed(described))
    return failure();
  PlannedLayout planned;
  llvm::json::Object &json = planned.json;
  if (*described) {
    json = std::move((*described)->json);
    planned.svg = std::move((*described)->svg);
  }
  json["model"] = what.str();
  json["mesh"] = llvm::json::Object{
      {"dp", options.dp}, {"pp", options.pp}, {"tp", options.tp}};
  json["train"] = options.train;
  // Every rank of the mesh (row-major over dp x pp x tp) with what it holds:
  // a pipeline rank's tensor-parallel ranks and the replicas hold alike.
  std::string recomputeLine;
  if (options.train) {
    SmallVector<HeldBytes> held = heldBytes(*module, options.pp);
    llvm::json::Array ranks;
    int64_t numRanks = options.dp * options.pp * options.tp;
    for (int64_t r = 0; r < numRanks; ++r) {
      int64_t stage = (r / options.tp) % options.pp;
      ranks.push_back(llvm::json::Object{
          {"rank", r},
          {"coords", llvm::json::Object{{"dp", r / (options.tp * options.pp)},
                                        {"pp", stage},
                                        {"tp", r % options.tp}}},
          {"parameter_bytes", held[stage].parameters},
          {"gradient_bytes", held[stage].gradients},
          {"optimizer_state_bytes", held[stage].state}});
    }
    json["ranks"] = std::move(ranks);
    json["zero"] = options.zero;
    llvm::json::Object recompute =
        describeRecompute(*module, options.recompute);
    recomputeLine = recomputeSummary(recompute);
    if (!quiet)
      warnOverBudget(recompute);
    json["recompute"] = std::move(recompute);
  }
  // A generation build: what a rank holds of the weights and the KV cache,
  // and how many tokens' keys and values fit beside the weights in
  // --memory-budget (the workspace, known once code is emitted, left out).
  std::string generationLine;
  if (options.generate)
    json["generation"] =
        describeGenerationPlan(*module, options, generationLine);
  // The collectives of the step (of one microbatch's stage functions with
  // pipelining: the schedule runs those per microbatch).
  json["collectives"] = describeCollectives(*module);
  // On a machine: the step's time, throughput, MFU and memory there.
  std::string predictionLine;
  if (!options.machine.empty()) {
    llvm::Expected<CostModel> cost =
        CostModel::forMachine(options.machine, options.dtype);
    if (!cost)
      return printError(llvm::toString(cost.takeError()));
    if (options.generate) {
      // A server's figures: the decode's time per token, tokens per
      // second, the sequences that fit.
      std::string error;
      std::optional<ServingPrediction> serving =
          predictServing(*module, options, *cost, error);
      if (!serving)
        return printError(what + " at tp " + std::to_string(options.tp) +
                          " x pp " + std::to_string(options.pp) + " on " +
                          cost->machine + ": " + error);
      json["prediction"] = serving->toJson();
      predictionLine = serving->summary(cost->machine);
    } else {
      int64_t held = 0;
      for (const HeldBytes &h : heldBytes(*module, options.pp))
        held = std::max(held, h.parameters + h.gradients + h.state);
      json["prediction"] =
          predictStep(*module, options, *cost, json, held, predictionLine);
    }
  }
  // What each axis but the pipeline's does, as the compile says it.
  llvm::raw_string_ostream os(planned.summary);
  os << "pcc: planned " << what << " at ";
  if (options.dp > 1)
    os << "dp " << options.dp << " x ";
  os << "tp " << options.tp << " x pp " << options.pp << " ("
     << options.dp * options.tp * options.pp << " rank(s)) -> "
     << options.outDir << "/plan.json\n";
  if (options.dp > 1) {
    os << "  data parallel: dp " << options.dp;
    if (options.zero)
      os << ", ZeRO " << options.zero;
    os << "; collectives of the step:";
    printCollectivesOver(os, *json.getArray("collectives"), dist::kDataAxis);
  }
  if (options.tp > 1) {
    os << "  tensor parallel: tp " << options.tp
       << (options.sequenceParallel ? " (sequence parallel)" : "")
       << "; collectives of the step:";
    printCollectivesOver(os, *json.getArray("collectives"), dist::kTensorAxis);
  }
  os << recomputeLine << generationLine;
  if (*described)
    os << (*described)->summary;
  os << predictionLine;
  return planned;
}

std::optional<PlannedLayout> pcc::planExactly(ModuleOp source,
                                              const CompileOptions &options,
                                              StringRef what,
                                              std::string &error,
                                              std::string *warnings) {
  ErrorCapture capture(*source.getContext());
  FailureOr<PlannedLayout> planned =
      planLayout(OwningOpRef<ModuleOp>(source.clone()), options, what,
                 /*quiet=*/true);
  if (failed(planned)) {
    error = capture.first;
    return std::nullopt;
  }
  if (warnings)
    *warnings = std::move(capture.warnings);
  return std::move(*planned);
}

int64_t pcc::chooseHeadPieces(ModuleOp model, const CompileOptions &options,
                              std::string &note, llvm::json::Object *record,
                              StringRef what,
                              std::optional<HeadPiecesPlan> *chosenPlan) {
  if (!options.train || options.pp < 2 || options.headPieces != 0)
    return options.headPieces;
  CompileOptions planning = options;
  if (planning.machine.empty()) {
    // The target's own machine, where it has one.
    if (options.target != "cpu")
      return options.headPieces;
    planning.machine = options.target;
  }
  // A machine description that does not load is the compile's to report.
  llvm::Expected<CostModel> cost =
      CostModel::forMachine(planning.machine, planning.dtype);
  if (!cost) {
    llvm::consumeError(cost.takeError());
    return options.headPieces;
  }
  // Each count of pieces as planned (a count past the sequence's positions
  // is planned as their number) and its step. The candidates' diagnostics
  // are the compile's to give, once. A caller that plans the chosen count
  // next with these same options (`chosenPlan`) gets that plan back instead,
  // with the warnings it would have printed: a plan for each count made
  // gives the same program whether the count was asked for or the pass's
  // own.
  std::map<int64_t, double> steps;
  std::map<int64_t, HeadPiecesPlan> kept;
  bool keep = chosenPlan && planning.machine == options.machine;
  int64_t own = 0;
  auto plan = [&](int64_t pieces) {
    planning.headPieces = pieces;
    std::string error, warnings;
    std::optional<PlannedLayout> planned =
        planExactly(model, planning, what, error, &warnings);
    if (!planned)
      return;
    const llvm::json::Object *prediction =
        planned->json.getObject("prediction");
    const llvm::json::Object *schedule = planned->json.getObject("schedule");
    std::optional<double> seconds =
        prediction ? prediction->getNumber("step_seconds") : std::nullopt;
    std::optional<int64_t> made =
        schedule ? schedule->getInteger("head_pieces") : std::nullopt;
    if (!seconds || !made || *made < 1)
      return;
    if (steps.try_emplace(*made, *seconds).second && keep)
      kept.try_emplace(*made, HeadPiecesPlan{std::move(*planned), warnings});
    if (pieces == 0)
      own = *made;
  };
  // The pass's own count, then 1 to 4.
  plan(0);
  for (int64_t pieces = 1; pieces <= 4; ++pieces)
    if (!steps.count(pieces))
      plan(pieces);
  if (steps.empty())
    return options.headPieces;
  double least = std::numeric_limits<double>::infinity();
  for (auto [pieces, seconds] : steps)
    least = std::min(least, seconds);
  int64_t chosen = 0;
  for (auto [pieces, seconds] : steps)
    if (!chosen && seconds <= 1.01 * least)
      chosen = pieces;
  llvm::raw_string_ostream os(note);
  os << "    planned step by the LM head's pieces (" << cost->machine
     << "):";
  for (auto [pieces, seconds] : steps)
    os << " " << pieces << ": " << formatSeconds(seconds)
       << (pieces == chosen ? " (chosen)" : "") << ",";
  note.back() = '\n';
  if (record) {
    llvm::json::Object byCount;
    for (auto [pieces, seconds] : steps)
      byCount[std::to_string(pieces)] = seconds;
    *record = llvm::json::Object{{"chosen", chosen},
                                 {"pass", own},
                                 {"step_seconds", std::move(byCount)}};
  }
  if (auto it = kept.find(chosen); it != kept.end())
    *chosenPlan = std::move(it->second);
  return chosen;
}

LogicalResult pcc::checkPlanFolder(StringRef dir, ArrayRef<StringRef> allowed) {
  // Plans go into a folder of their own: an existing one may hold only a
  // previous plan.
  if (!llvm::sys::fs::exists(dir))
    return success();
  if (!llvm::sys::fs::is_directory(dir))
    return printError("output '" + dir + "' exists and is not a folder");
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    if (!llvm::is_contained(allowed, llvm::sys::path::filename(it->path())))
      return printError("output folder '" + dir +
                        "' holds other files than a plan; choose another");
  return success();
}

LogicalResult pcc::writePlanFile(StringRef dir, StringRef name,
                                 StringRef text) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return printError("cannot create '" + dir + "': " + ec.message());
  std::string path = (dir + "/" + name).str();
  std::string tmp = path + ".tmp";
  std::error_code ec;
  {
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec)
      return printError("cannot write " + path + ": " + ec.message());
    os << text;
  }
  if ((ec = llvm::sys::fs::rename(tmp, path)))
    return printError("cannot write " + path + ": " + ec.message());
  return success();
}

/// `pcc plan --devices N`: the search's ranking into DIR/search.json and
/// the best layout's plan into DIR/plan.json (and schedule.svg).
static LogicalResult planSearch(const CompileOptions &given,
                                StringRef modelSpec, raw_ostream &summary) {
  // As `pcc compile --auto`: the CPU's machine description unless another
  // is named (a GPU target has no default machine).
  CompileOptions options = given;
  if (options.machine.empty()) {
    if (options.target != "cpu")
      return printError("--devices on --target " + options.target +
                        " searches the layout for a machine: give --machine "
                        "(" +
                        llvm::join(CostModel::getMachineNames(), ", ") +
                        " or a description file)");
    options.machine = "cpu";
  }
  if (std::string problem = checkLayoutOptions(options); !problem.empty())
    return printError(problem);
  if (failed(checkPlanFolder(options.outDir,
                             {"plan.json", "schedule.svg", "search.json"})))
    return failure();
  FailureOr<SearchResult> found =
      options.generate
          ? searchServingLayouts(options, modelSpec, options.devices)
          : searchLayouts(options, modelSpec, options.devices);
  if (failed(found))
    return failure();
  auto text = [](llvm::json::Object json) {
    return llvm::formatv("{0:2}", llvm::json::Value(std::move(json))).str() +
           "\n";
  };
  if (failed(writePlanFile(options.outDir, "search.json",
                           text(std::move(found->json)))) ||
      failed(writePlanFile(options.outDir, "plan.json",
                           text(std::move(found->plan.json)))))
    return failure();
  std::string svg = (options.outDir + "/schedule.svg");
  if (!found->plan.svg.empty()) {
    if (failed(writePlanFile(options.outDir, "schedule.svg", found->plan.svg)))
      return failure();
  } else {
    // An earlier plan's picture would not be this one's.
    (void)llvm::sys::fs::remove(svg);
  }
  summary << found->summary << "  -> " << options.outDir
          << "/search.json; the best layout's plan:\n"
          << found->plan.summary;
  return success();
}

LogicalResult pcc::plan(const CompileOptions &options, StringRef modelSpec,
                        raw_ostream &summary) {
  if (options.devices > 0)
    return planSearch(options, modelSpec, summary);
  if (options.pp < 1 || options.tp < 1 || options.dp < 1)
    return printError("--dp, --tp and --pp must be at least 1");
  if (std::string problem = checkLayoutOptions(options); !problem.empty())
    return printError(problem);
  if (failed(checkPlanFolder(options.outDir, {"plan.json", "schedule.svg"})))
    return failure();
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.disableMultithreading();
  auto printer = installDiagnosticPrinter(context);
  OwningOpRef<ModuleOp> module = loadPlannedModel(context, options, modelSpec);
  if (!module)
    return failure();
  std::string what = modelSpec.empty() ? options.model : modelSpec.str();
  // The head's pieces as `pcc compile` chooses them.
  CompileOptions chosen = options;
  std::string piecesNote;
  llvm::json::Object piecesChoice;
  std::optional<HeadPiecesPlan> reused;
  chosen.headPieces = chooseHeadPieces(*module, options, piecesNote,
                                       &piecesChoice, what, &reused);
  FailureOr<PlannedLayout> planned = failure();
  if (reused) {
    // Planned already, quietly: what it would have said, then the plan.
    llvm::errs() << reused->warnings;
    if (const llvm::json::Object *recompute =
            reused->plan.json.getObject("recompute"))
      warnOverBudget(*recompute);
    planned = std::move(reused->plan);
  } else {
    planned = planLayout(std::move(module), chosen, what);
  }
  if (failed(planned))
    return failure();
  planned->summary += piecesNote;
  if (!piecesChoice.empty())
    planned->json["head_pieces_choice"] = std::move(piecesChoice);
  std::string text =
      llvm::formatv("{0:2}", llvm::json::Value(std::move(planned->json)))
          .str() +
      "\n";
  if (failed(writePlanFile(options.outDir, "plan.json", text)))
    return failure();
  if (!planned->svg.empty() &&
      failed(writePlanFile(options.outDir, "schedule.svg", planned->svg)))
    return failure();
  summary << planned->summary;
  return success();
}
