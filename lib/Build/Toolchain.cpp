//===- Toolchain.cpp - The compile pipeline and the host compilers --------===//
//
// What every build of a model goes through: the pass pipeline `pcc compile`
// runs, diagnostics that name the ONNX node, and the host compilers (the C++
// compiler, nvcc) that build the generated sources, with their cache.
//
//===----------------------------------------------------------------------===//

#include "pcc/Driver/Driver.h"

#include "pcc/Build/Build.h"

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

/// A warning as installDiagnosticPrinter prints it, newline included.
static std::string formatWarning(Diagnostic &diag) {
  return "pcc: warning: " + formatDiagnostic(diag) + "\n";
}

ErrorCapture::ErrorCapture(MLIRContext &context)
    : handler(&context, [this](Diagnostic &d) {
        if (d.getSeverity() == DiagnosticSeverity::Error && first.empty())
          first = d.str();
        if (d.getSeverity() == DiagnosticSeverity::Warning)
          warnings += formatWarning(d);
        return success();
      }) {}

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
          llvm::errs() << formatWarning(diag);
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
  // Attention reads the projections' [B, T, H, D] in place, where the
  // program does not also need the transposes it dropped.
  if (options.fuseAttention)
    pm.addNestedPass<func::FuncOp>(createAttentionLayout());
  // Each update right after its gradient, which the caches still hold
  // (before grouping, which then sees the order the code runs in).
  if (options.train)
    pm.addNestedPass<func::FuncOp>(createHoistUpdates());
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

/// Adds `text` to `hash`, ended so that no two lists of texts hash alike.
static void addText(llvm::SHA256 &hash, StringRef text) {
  hash.update(text);
  hash.update(StringRef("\0", 1));
}

/// Adds what makes a build tool's output to `hash`: the tool (its file,
/// size and time), its flags and, for -march=native, the processor.
static void addToolchain(llvm::SHA256 &hash, StringRef tool,
                         ArrayRef<std::string> flags) {
  SmallString<256> program(tool);
  (void)llvm::sys::fs::real_path(tool, program);
  addText(hash, program);
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(program, status)) {
    addText(hash, std::to_string(status.getSize()));
    addText(hash,
            std::to_string(
                status.getLastModificationTime().time_since_epoch().count()));
  }
  for (const std::string &flag : flags)
    addText(hash, flag);
  if (llvm::is_contained(flags, "-march=native")) {
    addText(hash, llvm::sys::getHostCPUName());
    std::vector<std::string> features;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      features.push_back((feature.second ? "+" : "-") + feature.first().str());
    llvm::sort(features);
    for (const std::string &feature : features)
      addText(hash, feature);
  }
}

/// The first 16 bytes of `hash`'s digest in hex.
static std::string getDigest(llvm::SHA256 &hash) {
  std::array<uint8_t, 32> digest = hash.final();
  return llvm::toHex(ArrayRef(digest).take_front(16), true);
}

/// The name of the kernels' entries in the cache (without a suffix): a hash
/// of what makes them, i.e. the kernels' text and the compiler with its
/// flags.
static std::string getKernelEntryName(StringRef cxx,
                                      ArrayRef<std::string> flags) {
  llvm::SHA256 hash;
  addText(hash, getKernelHeader());
  addText(hash, getKernelSource());
  addToolchain(hash, cxx, flags);
  return "kernels-" + getDigest(hash);
}

/// `source` without its line comments that stand alone on a line: they
/// cannot change what it compiles to, and name what the build came from
/// (an op's location, the model's path as given). Such a line is kept
/// where it may be more than a comment: after a line that a backslash
/// continues, ending in one itself, closing a block comment, or anywhere
/// in a source with a raw string literal.
static std::string withoutLineComments(StringRef source) {
  if (source.contains("R\""))
    return source.str();
  std::string text;
  text.reserve(source.size());
  bool continued = false;
  for (StringRef line : llvm::split(source, '\n')) {
    bool comment = !continued && line.ltrim().starts_with("//") &&
                   !line.ends_with("\\") && !line.contains("*/");
    continued = line.ends_with("\\");
    if (!comment)
      text.append(line.begin(), line.end()).push_back('\n');
  }
  return text;
}

/// The most bytes of libraries the cache keeps: $PCC_CACHE_LIMIT_MB
/// megabytes, else 1 GB; 0 keeps none (timing a compile).
static uint64_t getLibraryCacheLimit() {
  uint64_t megabytes = 1024;
  if (std::optional<std::string> env =
          llvm::sys::Process::GetEnv("PCC_CACHE_LIMIT_MB"))
    (void)StringRef(*env).getAsInteger(10, megabytes);
  return megabytes << 20;
}

/// The cache's entry for the library that `tool` with `flags` builds from
/// `source` (its code: see withoutLineComments) and the files pcc writes
/// beside it, or an empty path where there is none (no cache, a limit of
/// 0, a source that cannot be read): a hash of all of them names it, so
/// that a model compiled again with the same options, by the same pcc and
/// tools, runs no compiler.
static std::string getLibraryEntry(const std::string &source, StringRef tool,
                                   ArrayRef<std::string> flags) {
  std::optional<std::string> dir = getCacheDir();
  if (!dir || getLibraryCacheLimit() == 0 ||
      llvm::sys::fs::create_directories(*dir))
    return "";
  auto text = llvm::MemoryBuffer::getFile(source);
  if (!text)
    return "";
  llvm::SHA256 hash;
  addText(hash, withoutLineComments((*text)->getBuffer()));
  for (StringRef written :
       {getAbiHeader(), getKernelHeader(), getKernelSource(),
        getCudaKernelHeader(), getCudaEmulationHeader()})
    addText(hash, written);
  addToolchain(hash, tool, flags);
  return *dir + "/library-" + getDigest(hash) + ".so";
}

/// Removes the libraries in `dir` used longest ago (a hit renews an
/// entry's time) until those left fit the cache's limit. Builds that run at
/// the same time may remove the same entry: what fails is left.
static void evictLibraries(StringRef dir) {
  struct Entry {
    std::string path;
    uint64_t size;
    llvm::sys::TimePoint<> time;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    StringRef name = llvm::sys::path::filename(it->path());
    llvm::sys::fs::file_status status;
    if (!name.starts_with("library-") || !name.ends_with(".so") ||
        llvm::sys::fs::status(it->path(), status))
      continue;
    entries.push_back(
        {it->path(), status.getSize(), status.getLastModificationTime()});
    total += status.getSize();
  }
  uint64_t limit = getLibraryCacheLimit();
  llvm::sort(entries,
             [](const Entry &a, const Entry &b) { return a.time < b.time; });
  for (const Entry &entry : entries) {
    if (total <= limit)
      break;
    if (!llvm::sys::fs::remove(entry.path))
      total -= entry.size;
  }
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

/// Makes `output` by `build`, unless the cache holds `entry` (none when
/// empty): then it is copied, and said in `logFile`. What `build` makes is
/// stored as `entry`, and the cache's least recently used libraries are
/// dropped beyond its limit.
static LogicalResult
buildThroughCache(const std::string &entry, const std::string &output,
                  const std::string &logFile,
                  llvm::function_ref<LogicalResult()> build) {
  if (entry.empty())
    return build();
  if (!llvm::sys::fs::copy_file(entry, output)) {
    // The entry's time says when it was last used.
    int fd;
    if (!llvm::sys::fs::openFileForReadWrite(entry, fd,
                                             llvm::sys::fs::CD_OpenExisting,
                                             llvm::sys::fs::OF_None)) {
      (void)llvm::sys::fs::setLastAccessAndModificationTime(
          fd, std::chrono::system_clock::now());
      llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    }
    (void)llvm::sys::fs::setPermissions(output, llvm::sys::fs::all_read |
                                                    llvm::sys::fs::all_exe |
                                                    llvm::sys::fs::owner_write);
    appendToLog(logFile, "pcc: the library from the cache: " + entry + "\n");
    return success();
  }
  if (failed(build()))
    return failure();
  if (storeInCache(output, entry))
    evictLibraries(llvm::sys::path::parent_path(entry));
  return success();
}

/// Compiles the model's `source` with `cxx` and links it with the kernels
/// (from the cache where it holds them) into `output`.
static LogicalResult compileAndLink(const std::string &source,
                                    const std::string &output,
                                    const std::string &logFile,
                                    std::string &error, StringRef cxx,
                                    const CxxFlags &flags) {
  auto compileArgs = [&](ArrayRef<std::string> inputArgs, StringRef output) {
    SmallVector<std::string> args{cxx.str()};
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
    entry = *dir + "/" + getKernelEntryName(cxx, flags.compile);
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
    SmallVector<std::string> args{cxx.str(), "-o", output, modelObject,
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

LogicalResult pcc::buildSharedLibrary(const std::string &source,
                                      const std::string &output,
                                      const std::string &logFile,
                                      std::string &error, StringRef cpu) {
  FailureOr<std::string> cxx = findCxx(error);
  if (failed(cxx))
    return failure();
  CxxFlags flags = getCxxFlags(cpu);
  SmallVector<std::string> allFlags(flags.compile);
  llvm::append_range(allFlags, flags.link);
  return buildThroughCache(
      getLibraryEntry(source, *cxx, allFlags), output, logFile, [&] {
        return compileAndLink(source, output, logFile, error, *cxx, flags);
      });
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
  SmallVector<std::string> flags{"-std=c++17",
                                 "-O3",
                                 "-arch=" + arch.str(),
                                 "--expt-relaxed-constexpr",
                                 "-Xcompiler",
                                 "-fPIC",
                                 "-shared",
                                 "-w"},
      libraries{"-L" + std::string(lib), "-lcublasLt"};
  SmallVector<std::string> args{*nvcc};
  llvm::append_range(args, flags);
  llvm::append_range(args, ArrayRef<std::string>{"-o", output, source});
  llvm::append_range(args, libraries);
  llvm::append_range(flags, libraries);
  return buildThroughCache(
      getLibraryEntry(source, *nvcc, flags), output, logFile,
      [&] { return runBuild(args, logFile, error, "CUDA compiler (nvcc)"); });
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
  SmallVector<std::string> flags{"-std=c++17", "-O2",     "-fno-math-errno",
                                 "-fPIC",      "-shared", "-Wl,-z,nodelete",
                                 "-w",         "-x",      "c++"},
      libraries{"-x", "none"};
  std::istringstream blas(PCC_BLAS_FLAGS);
  for (std::string flag; blas >> flag;)
    libraries.push_back(flag);
  SmallVector<std::string> args{*cxx};
  llvm::append_range(args, flags);
  llvm::append_range(args,
                     ArrayRef<std::string>{"-include", std::string(header),
                                           "-o", output, source});
  llvm::append_range(args, libraries);
  // The forced include is part of the build (its text is in every key).
  llvm::append_range(flags,
                     ArrayRef<std::string>{"-include", "pcc_cuda_emulation.h"});
  llvm::append_range(flags, libraries);
  return buildThroughCache(
      getLibraryEntry(source, *cxx, flags), output, logFile, [&] {
        return runBuild(args, logFile, error, "C++ compiler (CUDA emulation)");
      });
}

LogicalResult
pcc::writeTexts(StringRef dir,
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

