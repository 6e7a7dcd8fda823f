//===- StepPhases.h - Forward, backward and optimizer of a step -*- C++ -*-===//
//
// What the pipeline passes share about a step function: which ops belong to
// the forward (they compute the outputs and the loss), the backward (the
// gradients) and the optimizer (the updates), found from what each op
// contributes to, not from markers that folding could lose; and which values
// are free: computed from parameters, state and constants alone, so
// that every stage that needs one recomputes it rather than receiving it.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_ANALYSIS_STEPPHASES_H
#define PCC_ANALYSIS_STEPPHASES_H

#include "pcc/Transforms/Pipeline/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace pcc::pipeline {

/// What an op contributes to. `Weight` is never classified: it names the
/// weight-gradient part of a backward split for zero-bubble schedules.
enum class Phase { Forward, Backward, Weight, Optimizer, Dead };

struct StepPhases {
  llvm::DenseMap<mlir::Operation *, Phase> phase;
  /// Values recomputed wherever they are used.
  llvm::DenseSet<mlir::Value> free;

  Phase of(mlir::Operation *op) const {
    auto it = phase.find(op);
    return it == phase.end() ? Phase::Dead : it->second;
  }
  bool isFree(mlir::Value v) const { return free.contains(v); }
  /// An op whose results are all free (or that has none worth placing).
  bool isFree(mlir::Operation *op) const;
};

/// Classifies every op of `func` (a single block ending in func.return).
StepPhases classifyPhases(mlir::func::FuncOp func);

/// The forward's work (its ops that are not free) in program order, a
/// topological order, and each op's position in it.
struct ForwardOrder {
  llvm::SmallVector<mlir::Operation *> ops;
  llvm::DenseMap<mlir::Operation *, size_t> position;
};
ForwardOrder getForwardOrder(mlir::func::FuncOp func, const StepPhases &phases);

/// crossing[k] for each position k of `forward` and its end (n + 1 in all):
/// the bytes of the values that forward ops before k make and forward ops
/// at k or later read; with `arguments`, also those of `func`'s arguments
/// that are not free (the inputs), as made before position 0.
llvm::SmallVector<double> getCrossingBytes(mlir::func::FuncOp func,
                                           const StepPhases &phases,
                                           const ForwardOrder &forward,
                                           bool arguments);

/// Per stage (of `stages`), the bytes one microbatch's forward keeps for
/// its backward: the forward values that a backward op of the stage reads,
/// each counted once per stage that reads it. `stageOf` gives an op's stage,
/// or none for an op outside every stage.
llvm::SmallVector<int64_t> getStashBytes(
    mlir::func::FuncOp func, const StepPhases &phases, int64_t stages,
    llvm::function_ref<std::optional<int64_t>(mlir::Operation *)> stageOf);

/// The sum that gradient clipping's squared norm is (rooted at the op
/// marked graph.gradient_norm): its adds (the root, when it is an add, and
/// the adds that only the sum reads, transitively) and its parts (their
/// other operands, the squares of single gradients; the root itself when
/// it is no add). A pipeline sums each rank's parts and all-reduces them.
void getGradientNormSum(mlir::Operation *root,
                        llvm::SmallVectorImpl<mlir::Operation *> &adds,
                        llvm::SmallVectorImpl<mlir::Value> &parts);

/// "'h.0.attn.weight' (state argument 12)", for diagnostics.
std::string describeState(mlir::func::FuncOp step, unsigned arg);

} // namespace pcc::pipeline

#endif // PCC_ANALYSIS_STEPPHASES_H
