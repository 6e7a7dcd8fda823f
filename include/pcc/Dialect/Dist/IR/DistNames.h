//===- DistNames.h - The Dist dialect's attributes --------------*- C++ -*-===//
//
// The discardable attributes that the sharding and pipeline passes write
// and the targets read, named once for all of them (targets do not depend
// on the Transforms headers). The Dist dialect verifies every `dist.*`
// attribute where it appears (DistDialect::verifyOperationAttribute and
// the argument and result verifiers): its kind of value, its range, and
// that the name is one of these.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_DIALECT_DIST_IR_DISTNAMES_H
#define PCC_DIALECT_DIST_IR_DISTNAMES_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace pcc::dist {

/// The device mesh the passes create (`dist.mesh @mesh`), and its axes:
/// data parallelism, pipeline stages and tensor parallelism, in the order
/// the mesh lists them (major to minor: a stage's tensor-parallel ranks are
/// neighbours, and so are a replica's stages).
inline constexpr llvm::StringLiteral kMeshName = "mesh";
inline constexpr llvm::StringLiteral kDataAxis = "dp";
inline constexpr llvm::StringLiteral kPipelineAxis = "pp";
inline constexpr llvm::StringLiteral kTensorAxis = "tp";
inline constexpr llvm::StringLiteral kMeshAxisOrder[] = {
    kDataAxis, kPipelineAxis, kTensorAxis};
/// A pipeline rank's step (and its optimizer function): its coordinate
/// along the pipeline axis.
inline constexpr llvm::StringLiteral kRankAttr = "dist.rank";
/// A call of a stage function: the scheduled action ("F0", "B1", "W0", "O";
/// "F0+" for microbatch 0 of the next step, which a schedule without a flush
/// runs before the step ends; "W" for a stage's weight-gradient products
/// deferred to one call over all microbatches).
inline constexpr llvm::StringLiteral kActionAttr = "dist.action";
/// A result of a rank's step: its index among the whole step's results,
/// which orders the outputs table the ranks share.
inline constexpr llvm::StringLiteral kResultIndexAttr = "dist.result_index";

// Sharding (pcc-propagate-sharding, pcc-partition, pcc-pad-vocabulary):
/// A value's #dist.sharding: a state argument's, a graph.weight's, a
/// split result's, a graph input's batch split.
inline constexpr llvm::StringLiteral kShardingAttr = "dist.sharding";
/// The layouts an op reads its operands in and makes its results in: an
/// array of #dist.sharding, one per operand (result).
inline constexpr llvm::StringLiteral kOperandsAttr = "dist.operands";
inline constexpr llvm::StringLiteral kResultsAttr = "dist.results";
/// [dim, extent]: a table padded along dim, of which `extent` rows are
/// real.
inline constexpr llvm::StringLiteral kPaddingAttr = "dist.padding";

// Pipelines (pcc-microbatch, pcc-pipeline-stages, -outline, -lower-schedule):
inline constexpr llvm::StringLiteral kMicrobatchesAttr = "dist.microbatches";
inline constexpr llvm::StringLiteral kBatchDimAttr = "dist.batch_dim";
inline constexpr llvm::StringLiteral kStageAttr = "dist.stage";
inline constexpr llvm::StringLiteral kStagesAttr = "dist.stages";
inline constexpr llvm::StringLiteral kNumStagesAttr = "dist.num_stages";
/// On a pipelined step: the pipelines its schedule runs over the same
/// ranks; with 2 (Chimera), stage s also runs on rank ranks - 1 - s.
inline constexpr llvm::StringLiteral kPipelinesAttr = "dist.pipelines";

/// The pipeline rank of `ranks` that runs virtual stage `stage` of
/// microbatch `microbatch` with `pipelines` pipelines over the ranks: rank
/// `stage % ranks`, or, in the second of two (the odd microbatches, one
/// stage per rank), rank `ranks - 1 - stage`.
inline int64_t getPipelineRank(int64_t stage, int64_t microbatch, int64_t ranks,
                               int64_t pipelines) {
  if (pipelines == 2 && microbatch % 2 == 1)
    return ranks - 1 - stage;
  return stage % ranks;
}
/// A step of a program of several pipelined steps: the dist.schedule it
/// runs.
inline constexpr llvm::StringLiteral kStepScheduleAttr = "dist.step_schedule";
/// A backward op of the weight gradient (W), not of the input gradient.
inline constexpr llvm::StringLiteral kWeightGradAttr = "dist.weight_grad";
/// Per virtual stage: the times of F, B and W (3 per stage), and the bytes
/// one microbatch's forward keeps until its backward.
inline constexpr llvm::StringLiteral kStageCostsAttr = "dist.stage_costs";
inline constexpr llvm::StringLiteral kStashBytesAttr = "dist.stash_bytes";
/// Per virtual stage: the time of the weight-gradient products it runs
/// once a step, after its rank's last action (pipeline::deferProducts),
/// which its W time leaves out.
inline constexpr llvm::StringLiteral kDeferredCostsAttr =
    "dist.deferred_costs";
/// Per virtual stage: the seconds its activations take to reach the next
/// stage and its input gradient the previous one (2 per stage).
inline constexpr llvm::StringLiteral kTransferCostsAttr = "dist.transfer_costs";
/// Per virtual stage: the bytes of those two sends.
inline constexpr llvm::StringLiteral kTransferBytesAttr = "dist.transfer_bytes";
/// The time of the heaviest forward op with its backward: a lower bound on
/// the slowest stage that no cut can beat.
inline constexpr llvm::StringLiteral kHeaviestOpTimeAttr =
    "dist.heaviest_op_time";
/// Per pipeline rank: the bytes of the parameters, optimizer state and
/// weights it holds throughout.
inline constexpr llvm::StringLiteral kBaseBytesAttr = "dist.base_bytes";
/// An add of a gradient's parts made on different stages: each stage
/// accumulates its part and the parts are summed after the flush.
inline constexpr llvm::StringLiteral kGradSumAttr = "dist.grad_sum";
/// Outlined functions: their phase ("forward", "backward", "optimizer")
/// and the pipeline rank of an optimizer; what their arguments and results
/// are (see Outline.cpp).
inline constexpr llvm::StringLiteral kPhaseAttr = "dist.phase";
inline constexpr llvm::StringLiteral kInputRole = "dist.input";
inline constexpr llvm::StringLiteral kStateRole = "dist.state";
inline constexpr llvm::StringLiteral kValueRole = "dist.value";
inline constexpr llvm::StringLiteral kOutputRole = "dist.output";
inline constexpr llvm::StringLiteral kGradRole = "dist.grad";
inline constexpr llvm::StringLiteral kUpdateRole = "dist.update";
/// On a result of a stage's backward whose weight-gradient products the
/// step defers (pipeline::deferProducts): the operand `j` of those
/// products, whose microbatches the lowering joins and passes as argument
/// `j` (same attribute) of the function that computes them once a step.
inline constexpr llvm::StringLiteral kDeferredRole = "dist.deferred";
/// An argument of a forward or backward that the step computes once, before
/// the rank's first call reads it, rather than every microbatch: a free
/// value (made from parameters and constants alone) that narrows a
/// parameter, such as its bf16 copy under --dtype bf16. The integer names
/// the step's op that makes it, which carries it as kInvariantIdAttr.
inline constexpr llvm::StringLiteral kInvariantRole = "dist.invariant";
inline constexpr llvm::StringLiteral kInvariantIdAttr = "dist.invariant_id";
/// A `dist.grad` result whose sum over the ranks of these mesh axes (data
/// or tensor parallelism's) is still to be taken: the lowering all-reduces
/// the gradient once, after its last microbatch, instead of every
/// microbatch's part.
inline constexpr llvm::StringLiteral kReduceAxesAttr = "dist.reduce_axes";
/// On a result of a function that a call runs (from pcc-lower-schedule):
/// the index of the argument whose buffer the result is written into, the
/// partial sum it adds to (a stage's accumulating backward) or the state it
/// updates (a pipeline rank's optimizer). The caller gives both the same
/// buffer, which the call's operand may no longer be read from
/// (mayWriteIntoOperand).
inline constexpr llvm::StringLiteral kAccumulatesAttr = "dist.accumulates";

} // namespace pcc::dist

#endif // PCC_DIALECT_DIST_IR_DISTNAMES_H
