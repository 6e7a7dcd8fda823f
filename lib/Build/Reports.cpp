//===- Reports.cpp - What a build decided, for people and for plan.json ---===//
//
// Descriptions shared by `pcc compile`'s report and `pcc plan`: the
// recomputation chosen, the collectives per step, the fused attention, and
// the checks of a layout's options before any work.
//
//===----------------------------------------------------------------------===//

#include "pcc/Build/Build.h"
#include "pcc/Driver/Driver.h"

#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Generation/DeriveGeneration.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <set>

using namespace mlir;
using namespace pcc;

std::string pcc::humanCount(double v, StringRef unit) {
  const char *suffix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4)
    v /= 1000, ++i;
  std::string scaled = (suffix[i] + unit).str();
  return llvm::formatv("{0:F2}{1}{2}", v, scaled.empty() ? "" : " ", scaled)
      .str();
}

llvm::json::Value pcc::shapeJson(Type t) {
  llvm::json::Array a;
  for (int64_t d : cast<RankedTensorType>(t).getShape())
    a.push_back(d);
  return a;
}

llvm::json::Object pcc::describeRecompute(ModuleOp module, StringRef mode) {
  auto totals = module->getAttrOfType<DictionaryAttr>(graph::kRecomputeAttr);
  auto count = [&](StringRef key) -> int64_t {
    auto value = totals ? totals.getAs<IntegerAttr>(key) : nullptr;
    return value ? value.getInt() : 0;
  };
  llvm::json::Object result{{"mode", mode.str()},
                            {"ops", count("ops")},
                            {"flops", count("flops")},
                            {"bytes_not_kept", count("bytes")}};
  if (!totals)
    return result;
  // Per pipeline stage, and with auto the budget and the ranks above it.
  if (auto stages = totals.getAs<ArrayAttr>("stages")) {
    llvm::json::Array perStage;
    for (auto [s, entry] : llvm::enumerate(stages.getAsRange<DictionaryAttr>()))
      perStage.push_back(llvm::json::Object{
          {"stage", int64_t(s)},
          {"ops", cast<IntegerAttr>(entry.get("ops")).getInt()},
          {"flops", cast<IntegerAttr>(entry.get("flops")).getInt()},
          {"bytes_not_kept", cast<IntegerAttr>(entry.get("bytes")).getInt()}});
    result["stages"] = std::move(perStage);
  }
  if (auto budget = totals.getAs<IntegerAttr>("budget"))
    result["budget_bytes"] = budget.getInt();
  if (auto over = totals.getAs<ArrayAttr>("over")) {
    llvm::json::Array ranks;
    for (auto entry : over.getAsRange<DictionaryAttr>())
      ranks.push_back(llvm::json::Object{
          {"rank", cast<IntegerAttr>(entry.get("rank")).getInt()},
          {"predicted_bytes", cast<IntegerAttr>(entry.get("bytes")).getInt()}});
    result["over_budget"] = std::move(ranks);
  }
  return result;
}

llvm::json::Array pcc::describeAttention(ModuleOp module) {
  llvm::json::Array entries;
  // A forward outlined into pipeline stages or cloned per microbatch is one
  // op of the model each: one entry per set of nodes.
  std::set<std::vector<std::string>> seen;
  module.walk([&](graph::AttentionOp op) {
    std::vector<std::string> nodes;
    op.getLoc()->walk([&](Location loc) {
      if (auto name = dyn_cast<NameLoc>(loc))
        nodes.push_back(name.getName().str());
      return WalkResult::advance();
    });
    llvm::sort(nodes);
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    if (!seen.insert(nodes).second)
      return;
    ArrayRef<int64_t> q =
        cast<RankedTensorType>(op.getQuery().getType()).getShape();
    ArrayRef<int64_t> k =
        cast<RankedTensorType>(op.getKey().getType()).getShape();
    // [B, H, T, D], or [B, T, H, D] once pcc-attention-layout made the op
    // sequence-first.
    int64_t headAxis = op.getSequenceFirst() ? 2 : 1;
    int64_t sequenceAxis = 3 - headAxis;
    bool padding = false, bias = false;
    if (Value b = op.getBias()) {
      // [B, 1, 1, Tk] (or fewer leading dimensions): a padding mask.
      ArrayRef<int64_t> s = cast<RankedTensorType>(b.getType()).getShape();
      SmallVector<int64_t> full(4 - std::min<size_t>(4, s.size()), 1);
      llvm::append_range(full, s);
      padding = full[1] == 1 && full[2] == 1;
      bias = !padding;
    }
    llvm::json::Array names;
    for (const std::string &n : nodes)
      names.push_back(n);
    llvm::json::Object entry{{"nodes", std::move(names)},
                             {"causal", op.getCausal()},
                             {"padding", padding},
                             {"bias", bias},
                             {"heads", q[headAxis]},
                             {"kv_heads", k[headAxis]},
                             {"head_dim", q[3]},
                             {"queries", q[sequenceAxis]},
                             {"keys", k[sequenceAxis]}};
    if (std::optional<APFloat> cap = op.getSoftcap())
      entry["softcap"] = cap->convertToDouble();
    if (std::optional<int64_t> window = op.getWindow())
      entry["window"] = *window;
    if (op.getSinks())
      entry["sinks"] = true;
    entries.push_back(std::move(entry));
  });
  return entries;
}

std::string pcc::recomputeSummary(const llvm::json::Object &recompute) {
  if (recompute.getString("mode").value_or("none") == "none")
    return "";
  auto count = [&](StringRef key) {
    return recompute.getInteger(key).value_or(0);
  };
  std::string line = ("  recompute: " + Twine(count("ops")) +
                      " forward op(s) again in the backward, +" +
                      humanCount(count("flops"), "FLOP") + "/step, " +
                      humanCount(count("bytes_not_kept"), "B") +
                      " of activations no longer kept for it")
                         .str();
  if (std::optional<int64_t> budget = recompute.getInteger("budget_bytes"))
    line += " (auto, to fit " + humanCount(*budget, "B") + " per rank)";
  line += "\n";
  // Stage by stage, what auto chose.
  if (const llvm::json::Array *stages = recompute.getArray("stages"))
    if (recompute.getInteger("budget_bytes"))
      for (const llvm::json::Value &entry : *stages) {
        const llvm::json::Object &stage = *entry.getAsObject();
        if (!*stage.getInteger("ops"))
          continue;
        line +=
            llvm::formatv("    stage {0}: {1} op(s), +{2}, {3} no longer "
                          "kept per microbatch\n",
                          *stage.getInteger("stage"), *stage.getInteger("ops"),
                          humanCount(*stage.getInteger("flops"), "FLOP"),
                          humanCount(*stage.getInteger("bytes_not_kept"), "B"))
                .str();
      }
  return line;
}

void pcc::warnOverBudget(const llvm::json::Object &recompute) {
  const llvm::json::Array *over = recompute.getArray("over_budget");
  if (!over)
    return;
  for (const llvm::json::Value &entry : *over) {
    const llvm::json::Object &rank = *entry.getAsObject();
    llvm::errs() << "pcc: warning: rank " << *rank.getInteger("rank")
                 << " needs "
                 << humanCount(*rank.getInteger("predicted_bytes"), "B")
                 << " even recomputing all it can, over --memory-budget "
                 << humanCount(*recompute.getInteger("budget_bytes"), "B")
                 << "\n";
  }
}

llvm::json::Array pcc::describeCollectives(ModuleOp module) {
  // Per kind and mesh axes ("all_reduce dp"): count and bytes.
  struct CollectiveTotal {
    std::string kind, axes;
    int64_t count = 0, bytes = 0;
  };
  std::map<std::pair<std::string, std::string>, CollectiveTotal> collectives;
  module->walk([&](Operation *op) {
    if (!isa<dist::AllReduceOp, dist::AllGatherOp, dist::ReduceScatterOp,
             dist::AllToAllOp, dist::SendOp, dist::RecvOp>(op))
      return;
    Value v = op->getNumResults() ? op->getResult(0) : op->getOperand(0);
    std::string axes;
    if (auto list = op->getAttrOfType<ArrayAttr>("axes"))
      for (Attribute a : list)
        axes +=
            (axes.empty() ? "" : ",") + cast<StringAttr>(a).getValue().str();
    std::string kind = op->getName().stripDialect().str();
    CollectiveTotal &entry = collectives[{kind, axes}];
    entry.kind = kind;
    entry.axes = axes;
    entry.count += 1;
    entry.bytes += getTensorBytes(v.getType());
  });
  llvm::json::Array comms;
  for (auto &kv : collectives)
    comms.push_back(llvm::json::Object{{"kind", kv.second.kind},
                                       {"axes", kv.second.axes},
                                       {"bytes", kv.second.bytes},
                                       {"count", kv.second.count}});
  return comms;
}

void pcc::printCollectivesOver(llvm::raw_ostream &os,
                               const llvm::json::Array &collectives,
                               StringRef axis) {
  bool any = false;
  for (const llvm::json::Value &c : collectives) {
    const llvm::json::Object &o = *c.getAsObject();
    if (!llvm::is_contained(llvm::split(*o.getString("axes"), ','), axis))
      continue;
    os << " " << *o.getInteger("count") << " " << *o.getString("kind") << " ("
       << humanCount(*o.getInteger("bytes"), "B") << ")";
    any = true;
  }
  if (!any)
    os << " no collectives";
  os << "\n";
}

std::string pcc::checkLayoutOptions(const CompileOptions &options) {
  if (options.optimizer == "adamw" && options.momentum != 0)
    return "--momentum is SGD's (--optimizer sgd); AdamW's moments take "
           "--beta1 and --beta2";
  if (options.sequenceParallel && options.tp < 2)
    return "--sequence-parallel splits activations over tensor parallelism: "
           "give --tp 2 or more";
  // 2bw's weights apply without a pipeline too: it has no flush to drop.
  if (options.pp < 2 && options.microbatches <= 1 &&
      ((options.schedule != "1f1b" && options.schedule != "2bw") ||
       options.virtualStages != 1 || !options.ppSplit.empty()))
    return "--schedule, --virtual-stages and --pp-split shape a pipeline: "
           "give --pp 2 or more";
  if (options.schedule == "2bw" && options.zero > 1)
    return llvm::formatv("--schedule 2bw keeps every stage's weights whole "
                         "in two versions, which ZeRO {0} shards: give "
                         "--zero 1 or none",
                         options.zero)
        .str();
  if (options.eval && !options.train)
    return "--eval builds a training step's evaluation: it needs --train";
  PipelineConfig defaults;
  if (options.generate) {
    if (options.train)
      return "--generate builds inference steps: it does not take --train";
    if (options.maxSeq < 2)
      return "--generate needs --max-seq N (2 or more): the longest "
             "sequence, prompt and new tokens";
    if (options.dp > 1 || options.microbatches > 1)
      return "--generate runs over --tp and --pp; --dp and --microbatches "
             "are not supported with it";
    int64_t perSequence =
        (options.maxSeq + options.kvBlock - 1) / options.kvBlock;
    if (options.kvBlocks > 0 && options.memoryBudget > 0)
      return "--kv-blocks and --memory-budget both size the KV cache: give "
             "one";
    if (options.kvBlocks > 0 && options.kvBlocks < perSequence)
      return llvm::formatv("--kv-blocks {0} cannot hold one sequence of "
                           "--max-seq {1} in blocks of --kv-block {2} ({3} "
                           "blocks)",
                           options.kvBlocks, options.maxSeq, options.kvBlock,
                           perSequence)
          .str();
  } else if (options.maxSeq != defaults.maxSeq ||
             options.maxBatch != defaults.maxBatch ||
             options.maxTokens != defaults.maxTokens ||
             options.kvBlock != defaults.kvBlock ||
             options.kvBlocks != defaults.kvBlocks) {
    return "--max-seq, --max-batch, --max-tokens, --kv-block and --kv-blocks "
           "shape a generation build: they need --generate";
  }
  // An evaluation step (withLoss) is built from a training build's
  // options, whose training options it leaves unused.
  if (!options.train && !options.withLoss) {
    if (options.optimizer != defaults.optimizer || options.lr != defaults.lr ||
        options.beta1 != defaults.beta1 || options.beta2 != defaults.beta2 ||
        options.eps != defaults.eps ||
        options.weightDecay != defaults.weightDecay ||
        options.momentum != defaults.momentum)
      return "--optimizer, --lr, --beta1, --beta2, --eps, --weight-decay and "
             "--momentum need --train";
    if (!options.trainable.empty() || !options.freeze.empty())
      return "--trainable and --freeze need --train";
    if (options.clipGrad > 0)
      return "--clip-grad needs --train";
    if (options.delayWeights || options.schedule == "2bw")
      return "--schedule 2bw trains on the weights one update old: it "
             "needs --train";
    if (options.lrSchedule != "constant" || options.warmupSteps ||
        options.decaySteps || options.minLr)
      return "--lr-schedule, --warmup-steps, --decay-steps and --min-lr need "
             "--train";
    if (options.recompute != "none")
      return "--recompute decides what a training step's backward "
             "recomputes: it needs --train";
  }
  if (options.recompute != "none" && options.recompute != "selective" &&
      options.recompute != "full" && options.recompute != "auto")
    return "--recompute takes none, selective, full or auto, got '" +
           options.recompute + "'";
  if (!options.machine.empty())
    if (llvm::Expected<CostModel> machine =
            CostModel::forMachine(options.machine, options.dtype);
        !machine)
      return llvm::toString(machine.takeError());
  if (options.recompute == "auto" && options.memoryBudget <= 0)
    return "--recompute auto chooses what to recompute so that each rank "
           "fits a memory budget: it needs --memory-budget";
  if (options.memoryBudget > 0 && options.recompute != "auto" &&
      !options.generate)
    return "--memory-budget is the budget of --recompute auto (or, with "
           "--generate, of the KV cache): it needs --recompute auto";
  if (options.zero < 0 || options.zero > 3)
    return "--zero must be 0, 1, 2 or 3, got " + std::to_string(options.zero);
  if (options.zero > 0) {
    if (!options.train)
      return "--zero needs --train";
    if (options.dp < 2)
      return "--zero " + std::to_string(options.zero) +
             " splits over data parallelism: give --dp 2 or more";
  }
  return "";
}

//===----------------------------------------------------------------------===//
// pcc compile
//===----------------------------------------------------------------------===//

/// What is wrong with the target options (a one-line message), or an empty
/// string.
