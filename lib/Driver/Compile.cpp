//===- Compile.cpp - The `pcc compile` pipeline ---------------------------===//

#include "pcc/Driver/Driver.h"
#include "pcc/Planning/Plan.h"
#include "pcc/Planning/Planning.h"

#include "pcc/Build/Build.h"

#include "pcc/Analysis/BufferPlan.h"
#include "pcc/Analysis/CostModel.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Import/OnnxImporter.h"
#include "pcc/InitAll.h"
#include "pcc/Target/AbiTables.h"
#include "pcc/Target/CallGraph.h"
#include "pcc/Target/Cpu/CppEmitter.h"
#include "pcc/Target/Cuda/CudaEmitter.h"
#include "pcc/Target/WeightTensors.h"
#include "pcc/Transforms/Generation/DeriveGeneration.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipelines.h"

#include "pccrt/Runtime.h"

#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/TargetParser/Host.h"

#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

using namespace mlir;
using namespace pcc;


static std::string checkTargetOptions(const CompileOptions &options) {
  bool cuda = options.target == "cuda";
  if (options.target != "cpu" && !cuda)
    return "unknown target '" + options.target + "' (cpu or cuda)";
  if (options.cudaEmulate && !cuda)
    return "--cuda-emulate needs --target cuda";
  return "";
}

namespace {
/// What one step does, as report.json counts it.
struct StepCounts {
  /// The program's ops by name, and their number.
  llvm::StringMap<int64_t> opCounts;
  int64_t numOps = 0;
  /// The flops of one step of the program's first entry point: on all its
  /// ranks together, and on its busiest rank (a pipeline's ranks run
  /// different stages; tensor and data parallelism's the same program);
  /// and of each entry point by name, on all ranks.
  int64_t flops = 0, flopsPerRank = 0;
  llvm::StringMap<int64_t> entryFlops;
  /// Saved activations: forward values that the backward ops read, i.e.
  /// what a training step keeps alive between its forward and backward.
  int64_t savedCount = 0, savedBytes = 0;
  /// The gradients the step returns.
  int64_t numGrads = 0;
};

/// What `pcc compile` writes about a program besides its code.
struct CompileReport {
  /// report.json: what the compile decided.
  llvm::json::Object report;
  /// plan.json: the mesh, what each rank holds, and the collectives of one
  /// step.
  llvm::json::Object plan;
  /// The lines printed once OUT is in place.
  std::string summary;
};
} // namespace

static StepCounts countStep(ModuleOp module, ArrayRef<func::FuncOp> entries,
                            int64_t ranks) {
  StepCounts counts;
  // Ops of the program; flops of one step, a called function's once per
  // call.
  llvm::DenseMap<Operation *, int64_t> flopsOf;
  std::function<int64_t(func::FuncOp)> functionFlops = [&](func::FuncOp f) {
    auto [it, inserted] = flopsOf.try_emplace(f, 0);
    if (!inserted)
      return it->second;
    int64_t total = 0;
    f.walk([&](Operation *op) {
      if (auto cost = dyn_cast<graph::CostOpInterface>(op))
        total += cost.getFlops();
      if (auto call = dyn_cast<func::CallOp>(op))
        if (auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee()))
          total += functionFlops(callee);
    });
    return flopsOf[f] = total;
  };
  module->walk([&](Operation *op) {
    if (isa<func::FuncOp, func::ReturnOp, func::CallOp, ModuleOp>(op) ||
        (op->getDialect()->getNamespace() == "dist" && op->getNumRegions()))
      return;
    if (op->getParentOfType<dist::ScheduleOp>())
      return;
    ++counts.opCounts[op->getName().getStringRef()];
    ++counts.numOps;
  });
  // Each entry point has one function, or one per pipeline rank; each
  // function runs on ranks / functions of the mesh's ranks.
  llvm::StringMap<int64_t> functions;
  for (func::FuncOp entry : entries) {
    auto name = entry->getAttrOfType<StringAttr>(pcc::kEntryPointAttr);
    ++functions[name ? name.getValue() : "main"];
  }
  auto first = entries.front()->getAttrOfType<StringAttr>(pcc::kEntryPointAttr);
  StringRef firstName = first ? first.getValue() : "main";
  for (func::FuncOp entry : entries) {
    auto name = entry->getAttrOfType<StringAttr>(pcc::kEntryPointAttr);
    StringRef entryName = name ? name.getValue() : "main";
    int64_t flops = functionFlops(entry);
    counts.entryFlops[entryName] +=
        flops * std::max<int64_t>(1, ranks / functions[entryName]);
    if (entryName == firstName)
      counts.flopsPerRank = std::max(counts.flopsPerRank, flops);
  }
  counts.flops = counts.entryFlops[firstName];
  llvm::DenseSet<Value> saved;
  module->walk([&](Operation *op) {
    if (!op->hasAttr(graph::kBackwardAttr))
      return;
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || def->hasAttr(graph::kBackwardAttr) ||
          isa<graph::ConstantOp, graph::WeightOp>(def) ||
          !saved.insert(v).second)
        continue;
      ++counts.savedCount;
      counts.savedBytes += getTensorBytes(v.getType());
    }
  });
  for (auto &[index, at] : getStepResults(entries))
    counts.numGrads +=
        at.first.getResultAttr(at.second, graph::kGradAttr) != nullptr;
  return counts;
}

/// plan.json's ranks, row-major over (dp, pp, tp): a pipeline rank's tp
/// ranks hold alike, and so do the replicas.
namespace {
/// What one rank of the mesh holds of the step's parameters and state.
struct RankHolding {
  int64_t stage = 0, params = 0, state = 0, gradients = 0, prepared = 0;
};
} // namespace

/// What each rank (row-major over dp x pp x tp) holds: a pipeline rank
/// its stage's parameters and state, any other rank the step's.
static SmallVector<RankHolding> getRankHoldings(const CompileOptions &options,
                                                ModuleOp module,
                                                const StepMemory &memory) {
  ArrayRef<int64_t> heldBytes;
  if (auto s = module.getOps<dist::ScheduleOp>(); !s.empty())
    if (auto base = (*s.begin()).getBaseBytes())
      heldBytes = *base;
  SmallVector<RankHolding> ranks;
  for (int64_t r = 0; r < options.dp * options.tp * options.pp; ++r) {
    RankHolding &held = ranks.emplace_back();
    held.stage = (r / options.tp) % options.pp;
    held.params = memory.paramBytes;
    held.state = memory.stateBytes;
    held.gradients = memory.ranks.front().gradients;
    held.prepared = memory.preparedBytes;
    // memory.ranks is per entry function: per pipeline rank under a
    // pipeline (a program of several entry points has one per entry point).
    if (options.pp > 1 && size_t(held.stage) < memory.ranks.size()) {
      held.params = memory.ranks[held.stage].params;
      held.state = memory.ranks[held.stage].state;
      held.gradients = memory.ranks[held.stage].gradients;
      held.prepared = memory.ranks[held.stage].prepared;
      if (!options.train && size_t(held.stage) < heldBytes.size())
        held.params = heldBytes[held.stage];
    }
  }
  return ranks;
}

/// The weights of the rank that holds the most: what each rank holds but
/// under a pipeline, whose ranks hold their stages'.
static int64_t getBusiestRankWeights(ArrayRef<RankHolding> ranks) {
  int64_t most = 0;
  for (const RankHolding &held : ranks)
    most = std::max(most, held.params);
  return most;
}

/// report.json's per_rank_bytes: all that each rank needs, in rank order
/// (StepMemory::getPerRankBytes with the rank's own parameters, state and
/// workspace).
static llvm::json::Array describePerRankBytes(ArrayRef<RankHolding> ranks,
                                              const StepMemory &memory) {
  llvm::json::Array bytes;
  for (const RankHolding &held : ranks)
    bytes.push_back(memory.getPerRankBytes() - memory.paramBytes -
                    memory.stateBytes - memory.workspaceBytes -
                    memory.preparedBytes + held.params + held.state +
                    held.prepared + memory.getStageWorkspaceBytes(held.stage));
  return bytes;
}

static llvm::json::Array describeRanks(const CompileOptions &options,
                                       ArrayRef<RankHolding> holdings,
                                       const StepMemory &memory) {
  llvm::json::Array ranks;
  for (auto [r, held] : llvm::enumerate(holdings)) {
    ranks.push_back(llvm::json::Object{
        {"rank", int64_t(r)},
        {"coords",
         llvm::json::Object{{"dp", int64_t(r) / (options.tp * options.pp)},
                            {"pp", held.stage},
                            {"tp", int64_t(r) % options.tp}}},
        {"stage", held.stage},
        {"parameter_bytes", held.params},
        {"optimizer_state_bytes", held.state},
        {"gradient_bytes", held.gradients},
        {"workspace_bytes", memory.getStageWorkspaceBytes(held.stage)}});
  }
  return ranks;
}

/// How each weight is laid out (plan.json's weights): its whole shape (as
/// in the weights file), the dimension split over the ranks and each rank's
/// shape.
static llvm::json::Array describeWeightLayouts(const CppEmitResult &code) {
  llvm::json::Array layouts;
  for (const WeightEntry &w : code.weights) {
    llvm::json::Array whole, local;
    for (int64_t d : w.value.getShapedType().getShape())
      whole.push_back(d);
    if (w.padding.first >= 0)
      whole[w.padding.first] = w.padding.second;
    RankedTensorType lt =
        w.localType ? w.localType : cast<RankedTensorType>(w.value.getType());
    for (int64_t d : lt.getShape())
      local.push_back(d);
    llvm::json::Object entry{{"name", w.name},
                             {"shape", std::move(whole)},
                             {"rank_shape", std::move(local)}};
    if (w.holders) {
      llvm::json::Array ranks;
      for (int64_t r = 0; r < 64; ++r)
        if (w.holders >> r & 1)
          ranks.push_back(r);
      entry["pipeline_ranks"] = std::move(ranks);
    }
    if (w.shardAxes) {
      entry["split_dim"] = w.shardDim;
      if (w.shardGroups > 1)
        entry["groups"] = w.shardGroups;
      if (w.padding.first >= 0)
        entry["padded_to"] =
            w.value.getShapedType().getDimSize(w.padding.first);
    }
    layouts.push_back(std::move(entry));
  }
  return layouts;
}

/// A pipeline's activations kept for the backward: each stage's stash of
/// one microbatch, summed (plan.json's stages); 0 without a pipeline.
static int64_t getStashBytesPerMicrobatch(
    const std::optional<PipelinePlan> &pipeline) {
  int64_t bytes = 0;
  if (!pipeline)
    return bytes;
  if (const llvm::json::Array *stages = pipeline->json.getArray("stages"))
    for (const llvm::json::Value &stage : *stages)
      if (const llvm::json::Object *o = stage.getAsObject())
        bytes += o->getInteger("stash_bytes").value_or(0);
  return bytes;
}

/// The summary of a compile: what it made, the trainable set, the pipeline
/// and one line per parallel axis with the collectives over it.
static std::string formatSummary(const CompileOptions &options,
                                 const BuiltProgram &program,
                                 const StepCounts &counts,
                                 const StepMemory &memory,
                                 ArrayRef<RankHolding> holdings,
                                 StringRef recomputeLine,
                                 const std::optional<PipelinePlan> &pipeline,
                                 const llvm::json::Array &collectives) {
  std::string text;
  llvm::raw_string_ostream summary(text);
  for (auto &[tied, to] : program.importReport.reties)
    summary << "pcc: re-tied initializer '" << tied << "' as the transpose of '"
            << to << "'\n";
  summary << "pcc: compiled " << options.model << " -> " << options.outDir
          << " (target " << options.target << ")\n"
          << "  ops: " << counts.numOps << ", parameters: " << memory.paramCount
          << " (" << humanCount(memory.paramElements, "")
          << " elements), flops/step: " << humanCount(counts.flops, "FLOP");
  if (counts.flops != counts.flopsPerRank)
    summary << " on all ranks, " << humanCount(counts.flopsPerRank, "FLOP")
            << " on the busiest";
  summary << "\n"
          << "  memory: weights "
          << humanCount(getBusiestRankWeights(holdings), "B")
          << ", workspace " << humanCount(memory.workspaceBytes, "B");
  if (!memory.stageWorkspaceBytes.empty()) {
    int64_t least = *llvm::min_element(memory.stageWorkspaceBytes);
    if (least != memory.workspaceBytes)
      summary << " on the busiest pipeline rank (" << humanCount(least, "B")
              << " on the least)";
  }
  if (memory.preparedBytes)
    summary << ", prepared operands " << humanCount(memory.preparedBytes, "B");
  // Scratch the runs keep between them: a generation build's KV cache, or
  // what a pipeline without a flush leaves from one step's call to the next.
  if (memory.cacheBytes)
    summary << (options.generate ? ", KV cache " : ", in flight between calls ")
            << humanCount(memory.cacheBytes, "B");
  summary << ", inputs+outputs " << humanCount(memory.ioBytes, "B") << "\n";
  summary << recomputeLine;
  if (options.train) {
    // Decisions by the exporter's record are counted; every other decision
    // is listed with its reason.
    llvm::StringMap<int> byRecord;
    for (const TrainableDecision &d : program.decisions)
      if (StringRef(d.reason).starts_with("exported as"))
        ++byRecord[(d.trainable ? "trained, " : "constant, ") + d.reason];
    for (auto &kv : byRecord)
      summary << "  " << kv.getKey() << ": " << kv.getValue()
              << " initializer(s)\n";
    for (const TrainableDecision &d : program.decisions)
      if (!StringRef(d.reason).starts_with("exported as"))
        summary << "  " << (d.trainable ? "trained" : "constant") << " '"
                << d.name << "': " << d.reason << "\n";
  }
  if (pipeline)
    summary << pipeline->summary << program.decided;
  if (options.dp > 1) {
    summary << "  data parallel: dp " << options.dp
            << " (ranks row-major over dp" << (options.pp > 1 ? " x pp" : "")
            << (options.tp > 1 ? " x tp" : "") << "), per replica: batch / "
            << options.dp << "; per step:";
    printCollectivesOver(summary, collectives, dist::kDataAxis);
  }
  if (options.tp > 1) {
    summary << "  tensor parallel: tp " << options.tp
            << (options.sequenceParallel ? " with sequence parallelism" : "")
            << ", per rank: "
            << "parameters " << humanCount(memory.paramBytes, "B");
    if (options.generate)
      summary << ", KV cache " << humanCount(memory.cacheBytes, "B");
    else
      summary << ", optimizer state " << humanCount(memory.stateBytes, "B");
    summary << "; per step:";
    printCollectivesOver(summary, collectives, dist::kTensorAxis);
  }
  if (options.train) {
    summary << "  training: " << options.optimizer << ", " << counts.numGrads
            << " gradients, optimizer state "
            << humanCount(memory.stateBytes, "B") << ", saved activations: ";
    // A pipeline's stages keep theirs between their forward and backward
    // functions, one stash per microbatch in flight (the ranks above).
    if (pipeline)
      summary << humanCount(getStashBytesPerMicrobatch(pipeline), "B")
              << " per microbatch over the stages\n";
    else
      summary << counts.savedCount << " ("
              << humanCount(counts.savedBytes, "B") << ")\n";
    if (options.delayWeights || options.schedule == "2bw")
      summary << "  weights one update old (--schedule 2bw, PipeDream-2BW's "
                 "rule W(t+1) = W(t) - lr * grad f_t(W(t-1))): the training "
                 "differs from a synchronous step's; the previous weights "
                 "are state, counted with the optimizer's\n";
  }
  if (options.eval)
    summary << "  evaluation: entry 'eval', the forward and its loss on the "
               "training step's parameters (pcc run --eval-data), "
            << humanCount(counts.entryFlops.lookup("eval"), "FLOP")
            << " per batch\n";
  return text;
}

/// The KV cache blocks a rank can hold within --memory-budget beside what
/// else it holds (weights, workspace, inputs and outputs), or an error
/// where they cannot hold one sequence of --max-seq.
static FailureOr<int64_t> fitKvBlocks(const CompileOptions &options,
                                      const StepMemory &memory,
                                      const CppEmitResult &code) {
  int64_t blocks = 0;
  for (const WeightEntry &w : code.weights)
    if (w.kind == WeightKind::Cache)
      blocks = w.localType.getDimSize(0);
  int64_t perBlock = blocks ? memory.cacheBytes / blocks : 0;
  int64_t rest = memory.getPerRankBytes() - memory.cacheBytes;
  int64_t fit = perBlock ? (options.memoryBudget - rest) / perBlock : 0;
  int64_t perSequence =
      (options.maxSeq + options.kvBlock - 1) / options.kvBlock;
  if (fit < perSequence)
    return printError(llvm::formatv(
        "--memory-budget {0} leaves {1} for the KV cache beside {2} of "
        "weights and buffers per rank: fewer than the {3} blocks ({4} per "
        "block) of one sequence of --max-seq {5}",
        humanCount(options.memoryBudget, "B"),
        humanCount(std::max<int64_t>(0, options.memoryBudget - rest), "B"),
        humanCount(rest, "B"), perSequence, humanCount(perBlock, "B"),
        options.maxSeq));
  return fit;
}

/// A generation build's shape and its KV cache, per rank (report.json's
/// `generation`; empty for any other build).
static llvm::json::Object describeGeneration(const CompileOptions &options,
                                             const CppEmitResult &code) {
  if (!options.generate)
    return {};
  // Per pipeline rank: the caches of its stages' layers.
  SmallVector<int64_t> perStage(std::max<int64_t>(1, options.pp), 0);
  int64_t blocks = 0, blockSize = 0;
  for (const WeightEntry &w : code.weights) {
    if (w.kind != WeightKind::Cache)
      continue;
    RankedTensorType t = w.localType;
    for (auto [r, bytes] : llvm::enumerate(perStage))
      if (!w.holders || (w.holders >> r & 1))
        bytes += getTensorBytes(t);
    blocks = t.getDimSize(0);
    blockSize = t.getDimSize(2);
  }
  int64_t cacheBytes = *llvm::max_element(perStage);
  int64_t tokens = blocks * blockSize;
  llvm::json::Object generation{
      {"max_seq", options.maxSeq},
      {"max_batch", options.maxBatch},
      {"prefill_tokens", options.maxTokens > 0
                             ? options.maxTokens
                             : std::max(options.maxSeq, options.maxBatch)},
      {"decode_tokens", getDecodeTokens(options)},
      {"kv_block", blockSize},
      {"kv_blocks", blocks},
      {"kv_cache_bytes", cacheBytes},
      {"kv_bytes_per_token", tokens ? cacheBytes / tokens : 0},
      {"cached_tokens", tokens}};
  // The figures above are the largest rank's; each pipeline rank's too.
  if (options.pp > 1)
    generation["kv_cache_bytes_per_pipeline_rank"] =
        llvm::json::Array(perStage);
  return generation;
}

/// report.json, plan.json and the summary of a compiled program. Warns, on
/// stderr, of ranks over --memory-budget.
static CompileReport buildReport(const CompileOptions &options,
                                 const BuiltProgram &program,
                                 ArrayRef<func::FuncOp> entries,
                                 const CppEmitResult &code,
                                 const StepMemory &memory,
                                 const std::optional<PipelinePlan> &pipeline) {
  ModuleOp module = *program.module;
  StepCounts counts = countStep(
      module, entries, int64_t(options.tp) * options.dp * options.pp);
  // Keys that own their names: the counts go before the report is written.
  llvm::json::Object ops;
  for (auto &kv : counts.opCounts)
    ops[kv.getKey().str()] = kv.getValue();
  llvm::json::Array reties, inputs, outputs, trainableSet;
  for (const TrainableDecision &d : program.decisions)
    trainableSet.push_back(llvm::json::Object{{"initializer", d.name},
                                              {"trainable", d.trainable},
                                              {"reason", d.reason}});
  for (auto &[tied, to] : program.importReport.reties)
    reties.push_back(
        llvm::json::Object{{"initializer", tied}, {"transpose_of", to}});
  // Graph inputs and outputs by ONNX name; training state and gradients are
  // reported by the emitter's weights and the optimizer. Every entry takes
  // all graph inputs; outputs are those of any rank, once each.
  func::FuncOp func = entries.front();
  for (auto [i, t] : llvm::enumerate(func.getArgumentTypes()))
    if (auto name = func.getArgAttrOfType<StringAttr>(i, kOnnxNameAttr))
      inputs.push_back(llvm::json::Object{{"name", name.getValue()},
                                          {"shape", shapeJson(t)}});
  for (auto &[index, at] : getStepResults(entries)) {
    auto [f, i] = at;
    if (auto name = f.getResultAttrOfType<StringAttr>(i, kOnnxNameAttr))
      outputs.push_back(
          llvm::json::Object{{"name", name.getValue()},
                             {"shape", shapeJson(f.getResultTypes()[i])}});
  }
  int64_t perRank = memory.getPerRankBytes();
  SmallVector<RankHolding> holdings = getRankHoldings(options, module, memory);
  // What pcc-recompute made the backward recompute.
  llvm::json::Object recompute = describeRecompute(module, options.recompute);
  // Unpipelined, what a rank needs is what its buffers plan.
  if (options.pp == 1)
    if (llvm::json::Array *over = recompute.getArray("over_budget"))
      for (llvm::json::Value &entry : *over)
        (*entry.getAsObject())["predicted_bytes"] = perRank;
  std::string recomputeLine = recomputeSummary(recompute);
  warnOverBudget(recompute);
  // The pass predicts a step's peak before its buffers are laid out; the
  // buffer plan has the last word.
  const llvm::json::Array *over = recompute.getArray("over_budget");
  if (options.memoryBudget > 0 && perRank > options.memoryBudget &&
      (!over || over->empty()))
    llvm::errs() << "pcc: warning: the step's buffers plan "
                 << humanCount(perRank, "B")
                 << " per rank, over --memory-budget "
                 << humanCount(options.memoryBudget, "B")
                 << ", which pcc-recompute predicted to fit\n";

  CompileReport result;
  result.report = llvm::json::Object{
      {"model", options.model},
      {"target", options.target},
      {"dtype", options.dtype},
      {"dp", options.dp},
      {"tp", options.tp},
      {"pp", options.pp},
      {"zero", options.zero},
      {"train", options.train},
      {"inputs", std::move(inputs)},
      {"outputs", std::move(outputs)},
      {"num_ops", counts.numOps},
      {"ops", std::move(ops)},
      {"parameters", llvm::json::Object{{"count", memory.paramCount},
                                        {"elements", memory.paramElements},
                                        {"bytes", memory.paramBytes}}},
      {"flops", counts.flops},
      {"flops_per_rank", counts.flopsPerRank},
      {"memory",
       llvm::json::Object{{"weights_bytes", memory.paramBytes},
                          {"optimizer_state_bytes", memory.stateBytes},
                          {"kv_cache_bytes", memory.cacheBytes},
                          {"workspace_bytes", memory.workspaceBytes},
                          {"prepared_bytes", memory.preparedBytes},
                          {"released_weights_bytes", memory.releasedBytes},
                          {"io_bytes", memory.ioBytes},
                          {"per_rank_bytes",
                           describePerRankBytes(holdings, memory)}}},
      {"saved_activations",
       pipeline ? llvm::json::Object{{"bytes_per_microbatch",
                                      getStashBytesPerMicrobatch(pipeline)}}
                : llvm::json::Object{{"count", counts.savedCount},
                                     {"bytes", counts.savedBytes}}},
      {"recompute", llvm::json::Object(recompute)},
      {"attention", describeAttention(module)},
      {"reties", std::move(reties)},
      {"trainable_set", std::move(trainableSet)},
      {"gradients", counts.numGrads},
  };
  // The collectives' `bytes` are the bytes each rank's buffers hold; the
  // summary lists them by axis too.
  llvm::json::Array collectives = describeCollectives(module);
  result.plan =
      llvm::json::Object{{"mesh", llvm::json::Object{{"dp", options.dp},
                                                     {"pp", options.pp},
                                                     {"tp", options.tp}}},
                         {"sequence_parallel", options.sequenceParallel},
                         {"zero", options.zero},
                         {"recompute", std::move(recompute)},
                         {"ranks", describeRanks(options, holdings, memory)},
                         {"collectives", llvm::json::Array(collectives)},
                         {"weights", describeWeightLayouts(code)}};
  if (pipeline)
    for (const auto &kv : pipeline->json)
      result.plan[kv.first] = kv.second;
  result.summary = formatSummary(options, program, counts, memory, holdings,
                                 recomputeLine, pipeline, collectives);
  // A program of several steps: each entry point's flops.
  if (counts.entryFlops.size() > 1) {
    llvm::json::Object entryPoints;
    for (const auto &kv : counts.entryFlops)
      entryPoints[kv.getKey().str()] =
          llvm::json::Object{{"flops", kv.getValue()}};
    result.report["entries"] = std::move(entryPoints);
  }
  if (options.generate) {
    llvm::json::Object generation = describeGeneration(options, code);
    llvm::raw_string_ostream line(result.summary);
    line << llvm::formatv(
        "  generation: prefill {0} tokens, decode {1}; KV cache {2}, {3} per "
        "token, {4} tokens in {5} blocks of {6}\n",
        *generation.getInteger("prefill_tokens"),
        *generation.getInteger("decode_tokens"),
        humanCount(*generation.getInteger("kv_cache_bytes"), "B"),
        humanCount(*generation.getInteger("kv_bytes_per_token"), "B"),
        *generation.getInteger("cached_tokens"),
        *generation.getInteger("kv_blocks"),
        *generation.getInteger("kv_block"));
    // A pipeline decodes its sequences in groups, one per stage in flight:
    // the bubble above is one step's alone.
    if (options.pp > 1) {
      line << llvm::formatv("  generation over pp {0}: {0} groups of up to "
                            "{1} sequences, one per stage, each a step "
                            "behind the other\n",
                            options.pp, getDecodeTokens(options));
      generation["groups"] = int64_t(options.pp);
    }
    result.report["generation"] = std::move(generation);
  }
  return result;
}

/// Writes report.json, plan.json and, for a pipeline, its schedule.svg
/// into `dir`.
static LogicalResult writeReport(StringRef dir, CompileReport &report,
                                 const std::optional<PipelinePlan> &pipeline) {
  auto format = [](llvm::json::Object &object) {
    return llvm::formatv("{0:2}\n", llvm::json::Value(std::move(object))).str();
  };
  std::string reportText = format(report.report);
  std::string planText = format(report.plan);
  std::string error;
  if (failed(writeTexts(dir, {{"report.json", reportText}}, error)) ||
      failed(writeTexts(dir, {{"plan.json", planText}}, error)) ||
      (pipeline &&
       failed(writeTexts(dir, {{"schedule.svg", pipeline->svg}}, error))))
    return printError(error);
  return success();
}

LogicalResult pcc::compile(const CompileOptions &options,
                           llvm::raw_ostream &summary) {
  if (std::string problem = checkLayoutOptions(options); !problem.empty())
    return printError(problem);
  if (std::string problem = checkTargetOptions(options); !problem.empty())
    return printError(problem);
  // The output folder is checked before any work: a compile that would
  // destroy a user's files is refused at once.
  OutputFolder out(options);
  if (failed(out.check()))
    return failure();
  // --auto: the layout the search chooses, compiled.
  if (options.autoLayout) {
    CompileOptions searching = options;
    if (searching.machine.empty()) {
      if (options.target != "cpu")
        return printError("--auto on --target " + options.target +
                          " searches for a machine: give --machine");
      searching.machine = "cpu";
    }
    FailureOr<SearchResult> found =
        searchLayouts(searching, "", options.devices);
    if (failed(found))
      return failure();
    const llvm::json::Object *best = found->json.getObject("best");
    const llvm::json::Object *prediction =
        best ? best->getObject("prediction") : nullptr;
    summary << "pcc: --auto chose " << found->description << " for "
            << options.devices << " device(s) of " << searching.machine;
    if (prediction)
      summary << llvm::formatv(
          " (predicted step {0}, peak {1:F2} MB per device; {2} layouts "
          "searched)",
          formatSeconds(prediction->getNumber("step_seconds").value_or(0)),
          double(prediction->getInteger("peak_bytes").value_or(0)) / 1e6,
          found->json.getInteger("searched").value_or(0));
    summary << "\n";
    CompileOptions chosen = found->best;
    chosen.autoLayout = false;
    chosen.devices = 0;
    return compile(chosen, summary);
  }

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.disableMultithreading();
  auto diagPrinter = installDiagnosticPrinter(context);
  // The LM head's pieces, where left to pcc, as the planner finds best.
  FailureOr<BuiltProgram> program =
      buildProgram(context, options, [](ModuleOp model, CompileOptions &o) {
        std::string note;
        o.headPieces = chooseHeadPieces(model, o, note);
        return note;
      });
  if (failed(program))
    return failure();
  ModuleOp module = *program->module;
  FailureOr<SmallVector<func::FuncOp>> entries = getProgramEntries(module);
  if (failed(entries))
    return failure();
  FailureOr<std::optional<PipelinePlan>> pipeline = describePipeline(module);
  if (failed(pipeline))
    return failure();

  // Everything is written into the staging folder. The compilers run while
  // the weights are written.
  if (failed(out.stage()))
    return failure();
  FailureOr<CppEmitResult> code =
      emitSources(module, options, out.getStagingDir());
  if (failed(code))
    return failure();
  StepMemory memory = countStepMemory(module, *entries, *code, options.target);
  // A generation build under a memory budget: the KV cache takes what the
  // rest leaves (vLLM's number of blocks), in whole blocks.
  if (options.generate && options.memoryBudget > 0) {
    FailureOr<int64_t> blocks = fitKvBlocks(options, memory, *code);
    if (failed(blocks))
      return failure();
    resizeKvCache(module, *blocks);
    code = emitSources(module, options, out.getStagingDir());
    if (failed(code))
      return failure();
    memory = countStepMemory(module, *entries, *code, options.target);
  }
  LibraryBuild libraries(options, out.getStagingDir());
  if (failed(writeWeights(*code, out.path("weights.safetensors"))) ||
      failed(libraries.wait()))
    return failure();

  CompileReport report =
      buildReport(options, *program, *entries, *code, memory, *pipeline);
  if (failed(writeReport(out.getStagingDir(), report, *pipeline)) ||
      failed(out.mark()))
    return failure();
  if (failed(out.commit()))
    return failure();
  summary << report.summary;
  return success();
}
