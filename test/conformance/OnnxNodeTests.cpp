//===- OnnxNodeTests.cpp - Runs ONNX's node tests through pcc -------------===//
//
// pcc-onnx-node-tests: the conformance runner. For every ONNX backend node
// test (a model.onnx plus test_data_set_*/{input,output}_<i>.pb) that uses
// the ops pcc claims to support, it imports the model, runs the compile
// pipeline, emits C++, builds the emitted models in large batches (one
// compiler invocation per ~80 models), runs every data set and compares
// with the reference outputs at ONNX's default tolerance.
//
// Every step that runs pcc's or generated code runs in a forked child, so a
// crash in the importer, the emitter or a generated model fails only its own
// test; up to --jobs children run at once.
//
// Output: one line per test (PASS, FAIL, SKIP, XFAIL, XPASS), a line
// `pass rate: P% of counted tests` and, last, `N passed, N failed, N
// skipped`. See README.md in this folder.
//
//===----------------------------------------------------------------------===//

#include "pcc/Driver/Driver.h"
#include "pcc/Import/OnnxImporter.h"
#include "pcc/InitAll.h"
#include "pcc/Target/Cpu/CppEmitter.h"
#include "pcc/Target/WeightTensors.h"

#include "pccrt/Runtime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace mlir;

namespace {

//===----------------------------------------------------------------------===//
// Options and test discovery
//===----------------------------------------------------------------------===//

const char *const kDefaultData = "/usr/share/libonnx-testdata/data/node";

const char *const kUsage =
    "usage: pcc-onnx-node-tests [--data DIR] [--filter SUBSTR] [--xfail FILE]\n"
    "                           [--keep DIR] [--jobs N] [--batch N]\n"
    "                           [--min-pass-rate P] [--verbose]\n"
    "Runs ONNX's node tests (DIR/test_*, default\n"
    "/usr/share/libonnx-testdata/data/node) that use pcc's ops through\n"
    "import, compile, C++ build and run, and compares with the references.\n";

struct Options {
  std::string data = kDefaultData;
  std::vector<std::string> filters;
  std::string xfail;
  std::string keep;
  int jobs = 2;
  int batch = 80;
  /// Below this percentage of counted tests passing, the run fails.
  double minPassRate = 95;
  bool verbose = false;
};

// clang-format off
/// The ops this runner exists to check: a test is selected when its model
/// uses at least one of them.
const std::set<std::string> kOpList = {
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal",
    "Neg", "Erf", "Tanh", "Sigmoid", "Exp", "Log", "Relu", "Softmax",
    "LogSoftmax", "LayerNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceL1", "ReduceL2", "ReduceSumSquare",
    "Reshape", "Transpose", "Split", "Slice", "Concat", "Gather",
    "GatherElements", "Expand", "Unsqueeze", "Squeeze", "Where", "Equal",
    "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Cast", "Constant",
    "ConstantOfShape", "Range", "Trilu", "Shape", "Identity", "CastLike",
    "IsNaN", "Sign", "CumSum", "TopK", "ArgMax", "ArgMin", "ScatterElements", "Mod", "Tile", "GatherND", "SplitToSequence", "SequenceAt",
    "Gelu", "Clip", "Softplus", "Softsign", "Mish", "HardSigmoid",
    "HardSwish", "LeakyRelu", "Elu"};

/// pcc's other supported ops: a selected test may use them too.
const std::set<std::string> kOtherSupported = {
    "Flatten", "Size", "Or", "And", "Not", "Xor", "Abs", "Floor", "Ceil",
    "Sin", "Cos", "Max", "Min", "Sum", "Mean", "Dropout", "ReduceMin"};
// clang-format on

enum class Status { Pending, Pass, Fail, Skip };

struct Test {
  std::string name, dir;
  Status status = Status::Pending;
  std::string reason;
  /// The graph inputs that are not initializers, in order: input_<i>.pb
  /// holds the value of inputs[i].
  std::vector<std::string> inputs;
  std::vector<int32_t> inputTypes;
  /// Inputs fixed at compile time (the import retried with bindings).
  std::set<std::string> bound;
  std::string prefix, source, weights;
  bool hasWeights = false;
};

std::string oneLine(std::string s) {
  for (char &c : s)
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

bool isIntegerType(int32_t t) {
  using TP = onnx::TensorProto;
  switch (t) {
  case TP::INT8:
  case TP::INT16:
  case TP::INT32:
  case TP::INT64:
  case TP::UINT8:
  case TP::UINT16:
  case TP::UINT32:
  case TP::UINT64:
    return true;
  default:
    return false;
  }
}

/// Files `<dir>/<stem><i>.pb`, ordered by i.
std::vector<std::string> numberedFiles(const std::string &dir,
                                       llvm::StringRef stem) {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    llvm::StringRef file = llvm::sys::path::filename(it->path());
    int index;
    if (!file.consume_front(stem) || !file.consume_back(".pb") ||
        file.getAsInteger(10, index))
      continue;
    found.push_back({index, it->path()});
  }
  llvm::sort(found);
  std::vector<std::string> out;
  for (auto &f : found)
    out.push_back(f.second);
  return out;
}

std::vector<std::string> dataSets(const std::string &testDir) {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(testDir, ec), end; !ec && it != end;
       it.increment(ec)) {
    llvm::StringRef file = llvm::sys::path::filename(it->path());
    int index;
    if (file.consume_front("test_data_set_") && !file.getAsInteger(10, index))
      found.push_back({index, it->path()});
  }
  llvm::sort(found);
  std::vector<std::string> out;
  for (auto &f : found)
    out.push_back(f.second);
  return out;
}

std::string readWholeFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool writeWholeFile(const std::string &path, llvm::StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return false;
  os << text;
  return !os.has_error();
}

/// Reads model.onnx and decides whether the test counts. Fills the test's
/// graph inputs. Returns false when the test is not selected at all.
bool classify(Test &t) {
  onnx::ModelProto model;
  std::ifstream f(t.dir + "/model.onnx", std::ios::binary);
  if (!f || !model.ParseFromIstream(&f)) {
    t.status = Status::Fail;
    t.reason = "cannot parse model.onnx";
    return true;
  }
  // Nodes of subgraphs (If/Loop/Scan bodies) count too; their parent op is
  // outside the list anyway.
  bool selected = false;
  std::string outside;
  std::function<void(const onnx::GraphProto &)> walk =
      [&](const onnx::GraphProto &graph) {
        for (const auto &node : graph.node()) {
          bool defaultDomain =
              node.domain().empty() || node.domain() == "ai.onnx";
          std::string op = defaultDomain
                               ? node.op_type()
                               : node.domain() + "::" + node.op_type();
          if (defaultDomain && kOpList.count(op))
            selected = true;
          else if (!(defaultDomain && kOtherSupported.count(op)) &&
                   outside.empty())
            outside = op;
          for (const auto &attr : node.attribute()) {
            if (attr.has_g())
              walk(attr.g());
            for (const auto &g : attr.graphs())
              walk(g);
          }
        }
      };
  walk(model.graph());
  if (!selected)
    return false;
  if (!outside.empty()) {
    t.status = Status::Skip;
    t.reason = "uses " + outside + ", which is not in the op list";
    return true;
  }
  // A model older than the importer reads (ONNX 1.12 tests some
  // activations in their first versions) is refused as a whole, like an
  // op outside the list.
  for (const auto &import : model.opset_import()) {
    bool defaultDomain =
        import.domain().empty() || import.domain() == "ai.onnx";
    if (defaultDomain && import.version() < pcc::kMinImportedOpset) {
      t.status = Status::Skip;
      t.reason = "opset " + std::to_string(import.version()) +
                 ", older than pcc imports";
      return true;
    }
  }
  std::set<std::string> initializers;
  for (const auto &init : model.graph().initializer())
    initializers.insert(init.name());
  for (const auto &in : model.graph().input()) {
    if (initializers.count(in.name()))
      continue;
    t.inputs.push_back(in.name());
    t.inputTypes.push_back(
        in.type().has_tensor_type() ? in.type().tensor_type().elem_type() : 0);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Forked jobs
//===----------------------------------------------------------------------===//

/// Runs jobs in forked children, at most `jobs` at once. A job's `child`
/// runs in the child (its return value is the exit code); `done` runs in
/// the parent with the wait status and may queue more jobs.
class Pool {
public:
  struct Job {
    std::function<int()> child;
    std::function<void(int status)> done;
  };
  explicit Pool(int jobs) : jobs(std::max(jobs, 1)) {}
  void add(Job job) { queue.push_back(std::move(job)); }
  void run() {
    std::map<pid_t, Job> running;
    while (!queue.empty() || !running.empty()) {
      while (!queue.empty() && int(running.size()) < jobs) {
        Job job = std::move(queue.front());
        queue.pop_front();
        std::fflush(nullptr);
        llvm::outs().flush();
        llvm::errs().flush();
        pid_t pid = fork();
        if (pid == 0) {
          int rc = 1;
          try {
            rc = job.child();
          } catch (const std::exception &) {
            rc = 3;
          }
          std::fflush(nullptr);
          _exit(rc);
        }
        if (pid < 0) {
          // Could not fork: run the job here and report it as a crash.
          job.done(W_EXITCODE(0, SIGABRT));
          continue;
        }
        running.emplace(pid, std::move(job));
      }
      int status = 0;
      pid_t pid = waitpid(-1, &status, 0);
      if (pid < 0) {
        if (errno == EINTR)
          continue;
        break;
      }
      auto it = running.find(pid);
      if (it == running.end())
        continue;
      Job job = std::move(it->second);
      running.erase(it);
      job.done(status);
    }
  }

private:
  int jobs;
  std::deque<Job> queue;
};

/// "crashed (signal 11, Segmentation fault)" or "exited with status N".
std::string describeStatus(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM)
      return "timed out";
    return "crashed (signal " + std::to_string(sig) + ", " + strsignal(sig) +
           ")";
  }
  if (WIFEXITED(status))
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended abnormally";
}

//===----------------------------------------------------------------------===//
// Import and emission (in a child)
//===----------------------------------------------------------------------===//

/// Imports, compiles and emits one test's model; writes `<prefix>.cpp`,
/// `<prefix>.safetensors` and `<prefix>.status` ("OK\n<bound names>\n" or
/// "FAIL\n<reason>\n").
int importChild(const Test &t, const std::string &tmp) {
  DialectRegistry registry;
  pcc::registerAllDialects(registry);
  MLIRContext context(registry);
  context.disableMultithreading();
  std::string firstError;
  std::string modelPath = t.dir + "/model.onnx";
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error || !firstError.empty())
      return success();
    firstError = pcc::formatDiagnostic(diag);
    if (llvm::StringRef(firstError).starts_with(modelPath + ": "))
      firstError = "model.onnx" + firstError.substr(modelPath.size());
    return success();
  });
  std::string statusPath = tmp + "/" + t.prefix + ".status";
  auto fail = [&](const std::string &stage) {
    writeWholeFile(
        statusPath,
        "FAIL\n" + stage + ": " +
            (firstError.empty() ? "failed without a diagnostic" : firstError) +
            "\n");
    return 0;
  };

  pcc::ImportOptions options;
  OwningOpRef<ModuleOp> module =
      pcc::importOnnxFile(context, modelPath, options);
  std::string bound;
  // An operand that must be a compile-time constant arrived as a graph
  // input: fix the integer inputs to their values in data set 0, and if
  // that is not enough (Range on float inputs), every input, as a user
  // would with --bind.
  for (bool integersOnly : {true, false}) {
    if (module || firstError.find("compile-time") == std::string::npos)
      break;
    std::string set0 = t.dir + "/test_data_set_0";
    options.bindings.clear();
    bound.clear();
    for (size_t i = 0; i < t.inputs.size(); ++i) {
      if (integersOnly && !isIntegerType(t.inputTypes[i]))
        continue;
      std::string pb = set0 + "/input_" + std::to_string(i) + ".pb";
      if (!llvm::sys::fs::exists(pb))
        continue;
      options.bindings[t.inputs[i]] = pb;
      bound += t.inputs[i] + "\t";
    }
    if (!options.bindings.empty()) {
      firstError.clear();
      module = pcc::importOnnxFile(context, modelPath, options);
    }
  }
  if (!module)
    return fail("import");
  PassManager pm(&context);
  pcc::buildCompilePipeline(pm, pcc::CompileOptions{});
  if (failed(pm.run(*module)))
    return fail("compile");
  auto func = dyn_cast<func::FuncOp>(module->getBody()->front());
  if (!func) {
    firstError = "the module holds no function";
    return fail("compile");
  }
  std::string source;
  llvm::raw_string_ostream os(source);
  pcc::CppEmitOptions emitOptions;
  emitOptions.symbolPrefix = t.prefix;
  FailureOr<pcc::CppEmitResult> emitted = pcc::emitCpp(func, os, emitOptions);
  if (failed(emitted))
    return fail("emit");
  os.flush();
  if (!writeWholeFile(t.source, source)) {
    firstError = "cannot write " + t.source;
    return fail("emit");
  }
  if (!emitted->weights.empty()) {
    try {
      std::deque<std::vector<uint8_t>> storage;
      pccrt::writeSafetensorRefs(t.weights,
                                 pcc::getWeightTensors(*emitted, storage),
                                 {{"format", "pcc"}});
    } catch (const pccrt::Error &e) {
      firstError = e.what();
      return fail("weights");
    }
  }
  writeWholeFile(statusPath, "OK\n" + bound + "\n" +
                                 (emitted->weights.empty() ? "0" : "1") + "\n");
  return 0;
}

//===----------------------------------------------------------------------===//
// Comparison
//===----------------------------------------------------------------------===//

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ff, bits;
  if (exp == 0x1f)
    bits = sign | 0x7f800000 | (mant << 13);
  else if (exp)
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  else if (!mant)
    bits = sign;
  else {
    float f = std::ldexp(float(mant), -24);
    return sign ? -f : f;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Element `i` of a tensor as a double (or, for 64-bit integers, printed
/// exactly).
double floatAt(const pccrt::Tensor &t, int64_t i) {
  const uint8_t *p = t.data.data();
  switch (t.dtype) {
  case PCCRT_F32: {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  case PCCRT_F64: {
    double v;
    std::memcpy(&v, p + 8 * i, 8);
    return v;
  }
  case PCCRT_F16: {
    uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return halfToFloat(v);
  }
  case PCCRT_BF16: {
    uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return bf16ToFloat(v);
  }
  default:
    return 0;
  }
}

std::string intAt(const pccrt::Tensor &t, int64_t i) {
  const uint8_t *p = t.data.data();
  auto get = [&](auto v) {
    std::memcpy(&v, p + sizeof(v) * i, sizeof(v));
    return std::to_string(v);
  };
  switch (t.dtype) {
  case PCCRT_BOOL:
    return p[i] ? "true" : "false";
  case PCCRT_I8:
    return get(int8_t());
  case PCCRT_U8:
    return get(uint8_t());
  case PCCRT_I16:
    return get(int16_t());
  case PCCRT_U16:
    return get(uint16_t());
  case PCCRT_I32:
    return get(int32_t());
  case PCCRT_U32:
    return get(uint32_t());
  case PCCRT_I64:
    return get(int64_t());
  case PCCRT_U64:
    return get(uint64_t());
  default:
    return "?";
  }
}

std::string formatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

/// Empty when `got` matches `ref`, else a one-line reason.
std::string compareTensors(const pccrt::Tensor &got, const pccrt::Tensor &ref,
                           const std::string &what) {
  if (got.dtype != ref.dtype || got.shape != ref.shape)
    return what + ": got " + pccrt::describeType(got.dtype, got.shape) +
           ", expected " + pccrt::describeType(ref.dtype, ref.shape);
  int64_t n = ref.numElements();
  size_t width = pccrt::dtypeSize(ref.dtype);
  if (got.data.size() != size_t(n) * width ||
      ref.data.size() != size_t(n) * width)
    return what + ": data size mismatch";
  bool isFloat = ref.dtype == PCCRT_F32 || ref.dtype == PCCRT_F64 ||
                 ref.dtype == PCCRT_F16 || ref.dtype == PCCRT_BF16;
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; ++i) {
    bool ok;
    if (isFloat) {
      double g = floatAt(got, i), r = floatAt(ref, i);
      if (std::isnan(r) || std::isnan(g))
        ok = std::isnan(r) && std::isnan(g);
      else if (std::isinf(r) || std::isinf(g))
        ok = g == r;
      else
        ok = std::fabs(g - r) <= 1e-7 + 1e-3 * std::fabs(r);
    } else if (ref.dtype == PCCRT_BOOL) {
      ok = (got.data[i] != 0) == (ref.data[i] != 0);
    } else {
      ok = !std::memcmp(got.data.data() + i * width,
                        ref.data.data() + i * width, width);
    }
    if (!ok && bad++ == 0)
      first = i;
  }
  if (!bad)
    return {};
  std::string g =
      isFloat ? formatDouble(floatAt(got, first)) : intAt(got, first);
  std::string r =
      isFloat ? formatDouble(floatAt(ref, first)) : intAt(ref, first);
  return what + ": element " + std::to_string(first) + " is " + g +
         ", expected " + r + " (" + std::to_string(bad) + " of " +
         std::to_string(n) + " elements differ)";
}

/// Runs every data set of one compiled test; empty on success.
std::string runTest(const Test &t, const std::string &library) {
  try {
    auto model =
        pccrt::Model::load(library, t.hasWeights ? t.weights : "", t.prefix);
    std::vector<std::string> sets = dataSets(t.dir);
    if (sets.empty())
      return "no test_data_set_* folder";
    std::string set0 = t.dir + "/test_data_set_0";
    for (const std::string &set : sets) {
      std::string setName = llvm::sys::path::filename(set).str();
      std::vector<std::string> inputFiles = numberedFiles(set, "input_");
      std::vector<pccrt::Tensor> inputs;
      for (size_t i = 0; i < inputFiles.size(); ++i) {
        if (i < t.inputs.size() && t.bound.count(t.inputs[i])) {
          // The value was fixed from data set 0 at compile time.
          std::string file0 = set0 + "/input_" + std::to_string(i) + ".pb";
          if (readWholeFile(inputFiles[i]) != readWholeFile(file0))
            return setName + ": input '" + t.inputs[i] +
                   "' was bound at compile time to data set 0's value, "
                   "which differs here";
          continue;
        }
        inputs.push_back(pccrt::readTensorProto(inputFiles[i]));
      }
      if (inputs.size() != size_t(model->info().num_inputs))
        return setName + ": " + std::to_string(inputs.size()) +
               " input files for " + std::to_string(model->info().num_inputs) +
               " model inputs";
      std::vector<pccrt::Tensor> outputs = model->run(inputs);
      std::vector<std::string> refFiles = numberedFiles(set, "output_");
      if (refFiles.size() != outputs.size())
        return setName + ": the model has " + std::to_string(outputs.size()) +
               " outputs, the test expects " + std::to_string(refFiles.size());
      for (size_t i = 0; i < outputs.size(); ++i) {
        pccrt::Tensor ref = pccrt::readTensorProto(refFiles[i]);
        std::string problem = compareTensors(
            outputs[i], ref, setName + ": output '" + outputs[i].name + "'");
        if (!problem.empty())
          return problem;
      }
    }
  } catch (const pccrt::Error &e) {
    return std::string("runtime error: ") + e.what();
  } catch (const std::exception &e) {
    return std::string("runtime error: ") + e.what();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

class Runner {
public:
  explicit Runner(Options opts) : opts(std::move(opts)) {}
  int main();

private:
  void importAll();
  void buildAll();
  void runAll();
  int report();
  void log(const std::string &msg) {
    if (opts.verbose)
      llvm::errs() << "pcc-onnx-node-tests: " << msg << "\n";
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  }

  struct Library {
    std::string name;
    std::vector<size_t> tests;
  };

  Options opts;
  std::vector<Test> tests;
  std::map<std::string, std::string> xfails;
  std::string tmp;
  std::vector<Library> libraries;
  int notSelected = 0;
  int libraryCounter = 0;
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
};

int Runner::main() {
  // Generated code may link OpenBLAS; tests are tiny and run beside the
  // compiler, so one thread each.
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  setenv("OMP_NUM_THREADS", "1", 1);

  if (!opts.xfail.empty()) {
    std::ifstream f(opts.xfail);
    if (!f) {
      llvm::errs() << "pcc-onnx-node-tests: error: cannot read xfail file '"
                   << opts.xfail << "'\n";
      return 2;
    }
    for (std::string line; std::getline(f, line);) {
      llvm::StringRef l = llvm::StringRef(line).trim();
      if (l.empty() || l.starts_with("#"))
        continue;
      auto [name, reason] = l.split('#');
      xfails[name.trim().str()] = reason.trim().str();
    }
  }

  if (!llvm::sys::fs::is_directory(opts.data)) {
    llvm::errs() << "pcc-onnx-node-tests: no ONNX node tests at '" << opts.data
                 << "' (install libonnx-testdata or pass --data)\n";
    return 77;
  }
  std::vector<std::string> dirs;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(opts.data, ec), end;
       !ec && it != end; it.increment(ec)) {
    std::string name = llvm::sys::path::filename(it->path()).str();
    if (!llvm::StringRef(name).starts_with("test_") ||
        !llvm::sys::fs::exists(it->path() + "/model.onnx"))
      continue;
    if (!opts.filters.empty() &&
        llvm::none_of(opts.filters, [&](const std::string &f) {
          return name.find(f) != std::string::npos;
        }))
      continue;
    dirs.push_back(it->path());
  }
  llvm::sort(dirs);
  for (const std::string &dir : dirs) {
    Test t;
    t.dir = dir;
    t.name = llvm::sys::path::filename(dir).str();
    if (!classify(t)) {
      ++notSelected;
      continue;
    }
    tests.push_back(std::move(t));
  }

  // The work folder.
  if (!opts.keep.empty()) {
    if (std::error_code e = llvm::sys::fs::create_directories(opts.keep)) {
      llvm::errs() << "pcc-onnx-node-tests: error: cannot create '" << opts.keep
                   << "': " << e.message() << "\n";
      return 2;
    }
    llvm::SmallString<256> abs(opts.keep);
    llvm::sys::fs::make_absolute(abs);
    tmp = abs.str().str();
  } else {
    llvm::SmallString<256> dir;
    if (std::error_code e =
            llvm::sys::fs::createUniqueDirectory("pcc-onnx-node-tests", dir)) {
      llvm::errs() << "pcc-onnx-node-tests: error: cannot create a temporary "
                      "folder: "
                   << e.message() << "\n";
      return 2;
    }
    tmp = dir.str().str();
  }
  if (std::string error; failed(pcc::writeRuntimeSources(tmp, error))) {
    llvm::errs() << "pcc-onnx-node-tests: error: " << error << "\n";
    return 2;
  }
  for (auto [i, t] : llvm::enumerate(tests)) {
    t.prefix = "t" + std::to_string(i);
    t.source = tmp + "/" + t.prefix + ".cpp";
    t.weights = tmp + "/" + t.prefix + ".safetensors";
  }

  importAll();
  log("imported in " + formatDouble(seconds()) + " s");
  buildAll();
  log("built in " + formatDouble(seconds()) + " s");
  runAll();
  log("ran in " + formatDouble(seconds()) + " s");
  int rc = report();
  if (opts.keep.empty())
    llvm::sys::fs::remove_directories(tmp);
  return rc;
}

void Runner::importAll() {
  Pool pool(opts.jobs);
  for (Test &t : tests) {
    if (t.status != Status::Pending)
      continue;
    pool.add({[&t, this] {
                alarm(60);
                return importChild(t, tmp);
              },
              [&t, this](int status) {
                std::string text =
                    readWholeFile(tmp + "/" + t.prefix + ".status");
                std::istringstream in(text);
                std::string kind, second, third;
                std::getline(in, kind);
                std::getline(in, second);
                std::getline(in, third);
                if (kind == "OK") {
                  llvm::SmallVector<llvm::StringRef> names;
                  llvm::StringRef(second).split(names, '\t', -1, false);
                  for (llvm::StringRef n : names)
                    t.bound.insert(n.str());
                  t.hasWeights = third == "1";
                  return;
                }
                t.status = Status::Fail;
                t.reason = kind == "FAIL"
                               ? second
                               : "import/emit " + describeStatus(status);
              }});
  }
  pool.run();
}

void Runner::buildAll() {
  std::vector<size_t> ready;
  for (auto [i, t] : llvm::enumerate(tests))
    if (t.status == Status::Pending)
      ready.push_back(i);
  Pool pool(opts.jobs);
  std::function<void(std::vector<size_t>)> addBatch =
      [&](std::vector<size_t> batch) {
        std::string name = tmp + "/lib" + std::to_string(libraryCounter++);
        std::string source = name + ".cpp";
        std::string text;
        for (size_t i : batch)
          text += "#include \"" + tests[i].prefix + ".cpp\"\n";
        writeWholeFile(source, text);
        pool.add(
            {[=] {
               std::string error;
               if (succeeded(pcc::buildSharedLibrary(source, name + ".so",
                                                     name + ".log", error)))
                 return 0;
               // Paths relative to the work folder keep it short.
               std::string dir = tmp + "/";
               for (size_t at; (at = error.find(dir)) != std::string::npos;)
                 error.erase(at, dir.size());
               writeWholeFile(name + ".error", oneLine(error));
               return 1;
             },
             [=, &addBatch](int status) {
               if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                 libraries.push_back({name + ".so", batch});
                 return;
               }
               if (batch.size() > 1) {
                 // Bisect, so that a bad model only fails itself.
                 log("batch " + name + " of " + std::to_string(batch.size()) +
                     " models failed to compile; bisecting");
                 size_t half = batch.size() / 2;
                 addBatch({batch.begin(), batch.begin() + half});
                 addBatch({batch.begin() + half, batch.end()});
                 return;
               }
               Test &t = tests[batch[0]];
               t.status = Status::Fail;
               std::string error = readWholeFile(name + ".error");
               t.reason =
                   "build: " +
                   (error.empty() ? "the compiler job " + describeStatus(status)
                                  : error);
             }});
      };
  // Equal batches of at most opts.batch models.
  size_t count = ready.size();
  size_t numBatches = (count + opts.batch - 1) / std::max(opts.batch, 1);
  for (size_t b = 0; b < numBatches; ++b) {
    size_t lo = count * b / numBatches, hi = count * (b + 1) / numBatches;
    addBatch({ready.begin() + lo, ready.begin() + hi});
  }
  pool.run();
}

void Runner::runAll() {
  Pool pool(opts.jobs);
  std::function<void(std::string, std::vector<size_t>)> addRun =
      [&](std::string library, std::vector<size_t> batch) {
        std::string results =
            tmp + "/run" + std::to_string(libraryCounter++) + ".txt";
        pool.add({[=] {
                    std::FILE *f = std::fopen(results.c_str(), "w");
                    if (!f)
                      return 2;
                    for (size_t i : batch) {
                      alarm(10);
                      std::string problem = runTest(tests[i], library);
                      std::fprintf(f, "%zu\t%s\n", i, oneLine(problem).c_str());
                      std::fflush(f);
                    }
                    alarm(0);
                    std::fclose(f);
                    return 0;
                  },
                  [=, &addRun](int status) {
                    std::set<size_t> reported;
                    std::ifstream in(results);
                    for (std::string line; std::getline(in, line);) {
                      auto [idx, problem] = llvm::StringRef(line).split('\t');
                      size_t i;
                      if (idx.getAsInteger(10, i))
                        continue;
                      reported.insert(i);
                      Test &t = tests[i];
                      t.status = problem.empty() ? Status::Pass : Status::Fail;
                      t.reason = problem.str();
                    }
                    std::vector<size_t> rest;
                    for (size_t i : batch)
                      if (!reported.count(i))
                        rest.push_back(i);
                    if (rest.empty())
                      return;
                    // The first unreported test brought the child down.
                    Test &t = tests[rest.front()];
                    t.status = Status::Fail;
                    t.reason = "the model run " + describeStatus(status);
                    rest.erase(rest.begin());
                    if (!rest.empty())
                      addRun(library, rest);
                  }});
      };
  for (const Library &lib : libraries)
    addRun(lib.name, lib.tests);
  pool.run();
}

int Runner::report() {
  int passed = 0, failed = 0, skipped = 0, unexpected = 0, xpassed = 0;
  for (const Test &t : tests) {
    auto xf = xfails.find(t.name);
    bool expectFail = xf != xfails.end();
    switch (t.status) {
    case Status::Skip:
      ++skipped;
      llvm::outs() << "SKIP " << t.name << ": " << t.reason << "\n";
      break;
    case Status::Pass:
      ++passed;
      if (expectFail) {
        ++xpassed;
        llvm::outs() << "XPASS " << t.name << "\n";
      } else {
        llvm::outs() << "PASS " << t.name << "\n";
      }
      break;
    case Status::Fail:
    case Status::Pending:
      ++failed;
      if (expectFail) {
        llvm::outs() << "XFAIL " << t.name << ": " << xf->second << "\n";
      } else {
        ++unexpected;
        llvm::outs() << "FAIL " << t.name << ": "
                     << (t.status == Status::Pending ? "not run" : t.reason)
                     << "\n";
      }
      break;
    }
  }
  // Statistics go to stderr; stdout ends with the pass rate and summary.
  llvm::outs().flush();
  for (const auto &[name, reason] : xfails)
    if (llvm::none_of(tests, [&](const Test &t) { return t.name == name; }) &&
        opts.filters.empty())
      llvm::errs() << "pcc-onnx-node-tests: warning: xfail entry '" << name
                   << "' names no selected test\n";
  int counted = passed + failed;
  double rate = counted ? 100.0 * passed / counted : 100.0;
  llvm::errs() << "pcc-onnx-node-tests: " << tests.size() << " selected, "
               << notSelected << " not selected (no op of the list), "
               << unexpected << " unexpected failures, " << xpassed
               << " unexpected passes, " << formatDouble(seconds()) << " s\n";
  llvm::outs() << llvm::format("pass rate: %.1f%% of counted tests\n", rate);
  llvm::outs() << passed << " passed, " << failed << " failed, " << skipped
               << " skipped\n";
  llvm::outs().flush();
  return unexpected || xpassed || rate < opts.minPassRate ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  Options opts;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc) {
        llvm::errs() << "pcc-onnx-node-tests: error: " << arg
                     << " needs a value\n";
        std::exit(2);
      }
      out = argv[++i];
    };
    auto integer = [&](int &out) {
      std::string v;
      value(v);
      if (llvm::StringRef(v).getAsInteger(10, out) || out < 1) {
        llvm::errs() << "pcc-onnx-node-tests: error: " << arg
                     << " expects a positive integer\n";
        std::exit(2);
      }
    };
    std::string v;
    if (arg == "--data")
      value(opts.data);
    else if (arg == "--filter")
      value(v), opts.filters.push_back(v);
    else if (arg == "--xfail")
      value(opts.xfail);
    else if (arg == "--keep")
      value(opts.keep);
    else if (arg == "--jobs" || arg == "-j")
      integer(opts.jobs);
    else if (arg == "--batch")
      integer(opts.batch);
    else if (arg == "--min-pass-rate") {
      value(v);
      if (llvm::StringRef(v).getAsDouble(opts.minPassRate) ||
          opts.minPassRate < 0 || opts.minPassRate > 100) {
        llvm::errs() << "pcc-onnx-node-tests: error: --min-pass-rate expects "
                        "a percentage\n";
        return 2;
      }
    } else if (arg == "--verbose" || arg == "-v")
      opts.verbose = true;
    else if (arg == "--help" || arg == "-h") {
      llvm::outs() << kUsage;
      return 0;
    } else {
      llvm::errs() << "pcc-onnx-node-tests: error: unknown argument '" << arg
                   << "'\n"
                   << kUsage;
      return 2;
    }
  }
  return Runner(std::move(opts)).main();
}
