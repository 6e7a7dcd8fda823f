//===- Compile.cpp - The `pcc compile` pipeline ---------------------------===//

#include "pcc/Driver/Driver.h"
#include "pcc/Driver/Plan.h"

#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Import/OnnxImporter.h"
#include "pcc/InitAll.h"
#include "pcc/Target/AbiTables.h"
#include "pcc/Target/CallGraph.h"
#include "pcc/Target/Cpu/CppEmitter.h"
#include "pcc/Target/Cuda/CudaEmitter.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipeline/CostModel.h"
#include "pcc/Transforms/Pipelines.h"

#include "pccrt/Runtime.h"

#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/TargetParser/Host.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

using namespace mlir;
using namespace pcc;

#ifndef PCC_BLAS_FLAGS
#define PCC_BLAS_FLAGS ""
#endif

std::string pcc::formatDiagnostic(Diagnostic &diag) {
  // The ONNX node (or file) an op comes from; the first of the nodes a
  // fused op replaced.
  std::string where;
  diag.getLocation()->walk([&](Location loc) {
    if (auto name = dyn_cast<NameLoc>(loc))
      where = name.getName().str();
    else if (auto file = dyn_cast<FileLineColLoc>(loc))
      where = file.getFilename().str();
    return where.empty() ? WalkResult::advance() : WalkResult::interrupt();
  });
  std::string msg = diag.str();
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  return where.empty() ? msg : where + ": " + msg;
}

std::unique_ptr<ScopedDiagnosticHandler>
pcc::installDiagnosticPrinter(MLIRContext &context,
                              std::function<void(Diagnostic &)> onRemark) {
  return std::make_unique<ScopedDiagnosticHandler>(
      &context, [onRemark = std::move(onRemark)](Diagnostic &diag) {
        switch (diag.getSeverity()) {
        case DiagnosticSeverity::Error:
          llvm::errs() << "pcc: error: " << formatDiagnostic(diag) << "\n";
          break;
        case DiagnosticSeverity::Warning:
          llvm::errs() << "pcc: warning: " << formatDiagnostic(diag) << "\n";
          break;
        case DiagnosticSeverity::Remark:
          if (onRemark)
            onRemark(diag);
          break;
        default:
          break;
        }
        return success();
      });
}

LogicalResult pcc::importAndPrint(const std::string &model,
                                  const ImportOptions &options,
                                  raw_ostream &os) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  auto diagPrinter = installDiagnosticPrinter(context);
  OwningOpRef<ModuleOp> module = importOnnxFile(context, model, options);
  if (!module)
    return failure();
  // Large values are elided, a weight's external data as a dense one is:
  // `dense_resource<__elided__>`. (Printing its resource, even elided,
  // would render the whole file in hexadecimal first.)
  constexpr int64_t kElideAbove = 16;
  auto &resources = DenseResourceElementsHandle::getManagerInterface(&context);
  std::optional<DenseResourceElementsHandle> elided;
  module->walk([&](graph::WeightOp w) {
    auto value = dyn_cast<DenseResourceElementsAttr>(w.getValue());
    if (!value || value.getNumElements() <= kElideAbove)
      return;
    if (!elided)
      elided = resources.insert("__elided__");
    w.setValueAttr(DenseResourceElementsAttr::get(value.getType(), *elided));
  });
  module->print(os, OpPrintingFlags().elideLargeElementsAttrs(kElideAbove));
  os << "\n";
  return success();
}

void pcc::buildCompilePipeline(OpPassManager &pm,
                               const CompileOptions &options) {
  ParallelizeOptions p;
  p.train = options.train;
  p.withLoss = options.withLoss;
  const OptimizerConfig &o = options.optimizer;
  p.optimizer = o.kind;
  p.lr = o.lr;
  p.beta1 = o.beta1;
  p.beta2 = o.beta2;
  p.eps = o.eps;
  p.weightDecay = o.weightDecay;
  p.momentum = o.momentum;
  p.clipGrad = o.clipGrad;
  p.lrSchedule = o.lrSchedule;
  p.warmupSteps = o.warmupSteps;
  p.decaySteps = o.decaySteps;
  p.minLr = o.minLr;
  p.trainable = options.trainable;
  p.freeze = options.freeze;
  p.untie = options.untie;
  p.remarks = options.train;
  p.labels = options.labels;
  p.logits = options.logits;
  p.dp = options.dp;
  p.bucketBytes = options.bucketBytes;
  p.zero = options.zero;
  p.tp = options.tp;
  p.shard = options.shard;
  p.sequenceParallel = options.sequenceParallel;
  p.recompute = options.recompute;
  p.memoryBudget = options.memoryBudget;
  p.plannedPeak = options.plannedPeak;
  p.fuseAttention = options.fuseAttention;
  p.pp = options.pp;
  p.microbatches = options.microbatches;
  p.schedule = options.schedule;
  p.virtualStages = options.virtualStages;
  p.ppSplit = options.ppSplit;
  p.costTable = options.costTable;
  p.target = options.target;
  p.dtype = options.dtype;
  p.lowerSchedule = options.lowerSchedule;
  buildParallelizePipeline(pm, p);
  // Code generation's view of the program: element-wise chains as loop
  // nests, and what runs inside a softmax's or a product's loop (the CPU's
  // products run epilogues; cuBLAS's calls do not).
  if (options.fuse)
    pm.addNestedPass<func::FuncOp>(
        createFuse({/*epilogues=*/options.target == "cpu"}));
}

/// Appends `text` to the file `path`; appends from concurrent builds come
/// one after the other.
static void appendToLog(const std::string &path, StringRef text) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::error_code ec;
  llvm::raw_fd_ostream log(path, ec, llvm::sys::fs::OF_Append);
  if (!ec)
    log << text;
}

/// Runs `args` (the program first) and appends its output to `logFile`,
/// followed by the command; on failure `error` says what failed and the
/// output's first error line. Builds may run at the same time.
static LogicalResult runBuild(ArrayRef<std::string> args,
                              const std::string &logFile, std::string &error,
                              StringRef what) {
  // The output goes to a file of its own, then to the log.
  SmallString<256> stepLog;
  int fd;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          logFile + ".step-%%%%%%", fd, stepLog)) {
    error = "cannot write " + logFile + ": " + ec.message();
    return failure();
  }
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  llvm::scope_exit removeStepLog([&] { llvm::sys::fs::remove(stepLog); });
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(stepLog),
                                          StringRef(stepLog)};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(args.front(), argRefs, std::nullopt,
                                     redirects, 0, 0, &execError);
  std::string output;
  if (auto text = llvm::MemoryBuffer::getFile(stepLog))
    output = (*text)->getBuffer().str();
  // The command ends its output, for whoever rebuilds by hand.
  appendToLog(logFile,
              output + "pcc: built with: " + llvm::join(args, " ") + "\n");
  if (rc == 0)
    return success();
  error = ("the " + what + " failed on the generated code").str();
  for (StringRef line : llvm::split(output, '\n'))
    if (line.contains("error")) {
      error += ": " + line.str();
      break;
    }
  if (!execError.empty())
    error += ": " + execError;
  return failure();
}

/// The host C++ compiler ($PCC_CXX or c++).
static FailureOr<std::string> findCxx(std::string &error) {
  std::string cxx = "c++";
  if (auto env = llvm::sys::Process::GetEnv("PCC_CXX"))
    cxx = *env;
  auto program = llvm::sys::findProgramByName(cxx);
  if (!program) {
    error = "C++ compiler '" + cxx + "' not found (set PCC_CXX)";
    return failure();
  }
  return *program;
}

namespace {
/// The host C++ compiler's flags for generated CPU code: those of each
/// object, and those that link them into the model's library.
struct CxxFlags {
  SmallVector<std::string> compile, link;
};
} // namespace

static CxxFlags getCxxFlags(StringRef cpu) {
  // OpenMP runs the loops' and GEMMs' threads; errno-free math lets the
  // compiler vectorize sqrt and friends. The library is never unloaded:
  // the OpenMP runtime it brings keeps its threads after a run, and a
  // process that loads and drops models (a test runner) must not unload
  // the code they wait in.
  CxxFlags flags;
  flags.compile = {"-std=c++17",      "-O3",   "-fopenmp",
                   "-fno-math-errno", "-fPIC", "-w"};
  if (cpu == "native")
    flags.compile.push_back("-march=native");
  flags.link = {"-shared", "-fopenmp", "-Wl,-z,nodelete"};
  std::istringstream blas(PCC_BLAS_FLAGS);
  for (std::string flag; blas >> flag;) {
    bool preprocessor =
        StringRef(flag).starts_with("-D") || StringRef(flag).starts_with("-I");
    (preprocessor ? flags.compile : flags.link).push_back(flag);
  }
  return flags;
}

/// pcc's cache folder: $PCC_CACHE_DIR, else $XDG_CACHE_HOME/pcc, else
/// ~/.cache/pcc; none where PCC_CACHE_DIR is set and empty.
static std::optional<std::string> getCacheDir() {
  if (std::optional<std::string> dir =
          llvm::sys::Process::GetEnv("PCC_CACHE_DIR"))
    return dir->empty() ? std::nullopt : dir;
  SmallString<256> dir;
  if (!llvm::sys::path::cache_directory(dir))
    return std::nullopt;
  llvm::sys::path::append(dir, "pcc");
  return std::string(dir);
}

/// The name of the kernels' entries in the cache (without a suffix): a hash
/// of what makes them, i.e. the kernels' text, the compiler (its file, size
/// and time), the flags and, for -march=native, the processor.
static std::string getKernelEntryName(StringRef cxx,
                                      ArrayRef<std::string> flags) {
  llvm::SHA256 hash;
  auto add = [&](StringRef text) {
    hash.update(text);
    hash.update(StringRef("\0", 1));
  };
  add(getKernelHeader());
  add(getKernelSource());
  SmallString<256> compiler(cxx);
  (void)llvm::sys::fs::real_path(cxx, compiler);
  add(compiler);
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(compiler, status)) {
    add(std::to_string(status.getSize()));
    add(std::to_string(
        status.getLastModificationTime().time_since_epoch().count()));
  }
  for (const std::string &flag : flags)
    add(flag);
  if (llvm::is_contained(flags, "-march=native")) {
    add(llvm::sys::getHostCPUName());
    std::vector<std::string> features;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      features.push_back((feature.second ? "+" : "-") + feature.first().str());
    llvm::sort(features);
    for (const std::string &feature : features)
      add(feature);
  }
  std::array<uint8_t, 32> digest = hash.final();
  return "kernels-" + llvm::toHex(ArrayRef(digest).take_front(16), true);
}

/// A new file beside `entry` for what becomes it, or an empty path.
static std::string createTempEntry(StringRef entry) {
  SmallString<256> temp;
  int fd;
  if (llvm::sys::fs::createUniqueFile(entry + ".tmp-%%%%%%", fd, temp))
    return "";
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  return std::string(temp);
}

/// Puts a copy of `file` into the cache as `entry`: under a name of its
/// own, then renamed, so that a build never sees half a file. Returns
/// whether it did.
static bool storeInCache(StringRef file, StringRef entry) {
  std::string temp = createTempEntry(entry);
  if (temp.empty())
    return false;
  if (llvm::sys::fs::copy_file(file, temp) ||
      llvm::sys::fs::rename(temp, entry)) {
    llvm::sys::fs::remove(temp);
    return false;
  }
  return true;
}

LogicalResult pcc::buildSharedLibrary(const std::string &source,
                                      const std::string &output,
                                      const std::string &logFile,
                                      std::string &error, StringRef cpu) {
  FailureOr<std::string> cxx = findCxx(error);
  if (failed(cxx))
    return failure();
  CxxFlags flags = getCxxFlags(cpu);
  auto compileArgs = [&](ArrayRef<std::string> inputArgs, StringRef output) {
    SmallVector<std::string> args{*cxx};
    llvm::append_range(args, flags.compile);
    llvm::append_range(args, inputArgs);
    llvm::append_range(args, ArrayRef<std::string>{"-o", output.str()});
    return args;
  };
  auto log = [&](const Twine &line) {
    appendToLog(logFile, ("pcc: " + line + "\n").str());
  };
  // The kernels (pcc_kernels.cpp beside `source`) are the same for every
  // model. The cache keeps, per compiler, flag set and processor, their
  // object and pcc_kernels.h precompiled: a build with both compiles only
  // the model's code and links. Otherwise the missing one is made while
  // the model's code compiles, the object first: the precompiled header
  // on a build that found the object (one more compile on a cold cache
  // would slow the build that makes the object).
  StringRef sourceDir = llvm::sys::path::parent_path(source);
  SmallString<256> kernelSource(sourceDir), kernelHeader(sourceDir);
  llvm::sys::path::append(kernelSource, "pcc_kernels.cpp");
  llvm::sys::path::append(kernelHeader, "pcc_kernels.h");
  std::string entry;
  if (std::optional<std::string> dir = getCacheDir();
      dir && !llvm::sys::fs::create_directories(*dir))
    entry = *dir + "/" + getKernelEntryName(*cxx, flags.compile);
  std::string objectEntry = entry + ".o", headerEntry = entry + ".h",
              pchEntry = entry + ".h.gch";
  bool cached = !entry.empty() && llvm::sys::fs::exists(objectEntry);
  bool precompiled = cached && llvm::sys::fs::exists(headerEntry) &&
                     llvm::sys::fs::exists(pchEntry);
  std::string modelObject = output + ".o", kernelObject = output + ".kernels.o";
  llvm::scope_exit removeObjects([&] {
    llvm::sys::fs::remove(modelObject);
    llvm::sys::fs::remove(kernelObject);
  });
  auto compileKernels = [&](std::string &kernelError) {
    return runBuild(compileArgs({"-c", kernelSource.str().str()}, kernelObject),
                    logFile, kernelError, "C++ compiler");
  };
  // The precompiled header: the header (beside `source`) as an entry of
  // its own (the compiler may check that the header it was made from is
  // unchanged), then the header compiled from it.
  auto precompileHeader = [&] {
    if (!storeInCache(kernelHeader, headerEntry))
      return;
    std::string temp = createTempEntry(pchEntry);
    if (temp.empty())
      return;
    std::string pchError;
    if (failed(runBuild(compileArgs({"-x", "c++-header", headerEntry}, temp),
                        logFile, pchError, "C++ compiler")) ||
        llvm::sys::fs::rename(temp, pchEntry))
      llvm::sys::fs::remove(temp);
  };
  std::string kernelError;
  LogicalResult kernelsBuilt = success();
  std::thread sideBuilder;
  if (!cached)
    sideBuilder =
        std::thread([&] { kernelsBuilt = compileKernels(kernelError); });
  else if (!precompiled)
    sideBuilder = std::thread(precompileHeader);
  auto joinSideBuilder = [&] {
    if (sideBuilder.joinable())
      sideBuilder.join();
  };
  llvm::scope_exit joinAtEnd(joinSideBuilder);
  auto compileModel = [&] {
    SmallVector<std::string> inputs;
    if (precompiled)
      inputs = {"-include", headerEntry};
    llvm::append_range(inputs, ArrayRef<std::string>{"-c", source});
    return runBuild(compileArgs(inputs, modelObject), logFile, error,
                    "C++ compiler");
  };
  LogicalResult modelBuilt = compileModel();
  if (failed(modelBuilt) && precompiled) {
    // Without the precompiled header; if that compiles, the compiler
    // refused the header (damaged, or made for another), which is dropped.
    precompiled = false;
    modelBuilt = compileModel();
    if (succeeded(modelBuilt)) {
      log("the cache's precompiled header failed; removed " + pchEntry);
      llvm::sys::fs::remove(pchEntry);
    }
  }
  if (!cached)
    joinSideBuilder();
  if (failed(modelBuilt))
    return failure();
  if (failed(kernelsBuilt)) {
    error = kernelError;
    return failure();
  }
  auto link = [&](StringRef kernels) {
    SmallVector<std::string> args{*cxx, "-o", output, modelObject,
                                  kernels.str()};
    llvm::append_range(args, flags.link);
    return runBuild(args, logFile, error, "linker");
  };
  if (cached) {
    log("the kernels' object from the cache: " + objectEntry);
    if (succeeded(link(objectEntry)))
      return success();
    // An entry that does not link (damaged, or another compiler's after
    // all) is made again.
    joinSideBuilder();
    if (failed(compileKernels(error)))
      return failure();
  }
  if (failed(link(kernelObject)))
    return failure();
  if (!entry.empty())
    storeInCache(kernelObject, objectEntry);
  return success();
}

LogicalResult pcc::buildCudaLibrary(const std::string &source,
                                    const std::string &output,
                                    const std::string &logFile,
                                    std::string &error, StringRef arch) {
  auto nvcc = llvm::sys::findProgramByName("nvcc");
  if (!nvcc)
    nvcc = llvm::sys::findProgramByName("nvcc", {"/usr/local/cuda/bin"});
  if (!nvcc) {
    error = "nvcc not found (neither on PATH nor in /usr/local/cuda/bin): "
            "--target cuda needs the CUDA toolkit";
    return failure();
  }
  // The kernels call constexpr host functions (numeric_limits) on the
  // device. cuBLASLt and the CUDA runtime come from the toolkit beside
  // nvcc.
  SmallString<256> lib(llvm::sys::path::parent_path(
      llvm::sys::path::parent_path(*nvcc)));
  llvm::sys::path::append(lib, "lib64");
  SmallVector<std::string> args{*nvcc,
                                "-std=c++17",
                                "-O3",
                                "-arch=" + arch.str(),
                                "--expt-relaxed-constexpr",
                                "-Xcompiler",
                                "-fPIC",
                                "-shared",
                                "-w",
                                "-o",
                                output,
                                source,
                                "-L" + std::string(lib),
                                "-lcublasLt"};
  return runBuild(args, logFile, error, "CUDA compiler (nvcc)");
}

LogicalResult pcc::buildEmulatedCudaLibrary(const std::string &source,
                                            const std::string &output,
                                            const std::string &logFile,
                                            std::string &error) {
  FailureOr<std::string> cxx = findCxx(error);
  if (failed(cxx))
    return failure();
  SmallString<256> header(llvm::sys::path::parent_path(source));
  llvm::sys::path::append(header, "pcc_cuda_emulation.h");
  SmallVector<std::string> args{
      *cxx,  "-std=c++17",     "-O2",     "-fno-math-errno", "-fPIC",
      "-shared", "-Wl,-z,nodelete", "-w", "-x",              "c++",
      "-include", std::string(header), "-o", output,          source, "-x",
      "none"};
  std::istringstream blas(PCC_BLAS_FLAGS);
  for (std::string flag; blas >> flag;)
    args.push_back(flag);
  return runBuild(args, logFile, error, "C++ compiler (CUDA emulation)");
}

std::vector<pccrt::TensorRef>
pcc::getWeightTensors(const CppEmitResult &emitted,
                      std::deque<std::vector<uint8_t>> &storage) {
  std::vector<pccrt::TensorRef> tensors;
  for (const WeightEntry &w : emitted.weights) {
    pccrt::TensorRef t;
    t.name = w.name;
    t.dtype = getOnnxDataType(w.value.getElementType());
    auto shape = w.value.getShapedType().getShape();
    t.shape.assign(shape.begin(), shape.end());
    auto [dim, extent] = w.padding;
    // The IR's bytes are the file's for a tensor of whole bytes: no copy of
    // a large model's weights. Those that view the model's external data
    // are copied from file to file.
    std::optional<ArrayRef<char>> raw;
    if (dim < 0)
      raw = graph::getStoredBytes(w.value);
    if (raw) {
      if (auto source = findExternalDataSource(*raw)) {
        t.file = source->first;
        t.fileOffset = source->second;
      } else {
        t.data = reinterpret_cast<const uint8_t *>(raw->data());
      }
      t.size = raw->size();
      tensors.push_back(std::move(t));
      continue;
    }
    DenseElementsAttr dense = graph::getDenseValue(w.value);
    assert(dense && "the emitter takes dense values or stored bytes only");
    // Zeros (an optimizer's moments) become a hole in the file: neither
    // held here nor written to disk.
    if (dim < 0 && dense.isSplat() && !dense.getElementType().isInteger(1) &&
        dense.getRawData().size() >= 1 &&
        llvm::all_of(dense.getRawData(), [](char c) { return c == 0; })) {
      t.zeros = true;
      t.size = uint64_t(dense.getNumElements()) *
               (dense.getElementType().getIntOrFloatBitWidth() / 8);
      tensors.push_back(std::move(t));
      continue;
    }
    // A splat or bools: made into bytes here, kept in `storage`.
    std::optional<ArrayRef<char>> stored = graph::getStoredBytes(dense);
    if (!stored) {
      std::vector<uint8_t> &bytes = storage.emplace_back(getRawBytes(dense));
      stored = ArrayRef<char>(reinterpret_cast<const char *>(bytes.data()),
                              bytes.size());
    }
    t.data = reinterpret_cast<const uint8_t *>(stored->data());
    t.size = stored->size();
    if (dim < 0) {
      tensors.push_back(std::move(t));
      continue;
    }
    // The file holds the real vocabulary; each rank's part gets its padding
    // back as zeros when it is loaded. Where the padding is the outermost
    // dimension (an embedding table), the real rows are a prefix of the
    // stored bytes, written as they are.
    int64_t outer = 1;
    for (int64_t d = 0; d < dim; ++d)
      outer *= shape[d];
    int64_t inner =
        int64_t(stored->size()) / std::max<int64_t>(1, outer * shape[dim]);
    t.shape[dim] = extent;
    t.size = uint64_t(outer * extent * inner);
    if (outer == 1) {
      tensors.push_back(std::move(t));
      continue;
    }
    std::vector<uint8_t> &cut = storage.emplace_back();
    cut.reserve(t.size);
    for (int64_t o = 0; o < outer; ++o)
      cut.insert(cut.end(), stored->begin() + o * shape[dim] * inner,
                 stored->begin() + (o * shape[dim] + extent) * inner);
    t.data = cut.data();
    tensors.push_back(std::move(t));
  }
  return tensors;
}

/// Writes each (file name, text) into `dir`.
static LogicalResult
writeTexts(StringRef dir,
           std::initializer_list<std::pair<StringRef, StringRef>> files,
           std::string &error) {
  for (auto [name, text] : files) {
    std::error_code ec;
    llvm::raw_fd_ostream os((dir + "/" + name).str(), ec);
    if (ec) {
      error = ("cannot write " + name + ": " + ec.message()).str();
      return failure();
    }
    os << text;
  }
  return success();
}

LogicalResult pcc::writeRuntimeSources(StringRef dir, std::string &error) {
  return writeTexts(dir,
                    {{"pcc_kernels.h", getKernelHeader()},
                     {"pcc_kernels.cpp", getKernelSource()},
                     {"pccrt.h", getAbiHeader()}},
                    error);
}

LogicalResult pcc::writeCudaHeaders(StringRef dir, std::string &error) {
  return writeTexts(dir,
                    {{"pcc_cuda_kernels.cuh", getCudaKernelHeader()},
                     {"pcc_cuda_emulation.h", getCudaEmulationHeader()},
                     {"pccrt.h", getAbiHeader()}},
                    error);
}

namespace {
/// A folder that is removed unless committed: `pcc compile` builds into it
/// and renames it over the output only once everything succeeded.
class TempDir {
public:
  explicit TempDir(std::string path) : path(std::move(path)) {}
  ~TempDir() {
    if (!committed)
      llvm::sys::fs::remove_directories(path);
  }
  std::string path;
  bool committed = false;
};
} // namespace

/// The file that marks a folder as a `pcc compile` output, which a later
/// compile may replace; pcc never replaces a folder without it.
static constexpr char kOutputMarker[] = ".pcc-output";

/// True when `inner` is `outer` or lies inside it (both absolute, resolved).
static bool isWithin(StringRef inner, StringRef outer) {
  if (!inner.starts_with(outer))
    return false;
  return inner.size() == outer.size() ||
         llvm::sys::path::is_separator(inner[outer.size()]) ||
         outer == llvm::sys::path::root_path(outer);
}

/// The real path of `p` when it exists, else its absolute form without dots.
static std::string resolvedPath(StringRef p) {
  SmallString<256> real;
  if (!llvm::sys::fs::real_path(p, real))
    return real.str().str();
  SmallString<256> abs(p);
  llvm::sys::fs::make_absolute(abs);
  llvm::sys::path::remove_dots(abs, true);
  return abs.str().str();
}

/// Refuses an output folder whose replacement could destroy something pcc
/// did not write: the folder holding the model or a bound input, the
/// current folder or one of its parents, or an existing non-empty folder
/// without pcc's marker.
static LogicalResult
checkOutputFolder(const CompileOptions &options, StringRef outAbs,
                  llvm::function_ref<LogicalResult(const Twine &)> fail) {
  std::string out = resolvedPath(outAbs);
  SmallVector<std::pair<std::string, std::string>> inputs{
      {options.model, "the model"}};
  for (const auto &[name, file] : options.bindings)
    inputs.push_back({file, "--bind " + name});
  for (const auto &[file, what] : inputs)
    if (isWithin(resolvedPath(file), out))
      return fail("-o " + options.outDir +
                  " would replace the folder "
                  "holding " +
                  what + " (" + file + "); choose another output folder");
  SmallString<256> cwd;
  if (!llvm::sys::fs::current_path(cwd) && isWithin(resolvedPath(cwd), out))
    return fail("-o " + options.outDir +
                " is the current folder or one of its parents; choose a new "
                "folder for the output");
  if (!llvm::sys::fs::exists(outAbs))
    return success();
  if (!llvm::sys::fs::is_directory(outAbs))
    return fail("output '" + options.outDir + "' exists and is not a folder");
  if (llvm::sys::fs::exists(outAbs + "/" + kOutputMarker))
    return success();
  std::error_code ec;
  llvm::sys::fs::directory_iterator it(outAbs, ec);
  if (!ec && it == llvm::sys::fs::directory_iterator())
    return success();
  return fail("output folder '" + options.outDir +
              "' exists and was not written by pcc compile; pcc replaces "
              "only its own output folders (remove it or choose another)");
}

static std::string humanCount(double v, StringRef unit) {
  const char *suffix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4)
    v /= 1000, ++i;
  std::string scaled = (suffix[i] + unit).str();
  return llvm::formatv("{0:F2}{1}{2}", v, scaled.empty() ? "" : " ", scaled)
      .str();
}

static llvm::json::Value shapeJson(Type t) {
  llvm::json::Array a;
  for (int64_t d : cast<RankedTensorType>(t).getShape())
    a.push_back(d);
  return a;
}

namespace {
/// Tells a user at a terminal which step of a compile is running once it
/// has taken a second ("pcc: importing model.onnx..."), and its time when it
/// ends; quiet otherwise, and when stderr is not a terminal.
class ProgressLine {
public:
  explicit ProgressLine(std::string step)
      : step(std::move(step)), start(std::chrono::steady_clock::now()) {
    if (!llvm::sys::Process::StandardErrIsDisplayed())
      return;
    watcher = std::thread([this] {
      std::unique_lock<std::mutex> lock(mutex);
      if (!ended.wait_for(lock, std::chrono::seconds(1), [&] { return done; })) {
        llvm::errs() << "pcc: " << this->step << "...";
        llvm::errs().flush();
        shown = true;
      }
    });
  }
  ~ProgressLine() {
    if (!watcher.joinable())
      return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      done = true;
    }
    ended.notify_one();
    watcher.join();
    if (shown)
      llvm::errs() << llvm::formatv(
          " {0:F1} s\n", std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count());
  }

private:
  std::string step;
  std::chrono::steady_clock::time_point start;
  std::thread watcher;
  std::mutex mutex;
  std::condition_variable ended;
  bool done = false, shown = false;
};
} // namespace

llvm::json::Object pcc::describeRecompute(ModuleOp module, StringRef mode) {
  auto totals = module->getAttrOfType<DictionaryAttr>(graph::kRecomputeAttr);
  auto count = [&](StringRef key) -> int64_t {
    auto value = totals ? totals.getAs<IntegerAttr>(key) : nullptr;
    return value ? value.getInt() : 0;
  };
  llvm::json::Object result{{"mode", mode},
                            {"ops", count("ops")},
                            {"flops", count("flops")},
                            {"bytes_not_kept", count("bytes")}};
  if (!totals)
    return result;
  // Per pipeline stage, and with auto the budget and the ranks above it.
  if (auto stages = totals.getAs<ArrayAttr>("stages")) {
    llvm::json::Array perStage;
    for (auto [s, entry] : llvm::enumerate(stages.getAsRange<DictionaryAttr>()))
      perStage.push_back(llvm::json::Object{
          {"stage", int64_t(s)},
          {"ops", cast<IntegerAttr>(entry.get("ops")).getInt()},
          {"flops", cast<IntegerAttr>(entry.get("flops")).getInt()},
          {"bytes_not_kept", cast<IntegerAttr>(entry.get("bytes")).getInt()}});
    result["stages"] = std::move(perStage);
  }
  if (auto budget = totals.getAs<IntegerAttr>("budget"))
    result["budget_bytes"] = budget.getInt();
  if (auto over = totals.getAs<ArrayAttr>("over")) {
    llvm::json::Array ranks;
    for (auto entry : over.getAsRange<DictionaryAttr>())
      ranks.push_back(llvm::json::Object{
          {"rank", cast<IntegerAttr>(entry.get("rank")).getInt()},
          {"predicted_bytes", cast<IntegerAttr>(entry.get("bytes")).getInt()}});
    result["over_budget"] = std::move(ranks);
  }
  return result;
}

llvm::json::Array pcc::describeAttention(ModuleOp module) {
  llvm::json::Array entries;
  // A forward outlined into pipeline stages or cloned per microbatch is one
  // op of the model each: one entry per set of nodes.
  std::set<std::vector<std::string>> seen;
  module.walk([&](graph::AttentionOp op) {
    std::vector<std::string> nodes;
    op.getLoc()->walk([&](Location loc) {
      if (auto name = dyn_cast<NameLoc>(loc))
        nodes.push_back(name.getName().str());
      return WalkResult::advance();
    });
    llvm::sort(nodes);
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    if (!seen.insert(nodes).second)
      return;
    ArrayRef<int64_t> q =
        cast<RankedTensorType>(op.getQuery().getType()).getShape();
    ArrayRef<int64_t> k =
        cast<RankedTensorType>(op.getKey().getType()).getShape();
    bool padding = false, bias = false;
    if (Value b = op.getBias()) {
      // [B, 1, 1, Tk] (or fewer leading dimensions): a padding mask.
      ArrayRef<int64_t> s = cast<RankedTensorType>(b.getType()).getShape();
      SmallVector<int64_t> full(4 - std::min<size_t>(4, s.size()), 1);
      llvm::append_range(full, s);
      padding = full[1] == 1 && full[2] == 1;
      bias = !padding;
    }
    llvm::json::Array names;
    for (const std::string &n : nodes)
      names.push_back(n);
    entries.push_back(llvm::json::Object{{"nodes", std::move(names)},
                                         {"causal", op.getCausal()},
                                         {"padding", padding},
                                         {"bias", bias},
                                         {"heads", q[1]},
                                         {"kv_heads", k[1]},
                                         {"head_dim", q[3]},
                                         {"queries", q[2]},
                                         {"keys", k[2]}});
  });
  return entries;
}

std::string pcc::recomputeSummary(const llvm::json::Object &recompute) {
  if (recompute.getString("mode").value_or("none") == "none")
    return "";
  auto count = [&](StringRef key) {
    return recompute.getInteger(key).value_or(0);
  };
  std::string line = ("  recompute: " + Twine(count("ops")) +
                       " forward op(s) again in the backward, +" +
                       humanCount(count("flops"), "FLOP") + "/step, " +
                       humanCount(count("bytes_not_kept"), "B") +
                       " of activations no longer kept for it")
                          .str();
  if (std::optional<int64_t> budget = recompute.getInteger("budget_bytes"))
    line += " (auto, to fit " + humanCount(*budget, "B") + " per rank)";
  line += "\n";
  // Stage by stage, what auto chose.
  if (const llvm::json::Array *stages = recompute.getArray("stages"))
    if (recompute.getInteger("budget_bytes"))
      for (const llvm::json::Value &entry : *stages) {
        const llvm::json::Object &stage = *entry.getAsObject();
        if (!*stage.getInteger("ops"))
          continue;
        line += llvm::formatv("    stage {0}: {1} op(s), +{2}, {3} no longer "
                              "kept per microbatch\n",
                              *stage.getInteger("stage"),
                              *stage.getInteger("ops"),
                              humanCount(*stage.getInteger("flops"), "FLOP"),
                              humanCount(*stage.getInteger("bytes_not_kept"),
                                         "B"))
                    .str();
      }
  return line;
}

void pcc::warnOverBudget(const llvm::json::Object &recompute) {
  const llvm::json::Array *over = recompute.getArray("over_budget");
  if (!over)
    return;
  for (const llvm::json::Value &entry : *over) {
    const llvm::json::Object &rank = *entry.getAsObject();
    llvm::errs() << "pcc: warning: rank " << *rank.getInteger("rank")
                 << " needs "
                 << humanCount(*rank.getInteger("predicted_bytes"), "B")
                 << " even recomputing all it can, over --memory-budget "
                 << humanCount(*recompute.getInteger("budget_bytes"), "B") << "\n";
  }
}

llvm::json::Array pcc::describeCollectives(ModuleOp module) {
  // Per kind and mesh axes ("all_reduce dp"): count and bytes.
  struct CollectiveTotal {
    std::string kind, axes;
    int64_t count = 0, bytes = 0;
  };
  std::map<std::pair<std::string, std::string>, CollectiveTotal> collectives;
  module->walk([&](Operation *op) {
    if (!isa<dist::AllReduceOp, dist::AllGatherOp, dist::ReduceScatterOp,
             dist::AllToAllOp, dist::SendOp, dist::RecvOp>(op))
      return;
    Value v = op->getNumResults() ? op->getResult(0) : op->getOperand(0);
    std::string axes;
    if (auto list = op->getAttrOfType<ArrayAttr>("axes"))
      for (Attribute a : list)
        axes +=
            (axes.empty() ? "" : ",") + cast<StringAttr>(a).getValue().str();
    std::string kind = op->getName().stripDialect().str();
    CollectiveTotal &entry = collectives[{kind, axes}];
    entry.kind = kind;
    entry.axes = axes;
    entry.count += 1;
    entry.bytes += tensorBytes(v.getType());
  });
  llvm::json::Array comms;
  for (auto &kv : collectives)
    comms.push_back(llvm::json::Object{{"kind", kv.second.kind},
                                       {"axes", kv.second.axes},
                                       {"bytes", kv.second.bytes},
                                       {"count", kv.second.count}});
  return comms;
}

void pcc::printCollectivesOver(llvm::raw_ostream &os,
                               const llvm::json::Array &collectives,
                               StringRef axis) {
  bool any = false;
  for (const llvm::json::Value &c : collectives) {
    const llvm::json::Object &o = *c.getAsObject();
    if (!llvm::is_contained(llvm::split(*o.getString("axes"), ','), axis))
      continue;
    os << " " << *o.getInteger("count") << " " << *o.getString("kind") << " ("
       << humanCount(*o.getInteger("bytes"), "B") << ")";
    any = true;
  }
  if (!any)
    os << " no collectives";
  os << "\n";
}

std::string pcc::checkLayoutOptions(const CompileOptions &options) {
  const OptimizerConfig &o = options.optimizer;
  if (o.kind == "adamw" && o.momentum != 0)
    return "--momentum is SGD's (--optimizer sgd); AdamW's moments take "
           "--beta1 and --beta2";
  if (options.sequenceParallel && options.tp < 2)
    return "--sequence-parallel splits activations over tensor parallelism: "
           "give --tp 2 or more";
  if (options.pp < 2 && options.microbatches <= 1 &&
      (options.schedule != "1f1b" || options.virtualStages != 1 ||
       !options.ppSplit.empty()))
    return "--schedule, --virtual-stages and --pp-split shape a pipeline: "
           "give --pp 2 or more";
  if (options.eval && !options.train)
    return "--eval builds a training step's evaluation: it needs --train";
  if (!options.train) {
    OptimizerConfig defaults;
    if (o.kind != defaults.kind || o.lr != defaults.lr ||
        o.beta1 != defaults.beta1 || o.beta2 != defaults.beta2 ||
        o.eps != defaults.eps || o.weightDecay != defaults.weightDecay ||
        o.momentum != defaults.momentum)
      return "--optimizer, --lr, --beta1, --beta2, --eps, --weight-decay and "
             "--momentum need --train";
    if (!options.trainable.empty() || !options.freeze.empty())
      return "--trainable and --freeze need --train";
    if (o.clipGrad > 0)
      return "--clip-grad needs --train";
    if (o.lrSchedule != "constant" || o.warmupSteps || o.decaySteps || o.minLr)
      return "--lr-schedule, --warmup-steps, --decay-steps and --min-lr need "
             "--train";
    if (options.recompute != "none")
      return "--recompute decides what a training step's backward "
             "recomputes: it needs --train";
  }
  if (options.recompute != "none" && options.recompute != "selective" &&
      options.recompute != "full" && options.recompute != "auto")
    return "--recompute takes none, selective, full or auto, got '" +
           options.recompute + "'";
  if (options.recompute == "auto" && options.memoryBudget <= 0)
    return "--recompute auto chooses what to recompute so that each rank "
           "fits a memory budget: it needs --memory-budget";
  if (options.memoryBudget > 0 && options.recompute != "auto")
    return "--memory-budget is the budget of --recompute auto: it needs "
           "--recompute auto";
  if (options.zero < 0 || options.zero > 3)
    return "--zero must be 0, 1, 2 or 3, got " + std::to_string(options.zero);
  if (options.zero > 0) {
    if (!options.train)
      return "--zero needs --train";
    if (options.dp < 2)
      return "--zero " + std::to_string(options.zero) +
             " splits over data parallelism: give --dp 2 or more";
  }
  return "";
}

/// What an unpipelined step holds outside its workspace: its arguments
/// (parameters, state, inputs), its weights, and its results but the state
/// updates (written over their state).
static int64_t getHeldBytes(ModuleOp module) {
  int64_t held = 0;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || !func.isPublic())
      continue;
    for (Type t : func.getArgumentTypes())
      held += tensorBytes(t);
    for (auto [i, t] : llvm::enumerate(func.getResultTypes()))
      if (!func.getResultAttr(i, graph::kUpdateAttr))
        held += tensorBytes(t);
    func.walk([&](graph::WeightOp op) { held += tensorBytes(op.getType()); });
  }
  return held;
}

LogicalResult pcc::compile(const CompileOptions &options,
                           llvm::raw_ostream &summary) {
  auto fail = [](const Twine &msg) {
    llvm::errs() << "pcc: error: " << msg << "\n";
    return failure();
  };
  if (std::string problem = checkLayoutOptions(options); !problem.empty())
    return fail(problem);
  bool cuda = options.target == "cuda";
  if (options.target != "cpu" && !cuda)
    return fail("unknown target '" + options.target + "' (cpu or cuda)");
  if (options.cudaEmulate && !cuda)
    return fail("--cuda-emulate needs --target cuda");

  // The output folder is checked before any work: a compile that would
  // destroy a user's files is refused at once.
  SmallString<256> outAbs(options.outDir);
  llvm::sys::fs::make_absolute(outAbs);
  llvm::sys::path::remove_dots(outAbs, true);
  while (outAbs.size() > 1 && llvm::sys::path::is_separator(outAbs.back()))
    outAbs.pop_back();
  StringRef parent = llvm::sys::path::parent_path(outAbs);
  if (!parent.empty() && !llvm::sys::fs::is_directory(parent))
    return fail("output folder's parent '" + parent + "' does not exist");
  if (failed(checkOutputFolder(options, outAbs, fail)))
    return failure();

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.disableMultithreading();
  // pcc-select-trainable reports each initializer's decision as a remark
  // "trainable: <reason>" or "constant: <reason>" at the initializer.
  struct Decision {
    std::string name, reason;
    bool trainable;
  };
  std::vector<Decision> decisions;
  auto diagPrinter = installDiagnosticPrinter(context, [&](Diagnostic &diag) {
    auto name = dyn_cast<NameLoc>(diag.getLocation());
    std::string message = diag.str();
    auto [verdict, reason] = StringRef(message).split(": ");
    if (name && (verdict == "trainable" || verdict == "constant"))
      decisions.push_back(
          {name.getName().str(), reason.str(), verdict == "trainable"});
  });

  ImportOptions importOptions;
  importOptions.bindings = options.bindings;
  importOptions.inputShapes = options.inputShapes;
  importOptions.retie = options.retie;
  ImportReport importReport;
  // Graph dialect IR (.mlir) is taken as the importer would have made it:
  // tests and users can state layouts (`dist.sharding`) in it.
  OwningOpRef<ModuleOp> module;
  {
    ProgressLine progress("importing " + options.model);
    module = StringRef(options.model).ends_with(".mlir")
                 ? parseSourceFile<ModuleOp>(options.model, &context)
                 : importOnnxFile(context, options.model, importOptions,
                                  &importReport);
  }
  if (!module)
    return failure();
  if (module->getOps<func::FuncOp>().empty())
    return fail(options.model + ": no function to compile");
  // Auto recomputation on one stage frees what the step's buffer plan
  // holds beyond the budget: the step is built and its buffers planned
  // without recomputation first (a pipeline's memory is the schedule's,
  // which the pass simulates itself), then, while the plan of what the pass
  // chose is still over (the pass frees what it keeps for the backward,
  // the plan's peak can fall by less), again with the excess added.
  CompileOptions effective = options;
  if (options.recompute == "auto" && options.pp == 1 &&
      options.microbatches <= 1) {
    ProgressLine progress("planning the step's memory");
    size_t decided = decisions.size();
    auto planPeak = [&](const CompileOptions &trialOptions)
        -> FailureOr<int64_t> {
      OwningOpRef<ModuleOp> trial = module->clone();
      PassManager trialPm(&context);
      buildCompilePipeline(trialPm, trialOptions);
      if (failed(trialPm.run(*trial)))
        return failure();
      decisions.resize(decided);
      llvm::raw_null_ostream sink;
      CppEmitOptions emitOptions;
      emitOptions.symbolPrefix = options.symbolPrefix;
      emitOptions.threads = options.threads;
      FailureOr<CppEmitResult> planned =
          cuda ? emitCuda(*trial, sink, emitOptions)
               : emitCpp(*trial, sink, emitOptions);
      if (failed(planned))
        return failure();
      return int64_t(planned->workspaceBytes) + getHeldBytes(*trial);
    };
    CompileOptions none = options;
    none.recompute = "none";
    none.memoryBudget = 0;
    FailureOr<int64_t> peak = planPeak(none);
    if (failed(peak))
      return failure();
    effective.plannedPeak = *peak;
    for (int round = 0; round < 3 && *peak > options.memoryBudget; ++round) {
      FailureOr<int64_t> chosen = planPeak(effective);
      if (failed(chosen))
        return failure();
      if (*chosen <= options.memoryBudget || *chosen >= *peak)
        break;
      effective.plannedPeak += *chosen - options.memoryBudget;
      peak = chosen;
    }
  }
  PassManager pm(&context);
  buildCompilePipeline(pm, effective);
  // Each pass's time, on stderr when the pipeline ends (for pcc's
  // developers: where a compile spends its time).
  if (const char *timing = std::getenv("PCC_PASS_TIMING");
      timing && StringRef(timing) == "1")
    pm.enableTiming();
  {
    ProgressLine progress(options.train ? "building the training step"
                                        : "optimizing");
    if (failed(pm.run(*module)))
      return failure();
  }
  // The program's entries are its public functions: one, or one per
  // pipeline rank (dist.rank); pipeline stages are private functions they
  // call, which the emitter compiles with them.
  FailureOr<MeshLayout> mesh = MeshLayout::get(*module);
  if (failed(mesh))
    return failure();
  FailureOr<SmallVector<func::FuncOp>> found =
      getEntryFunctions(*module, mesh->getAxisSize(dist::kPipelineAxis));
  if (failed(found))
    return failure();
  SmallVector<func::FuncOp> entries = std::move(*found);
  std::optional<PipelinePlan> pipeline;
  {
    FailureOr<std::optional<PipelinePlan>> described =
        describePipeline(*module);
    if (failed(described))
      return failure();
    pipeline = std::move(*described);
  }

  // Everything is written into a temporary folder beside OUT.
  TempDir tmp(
      (outAbs + ".pcc-tmp-" + Twine(llvm::sys::Process::getProcessId())).str());
  llvm::sys::fs::remove_directories(tmp.path);
  if (llvm::sys::fs::create_directory(tmp.path, /*IgnoreExisting=*/true,
                                      llvm::sys::fs::all_all))
    return fail("cannot create '" + tmp.path + "'");
  auto path = [&](StringRef name) { return (tmp.path + "/" + name).str(); };

  std::error_code ec;
  CppEmitOptions emitOptions;
  emitOptions.symbolPrefix = options.symbolPrefix;
  emitOptions.threads = options.threads;
  FailureOr<CppEmitResult> emitted;
  std::string sourceName = cuda ? "model.cu" : "model.cpp";
  {
    llvm::raw_fd_ostream source(path(sourceName), ec);
    if (ec)
      return fail("cannot write " + sourceName + ": " + ec.message());
    ProgressLine progress(cuda ? "generating CUDA C++" : "generating C++");
    emitted = cuda ? emitCuda(*module, source, emitOptions)
                   : emitCpp(*module, source, emitOptions);
    if (failed(emitted))
      return failure();
  }
  std::string headerError;
  if (failed(cuda ? writeCudaHeaders(tmp.path, headerError)
                  : writeRuntimeSources(tmp.path, headerError)))
    return fail(headerError);

  // The compilers run while the weights are written: the C++ compiler, or
  // nvcc and, for the host emulation, the C++ compiler beside it.
  std::string buildError, emulationError;
  LogicalResult built = failure(), emulated = success();
  std::thread builder([&] {
    if (cuda)
      built = buildCudaLibrary(path(sourceName), path("libmodel.so"),
                               path("build.log"), buildError,
                               options.cudaArch);
    else
      built = buildSharedLibrary(path(sourceName), path("libmodel.so"),
                                 path("build.log"), buildError, options.cpu);
  });
  std::thread emulationBuilder;
  if (options.cudaEmulate)
    emulationBuilder = std::thread([&] {
      emulated = buildEmulatedCudaLibrary(
          path(sourceName), path(kEmulatedLibrary), path("build-emulated.log"),
          emulationError);
    });
  llvm::scope_exit joinBuilder([&] {
    if (builder.joinable())
      builder.join();
    if (emulationBuilder.joinable())
      emulationBuilder.join();
  });

  // Weights, in the order the generated code expects them.
  std::deque<std::vector<uint8_t>> weightStorage;
  std::vector<pccrt::TensorRef> tensors =
      getWeightTensors(*emitted, weightStorage);
  // Parameters: the forward's graph.weight ops and, in a training step, the
  // state that has a gradient; the rest of the state is the optimizer's.
  int64_t paramElements = 0, paramBytes = 0, paramCount = 0, stateBytes = 0;
  auto countParam = [&](Type t) {
    ++paramCount;
    paramElements += cast<RankedTensorType>(t).getNumElements();
    paramBytes += tensorBytes(t);
  };
  // Each tensor once, by name, however many pipeline ranks hold it; per
  // pipeline rank, what it holds.
  llvm::StringSet<> counted;
  struct RankBytes {
    int64_t params = 0, state = 0, gradients = 0;
  };
  SmallVector<RankBytes> rankBytes(entries.size());
  for (auto [r, entry] : llvm::enumerate(entries)) {
    llvm::DenseSet<unsigned> graded;
    for (unsigned i = 0; i < entry.getNumResults(); ++i)
      if (std::optional<unsigned> arg =
              graph::getStateIndex(entry, i, graph::kGradAttr)) {
        graded.insert(*arg);
        // The gradient as this rank holds it (a block with ZeRO 2).
        rankBytes[r].gradients += tensorBytes(entry.getResultTypes()[i]);
      }
    for (auto [i, t] : llvm::enumerate(entry.getArgumentTypes())) {
      StringRef name = graph::getStateName(entry, i);
      if (name.empty())
        continue;
      (graded.contains(i) ? rankBytes[r].params : rankBytes[r].state) +=
          tensorBytes(t);
      if (!counted.insert(name).second)
        continue;
      if (graded.contains(i))
        countParam(t);
      else
        stateBytes += tensorBytes(t);
    }
  }
  // Inference weights: a split weight counts its block (what each rank
  // holds).
  module->walk([&](graph::WeightOp w) {
    Type t = w.getType();
    if (w->hasOneUse())
      if (auto slice = dyn_cast<dist::AllSliceOp>(*w->getUsers().begin()))
        t = slice.getType();
    if (counted.insert(w.getName()).second)
      countParam(t);
  });
  try {
    ProgressLine progress("writing the weights");
    pccrt::writeSafetensorRefs(path("weights.safetensors"), tensors,
                               {{"format", "pcc"}});
  } catch (const pccrt::Error &e) {
    return fail(e.what());
  }
  tensors.clear();
  weightStorage.clear();

  {
    ProgressLine progress(cuda ? "compiling the generated CUDA C++"
                               : "compiling the generated C++");
    builder.join();
    if (emulationBuilder.joinable())
      emulationBuilder.join();
  }
  if (failed(built))
    return fail(buildError);
  if (failed(emulated))
    return fail(emulationError);

  // The report: what the compile decided.
  llvm::StringMap<int64_t> opCounts;
  int64_t flops = 0, numOps = 0;
  // Ops of the program; flops of one step, a called function's once per
  // call.
  llvm::DenseMap<Operation *, int64_t> flopsOf;
  std::function<int64_t(func::FuncOp)> functionFlops = [&](func::FuncOp f) {
    auto [it, inserted] = flopsOf.try_emplace(f, 0);
    if (!inserted)
      return it->second;
    int64_t total = 0;
    f.walk([&](Operation *op) {
      if (auto cost = dyn_cast<graph::CostOpInterface>(op))
        total += cost.getFlops();
      if (auto call = dyn_cast<func::CallOp>(op))
        if (auto callee =
                module->lookupSymbol<func::FuncOp>(call.getCallee()))
          total += functionFlops(callee);
    });
    return flopsOf[f] = total;
  };
  module->walk([&](Operation *op) {
    if (isa<func::FuncOp, func::ReturnOp, func::CallOp, ModuleOp>(op) ||
        (op->getDialect()->getNamespace() == "dist" && op->getNumRegions()))
      return;
    if (op->getParentOfType<dist::ScheduleOp>())
      return;
    ++opCounts[op->getName().getStringRef()];
    ++numOps;
  });
  for (func::FuncOp entry : entries)
    flops += functionFlops(entry);
  // Saved activations: forward values that the backward ops read, i.e.
  // what a training step keeps alive between its forward and backward.
  int64_t savedCount = 0, savedBytes = 0;
  llvm::DenseSet<Value> saved;
  module->walk([&](Operation *op) {
    if (!op->hasAttr(graph::kBackwardAttr))
      return;
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || def->hasAttr(graph::kBackwardAttr) ||
          isa<graph::ConstantOp, graph::WeightOp>(def) ||
          !saved.insert(v).second)
        continue;
      ++savedCount;
      savedBytes += tensorBytes(v.getType());
    }
  });
  // The model's interface: every entry takes all graph inputs; outputs and
  // gradients are those of any rank, once each (by their step index).
  func::FuncOp func = entries.front();
  std::map<int64_t, std::pair<func::FuncOp, unsigned>> results;
  for (func::FuncOp entry : entries)
    for (unsigned i = 0; i < entry.getNumResults(); ++i) {
      auto index =
          entry.getResultAttrOfType<IntegerAttr>(i, dist::kResultIndexAttr);
      results.try_emplace(index ? index.getInt() : int64_t(i),
                          std::make_pair(entry, i));
    }
  int64_t ioBytes = 0;
  for (auto [i, t] : llvm::enumerate(func.getArgumentTypes()))
    if (func.getArgAttr(i, kOnnxNameAttr))
      ioBytes += tensorBytes(t);
  for (auto &[k, at] : results)
    if (!at.first.getResultAttr(at.second, graph::kUpdateAttr))
      ioBytes += tensorBytes(at.first.getResultTypes()[at.second]);
  llvm::json::Object ops;
  for (auto &kv : opCounts)
    ops[kv.getKey()] = kv.getValue();
  llvm::json::Array reties, inputs, outputs, trainableSet;
  for (const Decision &d : decisions)
    trainableSet.push_back(llvm::json::Object{{"initializer", d.name},
                                              {"trainable", d.trainable},
                                              {"reason", d.reason}});
  for (auto &[tied, to] : importReport.reties)
    reties.push_back(
        llvm::json::Object{{"initializer", tied}, {"transpose_of", to}});
  // Graph inputs and outputs by ONNX name; training state and gradients are
  // reported by the emitter's weights and the optimizer.
  for (auto [i, t] : llvm::enumerate(func.getArgumentTypes()))
    if (auto name = func.getArgAttrOfType<StringAttr>(i, kOnnxNameAttr))
      inputs.push_back(llvm::json::Object{{"name", name.getValue()},
                                          {"shape", shapeJson(t)}});
  int64_t numGrads = 0;
  for (auto &[k, at] : results) {
    auto [f, i] = at;
    if (auto name = f.getResultAttrOfType<StringAttr>(i, kOnnxNameAttr))
      outputs.push_back(llvm::json::Object{
          {"name", name.getValue()}, {"shape", shapeJson(f.getResultTypes()[i])}});
    numGrads += f.getResultAttr(i, graph::kGradAttr) != nullptr;
  }
  int64_t perRank =
      paramBytes + stateBytes + int64_t(emitted->workspaceBytes) + ioBytes;
  // What pcc-recompute made the backward recompute.
  llvm::json::Object recompute = describeRecompute(*module, options.recompute);
  // Unpipelined, what a rank needs is what its buffers plan.
  if (effective.plannedPeak > 0)
    if (llvm::json::Array *over = recompute.getArray("over_budget"))
      for (llvm::json::Value &entry : *over)
        (*entry.getAsObject())["predicted_bytes"] = perRank;
  std::string recomputeLine = recomputeSummary(recompute);
  warnOverBudget(recompute);
  // The pass predicts a step's peak before its buffers are laid out; the
  // buffer plan has the last word.
  if (options.memoryBudget > 0 && perRank > options.memoryBudget &&
      !recompute.getArray("over_budget")->size())
    llvm::errs() << "pcc: warning: the step's buffers plan "
                 << humanCount(perRank, "B") << " per rank, over --memory-budget "
                 << humanCount(options.memoryBudget, "B")
                 << ", which pcc-recompute predicted to fit\n";
  llvm::json::Object report{
      {"model", options.model},
      {"target", options.target},
      {"dtype", options.dtype},
      {"dp", options.dp},
      {"tp", options.tp},
      {"pp", options.pp},
      {"zero", options.zero},
      {"train", options.train},
      {"inputs", std::move(inputs)},
      {"outputs", std::move(outputs)},
      {"num_ops", numOps},
      {"ops", std::move(ops)},
      {"parameters", llvm::json::Object{{"count", paramCount},
                                        {"elements", paramElements},
                                        {"bytes", paramBytes}}},
      {"flops", flops},
      {"memory",
       llvm::json::Object{{"weights_bytes", paramBytes},
                          {"optimizer_state_bytes", stateBytes},
                          {"workspace_bytes", int64_t(emitted->workspaceBytes)},
                          {"io_bytes", ioBytes},
                          {"per_rank_bytes", llvm::json::Array{perRank}}}},
      {"saved_activations",
       llvm::json::Object{{"count", savedCount}, {"bytes", savedBytes}}},
      {"recompute", llvm::json::Object(recompute)},
      {"attention", describeAttention(*module)},
      {"reties", std::move(reties)},
      {"trainable_set", std::move(trainableSet)},
      {"gradients", numGrads},
  };
  {
    llvm::raw_fd_ostream os(path("report.json"), ec);
    if (ec)
      return fail("cannot write report.json: " + ec.message());
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(report))) << "\n";
  }

  // The parallel plan: the mesh, what each rank holds, and the collectives
  // of one step (`bytes`: the bytes each rank's buffers hold), which the
  // summary lists by axis too.
  int64_t numRanks = options.dp * options.tp * options.pp;
  llvm::json::Array collectives = describeCollectives(*module);
  {
    llvm::json::Array ranks;
    // Ranks are row-major over (dp, pp, tp): a pipeline rank's tp ranks
    // hold alike, and so do the replicas.
    ArrayRef<int64_t> heldBytes;
    if (auto s = module->getOps<dist::ScheduleOp>(); !s.empty())
      if (auto base = (*s.begin()).getBaseBytes())
        heldBytes = *base;
    for (int64_t r = 0; r < numRanks; ++r) {
      int64_t stage = (r / options.tp) % options.pp;
      int64_t params = paramBytes, state = stateBytes,
              gradients = rankBytes.front().gradients;
      if (entries.size() > 1 && size_t(stage) < entries.size()) {
        params = rankBytes[stage].params;
        state = rankBytes[stage].state;
        gradients = rankBytes[stage].gradients;
        if (!options.train && size_t(stage) < heldBytes.size())
          params = heldBytes[stage];
      }
      ranks.push_back(llvm::json::Object{
          {"rank", r},
          {"coords", llvm::json::Object{{"dp", r / (options.tp * options.pp)},
                                        {"pp", stage},
                                        {"tp", r % options.tp}}},
          {"stage", stage},
          {"parameter_bytes", params},
          {"optimizer_state_bytes", state},
          {"gradient_bytes", gradients},
          {"workspace_bytes", int64_t(emitted->workspaceBytes)}});
    }
    llvm::json::Array comms = collectives;
    // How each weight is laid out: its whole shape (as in the weights
    // file), the dimension split over the ranks and each rank's shape.
    llvm::json::Array layouts;
    for (const WeightEntry &w : emitted->weights) {
      llvm::json::Array whole, local;
      for (int64_t d : w.value.getShapedType().getShape())
        whole.push_back(d);
      if (w.padding.first >= 0)
        whole[w.padding.first] = w.padding.second;
      RankedTensorType lt =
          w.localType ? w.localType : cast<RankedTensorType>(w.value.getType());
      for (int64_t d : lt.getShape())
        local.push_back(d);
      llvm::json::Object entry{{"name", w.name},
                               {"shape", std::move(whole)},
                               {"rank_shape", std::move(local)}};
      if (w.shardAxes) {
        entry["split_dim"] = w.shardDim;
        if (w.shardGroups > 1)
          entry["groups"] = w.shardGroups;
        if (w.padding.first >= 0)
          entry["padded_to"] =
              w.value.getShapedType().getDimSize(w.padding.first);
      }
      layouts.push_back(std::move(entry));
    }
    llvm::json::Object plan{{"mesh", llvm::json::Object{{"dp", options.dp},
                                                        {"pp", options.pp},
                                                        {"tp", options.tp}}},
                            {"sequence_parallel", options.sequenceParallel},
                            {"zero", options.zero},
                            {"recompute", std::move(recompute)},
                            {"ranks", std::move(ranks)},
                            {"collectives", std::move(comms)},
                            {"weights", std::move(layouts)}};
    if (pipeline)
      for (auto &kv : pipeline->json)
        plan[kv.first] = std::move(kv.second);
    llvm::raw_fd_ostream os(path("plan.json"), ec);
    if (ec)
      return fail("cannot write plan.json: " + ec.message());
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(plan))) << "\n";
  }
  if (pipeline) {
    llvm::raw_fd_ostream os(path("schedule.svg"), ec);
    if (ec)
      return fail("cannot write schedule.svg: " + ec.message());
    os << pipeline->svg;
  }

  {
    llvm::raw_fd_ostream os(path(kOutputMarker), ec);
    if (ec)
      return fail("cannot write " + Twine(kOutputMarker) + ": " + ec.message());
    os << "This folder was written by pcc compile; a later compile with the "
          "same -o replaces it.\n";
  }

  // The evaluation step, built into OUT/eval with the same layout: the
  // forward and its loss, whose weights `pcc run --eval-data` replaces by
  // the trained parameters (whole tensors, by name).
  if (options.eval) {
    CompileOptions evalOptions = options;
    evalOptions.train = false;
    evalOptions.withLoss = true;
    evalOptions.eval = false;
    evalOptions.zero = 0;
    evalOptions.optimizer = OptimizerConfig();
    evalOptions.outDir = path("eval");
    std::string evalSummary;
    llvm::raw_string_ostream evalOs(evalSummary);
    ProgressLine progress("building the evaluation step");
    if (failed(compile(evalOptions, evalOs)))
      return fail("building the evaluation step (--eval) failed");
  }

  // Replace OUT by the complete result (checked again: a folder may have
  // appeared while compiling).
  if (failed(checkOutputFolder(options, outAbs, fail)))
    return failure();
  std::string old;
  if (llvm::sys::fs::exists(outAbs)) {
    old = (outAbs + ".pcc-old-" + Twine(llvm::sys::Process::getProcessId()))
              .str();
    llvm::sys::fs::remove_directories(old);
    if (llvm::sys::fs::rename(outAbs, old))
      return fail("cannot replace '" + options.outDir + "'");
  }
  if (std::error_code rec = llvm::sys::fs::rename(tmp.path, outAbs)) {
    if (!old.empty())
      llvm::sys::fs::rename(old, outAbs);
    return fail("cannot create '" + options.outDir + "': " + rec.message());
  }
  tmp.committed = true;
  if (!old.empty())
    llvm::sys::fs::remove_directories(old);

  for (auto &[tied, to] : importReport.reties)
    summary << "pcc: re-tied initializer '" << tied << "' as the transpose of '"
            << to << "'\n";
  summary << "pcc: compiled " << options.model << " -> " << options.outDir
          << " (target " << options.target << ")\n"
          << "  ops: " << numOps << ", parameters: " << paramCount << " ("
          << humanCount(paramElements, "")
          << " elements), flops/step: " << humanCount(flops, "FLOP") << "\n"
          << "  memory: weights " << humanCount(paramBytes, "B")
          << ", workspace " << humanCount(emitted->workspaceBytes, "B")
          << ", inputs+outputs " << humanCount(ioBytes, "B") << "\n";
  summary << recomputeLine;
  if (options.train) {
    // Decisions by the exporter's record are counted; every other decision
    // is listed with its reason.
    llvm::StringMap<int> byRecord;
    for (const Decision &d : decisions)
      if (StringRef(d.reason).starts_with("exported as"))
        ++byRecord[(d.trainable ? "trained, " : "constant, ") + d.reason];
    for (auto &kv : byRecord)
      summary << "  " << kv.getKey() << ": " << kv.getValue()
              << " initializer(s)\n";
    for (const Decision &d : decisions)
      if (!StringRef(d.reason).starts_with("exported as"))
        summary << "  " << (d.trainable ? "trained" : "constant") << " '"
                << d.name << "': " << d.reason << "\n";
  }
  if (pipeline)
    summary << pipeline->summary;
  // One line per parallel axis, with the collectives over it.
  if (options.dp > 1) {
    summary << "  data parallel: dp " << options.dp
            << " (ranks row-major over dp" << (options.pp > 1 ? " x pp" : "")
            << (options.tp > 1 ? " x tp" : "") << "), per replica: batch / "
            << options.dp << "; per step:";
    printCollectivesOver(summary, collectives, dist::kDataAxis);
  }
  if (options.tp > 1) {
    summary << "  tensor parallel: tp " << options.tp
            << (options.sequenceParallel ? " with sequence parallelism" : "")
            << ", per rank: "
            << "parameters " << humanCount(paramBytes, "B")
            << ", optimizer state " << humanCount(stateBytes, "B")
            << "; per step:";
    printCollectivesOver(summary, collectives, dist::kTensorAxis);
  }
  if (options.train)
    summary << "  training: " << options.optimizer.kind << ", " << numGrads
            << " gradients, optimizer state " << humanCount(stateBytes, "B")
            << ", saved activations: " << savedCount << " ("
            << humanCount(savedBytes, "B") << ")\n";
  return success();
}
