//===- Pipeline.h - Pipeline parallelism: stages and microbatches -*- C++
//-*-===//
//
// The passes that turn one training or inference step into pipeline
// stages: microbatching (the step on a slice of the batch), the stage
// partition (which ops each stage runs, balanced by the cost model), the
// outlining of stages into functions, and the lowering of a verified
// schedule into each pipeline rank's step function.
//
// Attributes they leave in the IR:
//   function  dist.microbatches = M     the step computes one of M slices
//   argument  dist.batch_dim = d        sliced along d per microbatch
//   result    dist.batch_dim = d        joined along d over microbatches
//   op        dist.stage = s            the pipeline stage that runs it
//             dist.stages = [s, ...]    the stages running a copy of it
//                                       (optimizer ops of tied parameters)
//             dist.grad_sum             a gradient's parts from several
//                                       stages, summed after the flush
//   result    dist.reduce_axes = [..]   (outlined) a gradient part still to
//                                       be summed over those mesh axes
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TRANSFORMS_PIPELINE_PIPELINE_H
#define PCC_TRANSFORMS_PIPELINE_PIPELINE_H

#include "pcc/Analysis/CostModel.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace pcc {

// The attributes' names and what they hold are the Dist dialect's (see
// DistNames.h), which verifies them.
using dist::kBaseBytesAttr;
using dist::kBatchDimAttr;
using dist::kDeferredRole;
using dist::kGradRole;
using dist::kGradSumAttr;
using dist::kHeaviestOpTimeAttr;
using dist::kInputRole;
using dist::kInvariantIdAttr;
using dist::kInvariantRole;
using dist::kMicrobatchesAttr;
using dist::kNumStagesAttr;
using dist::kOutputRole;
using dist::kPhaseAttr;
using dist::kReduceAxesAttr;
using dist::kStageAttr;
using dist::kDeferredCostsAttr;
using dist::kStageCostsAttr;
using dist::kStagesAttr;
using dist::kStashBytesAttr;
using dist::kStateRole;
using dist::kTransferBytesAttr;
using dist::kTransferCostsAttr;
using dist::kUpdateRole;
using dist::kValueRole;
using dist::kWeightGradAttr;

/// Whether free value `v` (made from parameters and constants alone) is
/// made once per step rather than in every microbatch's function that
/// reads it: a cast of a float to fewer bits (a parameter's bf16 or f16
/// copy under --dtype), which every microbatch's forward and backward would
/// otherwise make again from the same weight (at 7.5B, a tenth of a
/// microbatch's time). The step then holds it, half the parameter's bytes
/// or less, from the first call that reads it to its last.
bool isMadeOncePerStep(mlir::Value v);

/// For each of the `ranks` pipeline ranks of `step` (a step whose ops carry
/// their stage), the ops that make the copies made once per step
/// (isMadeOncePerStep) that the stages there read, each once, in the order
/// the stages' ops first read them: what the rank makes before its first
/// action.
llvm::SmallVector<llvm::SmallVector<mlir::Operation *>>
getOncePerStepCopies(mlir::func::FuncOp step, int64_t ranks);

/// Rewrites `func` (a forward, before the loss is attached) to compute one
/// of `microbatches` equal slices of its batch (see the pcc-microbatch
/// pass). `defaulted` says that the user did not choose `microbatches`:
/// errors then name the default instead of a flag.
llvm::LogicalResult microbatch(mlir::func::FuncOp func, int64_t microbatches,
                               bool defaulted = false);

struct StageOptions {
  /// Stages: pipeline ranks x virtual stages per rank.
  int64_t stages = 1;
  /// Pipeline ranks (stage s runs on rank s % ranks), and the devices of
  /// each (the other mesh axes: tensor parallelism), numbered
  /// consecutively.
  int64_t ranks = 1, ranksPerStage = 1;
  /// Manual cuts: the ONNX nodes after which a stage ends, comma-separated.
  std::string split;
  /// The schedule the stages will run and its microbatches: when given
  /// (gpipe, 1f1b, interleaved), the balanced cuts move while that
  /// schedule's simulated makespan shrinks.
  std::string schedule;
  int64_t microbatches = 0;
  CostModel cost = CostModel::forTarget("cpu");
  /// Where another step of the program puts what the ranks hold, by name:
  /// each weight (graph.weight) and state argument (graph.state), the
  /// stages that read it. When given, the cuts follow them instead of the
  /// costs, so that steps sharing weights and state (a generation build's
  /// prefill and decode) hold each on the same ranks.
  const llvm::StringMap<llvm::SmallVector<int64_t>> *holders = nullptr;
};

/// The stages at which the step `func`, its stages assigned, reads each
/// weight and state argument, by name (StageOptions::holders).
llvm::StringMap<llvm::SmallVector<int64_t>>
getHolderStages(mlir::func::FuncOp func);

/// Marks every op of the step `func` with the stage that runs it (see the
/// pcc-pipeline-stages pass).
llvm::LogicalResult assignStages(mlir::func::FuncOp func,
                                 const StageOptions &options);

/// Moves each stage's ops of the step `step` (marked by
/// pcc-pipeline-stages) into functions (see the pcc-pipeline-outline pass).
/// With `splitBackward`, each stage's weight gradient gets a function of its
/// own (the W of zero-bubble schedules).
llvm::LogicalResult outlineStages(mlir::func::FuncOp step,
                                  bool splitBackward = false);

namespace pipeline {
/// The one answer to "which stages hold state argument `arg` of the step
/// `step`", as pcc-pipeline-stages marked it (dist.stages on the
/// parameter): a parameter's stages are those whose ops read it, a
/// moment's (graph.state_of) its parameter's, and state of no parameter (a
/// step counter) is on every one of the `numStages` stages. The stage
/// partition places the optimizer by it, the outlining gives each holding
/// rank an optimizer function, and the lowering passes each rank its state.
llvm::SmallVector<int64_t> stateStages(mlir::func::FuncOp step, unsigned arg,
                                       int64_t numStages);

/// The pipeline ranks of `ranks` that run stage `stage` of `step`: rank
/// stage % ranks, and with two pipelines (dist.pipelines = 2, Chimera's)
/// rank ranks - 1 - stage as well; in rank order.
llvm::SmallVector<int64_t, 2> getStageRanks(mlir::func::FuncOp step,
                                            int64_t stage, int64_t ranks);

/// Whether pipeline rank `rank` of `ranks` holds state argument `arg`: one
/// of its stateStages runs there (getStageRanks).
bool holdsState(mlir::func::FuncOp step, unsigned arg, int64_t rank,
                int64_t ranks);

/// Whether result `k` of the step `step` updates its state argument in
/// place: it is that argument through ops that each update operand 0 in
/// place (graph::OpTrait::UpdatesInPlace: a KV cache's writes). A pipeline
/// writes such state through the argument it passes the stage that writes
/// it: no function returns it, and no optimizer makes it.
bool isUpdatedInPlace(mlir::func::FuncOp step, unsigned k);

/// Whether a schedule of `kind` runs every backward of a stage on one rank,
/// within one step's call, input and weight gradient together (gpipe, 1f1b,
/// interleaved): the lowering can then defer weight-gradient products to
/// one product a step (getDeferredProducts).
bool defersProducts(llvm::StringRef kind);

/// A weight-gradient product of a stage's backward that a step of
/// `microbatches` computes once, over every microbatch's positions (K
/// times the microbatches), rather than once per microbatch added into the
/// partial sum: each such addition reads and writes the whole result (50
/// MB for a tied LM head's gradient, past every cache) for a product of a
/// few positions. Megatron-LM defers its embedding's weight gradient so.
/// The product reads both operands with K as their slowest index (the
/// rows of its transposed A, of its B: GemmOperands), so that the
/// microbatches' buffers stacked are the operands of the one product; the
/// stack of both, held to the end of the backward, is no larger than the
/// result.
struct DeferredProduct {
  /// The graph.matmul, and the gradient result of its function that it
  /// is a term of (getAccumulatedTerms), with the term.
  mlir::Operation *product = nullptr;
  unsigned result = 0;
  mlir::Value term;
  /// The buffers the product reads its A (transposed) and B from.
  mlir::Value lhs, rhs;
  /// The bytes of both over all microbatches.
  int64_t bytes = 0;
};

/// The products of `func` (a stage's backward, or a whole step: its
/// gradient results are those `isGradient` names) that a step of
/// `microbatches` defers, in program order. With `inParts`, an operand
/// may be a part of a larger buffer (a step not yet outlined, whose stage
/// functions receive such a part, a slice of the batch's activations, as
/// a buffer of its own).
llvm::SmallVector<DeferredProduct>
getDeferredProducts(mlir::func::FuncOp func, int64_t microbatches,
                    llvm::function_ref<bool(unsigned)> isGradient,
                    bool inParts = false);

/// A stage's backward with its deferred products taken out (each returns
/// its operands' buffers instead, marked dist.deferred = 2p and 2p + 1,
/// and no longer its term of the gradient), and the function that computes
/// them once a step: argument j the step's microbatches' results j
/// stacked along their first dimension, a result per product, the
/// gradient's term (dist.grad, and dist.reduce_axes as the backward's).
struct DeferringBackward {
  mlir::func::FuncOp backward, products;
};

/// Makes both beside `backward` for a step of `microbatches`; none where
/// it has no product to defer.
std::optional<DeferringBackward> deferProducts(mlir::func::FuncOp backward,
                                               int64_t microbatches);

/// Whether `op` sums gradients over data parallelism (an all-reduce or
/// reduce-scatter over axis dp): a pipeline takes it once per step, of the
/// gradients accumulated over the microbatches, not once per microbatch.
bool isDataParallelReduction(mlir::Operation *op);

/// What the layout search (`pcc plan --devices`) estimates layouts from:
/// a step not yet pipelined, seen as the stage partition sees it. Per
/// forward op in program order (the positions the stages are cut at): the
/// seconds of the op, of the backward the partition would place with it
/// (input and weight gradient), of that backward's weight gradient alone,
/// and of the collectives among both; the bytes the backward reads of the
/// op's results; and the bytes of the parameters first read there, of
/// their gradients and of the optimizer state that goes with them.
struct StepProfile {
  llvm::SmallVector<double> forward, backward, weight, communication;
  llvm::SmallVector<int64_t> stash, parameters, gradients, state;
  /// The backward ops placed with each forward op (each op pays the
  /// machine's fixed overhead, whatever its size).
  llvm::SmallVector<int64_t> backwardOps;
  /// Per position and its end (n + 1): the bytes a cut there receives.
  llvm::SmallVector<double> crossing;
  /// Seconds of the optimizer update, which runs once per step.
  double optimizer = 0;
  /// The largest value any forward op makes.
  int64_t largestValue = 0;
  /// The forward's flops (as getForwardFlops counts them, in floating
  /// point: a large model's step exceeds 64-bit integers).
  double forwardFlops = 0;
};
StepProfile profileStep(mlir::func::FuncOp step, const CostModel &cost);

/// The flops of `step`'s forward (its ops that compute the outputs and the
/// loss, not those computed from parameters alone) on one rank and, for a
/// microbatched step, one microbatch: what a model's FLOP count is made
/// of (the backward's are about twice; recomputation is not counted).
int64_t getForwardFlops(mlir::func::FuncOp step);
} // namespace pipeline

/// Replaces the pipelined step of `module` by one function per pipeline
/// rank that runs its actions of the module's dist.schedule (see the
/// pcc-lower-schedule pass).
llvm::LogicalResult lowerSchedule(mlir::ModuleOp module);

} // namespace pcc

#endif // PCC_TRANSFORMS_PIPELINE_PIPELINE_H
