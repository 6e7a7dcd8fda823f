//===- Passes.h - pcc's passes ----------------------------------*- C++ -*-===//

#ifndef PCC_TRANSFORMS_PASSES_H
#define PCC_TRANSFORMS_PASSES_H

#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <functional>

namespace pcc {
class CostModel;

#define GEN_PASS_DECL
#include "pcc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pcc/Transforms/Passes.h.inc"

/// Checks that every value in `func` is a statically shaped tensor of a
/// supported element type; emits an error at the first that is not.
llvm::LogicalResult checkStaticShapes(mlir::func::FuncOp func);

/// One initializer's place in the trainable set, and why.
struct TrainableDecision {
  std::string name;
  bool trainable = false;
  std::string reason;
  /// What the exporter recorded ("parameter", "buffer", "constant"), if any.
  std::string exportedAs;
};

/// Decides which float initializers (graph.weight) a training step updates
/// and marks them `trainable` (see the pcc-select-trainable pass). Warns
/// about exports that lost their parameters. Fails on a bad regex.
llvm::FailureOr<llvm::SmallVector<TrainableDecision>>
selectTrainable(mlir::func::FuncOp func, llvm::StringRef trainableRegex,
                llvm::StringRef freezeRegex);

/// Where pcc-select-trainable reports its decisions, in the order it made
/// them (a driver's report of the trainable set).
using TrainableDecisionSink =
    std::function<void(llvm::ArrayRef<TrainableDecision>)>;

/// pcc-select-trainable with `sink`, which receives each function's
/// decisions as they are made.
std::unique_ptr<mlir::Pass>
createSelectTrainable(const SelectTrainableOptions &options,
                      TrainableDecisionSink sink);

/// Gives each operation that consumes a float initializer matching `regex`
/// its own copy of it, named after the consumer (see the pcc-untie pass).
/// Returns how many initializers were untied; fails on a bad regex.
llvm::FailureOr<unsigned> untieWeights(mlir::ModuleOp module,
                                       llvm::StringRef regex);

/// Appends the causal-LM cross-entropy of the logits against the shifted
/// labels as a result named "loss" (see the pcc-attach-loss pass), over
/// `pieces` parts of the sequence (0: as many as make the slowest of
/// `chunks` pipeline chunks fastest by `cost`, the CPU's defaults if null).
llvm::LogicalResult attachLoss(mlir::func::FuncOp func, llvm::StringRef labels,
                               llvm::StringRef logits, int64_t pieces = 1,
                               int64_t chunks = 1,
                               const CostModel *cost = nullptr);

/// Appends the gradient of the "loss" result with respect to every
/// graph.weight marked `trainable` (see the pcc-autodiff pass).
llvm::LogicalResult differentiate(mlir::func::FuncOp func);

struct OptimizerConfig {
  std::string kind = "adamw";
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  /// Negative: the optimizer's default (0.01 for AdamW, 0 for SGD).
  double weightDecay = -1;
  double momentum = 0;
  /// Gradient clipping by the global L2 norm (PyTorch's clip_grad_norm_);
  /// 0: none.
  double clipGrad = 0;
  /// The learning rate after s completed steps: constant, or a linear
  /// warmup over `warmupSteps` then a linear or cosine decay to `minLr` at
  /// step `decaySteps`.
  std::string lrSchedule = "constant";
  int64_t warmupSteps = 0, decaySteps = 0;
  double minLr = 0;
};

/// Turns trained parameters into state and appends their updates (see the
/// pcc-optimizer pass).
llvm::LogicalResult applyOptimizer(mlir::func::FuncOp func,
                                   const OptimizerConfig &options);

/// Pads the vocabularies of `func` that `tp` does not divide (see the
/// pcc-pad-vocabulary pass).
llvm::LogicalResult padVocabulary(mlir::func::FuncOp func, int64_t tp);

/// Gives every value of `func` a layout over mesh axis `axis` from its
/// parameters' and arguments' (see the pcc-propagate-sharding pass).
llvm::LogicalResult propagateSharding(mlir::func::FuncOp func,
                                      llvm::StringRef axis = "tp",
                                      bool sequenceParallel = false,
                                      bool outputsSplit = false,
                                      int64_t zeroStage = 0);

/// Rewrites `func` into the program of one rank of mesh axis `axis` (see
/// pcc-partition).
llvm::LogicalResult partition(mlir::func::FuncOp func,
                              llvm::StringRef axis = "tp");

/// Attaches sharding rules to the Dist dialect's collectives, so that the
/// layouts over one mesh axis pass through another axis's collectives.
void registerDistShardingRules(mlir::DialectRegistry &registry);

/// Splits the batched inputs of `func` over a data-parallel mesh axis of
/// `dp` ranks (see the pcc-data-parallel pass).
llvm::LogicalResult splitBatch(mlir::func::FuncOp func, int64_t dp);

/// Appends `values` to the function's results, each with its attributes.
/// PipeDream-2BW's weights: each trained parameter's readers read its
/// previous version, a new state argument the step sets to the parameter
/// before its update (pcc-delay-weights).
llvm::LogicalResult delayWeights(mlir::func::FuncOp func);

void appendResults(mlir::func::FuncOp func, mlir::ValueRange values,
                   llvm::ArrayRef<mlir::DictionaryAttr> attrs);

} // namespace pcc

#endif // PCC_TRANSFORMS_PASSES_H
