//===- Driver.h - The compile and run pipelines of the pcc tool -*- C++ -*-===//

#ifndef PCC_DRIVER_DRIVER_H
#define PCC_DRIVER_DRIVER_H

#include "pcc/Import/OnnxImporter.h"
#include "pcc/Target/Cpu/CppEmitter.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipelines.h"

#include "pccrt/Generate.h"
#include "pccrt/Runtime.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include "llvm/Support/JSON.h"

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pcc {

/// `pcc compile` and `pcc plan`: the pipeline's options (PipelineConfig,
/// declared in PipelineOptions.def) and those of import, the build and the
/// layout search.
struct CompileOptions : PipelineConfig {
  std::string model;
  std::string outDir;
  /// The layout search (pcc plan --devices N, pcc compile --auto
  /// --devices N): the devices it lays the step over (0: no search; the
  /// layout is the options'), and whether a compile compiles its choice.
  int64_t devices = 0;
  bool autoLayout = false;
  /// What the search of a generation build's serving layout optimizes
  /// (--objective): "throughput" (tokens per second) or "latency" (the
  /// decode's time per token).
  std::string objective = "throughput";
  /// Graph inputs fixed at compile time (--bind NAME=FILE.pb).
  std::map<std::string, std::string> bindings;
  /// Extents of symbolic input dimensions (--dim, --shape).
  InputShapes inputShapes;
  bool retie = true;
  /// Symbol prefix of the generated library.
  std::string symbolPrefix = "pcc";
  /// Threads of a run (--threads N); 0: the runtime decides (the cores
  /// shared among the ranks on the machine).
  int64_t threads = 0;
  /// The processor the code is built for (--cpu): "native" (the compiling
  /// machine's, -march=native) or "generic" (any of its architecture).
  std::string cpu = "native";
  /// Whether element-wise ops are fused into loop nests (pcc-fuse).
  bool fuse = true;
  /// Whether every op's code is traced (--profile-ops): see
  /// CppEmitOptions::profileLabel.
  bool profileOps = false;
  /// The CUDA target: the GPU architecture nvcc builds for (--cuda-arch),
  /// and whether the host emulation of the CUDA code is built beside it
  /// (--cuda-emulate), which `pcc run` runs where there is no GPU.
  std::string cudaArch = "sm_90";
  bool cudaEmulate = false;
};

/// The `pcc-parallelize` pipeline (pcc/Transforms/Pipelines.h) configured
/// from the compile options.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompileOptions &options);

/// What is wrong with the layout and training options together (a
/// one-line message), or an empty string: training flags without --train,
/// gradient clipping across pipeline stages.
std::string checkLayoutOptions(const CompileOptions &options);

/// The collectives of `module`'s program by kind and mesh axes, with their
/// count and the bytes of their results (plan.json's `collectives`).
llvm::json::Array describeCollectives(mlir::ModuleOp module);

/// What pcc-recompute made the backward recompute in `module` (report.json's
/// and plan.json's `recompute`: mode, ops, flops, bytes_not_kept; per
/// pipeline stage `stages`; with auto `budget_bytes` and `over_budget`), and
/// the summary line that says so (empty without recomputation).
llvm::json::Object describeRecompute(mlir::ModuleOp module,
                                     llvm::StringRef mode);
std::string recomputeSummary(const llvm::json::Object &recompute);
/// Warns, on stderr, of each rank that --recompute auto left above
/// --memory-budget.
void warnOverBudget(const llvm::json::Object &recompute);

/// The fused attention ops of `module` (report.json's `attention`), one
/// entry per graph.attention: the ONNX nodes it replaced, whether it is
/// causal, has a padding mask (a bias that varies only along the batch and
/// the keys) or another bias, and its heads, key/value heads, head size,
/// queries and keys per rank.
llvm::json::Array describeAttention(mlir::ModuleOp module);

/// Appends to a summary line the collectives of `collectives` (as
/// describeCollectives lists them) that run over mesh axis `axis`: count,
/// kind and bytes of each, or "no collectives", and ends the line.
void printCollectivesOver(llvm::raw_ostream &os,
                          const llvm::json::Array &collectives,
                          llvm::StringRef axis);

/// `pcc compile`: imports, optimizes, emits C++, builds OUT/libmodel.so and
/// writes OUT/weights.safetensors and OUT/report.json. OUT is replaced only
/// by a complete result. Diagnostics go to stderr as one line
/// `pcc: error: <node>: <message>`; a summary goes to `summary`.
llvm::LogicalResult compile(const CompileOptions &options,
                            llvm::raw_ostream &summary);

/// `pcc generate`: the requests and the sampling they default to.
/// `pcc serve`: the OpenAI API over a generation build.
struct ServeOptions {
  /// Where it listens: this machine alone unless told otherwise.
  std::string host = "127.0.0.1";
  int64_t port = 8000;
  /// Requests must carry `Authorization: Bearer KEY` when not empty.
  std::string apiKey;
  /// Requests that may wait for a place in the batch before new ones are
  /// answered 503.
  int64_t maxQueue = 64;
  /// The name /v1/models lists and requests may give (default: the
  /// compiled folder's name).
  std::string modelName;
  /// What a request leaves unset takes (--generation-config); without
  /// it, OpenAI's defaults (16 tokens, temperature 1).
  std::optional<pccrt::Sampling> defaults;
};

struct GenerateOptions {
  /// One JSON object a line: {"prompt": [ids] or "text"} and any of
  /// the keys of parseGenerationRequests.
  std::string prompts;
  /// A Hugging Face tokenizer.json: text prompts in, text out.
  std::string tokenizer;
  /// The chat template of requests of messages (and of
  /// /v1/chat/completions): a Jinja file or a tokenizer_config.json
  /// (empty: the tokenizer_config.json beside the tokenizer, if it has
  /// one).
  std::string chatTemplate;
  /// Serve over HTTP (pcc serve) instead of reading prompts.
  std::optional<ServeOptions> serve;
  /// Where the results go, one line per request in input order (empty:
  /// standard output).
  std::string output;
  pccrt::Sampling sampling;
};

struct RunOptions {
  std::string dir;
  /// `pcc generate` instead of `pcc run`'s steps, when set.
  std::optional<GenerateOptions> generation;
  /// `pcc follow`: a rank of a session that rank 0 leads (import pcc).
  bool follow = false;
  std::vector<std::string> inputs;
  std::string dumpDir;
  int64_t steps = 1;
  /// A token file that feeds the first input a new batch every step
  /// (--data), its token type (--data-dtype uint16|int32) and the seed of
  /// the batch sampler (--seed).
  std::string dataFile;
  std::string dataDtype = "uint16";
  uint64_t seed = 0;
  /// Checkpoints restored before the first step (--load) and written after
  /// the last (--save).
  std::string loadCheckpoint, saveCheckpoint;
  /// With --load on a training build: its trained parameters alone (a
  /// checkpoint of another optimizer or layout), from step 0
  /// (--weights-only).
  bool weightsOnly = false;
  /// A prefix that the checkpoint's names and the build's may differ by
  /// (--strip-prefix: an exporter's wrapper, "m.").
  std::string stripPrefix;
  /// A training build's learning-rate options given to `pcc run` (--lr,
  /// --min-lr, --warmup-steps, --decay-steps) and their values, in order:
  /// they replace the state the optimizer keeps them in, after --load.
  std::vector<std::pair<std::string, double>> rateOptions;
  /// With --save: also save every N steps (--save-every), and when the run
  /// is interrupted (SIGINT, SIGTERM), after the step that is running.
  int64_t saveEvery = 0;
  /// One line per N steps (--log-every) instead of one per step: the mean
  /// loss, the learning rate, tokens per second and the step time.
  int64_t logEvery = 0;
  /// Held-out tokens (--eval-data, read as --data's) whose loss the
  /// build's evaluation step (pcc compile --eval) prints every N steps
  /// (--eval-every; 0: after the last step), on the trained parameters.
  std::string evalData;
  int64_t evalEvery = 0;
  /// Seconds a rank of a multi-rank build may wait in one collective
  /// before every rank is ended (--timeout).
  double timeoutSeconds = 300;
  /// A failure injected to test how a multi-rank run ends (--fault
  /// rank=R,step=K,kind=exit|hang): rank `rank` exits, or hangs, when step
  /// `step` (counted from 1, as printed) begins.
  struct Fault {
    int64_t rank = 0, step = 1;
    bool hang = false;
  };
  std::optional<Fault> fault;
  /// When given, receives each step's milliseconds (on rank 0, or the only
  /// rank): what `pcc calibrate` measures with.
  std::vector<double> *stepMilliseconds = nullptr;
  /// A Chrome trace (chrome://tracing, Perfetto) of every rank's actions
  /// with their real times (--trace FILE), written by rank 0.
  std::string traceFile;
  /// The arguments of `pcc run` as given: the ranks that `pcc run` starts
  /// under mpirun run it again with them.
  std::vector<std::string> arguments;
};

/// `pcc run`: loads OUT, binds the inputs, runs K steps and optionally
/// dumps the first step's outputs (and, for a training step, gradients).
/// Errors are printed as one line to stderr. A build whose mesh has several
/// ranks runs as one process per rank: under a launcher (mpirun, srun) this
/// process is one of them; otherwise `run` starts them under mpirun and
/// reports how they ended.
llvm::LogicalResult run(const RunOptions &options, llvm::raw_ostream &summary);

/// One rank's `pcc generate` (run() starts the ranks, as for `pcc run`):
/// serves options.generation's requests with OUT's generation build
/// (pccrt::Generator) and, on rank 0, writes their tokens and one summary
/// line. Throws a pccrt::Error, on every rank, for anything wrong with the
/// requests or the build, before anything runs.
llvm::LogicalResult runGeneration(const RunOptions &options,
                                  const std::string &lib,
                                  const std::string &weights,
                                  pccrt::Communicator *comm,
                                  pccrt::Communicator *runComm,
                                  llvm::raw_ostream &summary);

/// `pcc generate` and `pcc serve` with --load: the trained parameters of
/// the checkpoint (with --strip-prefix) into `model`, on every rank; rank 0
/// says how many on stderr. Throws a pccrt::Error naming the checkpoint.
void loadTrainedParameters(const RunOptions &options, pccrt::Model &model);

/// `pcc serve`: every rank loads the build (a pccrt::Session); rank 0
/// answers the OpenAI API over HTTP and leads, the others follow. Ends on
/// SIGINT or SIGTERM once the running requests are finished or answered
/// with an error.
llvm::LogicalResult runServer(const RunOptions &options,
                              const std::string &lib,
                              const std::string &weights,
                              pccrt::Communicator *comm,
                              pccrt::Communicator *runComm,
                              llvm::raw_ostream &summary);

/// `pcc follow`: this rank (not 0) loads the build and carries out rank
/// 0's calls (pccrt::Session::follow) until it closes the session.
llvm::LogicalResult runFollower(const RunOptions &options,
                                const std::string &lib,
                                const std::string &weights,
                                pccrt::Communicator *comm,
                                pccrt::Communicator *runComm,
                                llvm::raw_ostream &summary);

/// The longest sequence a generation build in \p dir was compiled for
/// (report.json's generation.max_seq); throws a pccrt::Error otherwise.
int64_t readGenerationMaxSeq(const std::string &dir);

/// `pcc calibrate -o FILE`: measures this machine with pcc's own programs
/// (the products' throughput in f32 and bf16, the memory bandwidth and the
/// fixed cost of an op, on one rank's share of the cores; all-reduces and
/// point-to-point transfers between `ranks` MPI ranks) and writes its
/// machine description (docs/Machines.md) to FILE.
struct CalibrateOptions {
  std::string outFile;
  std::string name = "calibrated";
  int64_t ranks = 2;
  /// Set in the ranks it starts (`--collectives-rank FILE`): where rank 0
  /// writes the collectives' times.
  std::string collectivesFile;
};
llvm::LogicalResult calibrate(const CalibrateOptions &options,
                              llvm::raw_ostream &summary);

/// `pcc import`: prints the Graph dialect IR the importer produces.
llvm::LogicalResult importAndPrint(const std::string &model,
                                   const ImportOptions &options,
                                   llvm::raw_ostream &os);

/// One line for a diagnostic: "<ONNX node or file>: <message>".
std::string formatDiagnostic(mlir::Diagnostic &diag);

/// Installs the one-line `pcc: error: <node>: <message>` (and `pcc:
/// warning: ...`) diagnostic format on `context` for the lifetime of the
/// returned handler; remarks go to `onRemark`, when given.
std::unique_ptr<mlir::ScopedDiagnosticHandler> installDiagnosticPrinter(
    mlir::MLIRContext &context,
    std::function<void(mlir::Diagnostic &)> onRemark = nullptr);

/// Compiles C++ `source` into the shared library `output` with the host
/// compiler ($PCC_CXX or c++), adding the BLAS flags found at configure
/// time, and links it with pcc_kernels.cpp beside it, whose object pcc
/// keeps in its cache ($PCC_CACHE_DIR, else $XDG_CACHE_HOME/pcc or
/// ~/.cache/pcc; none where PCC_CACHE_DIR is empty) for each compiler, flag
/// set and processor. On failure returns the compiler's first error line.
llvm::LogicalResult buildSharedLibrary(const std::string &source,
                                       const std::string &output,
                                       const std::string &logFile,
                                       std::string &error,
                                       llvm::StringRef cpu = "native");

/// The library of a CUDA build's host emulation, beside its libmodel.so.
inline constexpr char kEmulatedLibrary[] = "libmodel-emulated.so";

/// Compiles the CUDA C++ `source` into the shared library `output` with
/// nvcc ($PATH, else /usr/local/cuda/bin) for `arch`, linked with cuBLASLt.
llvm::LogicalResult buildCudaLibrary(const std::string &source,
                                     const std::string &output,
                                     const std::string &logFile,
                                     std::string &error, llvm::StringRef arch);

/// Compiles the CUDA C++ `source` as host C++ against the CUDA emulation
/// header (pcc_cuda_emulation.h, beside it) into the shared library
/// `output`: the kernels' threads run as fibers, cuBLASLt's products on the
/// BLAS.
llvm::LogicalResult buildEmulatedCudaLibrary(const std::string &source,
                                             const std::string &output,
                                             const std::string &logFile,
                                             std::string &error);

/// Writes the headers the CUDA code includes (pccrt.h,
/// pcc_cuda_kernels.cuh and the emulation's pcc_cuda_emulation.h) into
/// `dir`.
llvm::LogicalResult writeCudaHeaders(llvm::StringRef dir, std::string &error);


/// Writes pccrt.h and pcc_kernels.h, which generated code includes, and
/// pcc_kernels.cpp, which buildSharedLibrary links with it, into `dir`. On
/// failure returns the reason in `error`.
llvm::LogicalResult writeRuntimeSources(llvm::StringRef dir,
                                        std::string &error);

} // namespace pcc

#endif // PCC_DRIVER_DRIVER_H
