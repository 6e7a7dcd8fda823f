//===- Build.cpp - The steps of a compile, for the commands ---------------===//

#include "pcc/Build/Build.h"

#include "pcc/Analysis/CostModel.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Target/AbiTables.h"
#include "pcc/Target/CallGraph.h"
#include "pcc/Target/Cpu/CppEmitter.h"
#include "pcc/Target/Cuda/CudaEmitter.h"
#include "pcc/Target/WeightTensors.h"

#include "pccrt/Runtime.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <cstdlib>
#include <deque>

using namespace mlir;
using namespace pcc;

LogicalResult pcc::printError(const Twine &message) {
  llvm::errs() << "pcc: error: " << message << "\n";
  return failure();
}

//===----------------------------------------------------------------------===//
// ProgressLine
//===----------------------------------------------------------------------===//

ProgressLine::ProgressLine(std::string step)
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

ProgressLine::~ProgressLine() {
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
        " {0:F1} s\n",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
}

//===----------------------------------------------------------------------===//
// OutputFolder
//===----------------------------------------------------------------------===//

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

OutputFolder::OutputFolder(const CompileOptions &options)
    : options(options), outAbs(options.outDir) {
  llvm::sys::fs::make_absolute(outAbs);
  llvm::sys::path::remove_dots(outAbs, true);
  while (outAbs.size() > 1 && llvm::sys::path::is_separator(outAbs.back()))
    outAbs.pop_back();
}

OutputFolder::~OutputFolder() {
  if (!staging.empty() && !committed)
    llvm::sys::fs::remove_directories(staging);
}

LogicalResult OutputFolder::check() const {
  StringRef parent = llvm::sys::path::parent_path(outAbs);
  if (!parent.empty() && !llvm::sys::fs::is_directory(parent))
    return printError("output folder's parent '" + parent + "' does not exist");
  return checkReplaceable();
}

LogicalResult OutputFolder::checkReplaceable() const {
  std::string out = resolvedPath(outAbs);
  SmallVector<std::pair<std::string, std::string>> inputs{
      {options.model, "the model"}};
  for (const auto &[name, file] : options.bindings)
    inputs.push_back({file, "--bind " + name});
  for (const auto &[file, what] : inputs)
    if (isWithin(resolvedPath(file), out))
      return printError("-o " + options.outDir +
                        " would replace the folder "
                        "holding " +
                        what + " (" + file + "); choose another output folder");
  SmallString<256> cwd;
  if (!llvm::sys::fs::current_path(cwd) && isWithin(resolvedPath(cwd), out))
    return printError("-o " + options.outDir +
                      " is the current folder or one of its parents; choose a "
                      "new folder for the output");
  if (!llvm::sys::fs::exists(outAbs))
    return success();
  if (!llvm::sys::fs::is_directory(outAbs))
    return printError("output '" + options.outDir +
                      "' exists and is not a folder");
  if (llvm::sys::fs::exists(outAbs + "/" + kOutputMarker))
    return success();
  std::error_code ec;
  llvm::sys::fs::directory_iterator it(outAbs, ec);
  if (!ec && it == llvm::sys::fs::directory_iterator())
    return success();
  return printError("output folder '" + options.outDir +
                    "' exists and was not written by pcc compile; pcc "
                    "replaces only its own output folders (remove it or "
                    "choose another)");
}

LogicalResult OutputFolder::stage() {
  // Beside OUT, so that replacing OUT is a rename.
  staging =
      (outAbs + ".pcc-tmp-" + Twine(llvm::sys::Process::getProcessId())).str();
  llvm::sys::fs::remove_directories(staging);
  if (llvm::sys::fs::create_directory(staging, /*IgnoreExisting=*/true,
                                      llvm::sys::fs::all_all))
    return printError("cannot create '" + staging + "'");
  return success();
}

std::string OutputFolder::path(StringRef name) const {
  return (staging + "/" + name).str();
}

LogicalResult OutputFolder::mark() {
  std::error_code ec;
  llvm::raw_fd_ostream os(path(kOutputMarker), ec);
  if (ec)
    return printError("cannot write " + Twine(kOutputMarker) + ": " +
                      ec.message());
  os << "This folder was written by pcc compile; a later compile with the "
        "same -o replaces it.\n";
  return success();
}

LogicalResult OutputFolder::commit() {
  if (failed(checkReplaceable()))
    return failure();
  std::string old;
  if (llvm::sys::fs::exists(outAbs)) {
    old = (outAbs + ".pcc-old-" + Twine(llvm::sys::Process::getProcessId()))
              .str();
    llvm::sys::fs::remove_directories(old);
    if (llvm::sys::fs::rename(outAbs, old))
      return printError("cannot replace '" + options.outDir + "'");
  }
  if (std::error_code ec = llvm::sys::fs::rename(staging, outAbs)) {
    if (!old.empty())
      llvm::sys::fs::rename(old, outAbs);
    return printError("cannot create '" + options.outDir +
                      "': " + ec.message());
  }
  committed = true;
  if (!old.empty())
    llvm::sys::fs::remove_directories(old);
  return success();
}

//===----------------------------------------------------------------------===//
// The program
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> pcc::loadModel(MLIRContext &context,
                                     const CompileOptions &options,
                                     ImportReport *report) {
  // Graph dialect IR (.mlir) is taken as the importer would have made it:
  // tests and users can state layouts (`dist.sharding`) in it.
  if (StringRef(options.model).ends_with(".mlir"))
    return parseSourceFile<ModuleOp>(options.model, &context);
  ImportOptions importOptions;
  importOptions.bindings = options.bindings;
  importOptions.inputShapes = options.inputShapes;
  // A generation build's steps are derived from one sequence of the
  // longest length.
  if (options.generate)
    importOptions.inputShapes.tokenShape = {1, options.maxSeq};
  importOptions.retie = options.retie;
  return importOnnxFile(context, options.model, importOptions, report);
}

FailureOr<BuiltProgram> pcc::buildProgram(
    MLIRContext &context, const CompileOptions &options,
    function_ref<std::string(ModuleOp, CompileOptions &)> decide) {
  BuiltProgram program;
  {
    ProgressLine progress("importing " + options.model);
    program.module = loadModel(context, options, &program.importReport);
  }
  if (!program.module)
    return failure();
  if (program.module->getOps<func::FuncOp>().empty())
    return printError(options.model + ": no function to compile");

  CompileOptions effective = options;
  if (decide)
    program.decided = decide(*program.module, effective);
  // pcc-select-trainable reports its decisions here.
  effective.onTrainableDecisions = [&](ArrayRef<TrainableDecision> made) {
    program.decisions.insert(program.decisions.end(), made.begin(),
                             made.end());
  };
  program.passManager = std::make_unique<PassManager>(&context);
  PassManager &pm = *program.passManager;
  buildCompilePipeline(pm, effective);
  // Each pass's time, on stderr when the pass manager goes with the program
  // (for pcc's developers: where a compile spends its time).
  if (const char *timing = std::getenv("PCC_PASS_TIMING");
      timing && StringRef(timing) == "1")
    pm.enableTiming();
  // The module as the failing pass left it, on stderr.
  if (const char *print = std::getenv("PCC_PRINT_IR_AFTER_FAILURE");
      print && StringRef(print) == "1") {
    context.disableMultithreading();
    pm.enableIRPrinting(
        [](Pass *, Operation *) { return false; },
        [](Pass *, Operation *) { return true; },
        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
        /*printAfterOnlyOnFailure=*/true);
  }
  {
    ProgressLine progress(options.train ? "building the training step"
                                        : "optimizing");
    if (failed(pm.run(*program.module)))
      return failure();
  }
  return std::move(program);
}

FailureOr<SmallVector<func::FuncOp>> pcc::getProgramEntries(ModuleOp module) {
  FailureOr<MeshLayout> mesh = MeshLayout::get(module);
  if (failed(mesh))
    return failure();
  return getEntryFunctions(module, mesh->getAxisSize(dist::kPipelineAxis));
}

//===----------------------------------------------------------------------===//
// Sources and libraries
//===----------------------------------------------------------------------===//

FailureOr<CppEmitResult> pcc::emitCode(ModuleOp module, raw_ostream &os,
                                       const CompileOptions &options) {
  CppEmitOptions emitOptions;
  emitOptions.symbolPrefix = options.symbolPrefix;
  emitOptions.threads = options.threads;
  // Each op traced as "<kind> <ONNX node>|<the cost model's microseconds
  // (--machine's, else the target's)>|<its flops>|<its bytes>", which
  // bench/op_profile.py sets side by side and pcc calibrate fits the rates
  // of op kinds to.
  std::optional<CostModel> cost;
  if (options.profileOps) {
    llvm::Expected<CostModel> model = CostModel::get(
        options.target, options.costTable, options.machine, options.dtype);
    if (!model)
      return printError(llvm::toString(model.takeError()));
    cost = std::move(*model);
    emitOptions.profileLabel = [&cost](Operation *op) {
      std::string label = op->getName().getStringRef().str();
      if (StringRef node = getNodeName(op->getLoc()); !node.empty())
        label += " " + node.str();
      auto counts = dyn_cast<graph::CostOpInterface>(op);
      label += llvm::formatv("|{0:F3}|{1}|{2}", cost->time(op) * 1e6,
                             counts ? counts.getFlops() : 0,
                             counts ? counts.getBytesAccessed() : 0)
                   .str();
      return label;
    };
  }
  return options.target == "cuda" ? emitCuda(module, os, emitOptions)
                                  : emitCpp(module, os, emitOptions);
}

/// The file name of the program's source.
static StringRef getSourceName(const CompileOptions &options) {
  return options.target == "cuda" ? "model.cu" : "model.cpp";
}

FailureOr<CppEmitResult> pcc::emitSources(ModuleOp module,
                                          const CompileOptions &options,
                                          StringRef dir) {
  bool cuda = options.target == "cuda";
  StringRef sourceName = getSourceName(options);
  FailureOr<CppEmitResult> emitted;
  {
    std::error_code ec;
    llvm::raw_fd_ostream source((dir + "/" + sourceName).str(), ec);
    if (ec)
      return printError("cannot write " + sourceName + ": " + ec.message());
    ProgressLine progress(cuda ? "generating CUDA C++" : "generating C++");
    emitted = emitCode(module, source, options);
    if (failed(emitted))
      return failure();
  }
  std::string headerError;
  if (failed(cuda ? writeCudaHeaders(dir, headerError)
                  : writeRuntimeSources(dir, headerError)))
    return printError(headerError);
  return emitted;
}

LibraryBuild::LibraryBuild(const CompileOptions &options, StringRef dir)
    : cuda(options.target == "cuda") {
  auto path = [dir = dir.str()](StringRef name) {
    return (dir + "/" + name).str();
  };
  std::string source = path(getSourceName(options));
  builder = std::thread([this, source, library = path("libmodel.so"),
                         log = path("build.log"), arch = options.cudaArch,
                         cpu = options.cpu] {
    built = cuda ? buildCudaLibrary(source, library, log, buildError, arch)
                 : buildSharedLibrary(source, library, log, buildError, cpu);
  });
  if (options.cudaEmulate)
    emulationBuilder = std::thread([this, source,
                                    library = path(kEmulatedLibrary),
                                    log = path("build-emulated.log")] {
      emulated = buildEmulatedCudaLibrary(source, library, log, emulationError);
    });
}

LibraryBuild::~LibraryBuild() {
  if (builder.joinable())
    builder.join();
  if (emulationBuilder.joinable())
    emulationBuilder.join();
}

LogicalResult LibraryBuild::wait() {
  {
    ProgressLine progress(cuda ? "compiling the generated CUDA C++"
                               : "compiling the generated C++");
    if (builder.joinable())
      builder.join();
    if (emulationBuilder.joinable())
      emulationBuilder.join();
  }
  if (failed(built))
    return printError(buildError);
  if (failed(emulated))
    return printError(emulationError);
  return success();
}

LogicalResult pcc::writeWeights(const CppEmitResult &code,
                                const std::string &path) {
  std::deque<std::vector<uint8_t>> storage;
  std::vector<pccrt::TensorRef> tensors = getWeightTensors(code, storage);
  try {
    ProgressLine progress("writing the weights");
    pccrt::writeSafetensorRefs(path, tensors, {{"format", "pcc"}});
  } catch (const pccrt::Error &e) {
    return printError(e.what());
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

std::map<int64_t, std::pair<func::FuncOp, unsigned>>
pcc::getStepResults(ArrayRef<func::FuncOp> entries) {
  std::map<int64_t, std::pair<func::FuncOp, unsigned>> results;
  for (func::FuncOp entry : entries)
    for (unsigned i = 0; i < entry.getNumResults(); ++i) {
      auto index =
          entry.getResultAttrOfType<IntegerAttr>(i, dist::kResultIndexAttr);
      results.try_emplace(index ? index.getInt() : int64_t(i),
                          std::make_pair(entry, i));
    }
  return results;
}

StepMemory pcc::countStepMemory(ModuleOp module, ArrayRef<func::FuncOp> entries,
                                const CppEmitResult &code, StringRef target) {
  StepMemory memory;
  memory.workspaceBytes = int64_t(code.workspaceBytes);
  for (uint64_t bytes : code.stageWorkspaceBytes)
    memory.stageWorkspaceBytes.push_back(int64_t(bytes));
  // Prepared operands are made on the host (a device run keeps every
  // weight as it is).
  memory.ranks.resize(entries.size());
  if (target == "cpu" && code.preparedBytes) {
    // A pipeline rank prepares the operands of the weights it holds.
    for (auto [r, rank] : llvm::enumerate(memory.ranks)) {
      for (auto [w, bytes] : llvm::zip(code.weights, code.weightPreparedBytes))
        if (w.holders == 0 || (r < 64 && ((w.holders >> r) & 1)))
          rank.prepared += int64_t(bytes);
      memory.preparedBytes = std::max(memory.preparedBytes, rank.prepared);
    }
    for (const WeightEntry &w : code.weights)
      if (w.kind == WeightKind::Constant && w.preparedReads &&
          w.preparedReads == w.reads)
        memory.releasedBytes += getTensorBytes(
            w.localType ? Type(w.localType) : Type(w.value.getType()));
  }
  // The parameters' names, whose whole tensors the weights table holds.
  llvm::StringSet<> params;
  auto countParam = [&](StringRef name, Type t) {
    ++memory.paramCount;
    params.insert(name);
    memory.paramBytes += getTensorBytes(t);
  };
  // Each tensor once, by name, however many pipeline ranks hold it; per
  // pipeline rank, what it holds.
  llvm::StringSet<> counted;
  for (size_t r = 0; r < entries.size(); ++r) {
    func::FuncOp entry = entries[r];
    StepMemory::RankBytes &rank = memory.ranks[r];
    llvm::DenseSet<unsigned> graded;
    for (unsigned i = 0; i < entry.getNumResults(); ++i)
      if (std::optional<unsigned> arg =
              graph::getStateIndex(entry, i, graph::kGradAttr)) {
        graded.insert(*arg);
        rank.gradients += getTensorBytes(entry.getResultTypes()[i]);
      }
    for (auto [i, t] : llvm::enumerate(entry.getArgumentTypes())) {
      StringRef name = graph::getStateName(entry, i);
      if (name.empty())
        continue;
      if (!entry.getArgAttr(i, graph::kCacheAttr))
        (graded.contains(i) ? rank.params : rank.state) += getTensorBytes(t);
      if (!counted.insert(name).second)
        continue;
      if (graded.contains(i))
        countParam(name, t);
      else if (entry.getArgAttr(i, graph::kCacheAttr))
        memory.cacheBytes += getTensorBytes(t);
      else
        memory.stateBytes += getTensorBytes(t);
    }
  }
  // Inference weights: a split weight counts its block.
  module->walk([&](graph::WeightOp w) {
    if (counted.insert(w.getName()).second)
      countParam(w.getName(), getHeldWeightType(w));
  });
  // The model's elements: each parameter whole (every rank's block), its
  // vocabulary without the padding that splitting it added.
  for (const WeightEntry &w : code.weights) {
    if (!params.contains(w.name))
      continue;
    auto shape = w.value.getShapedType().getShape();
    int64_t elements = w.value.getShapedType().getNumElements();
    if (auto [dim, extent] = w.padding; dim >= 0 && shape[dim] > 0)
      elements = elements / shape[dim] * extent;
    memory.paramElements += elements;
  }
  // Every entry takes all graph inputs.
  func::FuncOp func = entries.front();
  for (auto [i, t] : llvm::enumerate(func.getArgumentTypes()))
    if (func.getArgAttr(i, kOnnxNameAttr))
      memory.ioBytes += getTensorBytes(t);
  // Gradients are outputs only for a dump: a step keeps them in its
  // workspace and writes them out where asked (pccrt.h, ABI 16).
  for (auto &[index, at] : getStepResults(entries))
    if (!at.first.getResultAttr(at.second, graph::kUpdateAttr) &&
        !at.first.getResultAttr(at.second, graph::kGradAttr))
      memory.ioBytes += getTensorBytes(at.first.getResultTypes()[at.second]);
  return memory;
}

Type pcc::getHeldWeightType(graph::WeightOp w) {
  if (w->hasOneUse())
    if (auto slice = dyn_cast<dist::AllSliceOp>(*w->getUsers().begin()))
      return slice.getType();
  return w.getType();
}

func::FuncOp pcc::getStepFunction(ModuleOp module) {
  for (auto fn : module.getOps<func::FuncOp>())
    if (!fn.isExternal() && fn.isPublic())
      return fn;
  return nullptr;
}

RankedTensorType pcc::getTokenInputType(func::FuncOp step) {
  for (auto [i, t] : llvm::enumerate(step.getArgumentTypes()))
    if (step.getArgAttr(i, kOnnxNameAttr)) {
      auto type = dyn_cast<RankedTensorType>(t);
      return type && type.hasStaticShape() ? type : RankedTensorType();
    }
  return RankedTensorType();
}
