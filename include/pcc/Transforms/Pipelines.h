//===- Pipelines.h - pcc's named pass pipelines -----------------*- C++ -*-===//

#ifndef PCC_TRANSFORMS_PIPELINES_H
#define PCC_TRANSFORMS_PIPELINES_H

#include "pcc/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <cstdint>
#include <string>

namespace pcc {

/// The options of the `pcc-parallelize` pipeline, what `pcc compile` runs
/// between import and code generation: each declared once, in
/// PipelineOptions.def. The command line, the layout search and the driver
/// fill this struct; buildParallelizePipeline reads it.
struct PipelineConfig {
#define PCC_OPTION(TYPE, FIELD, NAME, DEFAULT, CLI, DESCRIPTION)               \
  TYPE FIELD = DEFAULT;
#include "pcc/Transforms/PipelineOptions.def"
  /// Receives pcc-select-trainable's decisions (a driver's report of the
  /// trainable set); null: they are only remarks, with `remarks`.
  TrainableDecisionSink onTrainableDecisions;
};

/// A generation build's decode step's tokens: `maxBatch`, or over a
/// pipeline of `pp` stages a group of ceil(maxBatch / pp) sequences, which
/// the runtime decodes one group per stage at a time.
inline int64_t getDecodeTokens(const PipelineConfig &options) {
  int64_t pp = options.pp > 1 ? int64_t(options.pp) : 1;
  return (int64_t(options.maxBatch) + pp - 1) / pp;
}

/// The same options as a textual pass pipeline's (pcc-opt
/// --pcc-parallelize="tp=2 train=true ...").
struct ParallelizeOptions
    : public mlir::PassPipelineOptions<ParallelizeOptions> {
#define PCC_OPTION(TYPE, FIELD, NAME, DEFAULT, CLI, DESCRIPTION)               \
  Option<TYPE> FIELD{*this, NAME, llvm::cl::desc(DESCRIPTION),                 \
                     llvm::cl::init(DEFAULT)};
#include "pcc/Transforms/PipelineOptions.def"

  /// The options' values.
  PipelineConfig getConfig() const;
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
                              const PipelineConfig &options);

/// Registers `pcc-parallelize` with the global pipeline registry.
void registerPipelines();

} // namespace pcc

#endif // PCC_TRANSFORMS_PIPELINES_H
