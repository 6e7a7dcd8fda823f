//===- ServingSearch.cpp - The serving layout of a generation build -------===//
//
// `pcc plan --generate --devices N --machine M`: each tp x pp layout of the
// N devices is planned exactly (the compile's passes up to the verified
// schedules, no code), and timed with the machine's cost model:
//
// - the decode's time per token (latency): one decode step through every
//   stage, the activations' transfers between them included;
// - tokens per second (throughput): without a pipeline, the step's tokens
//   over its time; over a pipeline, whose runtime decodes one group of
//   sequences per stage (vLLM's virtual engines), the groups' tokens over
//   the longer of the slowest stage's time per group and one group's trip
//   through the stages;
// - the sequences that fit: each rank's memory less its weights, in KV
//   cache positions, over --max-seq; fewer than --max-batch scale the
//   throughput down, fewer than one refuse the layout.
//
// The layouts are ranked by --objective, and the best is planned again for
// plan.json.
//
//===----------------------------------------------------------------------===//

#include "pcc/Build/Build.h"
#include "pcc/Planning/Planning.h"

#include "pcc/Analysis/CostModel.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/InitAll.h"
#include "pcc/Target/CallGraph.h"
#include "pcc/Transforms/Pipelines.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace pcc;

int64_t ServingMemory::kvBytesPerToken() const {
  int64_t largest = cache.empty() ? 0 : *llvm::max_element(cache);
  return cachedTokens() > 0 ? largest / cachedTokens() : 0;
}

ServingMemory pcc::getServingMemory(ModuleOp module, int64_t pp) {
  ServingMemory memory;
  memory.weights.assign(size_t(std::max<int64_t>(1, pp)), 0);
  memory.cache.assign(memory.weights.size(), 0);
  func::FuncOp step;
  for (auto f : module.getOps<func::FuncOp>())
    if (f.isPublic() && !f.isDeclaration()) {
      step = f;
      break;
    }
  if (!step)
    return memory;
  for (auto [i, type] : llvm::enumerate(step.getArgumentTypes())) {
    if (!step.getArgAttr(i, graph::kCacheAttr))
      continue;
    auto t = cast<RankedTensorType>(type);
    memory.blocks = t.getDimSize(0);
    memory.blockSize = t.getDimSize(2);
    auto stages = step.getArgAttrOfType<DenseI64ArrayAttr>(i, dist::kStagesAttr);
    for (size_t r = 0; r < memory.cache.size(); ++r)
      if (!stages || llvm::any_of(stages.asArrayRef(), [&](int64_t s) {
            return size_t(s) % memory.cache.size() == r;
          }))
        memory.cache[r] += getTensorBytes(t);
  }
  // Without a pipeline, every weight once, as the rank holds it; over one,
  // each weight once per rank whose stages read it (through ops computed
  // from weights alone, which carry no stage).
  llvm::StringSet<> counted;
  size_t ranks = memory.weights.size();
  if (ranks == 1) {
    module->walk([&](graph::WeightOp w) {
      if (counted.insert(w.getName()).second)
        memory.weights[0] += getTensorBytes(getHeldWeightType(w));
    });
    return memory;
  }
  llvm::DenseSet<std::pair<Operation *, size_t>> visited;
  std::function<void(Value, size_t)> hold = [&](Value v, size_t rank) {
    Operation *def = v.getDefiningOp();
    if (!def || def->hasAttr(dist::kStageAttr) ||
        !visited.insert({def, rank}).second)
      return;
    if (auto w = dyn_cast<graph::WeightOp>(def)) {
      std::string key = (w.getName() + "@" + Twine(rank)).str();
      if (counted.insert(key).second)
        memory.weights[rank] += getTensorBytes(getHeldWeightType(w));
      return;
    }
    for (Value o : def->getOperands())
      hold(o, rank);
  };
  for (auto f : module.getOps<func::FuncOp>())
    f.walk([&](Operation *op) {
      if (auto stage = op->getAttrOfType<IntegerAttr>(dist::kStageAttr))
        for (Value v : op->getOperands())
          hold(v, size_t(stage.getInt()) % ranks);
    });
  return memory;
}

namespace {
/// One step's time through the stages: each stage's, and the transfers of
/// the activations between them.
struct StageTimes {
  SmallVector<double> stages;
  double transfers = 0;
  double total() const {
    double sum = transfers;
    for (double t : stages)
      sum += t;
    return sum;
  }
  double slowest() const {
    return stages.empty() ? 0 : *llvm::max_element(stages);
  }
};

/// The times of the step `entry` of a planned generation build on `cost`:
/// per stage (dist.stage; one without a pipeline), its ops one after the
/// other, collectives included, the same way at every layout; and over a
/// pipeline its schedule's transfers of the activations.
std::optional<StageTimes> timeStep(ModuleOp module, StringRef entry,
                                   const CostModel &cost, int64_t pp) {
  func::FuncOp step;
  for (auto f : module.getOps<func::FuncOp>()) {
    auto named = f->getAttrOfType<StringAttr>(kEntryPointAttr);
    if (f.isPublic() && named && named.getValue() == entry)
      step = f;
  }
  if (!step)
    return std::nullopt;
  StageTimes times;
  times.stages.assign(size_t(pp), 0);
  // What is computed from the weights and constants alone (their views,
  // blocks and transposes) is prepared once, not per step.
  llvm::DenseSet<Operation *> prepared;
  for (Operation &op : step.getBody().front()) {
    if (llvm::all_of(op.getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && prepared.contains(def);
        }) && !isa<func::ReturnOp>(op)) {
      prepared.insert(&op);
      continue;
    }
    auto stage = op.getAttrOfType<IntegerAttr>(dist::kStageAttr);
    times.stages[stage ? size_t(stage.getInt()) % size_t(pp) : 0] +=
        cost.time(&op);
  }
  if (pp > 1) {
    auto schedule =
        module.lookupSymbol<dist::ScheduleOp>((entry + "_schedule").str());
    if (!schedule)
      return std::nullopt;
    ArrayRef<double> sends =
        schedule.getTransferCosts().value_or(ArrayRef<double>());
    int64_t stages = schedule.getRanks() * schedule.getVirtualStages();
    if (int64_t(sends.size()) == 2 * stages)
      for (int64_t s = 0; s + 1 < stages; ++s)
        times.transfers += sends[2 * s];
  }
  return times;
}
} // namespace

llvm::json::Object ServingPrediction::toJson() const {
  return llvm::json::Object{{"decode_seconds_per_token", latency},
                            {"tokens_per_second", throughput},
                            {"prefill_step_seconds", prefill},
                            {"sequences_that_fit", sequencesThatFit},
                            {"weights_bytes_per_rank", weightsBytes},
                            {"kv_bytes_per_token_per_rank", kvBytesPerToken}};
}

std::string ServingPrediction::summary(StringRef machine) const {
  return llvm::formatv("  prediction ({0}): decode {1} per token, {2:F0} "
                       "tokens/s, prefill step {3}; {4} sequence(s) of "
                       "--max-seq fit beside the weights\n",
                       machine, formatSeconds(latency), throughput,
                       formatSeconds(prefill), sequencesThatFit)
      .str();
}

std::optional<ServingPrediction>
pcc::predictServing(ModuleOp module, const CompileOptions &options,
                    const CostModel &cost, std::string &error) {
  ServingPrediction p;
  std::optional<StageTimes> decode =
      timeStep(module, "decode", cost, options.pp);
  std::optional<StageTimes> prefill =
      timeStep(module, "prefill", cost, options.pp);
  if (!decode || !prefill) {
    error = "its steps could not be timed";
    return std::nullopt;
  }
  ServingMemory memory = getServingMemory(module, options.pp);
  p.weightsBytes = *llvm::max_element(memory.weights);
  p.kvBytesPerToken = memory.kvBytesPerToken();
  // Cache positions that fit beside each rank's weights, in whole
  // sequences of --max-seq.
  int64_t fit = std::numeric_limits<int64_t>::max();
  for (auto [weights, cache] : llvm::zip(memory.weights, memory.cache)) {
    int64_t perToken =
        memory.cachedTokens() > 0 ? cache / memory.cachedTokens() : 0;
    if (perToken > 0)
      fit = std::min(fit, std::max<int64_t>(0, cost.memoryBytes - weights) /
                              perToken);
  }
  p.sequencesThatFit = fit == std::numeric_limits<int64_t>::max()
                           ? options.maxBatch
                           : fit / options.maxSeq;
  if (p.sequencesThatFit < 1) {
    error = llvm::formatv("its weights ({0} on a rank) leave room for less "
                          "than one sequence of --max-seq {1}",
                          formatBytes(double(p.weightsBytes)), options.maxSeq)
                .str();
    return std::nullopt;
  }
  int64_t batch = std::min<int64_t>(options.maxBatch, p.sequencesThatFit);
  int64_t groupTokens = getDecodeTokens(options);
  p.latency = decode->total();
  p.prefill = prefill->total();
  if (options.pp == 1) {
    p.throughput = double(batch) / std::max(1e-12, decode->total());
  } else {
    // Groups of up to the decode step's tokens, one per stage in flight:
    // a group's next step waits for its trip through the stages, a stage
    // for the groups before it.
    int64_t groups =
        std::min<int64_t>(options.pp, (batch + groupTokens - 1) / groupTokens);
    double period =
        std::max(double(groups) * decode->slowest(), decode->total());
    p.throughput = double(batch) / std::max(1e-12, period);
  }
  return p;
}

namespace {
/// A planned layout and what it predicts.
struct ServingLayout {
  int64_t tp = 1, pp = 1;
  ServingPrediction prediction;

  std::string name() const {
    return llvm::formatv("tp {0} x pp {1}", tp, pp).str();
  }
  llvm::json::Object toJson() const {
    llvm::json::Object json = prediction.toJson();
    json["tp"] = tp;
    json["pp"] = pp;
    return json;
  }
};
} // namespace

FailureOr<SearchResult>
pcc::searchServingLayouts(const CompileOptions &options, StringRef modelSpec,
                          int64_t devices) {
  if (options.objective != "latency" && options.objective != "throughput")
    return printError("--objective takes latency or throughput, got '" +
                      options.objective + "'");
  llvm::Expected<CostModel> machine =
      CostModel::forMachine(options.machine, options.dtype);
  if (!machine)
    return printError(llvm::toString(machine.takeError()));
  const CostModel &cost = *machine;

  std::unique_ptr<PlanningSource> loaded =
      PlanningSource::load(options, modelSpec);
  if (!loaded)
    return failure();
  MLIRContext &context = loaded->context;
  OwningOpRef<ModuleOp> &source = loaded->module;
  const std::string &what = loaded->what;

  SmallVector<ServingLayout> layouts;
  llvm::json::Array refused;
  for (int64_t tp = 1; tp <= devices; ++tp) {
    if (devices % tp != 0)
      continue;
    ServingLayout layout;
    layout.tp = tp;
    layout.pp = devices / tp;
    auto refuse = [&](const std::string &why) {
      refused.push_back(
          llvm::json::Object{{"tp", layout.tp}, {"pp", layout.pp},
                             {"reason", why}});
    };
    if (cost.devicesPerNode > 0 && tp > cost.devicesPerNode) {
      refuse("tensor parallelism beyond a node's " +
             std::to_string(cost.devicesPerNode) + " devices");
      continue;
    }
    CompileOptions o = options;
    o.tp = tp;
    o.pp = layout.pp;
    o.devices = 0;
    o.lowerSchedule = false;
    o.fuse = false;
    OwningOpRef<ModuleOp> module = source->clone();
    PassManager pm(&context);
    buildCompilePipeline(pm, o);
    ErrorCapture capture(context);
    if (failed(pm.run(*module))) {
      refuse(capture.first.empty() ? "the layout failed" : capture.first);
      continue;
    }
    std::string why;
    std::optional<ServingPrediction> predicted =
        predictServing(*module, o, cost, why);
    if (!predicted) {
      refuse(why);
      continue;
    }
    layout.prediction = *predicted;
    layouts.push_back(layout);
  }
  if (layouts.empty()) {
    std::string why = refused.empty()
                          ? std::string("no layout")
                          : std::string(*refused.front()
                                             .getAsObject()
                                             ->getString("reason"));
    return printError("no tp x pp layout of " + std::to_string(devices) +
                      " devices can serve " + what + ": " + why);
  }
  bool latency = options.objective == "latency";
  llvm::stable_sort(layouts, [&](const ServingLayout &a,
                                 const ServingLayout &b) {
    const ServingPrediction &x = a.prediction, &y = b.prediction;
    if (latency)
      return x.latency < y.latency ||
             (x.latency == y.latency && x.throughput > y.throughput);
    return x.throughput > y.throughput ||
           (x.throughput == y.throughput && x.latency < y.latency);
  });

  SearchResult result;
  result.best = options;
  result.best.tp = layouts.front().tp;
  result.best.pp = layouts.front().pp;
  result.best.devices = 0;
  result.description = layouts.front().name();
  llvm::json::Array ranked;
  for (const ServingLayout &l : layouts)
    ranked.push_back(l.toJson());
  result.json = llvm::json::Object{{"model", what},
                                   {"machine", cost.machine},
                                   {"devices", devices},
                                   {"objective", options.objective},
                                   {"max_seq", options.maxSeq},
                                   {"max_batch", options.maxBatch},
                                   {"layouts", std::move(ranked)},
                                   {"refused", std::move(refused)}};
  llvm::raw_string_ostream os(result.summary);
  os << "pcc: searched " << layouts.size() << " serving layout(s) of " << what
     << " for " << devices << " device(s) of " << cost.machine
     << " (objective: " << options.objective << ")\n";
  for (const ServingLayout &l : layouts)
    os << llvm::formatv("  {0}: {1} per token, {2:F0} tokens/s, prefill step "
                        "{3}, {4} sequence(s) of --max-seq fit{5}\n",
                        l.name(), formatSeconds(l.prediction.latency),
                        l.prediction.throughput,
                        formatSeconds(l.prediction.prefill),
                        l.prediction.sequencesThatFit,
                        &l == &layouts.front() ? "  <- best" : "");
  for (const llvm::json::Value &r : *result.json.getArray("refused")) {
    const llvm::json::Object &o = *r.getAsObject();
    os << llvm::formatv("  refused: tp {0} x pp {1}: {2}\n",
                        *o.getInteger("tp"), *o.getInteger("pp"),
                        *o.getString("reason"));
  }

  // The best layout's exact plan, for plan.json.
  FailureOr<PlannedLayout> planned =
      planLayout(source->clone(), result.best, what, /*quiet=*/true);
  if (failed(planned))
    return failure();
  result.plan = std::move(*planned);
  return result;
}
