//===- Compile.cpp - The `pcc compile` pipeline ---------------------------===//

#include "pcc/Driver/Driver.h"
#include "pcc/Driver/Plan.h"

#include "Build.h"

#include "pcc/Analysis/BufferPlan.h"
#include "pcc/Analysis/CostModel.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Import/OnnxImporter.h"
#include "pcc/InitAll.h"
#include "pcc/Target/AbiTables.h"
#include "pcc/Target/CallGraph.h"
#include "pcc/Target/Cpu/CppEmitter.h"
#include "pcc/Target/Cuda/CudaEmitter.h"
#include "pcc/Target/WeightTensors.h"
#include "pcc/Transforms/Generation/DeriveGeneration.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipelines.h"

#include "pccrt/Runtime.h"

#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/TargetParser/Host.h"

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
  buildParallelizePipeline(pm, options);
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

llvm::json::Object pcc::describeRecompute(ModuleOp module, StringRef mode) {
  auto totals = module->getAttrOfType<DictionaryAttr>(graph::kRecomputeAttr);
  auto count = [&](StringRef key) -> int64_t {
    auto value = totals ? totals.getAs<IntegerAttr>(key) : nullptr;
    return value ? value.getInt() : 0;
  };
  llvm::json::Object result{{"mode", mode.str()},
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
        line +=
            llvm::formatv("    stage {0}: {1} op(s), +{2}, {3} no longer "
                          "kept per microbatch\n",
                          *stage.getInteger("stage"), *stage.getInteger("ops"),
                          humanCount(*stage.getInteger("flops"), "FLOP"),
                          humanCount(*stage.getInteger("bytes_not_kept"), "B"))
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
                 << humanCount(*recompute.getInteger("budget_bytes"), "B")
                 << "\n";
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
    entry.bytes += getTensorBytes(v.getType());
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
  if (options.optimizer == "adamw" && options.momentum != 0)
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
  PipelineConfig defaults;
  if (options.generate) {
    if (options.train)
      return "--generate builds inference steps: it does not take --train";
    if (options.maxSeq < 2)
      return "--generate needs --max-seq N (2 or more): the longest "
             "sequence, prompt and new tokens";
    if (options.dp > 1 || options.microbatches > 1)
      return "--generate runs over --tp and --pp; --dp and --microbatches "
             "are not supported with it";
    int64_t perSequence =
        (options.maxSeq + options.kvBlock - 1) / options.kvBlock;
    if (options.kvBlocks > 0 && options.memoryBudget > 0)
      return "--kv-blocks and --memory-budget both size the KV cache: give "
             "one";
    if (options.kvBlocks > 0 && options.kvBlocks < perSequence)
      return llvm::formatv("--kv-blocks {0} cannot hold one sequence of "
                           "--max-seq {1} in blocks of --kv-block {2} ({3} "
                           "blocks)",
                           options.kvBlocks, options.maxSeq, options.kvBlock,
                           perSequence)
          .str();
  } else if (options.maxSeq != defaults.maxSeq ||
             options.maxBatch != defaults.maxBatch ||
             options.maxTokens != defaults.maxTokens ||
             options.kvBlock != defaults.kvBlock ||
             options.kvBlocks != defaults.kvBlocks) {
    return "--max-seq, --max-batch, --max-tokens, --kv-block and --kv-blocks "
           "shape a generation build: they need --generate";
  }
  // An evaluation step (withLoss) is built from a training build's
  // options, whose training options it leaves unused.
  if (!options.train && !options.withLoss) {
    if (options.optimizer != defaults.optimizer || options.lr != defaults.lr ||
        options.beta1 != defaults.beta1 || options.beta2 != defaults.beta2 ||
        options.eps != defaults.eps ||
        options.weightDecay != defaults.weightDecay ||
        options.momentum != defaults.momentum)
      return "--optimizer, --lr, --beta1, --beta2, --eps, --weight-decay and "
             "--momentum need --train";
    if (!options.trainable.empty() || !options.freeze.empty())
      return "--trainable and --freeze need --train";
    if (options.clipGrad > 0)
      return "--clip-grad needs --train";
    if (options.lrSchedule != "constant" || options.warmupSteps ||
        options.decaySteps || options.minLr)
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
  if (!options.machine.empty())
    if (llvm::Expected<CostModel> machine =
            CostModel::forMachine(options.machine, options.dtype);
        !machine)
      return llvm::toString(machine.takeError());
  if (options.recompute == "auto" && options.memoryBudget <= 0)
    return "--recompute auto chooses what to recompute so that each rank "
           "fits a memory budget: it needs --memory-budget";
  if (options.memoryBudget > 0 && options.recompute != "auto" &&
      !options.generate)
    return "--memory-budget is the budget of --recompute auto (or, with "
           "--generate, of the KV cache): it needs --recompute auto";
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

//===----------------------------------------------------------------------===//
// pcc compile
//===----------------------------------------------------------------------===//

/// What is wrong with the target options (a one-line message), or an empty
/// string.
static std::string checkTargetOptions(const CompileOptions &options) {
  bool cuda = options.target == "cuda";
  if (options.target != "cpu" && !cuda)
    return "unknown target '" + options.target + "' (cpu or cuda)";
  if (options.cudaEmulate && !cuda)
    return "--cuda-emulate needs --target cuda";
  return "";
}

namespace {
/// What one step does, as report.json counts it.
struct StepCounts {
  /// The program's ops by name, and their number.
  llvm::StringMap<int64_t> opCounts;
  int64_t numOps = 0;
  /// The flops of one step of the program's first entry point: on all its
  /// ranks together, and on its busiest rank (a pipeline's ranks run
  /// different stages; tensor and data parallelism's the same program);
  /// and of each entry point by name, on all ranks.
  int64_t flops = 0, flopsPerRank = 0;
  llvm::StringMap<int64_t> entryFlops;
  /// Saved activations: forward values that the backward ops read, i.e.
  /// what a training step keeps alive between its forward and backward.
  int64_t savedCount = 0, savedBytes = 0;
  /// The gradients the step returns.
  int64_t numGrads = 0;
};

/// What `pcc compile` writes about a program besides its code.
struct CompileReport {
  /// report.json: what the compile decided.
  llvm::json::Object report;
  /// plan.json: the mesh, what each rank holds, and the collectives of one
  /// step.
  llvm::json::Object plan;
  /// The lines printed once OUT is in place.
  std::string summary;
};
} // namespace

static StepCounts countStep(ModuleOp module, ArrayRef<func::FuncOp> entries,
                            int64_t ranks) {
  StepCounts counts;
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
        if (auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee()))
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
    ++counts.opCounts[op->getName().getStringRef()];
    ++counts.numOps;
  });
  // Each entry point has one function, or one per pipeline rank; each
  // function runs on ranks / functions of the mesh's ranks.
  llvm::StringMap<int64_t> functions;
  for (func::FuncOp entry : entries) {
    auto name = entry->getAttrOfType<StringAttr>(pcc::kEntryPointAttr);
    ++functions[name ? name.getValue() : "main"];
  }
  auto first = entries.front()->getAttrOfType<StringAttr>(pcc::kEntryPointAttr);
  StringRef firstName = first ? first.getValue() : "main";
  for (func::FuncOp entry : entries) {
    auto name = entry->getAttrOfType<StringAttr>(pcc::kEntryPointAttr);
    StringRef entryName = name ? name.getValue() : "main";
    int64_t flops = functionFlops(entry);
    counts.entryFlops[entryName] +=
        flops * std::max<int64_t>(1, ranks / functions[entryName]);
    if (entryName == firstName)
      counts.flopsPerRank = std::max(counts.flopsPerRank, flops);
  }
  counts.flops = counts.entryFlops[firstName];
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
      ++counts.savedCount;
      counts.savedBytes += getTensorBytes(v.getType());
    }
  });
  for (auto &[index, at] : getStepResults(entries))
    counts.numGrads +=
        at.first.getResultAttr(at.second, graph::kGradAttr) != nullptr;
  return counts;
}

/// plan.json's ranks, row-major over (dp, pp, tp): a pipeline rank's tp
/// ranks hold alike, and so do the replicas.
namespace {
/// What one rank of the mesh holds of the step's parameters and state.
struct RankHolding {
  int64_t stage = 0, params = 0, state = 0, gradients = 0;
};
} // namespace

/// What each rank (row-major over dp x pp x tp) holds: a pipeline rank
/// its stage's parameters and state, any other rank the step's.
static SmallVector<RankHolding> getRankHoldings(const CompileOptions &options,
                                                ModuleOp module,
                                                const StepMemory &memory) {
  ArrayRef<int64_t> heldBytes;
  if (auto s = module.getOps<dist::ScheduleOp>(); !s.empty())
    if (auto base = (*s.begin()).getBaseBytes())
      heldBytes = *base;
  SmallVector<RankHolding> ranks;
  for (int64_t r = 0; r < options.dp * options.tp * options.pp; ++r) {
    RankHolding &held = ranks.emplace_back();
    held.stage = (r / options.tp) % options.pp;
    held.params = memory.paramBytes;
    held.state = memory.stateBytes;
    held.gradients = memory.ranks.front().gradients;
    // memory.ranks is per entry function: per pipeline rank under a
    // pipeline (a program of several entry points has one per entry point).
    if (options.pp > 1 && size_t(held.stage) < memory.ranks.size()) {
      held.params = memory.ranks[held.stage].params;
      held.state = memory.ranks[held.stage].state;
      held.gradients = memory.ranks[held.stage].gradients;
      if (!options.train && size_t(held.stage) < heldBytes.size())
        held.params = heldBytes[held.stage];
    }
  }
  return ranks;
}

/// The weights of the rank that holds the most: what each rank holds but
/// under a pipeline, whose ranks hold their stages'.
static int64_t getBusiestRankWeights(ArrayRef<RankHolding> ranks) {
  int64_t most = 0;
  for (const RankHolding &held : ranks)
    most = std::max(most, held.params);
  return most;
}

/// report.json's per_rank_bytes: all that each rank needs, in rank order
/// (StepMemory::getPerRankBytes with the rank's own parameters and state).
static llvm::json::Array describePerRankBytes(ArrayRef<RankHolding> ranks,
                                              const StepMemory &memory) {
  llvm::json::Array bytes;
  for (const RankHolding &held : ranks)
    bytes.push_back(memory.getPerRankBytes() - memory.paramBytes -
                    memory.stateBytes + held.params + held.state);
  return bytes;
}

static llvm::json::Array describeRanks(const CompileOptions &options,
                                       ArrayRef<RankHolding> holdings,
                                       const StepMemory &memory) {
  llvm::json::Array ranks;
  for (auto [r, held] : llvm::enumerate(holdings)) {
    ranks.push_back(llvm::json::Object{
        {"rank", int64_t(r)},
        {"coords",
         llvm::json::Object{{"dp", int64_t(r) / (options.tp * options.pp)},
                            {"pp", held.stage},
                            {"tp", int64_t(r) % options.tp}}},
        {"stage", held.stage},
        {"parameter_bytes", held.params},
        {"optimizer_state_bytes", held.state},
        {"gradient_bytes", held.gradients},
        {"workspace_bytes", memory.workspaceBytes}});
  }
  return ranks;
}

/// How each weight is laid out (plan.json's weights): its whole shape (as
/// in the weights file), the dimension split over the ranks and each rank's
/// shape.
static llvm::json::Array describeWeightLayouts(const CppEmitResult &code) {
  llvm::json::Array layouts;
  for (const WeightEntry &w : code.weights) {
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
    if (w.holders) {
      llvm::json::Array ranks;
      for (int64_t r = 0; r < 64; ++r)
        if (w.holders >> r & 1)
          ranks.push_back(r);
      entry["pipeline_ranks"] = std::move(ranks);
    }
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
  return layouts;
}

/// A pipeline's activations kept for the backward: each stage's stash of
/// one microbatch, summed (plan.json's stages); 0 without a pipeline.
static int64_t getStashBytesPerMicrobatch(
    const std::optional<PipelinePlan> &pipeline) {
  int64_t bytes = 0;
  if (!pipeline)
    return bytes;
  if (const llvm::json::Array *stages = pipeline->json.getArray("stages"))
    for (const llvm::json::Value &stage : *stages)
      if (const llvm::json::Object *o = stage.getAsObject())
        bytes += o->getInteger("stash_bytes").value_or(0);
  return bytes;
}

/// The summary of a compile: what it made, the trainable set, the pipeline
/// and one line per parallel axis with the collectives over it.
static std::string formatSummary(const CompileOptions &options,
                                 const BuiltProgram &program,
                                 const StepCounts &counts,
                                 const StepMemory &memory,
                                 ArrayRef<RankHolding> holdings,
                                 StringRef recomputeLine,
                                 const std::optional<PipelinePlan> &pipeline,
                                 const llvm::json::Array &collectives) {
  std::string text;
  llvm::raw_string_ostream summary(text);
  for (auto &[tied, to] : program.importReport.reties)
    summary << "pcc: re-tied initializer '" << tied << "' as the transpose of '"
            << to << "'\n";
  summary << "pcc: compiled " << options.model << " -> " << options.outDir
          << " (target " << options.target << ")\n"
          << "  ops: " << counts.numOps << ", parameters: " << memory.paramCount
          << " (" << humanCount(memory.paramElements, "")
          << " elements), flops/step: " << humanCount(counts.flops, "FLOP");
  if (counts.flops != counts.flopsPerRank)
    summary << " on all ranks, " << humanCount(counts.flopsPerRank, "FLOP")
            << " on the busiest";
  summary << "\n"
          << "  memory: weights "
          << humanCount(getBusiestRankWeights(holdings), "B")
          << ", workspace " << humanCount(memory.workspaceBytes, "B");
  if (memory.preparedBytes)
    summary << ", prepared operands " << humanCount(memory.preparedBytes, "B");
  if (memory.cacheBytes)
    summary << ", KV cache " << humanCount(memory.cacheBytes, "B");
  summary << ", inputs+outputs " << humanCount(memory.ioBytes, "B") << "\n";
  summary << recomputeLine;
  if (options.train) {
    // Decisions by the exporter's record are counted; every other decision
    // is listed with its reason.
    llvm::StringMap<int> byRecord;
    for (const TrainableDecision &d : program.decisions)
      if (StringRef(d.reason).starts_with("exported as"))
        ++byRecord[(d.trainable ? "trained, " : "constant, ") + d.reason];
    for (auto &kv : byRecord)
      summary << "  " << kv.getKey() << ": " << kv.getValue()
              << " initializer(s)\n";
    for (const TrainableDecision &d : program.decisions)
      if (!StringRef(d.reason).starts_with("exported as"))
        summary << "  " << (d.trainable ? "trained" : "constant") << " '"
                << d.name << "': " << d.reason << "\n";
  }
  if (pipeline)
    summary << pipeline->summary;
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
            << "parameters " << humanCount(memory.paramBytes, "B");
    if (options.generate)
      summary << ", KV cache " << humanCount(memory.cacheBytes, "B");
    else
      summary << ", optimizer state " << humanCount(memory.stateBytes, "B");
    summary << "; per step:";
    printCollectivesOver(summary, collectives, dist::kTensorAxis);
  }
  if (options.train) {
    summary << "  training: " << options.optimizer << ", " << counts.numGrads
            << " gradients, optimizer state "
            << humanCount(memory.stateBytes, "B") << ", saved activations: ";
    // A pipeline's stages keep theirs between their forward and backward
    // functions, one stash per microbatch in flight (the ranks above).
    if (pipeline)
      summary << humanCount(getStashBytesPerMicrobatch(pipeline), "B")
              << " per microbatch over the stages\n";
    else
      summary << counts.savedCount << " ("
              << humanCount(counts.savedBytes, "B") << ")\n";
  }
  if (options.eval)
    summary << "  evaluation: entry 'eval', the forward and its loss on the "
               "training step's parameters (pcc run --eval-data), "
            << humanCount(counts.entryFlops.lookup("eval"), "FLOP")
            << " per batch\n";
  return text;
}

/// The KV cache blocks a rank can hold within --memory-budget beside what
/// else it holds (weights, workspace, inputs and outputs), or an error
/// where they cannot hold one sequence of --max-seq.
static FailureOr<int64_t> fitKvBlocks(const CompileOptions &options,
                                      const StepMemory &memory,
                                      const CppEmitResult &code) {
  int64_t blocks = 0;
  for (const WeightEntry &w : code.weights)
    if (w.kind == WeightKind::Cache)
      blocks = w.localType.getDimSize(0);
  int64_t perBlock = blocks ? memory.cacheBytes / blocks : 0;
  int64_t rest = memory.getPerRankBytes() - memory.cacheBytes;
  int64_t fit = perBlock ? (options.memoryBudget - rest) / perBlock : 0;
  int64_t perSequence =
      (options.maxSeq + options.kvBlock - 1) / options.kvBlock;
  if (fit < perSequence)
    return printError(llvm::formatv(
        "--memory-budget {0} leaves {1} for the KV cache beside {2} of "
        "weights and buffers per rank: fewer than the {3} blocks ({4} per "
        "block) of one sequence of --max-seq {5}",
        humanCount(options.memoryBudget, "B"),
        humanCount(std::max<int64_t>(0, options.memoryBudget - rest), "B"),
        humanCount(rest, "B"), perSequence, humanCount(perBlock, "B"),
        options.maxSeq));
  return fit;
}

/// A generation build's shape and its KV cache, per rank (report.json's
/// `generation`; empty for any other build).
static llvm::json::Object describeGeneration(const CompileOptions &options,
                                             const CppEmitResult &code) {
  if (!options.generate)
    return {};
  // Per pipeline rank: the caches of its stages' layers.
  SmallVector<int64_t> perStage(std::max<int64_t>(1, options.pp), 0);
  int64_t blocks = 0, blockSize = 0;
  for (const WeightEntry &w : code.weights) {
    if (w.kind != WeightKind::Cache)
      continue;
    RankedTensorType t = w.localType;
    for (auto [r, bytes] : llvm::enumerate(perStage))
      if (!w.holders || (w.holders >> r & 1))
        bytes += getTensorBytes(t);
    blocks = t.getDimSize(0);
    blockSize = t.getDimSize(2);
  }
  int64_t cacheBytes = *llvm::max_element(perStage);
  int64_t tokens = blocks * blockSize;
  llvm::json::Object generation{
      {"max_seq", options.maxSeq},
      {"max_batch", options.maxBatch},
      {"prefill_tokens", options.maxTokens > 0
                             ? options.maxTokens
                             : std::max(options.maxSeq, options.maxBatch)},
      {"decode_tokens", getDecodeTokens(options)},
      {"kv_block", blockSize},
      {"kv_blocks", blocks},
      {"kv_cache_bytes", cacheBytes},
      {"kv_bytes_per_token", tokens ? cacheBytes / tokens : 0},
      {"cached_tokens", tokens}};
  // The figures above are the largest rank's; each pipeline rank's too.
  if (options.pp > 1)
    generation["kv_cache_bytes_per_pipeline_rank"] =
        llvm::json::Array(perStage);
  return generation;
}

/// report.json, plan.json and the summary of a compiled program. Warns, on
/// stderr, of ranks over --memory-budget.
static CompileReport buildReport(const CompileOptions &options,
                                 const BuiltProgram &program,
                                 ArrayRef<func::FuncOp> entries,
                                 const CppEmitResult &code,
                                 const StepMemory &memory,
                                 const std::optional<PipelinePlan> &pipeline) {
  ModuleOp module = *program.module;
  StepCounts counts = countStep(
      module, entries, int64_t(options.tp) * options.dp * options.pp);
  // Keys that own their names: the counts go before the report is written.
  llvm::json::Object ops;
  for (auto &kv : counts.opCounts)
    ops[kv.getKey().str()] = kv.getValue();
  llvm::json::Array reties, inputs, outputs, trainableSet;
  for (const TrainableDecision &d : program.decisions)
    trainableSet.push_back(llvm::json::Object{{"initializer", d.name},
                                              {"trainable", d.trainable},
                                              {"reason", d.reason}});
  for (auto &[tied, to] : program.importReport.reties)
    reties.push_back(
        llvm::json::Object{{"initializer", tied}, {"transpose_of", to}});
  // Graph inputs and outputs by ONNX name; training state and gradients are
  // reported by the emitter's weights and the optimizer. Every entry takes
  // all graph inputs; outputs are those of any rank, once each.
  func::FuncOp func = entries.front();
  for (auto [i, t] : llvm::enumerate(func.getArgumentTypes()))
    if (auto name = func.getArgAttrOfType<StringAttr>(i, kOnnxNameAttr))
      inputs.push_back(llvm::json::Object{{"name", name.getValue()},
                                          {"shape", shapeJson(t)}});
  for (auto &[index, at] : getStepResults(entries)) {
    auto [f, i] = at;
    if (auto name = f.getResultAttrOfType<StringAttr>(i, kOnnxNameAttr))
      outputs.push_back(
          llvm::json::Object{{"name", name.getValue()},
                             {"shape", shapeJson(f.getResultTypes()[i])}});
  }
  int64_t perRank = memory.getPerRankBytes();
  SmallVector<RankHolding> holdings = getRankHoldings(options, module, memory);
  // What pcc-recompute made the backward recompute.
  llvm::json::Object recompute = describeRecompute(module, options.recompute);
  // Unpipelined, what a rank needs is what its buffers plan.
  if (program.plannedPeak > 0)
    if (llvm::json::Array *over = recompute.getArray("over_budget"))
      for (llvm::json::Value &entry : *over)
        (*entry.getAsObject())["predicted_bytes"] = perRank;
  std::string recomputeLine = recomputeSummary(recompute);
  warnOverBudget(recompute);
  // The pass predicts a step's peak before its buffers are laid out; the
  // buffer plan has the last word.
  const llvm::json::Array *over = recompute.getArray("over_budget");
  if (options.memoryBudget > 0 && perRank > options.memoryBudget &&
      (!over || over->empty()))
    llvm::errs() << "pcc: warning: the step's buffers plan "
                 << humanCount(perRank, "B")
                 << " per rank, over --memory-budget "
                 << humanCount(options.memoryBudget, "B")
                 << ", which pcc-recompute predicted to fit\n";

  CompileReport result;
  result.report = llvm::json::Object{
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
      {"num_ops", counts.numOps},
      {"ops", std::move(ops)},
      {"parameters", llvm::json::Object{{"count", memory.paramCount},
                                        {"elements", memory.paramElements},
                                        {"bytes", memory.paramBytes}}},
      {"flops", counts.flops},
      {"flops_per_rank", counts.flopsPerRank},
      {"memory",
       llvm::json::Object{{"weights_bytes", memory.paramBytes},
                          {"optimizer_state_bytes", memory.stateBytes},
                          {"kv_cache_bytes", memory.cacheBytes},
                          {"workspace_bytes", memory.workspaceBytes},
                          {"prepared_bytes", memory.preparedBytes},
                          {"released_weights_bytes", memory.releasedBytes},
                          {"io_bytes", memory.ioBytes},
                          {"per_rank_bytes",
                           describePerRankBytes(holdings, memory)}}},
      {"saved_activations",
       pipeline ? llvm::json::Object{{"bytes_per_microbatch",
                                      getStashBytesPerMicrobatch(pipeline)}}
                : llvm::json::Object{{"count", counts.savedCount},
                                     {"bytes", counts.savedBytes}}},
      {"recompute", llvm::json::Object(recompute)},
      {"attention", describeAttention(module)},
      {"reties", std::move(reties)},
      {"trainable_set", std::move(trainableSet)},
      {"gradients", counts.numGrads},
  };
  // The collectives' `bytes` are the bytes each rank's buffers hold; the
  // summary lists them by axis too.
  llvm::json::Array collectives = describeCollectives(module);
  result.plan =
      llvm::json::Object{{"mesh", llvm::json::Object{{"dp", options.dp},
                                                     {"pp", options.pp},
                                                     {"tp", options.tp}}},
                         {"sequence_parallel", options.sequenceParallel},
                         {"zero", options.zero},
                         {"recompute", std::move(recompute)},
                         {"ranks", describeRanks(options, holdings, memory)},
                         {"collectives", llvm::json::Array(collectives)},
                         {"weights", describeWeightLayouts(code)}};
  if (pipeline)
    for (const auto &kv : pipeline->json)
      result.plan[kv.first] = kv.second;
  result.summary = formatSummary(options, program, counts, memory, holdings,
                                 recomputeLine, pipeline, collectives);
  // A program of several steps: each entry point's flops.
  if (counts.entryFlops.size() > 1) {
    llvm::json::Object entryPoints;
    for (const auto &kv : counts.entryFlops)
      entryPoints[kv.getKey().str()] =
          llvm::json::Object{{"flops", kv.getValue()}};
    result.report["entries"] = std::move(entryPoints);
  }
  if (options.generate) {
    llvm::json::Object generation = describeGeneration(options, code);
    llvm::raw_string_ostream line(result.summary);
    line << llvm::formatv(
        "  generation: prefill {0} tokens, decode {1}; KV cache {2}, {3} per "
        "token, {4} tokens in {5} blocks of {6}\n",
        *generation.getInteger("prefill_tokens"),
        *generation.getInteger("decode_tokens"),
        humanCount(*generation.getInteger("kv_cache_bytes"), "B"),
        humanCount(*generation.getInteger("kv_bytes_per_token"), "B"),
        *generation.getInteger("cached_tokens"),
        *generation.getInteger("kv_blocks"),
        *generation.getInteger("kv_block"));
    // A pipeline decodes its sequences in groups, one per stage in flight:
    // the bubble above is one step's alone.
    if (options.pp > 1) {
      line << llvm::formatv("  generation over pp {0}: {0} groups of up to "
                            "{1} sequences, one per stage, each a step "
                            "behind the other\n",
                            options.pp, getDecodeTokens(options));
      generation["groups"] = int64_t(options.pp);
    }
    result.report["generation"] = std::move(generation);
  }
  return result;
}

/// Writes report.json, plan.json and, for a pipeline, its schedule.svg
/// into `dir`.
static LogicalResult writeReport(StringRef dir, CompileReport &report,
                                 const std::optional<PipelinePlan> &pipeline) {
  auto format = [](llvm::json::Object &object) {
    return llvm::formatv("{0:2}\n", llvm::json::Value(std::move(object))).str();
  };
  std::string reportText = format(report.report);
  std::string planText = format(report.plan);
  std::string error;
  if (failed(writeTexts(dir, {{"report.json", reportText}}, error)) ||
      failed(writeTexts(dir, {{"plan.json", planText}}, error)) ||
      (pipeline &&
       failed(writeTexts(dir, {{"schedule.svg", pipeline->svg}}, error))))
    return printError(error);
  return success();
}

LogicalResult pcc::compile(const CompileOptions &options,
                           llvm::raw_ostream &summary) {
  if (std::string problem = checkLayoutOptions(options); !problem.empty())
    return printError(problem);
  if (std::string problem = checkTargetOptions(options); !problem.empty())
    return printError(problem);
  // The output folder is checked before any work: a compile that would
  // destroy a user's files is refused at once.
  OutputFolder out(options);
  if (failed(out.check()))
    return failure();
  // --auto: the layout the search chooses, compiled.
  if (options.autoLayout) {
    CompileOptions searching = options;
    if (searching.machine.empty()) {
      if (options.target != "cpu")
        return printError("--auto on --target " + options.target +
                          " searches for a machine: give --machine");
      searching.machine = "cpu";
    }
    FailureOr<SearchResult> found =
        searchLayouts(searching, "", options.devices);
    if (failed(found))
      return failure();
    const llvm::json::Object *best = found->json.getObject("best");
    const llvm::json::Object *prediction =
        best ? best->getObject("prediction") : nullptr;
    summary << "pcc: --auto chose " << found->description << " for "
            << options.devices << " device(s) of " << searching.machine;
    if (prediction)
      summary << llvm::formatv(
          " (predicted step {0}, peak {1:F2} MB per device; {2} layouts "
          "searched)",
          formatSeconds(prediction->getNumber("step_seconds").value_or(0)),
          double(prediction->getInteger("peak_bytes").value_or(0)) / 1e6,
          found->json.getInteger("searched").value_or(0));
    summary << "\n";
    CompileOptions chosen = found->best;
    chosen.autoLayout = false;
    chosen.devices = 0;
    return compile(chosen, summary);
  }

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.disableMultithreading();
  auto diagPrinter = installDiagnosticPrinter(context);
  FailureOr<BuiltProgram> program = buildProgram(context, options);
  if (failed(program))
    return failure();
  ModuleOp module = *program->module;
  FailureOr<SmallVector<func::FuncOp>> entries = getProgramEntries(module);
  if (failed(entries))
    return failure();
  FailureOr<std::optional<PipelinePlan>> pipeline = describePipeline(module);
  if (failed(pipeline))
    return failure();

  // Everything is written into the staging folder. The compilers run while
  // the weights are written.
  if (failed(out.stage()))
    return failure();
  FailureOr<CppEmitResult> code =
      emitSources(module, options, out.getStagingDir());
  if (failed(code))
    return failure();
  StepMemory memory = countStepMemory(module, *entries, *code, options.target);
  // A generation build under a memory budget: the KV cache takes what the
  // rest leaves (vLLM's number of blocks), in whole blocks.
  if (options.generate && options.memoryBudget > 0) {
    FailureOr<int64_t> blocks = fitKvBlocks(options, memory, *code);
    if (failed(blocks))
      return failure();
    resizeKvCache(module, *blocks);
    code = emitSources(module, options, out.getStagingDir());
    if (failed(code))
      return failure();
    memory = countStepMemory(module, *entries, *code, options.target);
  }
  LibraryBuild libraries(options, out.getStagingDir());
  if (failed(writeWeights(*code, out.path("weights.safetensors"))) ||
      failed(libraries.wait()))
    return failure();

  CompileReport report =
      buildReport(options, *program, *entries, *code, memory, *pipeline);
  if (failed(writeReport(out.getStagingDir(), report, *pipeline)) ||
      failed(out.mark()))
    return failure();
  if (failed(out.commit()))
    return failure();
  summary << report.summary;
  return success();
}
