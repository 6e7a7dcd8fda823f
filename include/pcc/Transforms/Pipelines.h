//===- Pipelines.h - pcc's named pass pipelines -----------------*- C++ -*-===//

#ifndef PCC_TRANSFORMS_PIPELINES_H
#define PCC_TRANSFORMS_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace pcc {

/// Options of the `pcc-parallelize` pipeline: what `pcc compile` runs
/// between import and code generation. Tensor and pipeline parallelism
/// join these options as their passes land.
struct ParallelizeOptions
    : public mlir::PassPipelineOptions<ParallelizeOptions> {
  Option<bool> train{*this, "train",
                     llvm::cl::desc("Compile a training step: loss, "
                                    "backward and optimizer update"),
                     llvm::cl::init(false)};
  Option<bool> withLoss{
      *this, "with-loss",
      llvm::cl::desc("Without train: the forward with the training loss "
                     "attached (an evaluation step)"),
      llvm::cl::init(false)};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("adamw or sgd"),
                                llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::init(1e-8)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (negative: the optimizer's default)"),
      llvm::cl::init(-1)};
  Option<double> momentum{*this, "momentum", llvm::cl::init(0)};
  Option<double> clipGrad{*this, "clip-grad",
                          llvm::cl::desc("Clip the gradients' global L2 norm"),
                          llvm::cl::init(0)};
  Option<std::string> lrSchedule{*this, "lr-schedule",
                                 llvm::cl::desc("constant, linear or cosine"),
                                 llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{*this, "warmup-steps", llvm::cl::init(0)};
  Option<int64_t> decaySteps{*this, "decay-steps", llvm::cl::init(0)};
  Option<double> minLr{*this, "min-lr", llvm::cl::init(0)};
  Option<std::string> trainable{
      *this, "trainable",
      llvm::cl::desc("Regular expression of initializers to train")};
  Option<std::string> freeze{
      *this, "freeze",
      llvm::cl::desc("Regular expression of initializers not to train")};
  Option<std::string> untie{
      *this, "untie",
      llvm::cl::desc("Regular expression of shared initializers to give "
                     "each consumer its own copy of")};
  Option<bool> remarks{
      *this, "remarks",
      llvm::cl::desc("Report each initializer's trainable decision"),
      llvm::cl::init(false)};
  Option<std::string> labels{*this, "labels",
                             llvm::cl::desc("ONNX name of the labels")};
  Option<std::string> logits{*this, "logits",
                             llvm::cl::desc("ONNX name of the logits")};
  Option<int64_t> dp{*this, "dp", llvm::cl::desc("Ranks of data parallelism"),
                     llvm::cl::init(1)};
  Option<int64_t> zero{*this, "zero",
                       llvm::cl::desc("With dp: ZeRO stage (0, 1 or 2)"),
                       llvm::cl::init(0)};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("With dp: the most bytes of one bucket of gradients "
                     "all-reduced together (0: one all-reduce each)"),
      llvm::cl::init(25 << 20)};
  Option<int64_t> tp{*this, "tp", llvm::cl::desc("Ranks of tensor parallelism"),
                     llvm::cl::init(1)};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("Sequence parallelism between tensor-parallel regions"),
      llvm::cl::init(false)};
  Option<bool> fuseAttention{
      *this, "fuse-attention",
      llvm::cl::desc("Form graph.attention from exported attention "
                     "(pcc-fuse-attention)"),
      llvm::cl::init(true)};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("With train: none, selective, full or auto "
                     "(pcc-recompute: the backward recomputes each block's "
                     "activations, the large ones cheap to make again, or "
                     "what fits memory-budget at the least work)"),
      llvm::cl::init("none")};
  Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("With recompute=auto: the bytes each rank may hold"),
      llvm::cl::init(0)};
  Option<std::string> machine{
      *this, "machine",
      llvm::cl::desc("Machine description (a100-80gb, h100-80gb, cpu or a "
                     "JSON file) whose throughputs time the stages")};
  Option<int64_t> plannedPeak{
      *this, "planned-peak",
      llvm::cl::desc("With recompute=auto, unpipelined: the step's planned "
                     "peak without recomputation (0: estimated)"),
      llvm::cl::init(0)};
  Option<std::string> shard{
      *this, "shard",
      llvm::cl::desc("Layout overrides REGEX=col|row|rep, ';'-separated")};
  Option<int64_t> pp{*this, "pp", llvm::cl::desc("Pipeline ranks"),
                     llvm::cl::init(1)};
  Option<int64_t> microbatches{
      *this, "microbatches",
      llvm::cl::desc("Microbatches per step (0: as many as pipeline ranks)"),
      llvm::cl::init(0)};
  Option<bool> lowerSchedule{
      *this, "lower-schedule",
      llvm::cl::desc("Lower the verified pipeline schedule into one step "
                     "function per pipeline rank (false: stop at the "
                     "schedule, as `pcc plan` does)"),
      llvm::cl::init(true)};
  Option<std::string> schedule{
      *this, "schedule", llvm::cl::desc("gpipe, 1f1b, interleaved or zb-h1"),
      llvm::cl::init("1f1b")};
  Option<int64_t> virtualStages{
      *this, "virtual-stages",
      llvm::cl::desc("Model chunks per pipeline rank (interleaved)"),
      llvm::cl::init(1)};
  Option<std::string> ppSplit{
      *this, "pp-split",
      llvm::cl::desc("ONNX nodes after which pipeline stages end")};
  Option<std::string> costTable{
      *this, "cost-table",
      llvm::cl::desc("JSON table of measured throughputs")};
  Option<std::string> target{*this, "target",
                             llvm::cl::desc("Code generation target"),
                             llvm::cl::init("cpu")};
  Option<std::string> dtype{
      *this, "dtype",
      llvm::cl::desc("Element type of the matrix products: f32, or bf16 "
                     "(pcc-mixed-precision)"),
      llvm::cl::init("f32")};
};

/// Builds the pipeline: with `untie`, pcc-untie; for training,
/// pcc-select-trainable, pcc-attach-loss, pcc-autodiff and pcc-optimizer
/// (with a 16-bit dtype, pcc-mixed-precision before autodiff and
/// pcc-narrow-stash after it, or pcc-mixed-precision after the forward's
/// rewrites for inference);
/// then folding and CSE; with tp > 1, pcc-shard-strategy,
/// pcc-propagate-sharding and pcc-partition over the whole step; with
/// pipeline parallelism or microbatches, pcc-microbatch (before the loss),
/// then pcc-pipeline-stages, pcc-pipeline-schedule, pcc-verify-schedule,
/// pcc-pipeline-outline and pcc-lower-schedule; and the static-shape check
/// that the targets rely on.
void buildParallelizePipeline(mlir::OpPassManager &pm,
                              const ParallelizeOptions &options);

/// Registers `pcc-parallelize` with the global pipeline registry.
void registerPipelines();

} // namespace pcc

#endif // PCC_TRANSFORMS_PIPELINES_H
