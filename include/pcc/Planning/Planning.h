//===- Planning.h - Layouts planned without code ----------------*- C++ -*-===//
//
// The planner: a layout planned exactly without generating code
// (planLayout, `pcc plan`), the layout searches of training and serving
// (`pcc plan --devices`, `pcc compile --auto`) and their predictions on a
// machine's cost model. Callable from any C++ caller; the commands of
// lib/Driver only print and write what it returns.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_PLANNING_PLANNING_H
#define PCC_PLANNING_PLANNING_H

#include "pcc/Analysis/CostModel.h"
#include "pcc/Driver/Driver.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <optional>
#include <string>

namespace pcc {

/// The model `pcc plan` plans: `options.model`, or the one `modelSpec`
/// describes by its sizes (gpt:...). Null on failure, diagnosed.
mlir::OwningOpRef<mlir::ModuleOp>
loadPlannedModel(mlir::MLIRContext &context, const CompileOptions &options,
                 llvm::StringRef modelSpec);

/// A model that a layout search plans again and again: its context (every
/// dialect, one thread) and the module as loaded, `what` naming it.
struct PlanningSource {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string what;
  PlanningSource();
  /// Loads `options.model`, or the model `modelSpec` describes; null where
  /// it cannot be loaded (diagnosed).
  static std::unique_ptr<PlanningSource> load(const CompileOptions &options,
                                              llvm::StringRef modelSpec);
};

/// What planning a layout found: plan.json's content, the schedule's
/// picture (empty without a pipeline) and the summary `pcc plan` prints.
struct PlannedLayout {
  llvm::json::Object json;
  std::string svg, summary;
};

/// Plans `module` (a model as loaded, `what` naming it) at the layout of
/// `options` without generating code. `quiet` leaves out the warnings a
/// user reads (a layout search plans candidates nobody asked for). Fails
/// with the error diagnosed.
llvm::FailureOr<PlannedLayout>
planLayout(mlir::OwningOpRef<mlir::ModuleOp> module,
           const CompileOptions &options, llvm::StringRef what,
           bool quiet = false);

/// Plans `options` on a copy of `source` as planLayout does, quietly: no
/// diagnostic is printed; nullopt with the first error in `error` when it
/// fails (a search's candidate, a count of head pieces). `warnings`, where
/// given, gets the warnings planning would have printed, as printed.
std::optional<PlannedLayout> planExactly(mlir::ModuleOp source,
                                         const CompileOptions &options,
                                         llvm::StringRef what,
                                         std::string &error,
                                         std::string *warnings = nullptr);
/// A count of head pieces as chooseHeadPieces planned it: planLayout's
/// result (quiet) and the warnings it would have printed otherwise.
struct HeadPiecesPlan {
  PlannedLayout plan;
  std::string warnings;
};
/// The pieces of the sequence in which a pipelined training step computes
/// its LM head and loss, where `options` leaves them to pcc (--train, --pp
/// above 1, --head-pieces 0): of 1 to 4 pieces and the count
/// pcc-attach-loss picks by itself, the one whose planned step (stages,
/// schedule and all, as planLayout plans it) is the shortest on the cost
/// model of --machine, or of the target's own machine; within 1% of it
/// (the cost model's own error, as pcc-attach-loss allows), the fewest.
/// `model` is the model as loaded, each count planned on a copy of it,
/// quietly: a count that fails to plan is passed over, and the compile
/// reports its own errors. Else, or where no count plans,
/// options.headPieces. `note` gets a line saying each count's step, and
/// `record`, where given, {"chosen": N, "pass": the pass's own count,
/// "step_seconds": {"1": ..., ...}}. Each count is planned as `what`;
/// `chosenPlan`, where given, gets the chosen count's plan when it was made
/// with `options` as they are (--machine given), so that a caller planning
/// that count next need not plan it again.
int64_t chooseHeadPieces(mlir::ModuleOp model, const CompileOptions &options,
                         std::string &note,
                         llvm::json::Object *record = nullptr,
                         llvm::StringRef what = "",
                         std::optional<HeadPiecesPlan> *chosenPlan = nullptr);
/// Checks that `dir` is absent or a folder holding only files named in
/// `allowed` (an earlier plan's), so that a plan replaces nothing else.
llvm::LogicalResult checkPlanFolder(llvm::StringRef dir,
                                    llvm::ArrayRef<llvm::StringRef> allowed);

/// Writes `text` to `dir`/`name` (creating `dir`) through a temporary file,
/// so that a failure leaves no partial file.
llvm::LogicalResult writePlanFile(llvm::StringRef dir, llvm::StringRef name,
                                  llvm::StringRef text);

/// What a layout search found (searchLayouts).
struct SearchResult {
  /// The chosen layout, as the options of a compile or plan.
  CompileOptions best;
  /// It in words ("dp 8 x tp 8 x pp 16, ...").
  std::string description;
  /// search.json's content, the chosen layout's exact plan and the lines
  /// that say what the search found.
  llvm::json::Object json;
  PlannedLayout plan;
  std::string summary;
};

/// `pcc plan --devices N`: searches the layouts of the training step of
/// `options.model` (or of the model `modelSpec` describes) on `devices`
/// devices of `options.machine` (see Search.cpp), the options' other
/// settings (dtype, optimizer, ...) kept. Fails with the error printed.
llvm::FailureOr<SearchResult> searchLayouts(const CompileOptions &options,
                                            llvm::StringRef modelSpec,
                                            int64_t devices);

/// "12.30 s", "45.60 ms", "7.80 us".
std::string formatSeconds(double seconds);

/// "11.44 GB" (powers of 1000).
std::string formatBytes(double bytes);

/// The time of a step without stages on the machine of `cost` as its
/// program runs: its ops one after another, but a collective that completes
/// at its waits (pcc-overlap-collectives) runs on the links from when it is
/// reached until it is done, one at a time, while the ops up to its first
/// wait compute.
double getStepSeconds(mlir::func::FuncOp step, const CostModel &cost);

/// What each pipeline rank of a planned generation build holds: the bytes
/// of its weights and of its KV cache, and the cache's positions.
struct ServingMemory {
  llvm::SmallVector<int64_t> weights, cache;
  int64_t blocks = 0, blockSize = 0;
  int64_t cachedTokens() const { return blocks * blockSize; }
  /// The largest rank's bytes of cache per cached token.
  int64_t kvBytesPerToken() const;
};
ServingMemory getServingMemory(mlir::ModuleOp module, int64_t pp);

/// What a generation build's layout predicts on a machine.
struct ServingPrediction {
  double latency = 0;    ///< seconds per decoded token, one sequence
  double throughput = 0; ///< tokens per second at the batch that fits
  double prefill = 0;    ///< one prefill step through the stages
  int64_t sequencesThatFit = 0, weightsBytes = 0, kvBytesPerToken = 0;
  llvm::json::Object toJson() const;
  /// "  prediction (MACHINE): decode ... per token, ..." and a newline.
  std::string summary(llvm::StringRef machine) const;
};

/// Times a planned generation build (planLayout's module) on the machine
/// of `cost` (see ServingSearch.cpp); nullopt with the reason in `error`
/// where its steps cannot be timed or a rank's weights leave no room for
/// one sequence's cache.
std::optional<ServingPrediction> predictServing(mlir::ModuleOp module,
                                                const CompileOptions &options,
                                                const CostModel &cost,
                                                std::string &error);

/// `pcc plan --generate --devices N`: the tp x pp layouts of N devices of
/// `options.machine` for serving `options.model` (or the model `modelSpec`
/// describes), ranked by `options.objective` (latency: the decode's time
/// per token; throughput: tokens per second at the batch that fits), the
/// options' other settings kept. Fails with the error printed.
llvm::FailureOr<SearchResult>
searchServingLayouts(const CompileOptions &options, llvm::StringRef modelSpec,
                     int64_t devices);

} // namespace pcc

#endif // PCC_PLANNING_PLANNING_H
