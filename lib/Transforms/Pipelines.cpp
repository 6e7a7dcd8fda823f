//===- Pipelines.cpp - pcc's named pass pipelines -------------------------===//

#include "pcc/Transforms/Pipelines.h"

#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipeline/Schedule.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

pcc::PipelineConfig pcc::ParallelizeOptions::getConfig() const {
  PipelineConfig config;
#define PCC_OPTION(TYPE, FIELD, NAME, DEFAULT, CLI, DESCRIPTION)               \
  config.FIELD = FIELD;
#include "pcc/Transforms/PipelineOptions.def"
  return config;
}

void pcc::buildParallelizePipeline(OpPassManager &pm,
                                   const PipelineConfig &options) {
  // A generation step is one pass of its tokens through the stages: its
  // sequences follow each other as the runtime's groups, not microbatches.
  int64_t microbatches =
      options.microbatches > 0 ? int64_t(options.microbatches)
      : options.generate       ? 1
                               : int64_t(options.pp);
  bool defaulted = options.microbatches == 0;
  bool pipelined = options.pp > 1 || microbatches > 1;
  // Attention as one op before the training passes, so that its backward
  // is its own (recomputing the probabilities) and no pass sees the scores.
  // CUDA's kernels hold a head of up to 128 features in shared memory.
  if (options.fuseAttention)
    pm.addNestedPass<func::FuncOp>(
        createFuseAttention({options.target == "cuda" ? 128 : 0}));
  // More ranks than key/value heads: a copy of its head on each rank, so
  // that attention (and a generation build's KV cache) splits one head per
  // rank (vLLM's replication; Megatron's for fewer query groups than tp).
  if (options.fuseAttention && options.tp > 1)
    pm.addNestedPass<func::FuncOp>(createReplicateKVHeads({options.tp}));
  // A generation build's steps are derived from the forward, attention
  // fused; the layout passes then split them as any forward.
  if (options.generate)
    pm.addPass(createDeriveGeneration(
        {options.maxBatch,
         options.maxTokens > 0 ? options.maxTokens
                               : std::max(options.maxSeq, options.maxBatch),
         getDecodeTokens(options), options.kvBlock, options.kvBlocks}));
  // The positions the steps' inputs index, before any pass pads or splits
  // the axes they index (a generation build's, once its steps are derived:
  // its own check names --max-seq).
  pm.addNestedPass<func::FuncOp>(createBoundIndices());
  // Before the trainable set is decided: each copy is judged on its own.
  if (!options.untie.empty())
    pm.addPass(createUntie({options.untie}));
  if (options.train) {
    OpPassManager &fpm = pm.nest<func::FuncOp>();
    fpm.addPass(createSelectTrainable(
        {options.trainable, options.freeze, options.remarks},
        options.onTrainableDecisions));
    // The loss of one microbatch: the pipeline averages them.
    if (microbatches > 1)
      fpm.addPass(createMicrobatch({microbatches, defaulted}));
    // A pipeline may compute a heavy LM head in pieces of the sequence,
    // which its stages share.
    int64_t chunks = options.pp > 1 ? options.pp * options.virtualStages : 1;
    fpm.addPass(createAttachLoss({options.labels, options.logits,
                                  options.headPieces, chunks,
                                  options.costTable, options.target,
                                  options.machine, options.dtype}));
    // Padding comes before autodiff: the backward follows the padded
    // forward.
    // With ZeRO the padded extent splits over tp, then each block over dp.
    // Without tp, ZeRO 3 pads too: it holds the parameter itself split, and
    // a table that dp does not divide (GPT-2's 50257 rows) would otherwise
    // be split along its features, every rank's block strided, and be
    // transposed around each gather and reduce-scatter (four passes over
    // GPT-2's 154 MB embedding a step). ZeRO 1 and 2 hold the parameter
    // whole, and a whole tensor's padding has no place in the runtime's
    // tables (a split's full extent says it).
    int64_t zeroDp =
        options.zero > 0 && (options.tp > 1 || options.zero >= 3) ? options.dp
                                                                   : 1;
    if (options.tp * zeroDp > 1)
      fpm.addPass(createPadVocabulary({options.tp * zeroDp}));
    // The products are narrowed before the backward is derived, so that
    // its products are narrowed too.
    if (options.dtype != "f32")
      fpm.addPass(createMixedPrecision({options.dtype}));
    fpm.addPass(createAutodiff());
    if (options.delayWeights || options.schedule == "2bw")
      fpm.addPass(createDelayWeights());
    OptimizerOptions update;
    update.kind = options.optimizer;
    update.lr = options.lr;
    update.beta1 = options.beta1;
    update.beta2 = options.beta2;
    update.eps = options.eps;
    update.weightDecay = options.weightDecay;
    update.momentum = options.momentum;
    update.clipGrad = options.clipGrad;
    update.lrSchedule = options.lrSchedule;
    update.warmupSteps = options.warmupSteps;
    update.decaySteps = options.decaySteps;
    update.minLr = options.minLr;
    fpm.addPass(createOptimizer(update));
    // The backward's activations in 16 bits where the forward holds them
    // so.
    if (options.dtype != "f32")
      fpm.addPass(createNarrowStash());
    // The evaluation step: the training step's forward and loss, which the
    // layout passes then lay out with it.
    if (options.eval)
      pm.addPass(createDeriveEvaluation());
  }
  if (!options.train && microbatches > 1)
    pm.addNestedPass<func::FuncOp>(createMicrobatch({microbatches, defaulted}));
  // An evaluation step: the forward and the loss the training step would
  // take of it (of one microbatch, as training takes it: the pipeline
  // averages them).
  if (!options.train && options.withLoss)
    pm.addNestedPass<func::FuncOp>(
        createAttachLoss({options.labels, options.logits}));
  if (!options.train && options.tp > 1)
    pm.addNestedPass<func::FuncOp>(createPadVocabulary({options.tp}));
  if (!options.train && options.dtype != "f32")
    pm.addNestedPass<func::FuncOp>(createMixedPrecision({options.dtype}));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // The mesh's axes are laid out one at a time, each on the program the
  // earlier ones' partitioning left: tensor parallelism first, then data
  // parallelism splits the batch of each tensor-parallel program, and with
  // ZeRO each rank's block of a parameter's optimizer state (a dimension
  // split by both nests dp's blocks in tp's, tp major).
  if (options.tp > 1) {
    // Sharding runs after autodiff and the optimizer: the backward's
    // collectives (Megatron's conjugates) and the split optimizer state
    // fall out of partitioning the whole step.
    pm.addPass(
        createShardStrategy({options.tp, options.shard,
                             options.sequenceParallel, options.remarks}));
    PropagateShardingOptions byTensor;
    byTensor.sequenceParallel = options.sequenceParallel;
    pm.addPass(createPropagateSharding(byTensor));
    pm.addPass(createPartition());
    pm.addPass(createCSEPass());
  }
  if (options.dp > 1) {
    pm.addPass(createDataParallel({options.dp, options.zero}));
    PropagateShardingOptions byBatch;
    byBatch.axis = dist::kDataAxis.str();
    byBatch.outputsSplit = true;
    byBatch.zero = options.zero;
    pm.addPass(createPropagateSharding(byBatch));
    pm.addPass(createPartition({dist::kDataAxis.str()}));
    pm.addPass(createCSEPass());
  }
  // Recomputation is chosen on the laid-out mesh (a rank's shards) and,
  // pipelined, per stage: the forward's collectives are made again too.
  auto addRecompute = [&] {
    if (!options.train || options.recompute == "none")
      return;
    RecomputeOptions recompute;
    recompute.mode = options.recompute;
    recompute.memoryBudget = options.memoryBudget;
    recompute.schedule = options.schedule;
    recompute.microbatches = microbatches;
    recompute.virtualStages = options.virtualStages;
    recompute.costTable = options.costTable;
    recompute.target = options.target;
    recompute.machine = options.machine;
    recompute.dtype = options.dtype;
    pm.addPass(createRecompute(recompute));
  };
  if (!pipelined)
    addRecompute();
  if (pipelined) {
    // Stages are cut from the tensor-parallel program, so they contain its
    // collectives; the schedule is verified before it is compiled.
    pm.addPass(createPipelineStages(
        {options.pp, options.virtualStages, options.schedule, microbatches,
         options.ppSplit, options.costTable, options.target, options.machine,
         options.dtype}));
    addRecompute();
    PipelineScheduleOptions schedule;
    schedule.kind = options.schedule;
    schedule.microbatches = microbatches;
    schedule.virtualStages = options.virtualStages;
    schedule.ranks = options.pp;
    pm.addPass(createPipelineSchedule(schedule));
    pm.addPass(createVerifySchedule());
    if (!options.lowerSchedule)
      return;
    // Zero-bubble schedules run the weight gradient (W) apart.
    pm.addPass(
        createPipelineOutline({pipeline::splitsBackward(options.schedule)}));
    pm.addPass(createLowerSchedule());
    pm.addPass(createCSEPass());
  }
  // Last, on every function a pipeline made too: collectives start as
  // early as their operands allow, and the code waits for them where their
  // results are first read.
  if (options.dp > 1)
    pm.addNestedPass<func::FuncOp>(
        createBucketCollectives({dist::kDataAxis.str(), options.bucketBytes}));
  if (options.tp > 1 || options.dp > 1)
    pm.addNestedPass<func::FuncOp>(createOverlapCollectives());
  pm.addNestedPass<func::FuncOp>(createCheckStaticShapes());
}

void pcc::registerPipelines() {
  PassPipelineRegistration<ParallelizeOptions>(
      "pcc-parallelize",
      "What `pcc compile` runs between import and code generation "
      "(training passes when train=true, folding, the static-shape check)",
      [](OpPassManager &pm, const ParallelizeOptions &options) {
        buildParallelizePipeline(pm, options.getConfig());
      });
}
