//===- Build.h - The steps of a compile -------------------------*- C++ -*-===//
//
// `pcc compile` in steps that the planner (lib/Planning) and the commands
// (lib/Driver) take on their own: the output folder, the program (the model
// imported, the memory trial of --recompute auto and the pass pipeline),
// its sources, the host compilers that build its libraries, its weights,
// the memory its step holds, and the reports of what it decided.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_BUILD_BUILD_H
#define PCC_BUILD_BUILD_H

#include "pcc/Analysis/CostModel.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Driver/Driver.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/JSON.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pcc {

/// Prints `pcc: error: <message>` on stderr and returns failure.
llvm::LogicalResult printError(const llvm::Twine &message);

/// Tells a user at a terminal which step of a compile is running once it
/// has taken a second ("pcc: importing model.onnx..."), and its time when it
/// ends; quiet otherwise, and when stderr is not a terminal.
class ProgressLine {
public:
  explicit ProgressLine(std::string step);
  ~ProgressLine();

private:
  std::string step;
  std::chrono::steady_clock::time_point start;
  std::thread watcher;
  std::mutex mutex;
  std::condition_variable ended;
  bool done = false, shown = false;
};

/// `pcc compile`'s output folder OUT (-o). A compile writes into a staging
/// folder beside OUT, which replaces OUT only once everything succeeded
/// and is removed otherwise. OUT is checked before any work and again
/// before it is replaced, so that pcc never destroys what it did not write.
class OutputFolder {
public:
  explicit OutputFolder(const CompileOptions &options);
  OutputFolder(const OutputFolder &) = delete;
  OutputFolder &operator=(const OutputFolder &) = delete;
  /// Removes the staging folder unless it replaced OUT.
  ~OutputFolder();

  /// Refuses, printing why, an OUT whose parent does not exist or whose
  /// replacement could destroy something pcc did not write: the folder
  /// holding the model or a bound input, the current folder or one of its
  /// parents, or an existing non-empty folder without pcc's marker.
  llvm::LogicalResult check() const;
  /// Creates the staging folder, empty.
  llvm::LogicalResult stage();
  llvm::StringRef getStagingDir() const { return staging; }
  /// The path of `name` in the staging folder.
  std::string path(llvm::StringRef name) const;
  /// Marks the staging folder as a `pcc compile` output, which a later
  /// compile with the same -o may replace.
  llvm::LogicalResult mark();
  /// Replaces OUT by the staging folder, checked again first: a folder may
  /// have appeared while compiling.
  llvm::LogicalResult commit();

private:
  llvm::LogicalResult checkReplaceable() const;

  const CompileOptions &options;
  /// OUT, absolute and without dots or a trailing separator.
  llvm::SmallString<256> outAbs;
  std::string staging;
  bool committed = false;
};

/// A program as buildProgram leaves it, with what building it decided.
struct BuiltProgram {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The pass manager that ran the pipeline, kept with the module: with
  /// PCC_PASS_TIMING=1 it reports the passes' timing when destroyed, which
  /// `pcc compile` leaves to its end.
  std::unique_ptr<mlir::PassManager> passManager;
  /// The initializers the importer re-tied.
  ImportReport importReport;
  /// pcc-select-trainable's decisions, in the order it made them (its
  /// TrainableDecisionSink).
  std::vector<TrainableDecision> decisions;
  /// What buildProgram's `decide` settled, in lines for the summary.
  std::string decided;
};

/// Reads `options.model`: Graph dialect IR (.mlir) as the importer would
/// have made it, else ONNX, imported with the options' bindings, input
/// shapes and re-tying (reported in `report`). Null on failure, diagnosed.
mlir::OwningOpRef<mlir::ModuleOp> loadModel(mlir::MLIRContext &context,
                                            const CompileOptions &options,
                                            ImportReport *report = nullptr);

/// Loads the model and runs the compile pipeline on it, after measuring the
/// step's planned peak for --recompute auto on one stage. `decide`, where
/// given, sees the model as loaded and may settle options the pipeline
/// leaves to it (the planner's choice of --head-pieces), returning lines
/// for the summary that say so (BuiltProgram::decided). Fails with the
/// error diagnosed or printed.
llvm::FailureOr<BuiltProgram> buildProgram(
    mlir::MLIRContext &context, const CompileOptions &options,
    llvm::function_ref<std::string(mlir::ModuleOp, CompileOptions &)> decide =
        {});

/// The program's entries: its public function, or one per pipeline rank
/// (dist.rank); pipeline stages are private functions they call, which the
/// emitter compiles with them.
llvm::FailureOr<llvm::SmallVector<mlir::func::FuncOp>>
getProgramEntries(mlir::ModuleOp module);

/// Emits the program as the target's source into `os`.
llvm::FailureOr<CppEmitResult> emitCode(mlir::ModuleOp module,
                                        llvm::raw_ostream &os,
                                        const CompileOptions &options);

/// Writes the program's source (model.cpp, or model.cu for CUDA) and the
/// headers and runtime sources it is built with into `dir`.
llvm::FailureOr<CppEmitResult> emitSources(mlir::ModuleOp module,
                                           const CompileOptions &options,
                                           llvm::StringRef dir);

/// The host compilers that build the libraries of emitSources' folder, in
/// the background: the C++ compiler, or nvcc and, for --cuda-emulate, the
/// C++ compiler beside it for the host emulation.
class LibraryBuild {
public:
  /// Starts the compilers on the sources in `dir`.
  LibraryBuild(const CompileOptions &options, llvm::StringRef dir);
  LibraryBuild(const LibraryBuild &) = delete;
  LibraryBuild &operator=(const LibraryBuild &) = delete;
  /// Waits for the compilers still running.
  ~LibraryBuild();

  /// Waits for the compilers; fails, printing the first failure, when one
  /// failed.
  llvm::LogicalResult wait();

private:
  bool cuda;
  std::string buildError, emulationError;
  llvm::LogicalResult built = llvm::failure(), emulated = llvm::success();
  std::thread builder, emulationBuilder;
};

/// Writes the emitter's weights, in the order the generated code expects
/// them, into the safetensors file `path`.
llvm::LogicalResult writeWeights(const CppEmitResult &code,
                                 const std::string &path);

/// The step's results by their index in the step (dist.result_index when
/// pipelined): each, once, as (the entry returning it, its result number).
std::map<int64_t, std::pair<mlir::func::FuncOp, unsigned>>
getStepResults(llvm::ArrayRef<mlir::func::FuncOp> entries);

/// The memory a step holds, by what it holds.
struct StepMemory {
  /// The parameters: the forward's graph.weight ops and, in a training
  /// step, the state that has a gradient. Each tensor counts once, however
  /// many pipeline ranks hold it: its bytes as a rank holds it (a split
  /// weight's block), its elements whole (the model's, without the padding
  /// a split vocabulary takes).
  int64_t paramCount = 0, paramElements = 0, paramBytes = 0;
  /// The rest of the state: the optimizer's.
  int64_t stateBytes = 0;
  /// A generation build's KV cache (state marked graph.cache).
  int64_t cacheBytes = 0;
  /// The buffers of the step's work (the emitter's buffer plan): on the
  /// rank that needs the most, and a pipeline's per pipeline rank (empty
  /// when not pipelined).
  int64_t workspaceBytes = 0;
  llvm::SmallVector<int64_t> stageWorkspaceBytes;
  /// The workspace of pipeline rank `stage` (the most where not
  /// pipelined).
  int64_t getStageWorkspaceBytes(int64_t stage) const {
    return stage < int64_t(stageWorkspaceBytes.size())
               ? stageWorkspaceBytes[stage]
               : workspaceBytes;
  }
  /// The graph inputs, and the outputs but the state updates (written over
  /// their state) and the gradients (in the workspace, written out only
  /// for a dump).
  int64_t ioBytes = 0;
  /// The operands prepared from the weights (packed for products; those
  /// of the pipeline rank that holds the most, RankBytes::prepared), and
  /// the weights the runtime frees once they are prepared (read only
  /// through them): a weight also read otherwise (a tied embedding) is
  /// held twice.
  int64_t preparedBytes = 0, releasedBytes = 0;
  /// What one pipeline rank holds of the training state (the gradients as
  /// the rank holds them: a block with ZeRO 2).
  struct RankBytes {
    int64_t params = 0, state = 0, gradients = 0, prepared = 0;
  };
  /// Per entry (pipeline rank).
  llvm::SmallVector<RankBytes> ranks;

  /// All a rank needs.
  int64_t getPerRankBytes() const {
    return paramBytes - releasedBytes + preparedBytes + stateBytes +
           cacheBytes + workspaceBytes + ioBytes;
  }
};

/// Counts the memory of the step whose entries are `entries`, with what
/// the emitter planned for it in `code` (its workspace and, on the CPU, the
/// operands it prepares from constant weights).
StepMemory countStepMemory(mlir::ModuleOp module,
                           llvm::ArrayRef<mlir::func::FuncOp> entries,
                           const CppEmitResult &code, llvm::StringRef target);

/// What a rank holds of weight `w`: its block where a dist.all_slice is its
/// one reader (the runtime loads the block alone), else the whole tensor.
mlir::Type getHeldWeightType(graph::WeightOp w);

/// The step function of a module as the pipeline leaves it before
/// lowering: its public definition (null if none).
mlir::func::FuncOp getStepFunction(mlir::ModuleOp module);

/// The type of `step`'s token input: its first argument that names an ONNX
/// graph input, whose leading extent is the batch; null if there is none or
/// it has no static shape.
mlir::RankedTensorType getTokenInputType(mlir::func::FuncOp step);

/// Writes each (file name, text) into `dir`; fails with the reason in
/// `error`.
llvm::LogicalResult
writeTexts(llvm::StringRef dir,
           std::initializer_list<std::pair<llvm::StringRef, llvm::StringRef>>
               files,
           std::string &error);

/// "1.23 M<unit>": `v` scaled by powers of 1000, two decimals.
std::string humanCount(double v, llvm::StringRef unit);

/// A ranked tensor type's shape as a JSON array.
llvm::json::Value shapeJson(mlir::Type t);

/// The first error diagnosed in `context` while it lives, kept rather than
/// printed (a search reports why a candidate failed), and the warnings,
/// each a line as the diagnostic printer would print it (to print later
/// for a plan that is kept). In Toolchain.cpp.
struct ErrorCapture {
  std::string first, warnings;
  mlir::ScopedDiagnosticHandler handler;
  explicit ErrorCapture(mlir::MLIRContext &context);
};

} // namespace pcc

#endif // PCC_BUILD_BUILD_H
