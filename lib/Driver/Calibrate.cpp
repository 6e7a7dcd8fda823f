//===- Calibrate.cpp - This machine's description, measured ---------------===//
//
// `pcc calibrate -o FILE` writes a machine description (docs/Machines.md)
// of the machine it runs on, for `--machine FILE`: what the cost model
// needs, measured with pcc's own programs rather than taken from a
// datasheet.
//
// - The products' throughput: a chain of square matrix products compiled
//   by pcc (f32, and bf16 products with --dtype bf16), run on one rank's
//   share of the cores (the cores over --ranks), as a rank of a
//   multi-rank program runs. Peak and achievable are the best measured.
// - The memory bandwidth: an element-wise op over tensors far larger than
//   the caches, at the bytes the cost model counts for it.
// - The fixed cost of an op: a chain of element-wise ops on a few
//   elements.
// - Collectives and transfers: --ranks MPI ranks (started under mpirun as
//   `pcc run` starts its ranks) time all-reduces and sends of
//   4 KiB to 64 MiB; the bandwidth and latency are fitted to the ring
//   traffic the cost model charges (CostModel::collectiveTime). The ranks
//   share one host: the description has a node of --ranks devices, and
//   its inter-node link is taken as the intra-node one (nothing between
//   hosts was measured).
// - Memory: the host's physical memory over --ranks.
//
//===----------------------------------------------------------------------===//

#include "pcc/Build/Build.h"
#include "pcc/Planning/Plan.h"
#include "pcc/Planning/Planning.h"

#include "pcc/Driver/Driver.h"
#include "pccrt/Comm.h"
#include "pccrt/Launch.h"
#include "pccrt/Runtime.h"

#include "pcc/Analysis/CostModel.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <thread>
#include <unistd.h>

using namespace pcc;

namespace {

/// "tensor<64x64xf32>".
std::string tensorType(llvm::ArrayRef<int64_t> shape) {
  std::string t = "tensor<";
  for (int64_t d : shape)
    t += std::to_string(d) + "x";
  return t + "f32>";
}

/// A program of `count` ops y_i = OP(y_{i-1}, w), y_0 = x, of two inputs x
/// and w of `shape` (inputs: constants would be folded or prepared ahead),
/// OP being "graph.matmul" or an element-wise op ("graph.add"). Two kinds
/// differ, so that a long chain's values stay finite and normal on inputs
/// in (0, 1]: a square root is unary (y_i = sqrt(y_{i-1})), and a division
/// alternates y_i = w / y_{i-1}.
std::string chainSource(llvm::StringRef op, llvm::ArrayRef<int64_t> shape,
                        int64_t count) {
  std::string t = tensorType(shape);
  std::string body, x = "%x";
  for (int64_t i = 0; i < count; ++i) {
    if (op == "graph.sqrt")
      body += llvm::formatv("    %y{0} = {1} {2} : {3}\n", i, op, x, t);
    else if (op == "graph.div")
      body += llvm::formatv("    %y{0} = {1} %w, {2} : ({3}, {3}) -> {3}\n",
                            i, op, x, t);
    else
      body += llvm::formatv("    %y{0} = {1} {2}, %w : ({3}, {3}) -> {3}\n",
                            i, op, x, t);
    x = "%y" + std::to_string(i);
  }
  return llvm::formatv("module {{\n  func.func @main(%x: {0} {{onnx.name = "
                       "\"x\"}, %w: {0} {{onnx.name = \"w\"}) -> ({0} "
                       "{{onnx.name = \"y\"}) {{\n{1}    return {2} : {0}\n"
                       "  }\n}\n",
                       t, body, x);
}

/// The element-wise kinds calibrate times in chains of their own, as
/// (program, op): additions give the general vector rate, the others their
/// kind's (a division or a square root takes several additions' time).
/// (Transcendentals are left out: their libm paths' speed depends on the
/// values, which a chain of one function does not have as a model does.)
const std::pair<const char *, const char *> kVectorPrograms[] = {
    {"vector", "graph.add"},
    {"vector-div", "graph.div"},
    {"vector-sqrt", "graph.sqrt"}};

/// Compiles `source` in `dir`/`name` with inputs `name`.pb and `name`-w.pb
/// of `shape` (values in (0, 1]); element-wise ops fused where `fuse`.
llvm::Error buildTimedProgram(llvm::StringRef dir, llvm::StringRef name,
                              const std::string &source,
                              llvm::ArrayRef<int64_t> shape,
                              llvm::StringRef dtype, int64_t threads,
                              bool fuse = false) {
  std::string model = (dir + "/" + name + ".mlir").str();
  std::string out = (dir + "/" + name).str();
  auto error = [&](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   name + ": " + message);
  };
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(model, ec);
    if (ec)
      return error("cannot write " + model + ": " + ec.message());
    os << source;
  }
  pccrt::Tensor x;
  x.dtype = PCCRT_F32;
  x.shape.assign(shape.begin(), shape.end());
  int64_t elements = 1;
  for (int64_t d : shape)
    elements *= d;
  x.data.assign(size_t(elements) * sizeof(float), 0);
  auto *values = reinterpret_cast<float *>(x.data.data());
  for (int64_t i = 0; i < elements; ++i)
    values[i] = float((i * 7919) % 1000 + 1) * 1e-3f;
  for (const char *input : {"x", "w"}) {
    std::string path = (dir + "/" + name + "-" + input + ".pb").str();
    x.name = input;
    std::vector<uint8_t> bytes = pccrt::serializeTensorProto(x);
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return error("cannot write " + path + ": " + ec.message());
    os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  }
  CompileOptions compile;
  compile.model = model;
  compile.outDir = out;
  compile.threads = threads;
  compile.dtype = dtype.str();
  // Unfused, each op its own pass over memory, as the cost model times it.
  compile.fuse = fuse;
  std::string log;
  llvm::raw_string_ostream compileLog(log);
  if (failed(pcc::compile(compile, compileLog)))
    return error("the program did not compile");
  return llvm::Error::success();
}

/// Runs the program buildTimedProgram left in `dir`/`name` `steps` times;
/// the fastest step's seconds after the first (which warms the caches and
/// the thread pool).
llvm::Expected<double> runTimedProgram(llvm::StringRef dir,
                                       llvm::StringRef name, int64_t steps) {
  RunOptions run;
  run.dir = (dir + "/" + name).str();
  run.inputs = {(dir + "/" + name + "-x.pb").str(),
                (dir + "/" + name + "-w.pb").str()};
  run.steps = steps;
  std::vector<double> ms;
  run.stepMilliseconds = &ms;
  if (failed(pcc::run(run, llvm::nulls())) || ms.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   name + ": the program did not run");
  if (ms.size() > 1)
    ms.erase(ms.begin());
  return *std::min_element(ms.begin(), ms.end()) / 1e3;
}

/// The programs calibrate times, with their steps.
const std::pair<const char *, int64_t> kPrograms[] = {
    {"products-f32", 5}, {"products-bf16", 5}, {"bandwidth", 5},
    {"overhead", 20},    {"vector", 5},        {"vector-div", 5},
    {"vector-sqrt", 5}};

/// The training steps whose ops calibrate times kind by kind: small GPTs
/// (attention and its backward, layer norms, the loss, AdamW's fused
/// update, ...) at two scales, compiled as `pcc compile` compiles any,
/// every op traced: the two give each kind a fixed cost and a rate.
struct OpsProgram {
  const char *name, *model;
  int64_t vocabulary;
};
const OpsProgram kOpsPrograms[] = {
    {"ops-small", "gpt:layers=2,hidden=128,heads=4,vocab=512,seq=32,batch=1",
     512},
    {"ops-large", "gpt:layers=2,hidden=256,heads=4,vocab=2048,seq=128,batch=2",
     2048}};
constexpr int64_t kOpsSteps = 8;

/// Compiles an ops program's training step (--profile-ops) in
/// `dir`/NAME, with its tokens in `dir`/NAME-tokens.bin.
llvm::Error buildOpsProgram(llvm::StringRef dir, const OpsProgram &program,
                            int64_t threads) {
  auto error = [&](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::Twine(program.name) + ": " + message);
  };
  std::string why;
  llvm::FailureOr<std::string> source =
      describedModelSource(program.model, why);
  if (failed(source))
    return error(why);
  std::string model = (dir + "/" + program.name + ".mlir").str();
  std::string tokens = (dir + "/" + program.name + "-tokens.bin").str();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(model, ec);
    if (ec)
      return error("cannot write " + model + ": " + ec.message());
    os << *source;
    llvm::raw_fd_ostream data(tokens, ec);
    if (ec)
      return error("cannot write " + tokens + ": " + ec.message());
    for (uint32_t i = 0; i < 4096; ++i) {
      uint16_t token = uint16_t((i * 2654435761u) % program.vocabulary);
      data.write(reinterpret_cast<const char *>(&token), sizeof token);
    }
  }
  CompileOptions compile;
  compile.model = model;
  compile.outDir = (dir + "/" + program.name).str();
  compile.threads = threads;
  compile.train = true;
  compile.profileOps = true;
  std::string log;
  llvm::raw_string_ostream compileLog(log);
  if (failed(pcc::compile(compile, compileLog)))
    return error("the training step did not compile");
  return llvm::Error::success();
}

/// Runs each ops program kOpsSteps steps, its trace to
/// `dir`/NAME-trace-R.json.
llvm::Error runOpsPrograms(llvm::StringRef dir, int rank) {
  for (const OpsProgram &program : kOpsPrograms) {
    RunOptions run;
    run.dir = (dir + "/" + program.name).str();
    run.dataFile = (dir + "/" + program.name + "-tokens.bin").str();
    run.steps = kOpsSteps;
    run.traceFile = (dir + "/" + program.name + "-trace-" +
                     llvm::Twine(rank) + ".json")
                        .str();
    if (failed(pcc::run(run, llvm::nulls())))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::Twine(program.name) + ": the training step did not run");
  }
  return llvm::Error::success();
}

/// One traced op: the cost model's flops and bytes for it, and the seconds
/// it took.
struct OpSample {
  double flops = 0, bytes = 0, seconds = 0;
};

/// Each op kind's traced ops in the trace `file` (of a build compiled with
/// --profile-ops), after 2 warm-up steps, added to `kinds`. False if the
/// trace cannot be read.
bool readOpSamples(const std::string &file,
                   std::map<std::string, std::vector<OpSample>> &kinds) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      llvm::MemoryBuffer::getFile(file);
  if (!text)
    return false;
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*text)->getBuffer());
  if (!json) {
    llvm::consumeError(json.takeError());
    return false;
  }
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Array *events =
      root ? root->getArray("traceEvents") : nullptr;
  if (!events)
    return false;
  constexpr int64_t warmup = 2;
  for (const llvm::json::Value &v : *events) {
    const llvm::json::Object *e = v.getAsObject();
    const llvm::json::Object *args = e ? e->getObject("args") : nullptr;
    if (!args || args->getInteger("step").value_or(0) <= warmup)
      continue;
    llvm::SmallVector<llvm::StringRef, 4> fields;
    e->getString("name").value_or("").split(fields, '|');
    if (fields.size() != 4)
      continue;
    OpSample sample;
    (void)fields[2].getAsDouble(sample.flops);
    (void)fields[3].getAsDouble(sample.bytes);
    sample.seconds = e->getNumber("dur").value_or(0) * 1e-6;
    kinds[fields[0].split(' ').first.str()].push_back(sample);
  }
  return true;
}

/// The weight of each point (a, t) in a fit: the inverse of its t plus the
/// mean t, so that neither the many small ops nor the few large ones decide
/// alone (nor an op that took no time, its work done by another's loop).
llvm::SmallVector<double>
getFitWeights(llvm::ArrayRef<std::pair<double, double>> points) {
  double mean = 0;
  for (auto [a, t] : points)
    mean += std::max(t, 0.0) / double(points.size());
  llvm::SmallVector<double> weights;
  for (auto [a, t] : points)
    weights.push_back(1 / (std::max(t, 0.0) + mean));
  return weights;
}

/// The line t = fixed + perUnit * a through the points (a, t) of `points`,
/// by least squares weighed by getFitWeights. Neither part is negative:
/// where the fixed cost would be, the line goes through 0; where the slope
/// would be (times that do not grow with the amount over the sizes traced:
/// small ops, their fixed cost all there is to see, which gives no rate to
/// take to larger ones), it is the ratio of the totals and the fixed cost
/// 0.
std::pair<double, double>
fitLine(llvm::ArrayRef<std::pair<double, double>> points) {
  double sw = 0, swa = 0, swaa = 0, swt = 0, swat = 0, sa = 0, st = 0;
  llvm::SmallVector<double> weights = getFitWeights(points);
  for (auto [point, w] : llvm::zip(points, weights)) {
    auto [a, t] = point;
    if (t <= 0)
      continue;
    sw += w;
    swa += w * a;
    swaa += w * a * a;
    swt += w * t;
    swat += w * a * t;
    sa += a;
    st += t;
  }
  double det = sw * swaa - swa * swa;
  double fixed = -1, perUnit = 0;
  if (det > 1e-12 * sw * swaa) {
    fixed = (swaa * swt - swa * swat) / det;
    perUnit = (sw * swat - swa * swt) / det;
  }
  if (fixed < 0) {
    fixed = 0;
    perUnit = swaa > 0 ? swat / swaa : 0;
  }
  if (perUnit <= 0) {
    fixed = 0;
    perUnit = sa > 0 ? st / sa : 0;
  }
  return {fixed, perUnit};
}

/// Each op kind's costs from the ops programs' traces in `dir` (rank 0's),
/// fitted to every traced op of the kind (fitLine):
///  - an element-wise or data-movement kind: time = fixed cost + amount /
///    rate, where the amount is the kind's flops, or its bytes where the
///    cost model finds the kind bound by memory at the measured general
///    rates;
///  - a product: its flops at the rate of the large products timed above
///    (`matrixRate`), then a fixed cost and its bytes at a rate of their
///    own (`serial_bytes_per_second`): packing the operands, which a
///    small product (a microbatch of few rows against a weight) spends
///    most of its time on;
///  - a kind whose ops do not span sizes enough to tell a rate from a fixed
///    cost: a fixed cost alone, beside the general rate.
llvm::json::Object fitOpCosts(llvm::StringRef dir, double matrixRate,
                              double flopRate, double byteRate,
                              std::string &note) {
  llvm::json::Object ops;
  std::map<std::string, std::vector<OpSample>> kinds;
  bool read = false;
  for (const OpsProgram &program : kOpsPrograms)
    read |= readOpSamples(
        (dir + "/" + program.name + "-trace-0.json").str(), kinds);
  if (!read) {
    note = "op kinds: the training steps' traces could not be read";
    return ops;
  }
  // The products run one kernel, a graph.gemm's bias its epilogue: both
  // kinds get the costs fitted to all of them.
  constexpr llvm::StringLiteral kProducts[] = {"graph.gemm", "graph.matmul"};
  std::vector<OpSample> products;
  for (llvm::StringRef kind : kProducts) {
    auto it = kinds.find(kind.str());
    if (it == kinds.end())
      continue;
    llvm::append_range(products, it->second);
    kinds.erase(it);
  }
  if (!products.empty())
    for (llvm::StringRef kind : kProducts)
      kinds[kind.str()] = products;
  int64_t fitted = 0;
  for (const auto &[name, samples] : kinds) {
    if (llvm::StringRef(name).starts_with("dist."))
      continue;
    bool product = llvm::is_contained(kProducts, name);
    double flops = 0, bytes = 0;
    for (const OpSample &s : samples) {
      flops += s.flops;
      bytes += s.bytes;
    }
    // A product's amount is its bytes (what it takes beyond its flops).
    bool byBytes = product || bytes / byteRate >= flops / flopRate;
    double generalRate = byBytes ? byteRate : flopRate;
    llvm::SmallVector<std::pair<double, double>> points;
    double smallest = 0, largest = 0;
    for (const OpSample &s : samples) {
      double amount = byBytes ? s.bytes : s.flops;
      // An op timed at ten times the general rate did not do its work
      // itself (a transpose that a product reads in place): left out.
      if (!product && amount > 10 * generalRate * s.seconds)
        continue;
      double t = product ? s.seconds - s.flops / matrixRate : s.seconds;
      points.push_back({amount, t});
      smallest = points.size() == 1 ? amount : std::min(smallest, amount);
      largest = std::max(largest, amount);
    }
    if (points.empty())
      continue;
    // A rate needs sizes to tell it from the fixed cost: a kind traced at
    // one size (a negation of a scalar) gets a fixed cost, what its ops
    // took beyond the general rate, and keeps the general rate.
    if (largest < 4 * smallest) {
      double sw = 0, swExtra = 0;
      llvm::SmallVector<double> weights = getFitWeights(points);
      for (auto [point, w] : llvm::zip(points, weights)) {
        auto [a, t] = point;
        sw += w;
        swExtra += w * std::max(0.0, t - (product ? 0 : a / generalRate));
      }
      ops[name] = llvm::json::Object{{"overhead_seconds", swExtra / sw}};
      ++fitted;
      continue;
    }
    auto [fixedCost, perUnit] = fitLine(points);
    if (perUnit <= 0)
      continue;
    llvm::json::Object costs{{"overhead_seconds", fixedCost}};
    costs[product   ? "serial_bytes_per_second"
          : byBytes ? "bytes_per_second"
                    : "flops_per_second"] = 1 / perUnit;
    ops[name] = std::move(costs);
    ++fitted;
  }
  note = llvm::formatv("op kinds: {0} fitted (a fixed cost and a rate each) "
                       "to the ops of two training steps, {1} and {2} "
                       "(--profile-ops), {3} steps each after 2",
                       fitted, kOpsPrograms[0].model, kOpsPrograms[1].model,
                       kOpsSteps - 2)
             .str();
  return ops;
}

/// Sizes the collectives are timed at.
const int64_t kCollectiveBytes[] = {4 << 10, 64 << 10, 1 << 20, 16 << 20,
                                    64 << 20};

/// A rank of the timing: runs calibrate's programs on every rank at once,
/// then times all-reduces and sends at each size (the fastest of 5 after a
/// warm-up) and, on rank 0, writes {"programs": {name: seconds, ...},
/// "all_reduce": [[bytes, seconds], ...], "send": [...]} to `file`.
llvm::LogicalResult timeCollectives(const std::string &file) {
  int rank = 0, size = 0;
  pccrt::initMpi(&rank, &size);
  std::unique_ptr<pccrt::RankMonitor> monitor =
      pccrt::RankMonitor::forRank(rank);
  std::unique_ptr<pccrt::Communicator> comm =
      pccrt::createMpiCommunicator({size});
  comm->setMonitor(monitor.get());
  monitor->setPhase(pccrt::RankMonitor::Phase::Running);
  llvm::json::Object results;
  uint32_t axes = comm->allAxes();
  // The programs, on every rank at once: the ranks share the host's
  // memory bandwidth as a multi-rank program's do.
  llvm::SmallString<128> dir(file);
  llvm::sys::path::remove_filename(dir);
  llvm::json::Object programs;
  for (auto [name, steps] : kPrograms) {
    (void)comm->agree("");
    llvm::Expected<double> seconds = runTimedProgram(dir, name, steps);
    std::string error;
    if (!seconds)
      error = llvm::toString(seconds.takeError());
    std::vector<std::string> errors = comm->agree(error);
    for (const std::string &e : errors)
      if (!e.empty()) {
        if (rank == 0)
          llvm::errs() << "pcc: error: " << e << "\n";
        pccrt::finalizeMpi(monitor.get());
        return llvm::failure();
      }
    programs[name] = *seconds;
  }
  {
    (void)comm->agree("");
    std::string error;
    if (llvm::Error e = runOpsPrograms(dir, rank))
      error = llvm::toString(std::move(e));
    for (const std::string &e : comm->agree(error))
      if (!e.empty()) {
        if (rank == 0)
          llvm::errs() << "pcc: error: " << e << "\n";
        pccrt::finalizeMpi(monitor.get());
        return llvm::failure();
      }
  }
  results["programs"] = std::move(programs);
  for (llvm::StringRef kind : {"all_reduce", "send"}) {
    llvm::json::Array points;
    for (int64_t bytes : kCollectiveBytes) {
      int64_t count = bytes / 4;
      std::vector<float> in(size_t(count), 1.0f), out(size_t(count), 0.0f);
      double best = 1e30;
      for (int rep = 0; rep < 6; ++rep) {
        (void)comm->agree("");
        auto start = std::chrono::steady_clock::now();
        if (kind == "all_reduce") {
          comm->allReduce(axes, in.data(), count, PCCRT_F32, PCCRT_REDUCE_SUM);
        } else if (rank == 0) {
          comm->send(axes, 1, 7, in.data(), count, PCCRT_F32);
        } else if (rank == 1) {
          comm->recv(axes, 0, 7, out.data(), count, PCCRT_F32);
        }
        // The send's time is the receiver's: rank 0 waits for it.
        if (kind == "send") {
          int64_t done = 0;
          if (rank == 1)
            comm->send(axes, 0, 8, &done, 1, PCCRT_I64);
          else if (rank == 0)
            comm->recv(axes, 1, 8, &done, 1, PCCRT_I64);
        }
        double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
        if (rep > 0)
          best = std::min(best, seconds);
      }
      points.push_back(llvm::json::Array{bytes, best});
    }
    results[kind] = std::move(points);
  }
  llvm::LogicalResult result = llvm::success();
  if (rank == 0) {
    std::error_code ec;
    llvm::raw_fd_ostream os(file, ec);
    if (ec) {
      llvm::errs() << "pcc: error: cannot write " << file << ": "
                   << ec.message() << "\n";
      result = llvm::failure();
    } else {
      os << llvm::json::Value(std::move(results)) << "\n";
    }
  }
  pccrt::finalizeMpi(monitor.get());
  if (succeeded(result))
    monitor->setPhase(pccrt::RankMonitor::Phase::Done);
  return result;
}

/// Bandwidth and latency of a link from (bytes, seconds) points, where a
/// transfer of b bytes takes hops x latency + traffic(b) / bandwidth: the
/// least-squares line through the points.
std::pair<double, double> fitLink(const llvm::json::Array &points,
                                  double trafficPerByte, double hops) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const llvm::json::Value &p : points) {
    const llvm::json::Array *pair = p.getAsArray();
    double x = *(*pair)[0].getAsNumber() * trafficPerByte,
           y = *(*pair)[1].getAsNumber();
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  double intercept = (sy - slope * sx) / n;
  double bandwidth = slope > 0 ? 1 / slope : 1e9;
  double latency = std::max(1e-7, intercept / std::max(1.0, hops));
  return {bandwidth, latency};
}

} // namespace

llvm::LogicalResult pcc::calibrate(const CalibrateOptions &options,
                                   llvm::raw_ostream &summary) {
  if (!options.collectivesFile.empty())
    return timeCollectives(options.collectivesFile);
  if (options.outFile.empty())
    return printError("calibrate needs -o FILE");
  if (options.ranks < 1)
    return printError("--ranks must be at least 1");
  // Measurements go into a fresh folder, removed at the end.
  llvm::SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("pcc-calibrate", dir))
    return printError("cannot create a temporary folder: " + ec.message());
  llvm::scope_exit cleanup(
      [&] { (void)llvm::sys::fs::remove_directories(dir); });
  int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  int64_t threads = std::max<int64_t>(1, cores / options.ranks);
  summary << llvm::formatv("pcc: calibrating this machine ({0} core(s), {1} "
                           "per rank of {2})\n",
                           cores, threads, options.ranks);
  summary.flush();

  // The programs: 4 products of [768, 768] (3.6 GFLOP), in f32 and with
  // bf16 products; 4 adds over 8M floats (the cost model counts 3 x 32 MB
  // each); 200 adds over 16 floats (their fixed cost).
  const int64_t n = 768, products = 4, elements = 8 << 20, adds = 4, tiny = 200;
  // 100 element-wise ops of one kind over 64K floats (256 KB, in cache),
  // fused into one loop nest.
  const int64_t vectorElements = 64 << 10, vectorOps = 100;
  struct Build {
    const char *name;
    std::string source;
    llvm::SmallVector<int64_t> shape;
    const char *dtype;
  } builds[] = {
      {"products-f32",
       chainSource("graph.matmul", {n, n}, products),
       {n, n},
       "f32"},
      {"products-bf16",
       chainSource("graph.matmul", {n, n}, products),
       {n, n},
       "bf16"},
      {"bandwidth",
       chainSource("graph.add", {elements}, adds),
       {elements},
       "f32"},
      {"overhead", chainSource("graph.add", {16}, tiny), {16}, "f32"}};
  for (const Build &b : builds)
    if (llvm::Error e =
            buildTimedProgram(dir, b.name, b.source, b.shape, b.dtype, threads))
      return printError(llvm::toString(std::move(e)));
  for (auto [name, op] : kVectorPrograms)
    if (llvm::Error e = buildTimedProgram(
            dir, name, chainSource(op, {vectorElements}, vectorOps),
            {vectorElements}, "f32", threads, /*fuse=*/true))
      return printError(llvm::toString(std::move(e)));
  for (const OpsProgram &program : kOpsPrograms)
    if (llvm::Error e = buildOpsProgram(dir, program, threads))
      return printError(llvm::toString(std::move(e)));
  llvm::StringMap<double> seconds;

  // With several ranks, the programs run on all of them at once, and the
  // collectives between them, under mpirun.
  double linkBandwidth = 4e9, linkLatency = 2e-6;
  llvm::json::Array linkTimes;
  std::string collectivesNote = "one rank: no collective measured";
  if (options.ranks == 1) {
    for (auto [name, steps] : kPrograms) {
      llvm::Expected<double> time = runTimedProgram(dir, name, steps);
      if (!time)
        return printError(llvm::toString(time.takeError()));
      seconds[name] = *time;
    }
    if (llvm::Error e = runOpsPrograms(dir, 0))
      return printError(llvm::toString(std::move(e)));
  } else {
    if (!pccrt::haveMpi())
      return printError("calibrating " + std::to_string(options.ranks) +
                        " ranks needs MPI, and this pcc was built without "
                        "it (install libopenmpi-dev and rebuild), or give "
                        "--ranks 1");
    char self[4096];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0)
      return printError("cannot find the pcc executable");
    std::string file = (dir + "/collectives.json").str();
    pccrt::LaunchOptions launch;
    launch.ranks = options.ranks;
    launch.command = {std::string(self, size_t(length)), "calibrate",
                      "--collectives-rank", file};
    launch.timeoutSeconds = 120;
    std::vector<std::string> errors;
    int status = 1;
    try {
      status = pccrt::launchRanks(launch, errors);
    } catch (const std::exception &e) {
      return printError(std::string("cannot start the ranks: ") + e.what());
    }
    for (const std::string &line : errors)
      llvm::errs() << "pcc: error: " << line << "\n";
    if (status != 0)
      return printError("timing the collectives failed");
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
        llvm::MemoryBuffer::getFile(file);
    llvm::Expected<llvm::json::Value> json =
        text ? llvm::json::parse((*text)->getBuffer())
             : llvm::Expected<llvm::json::Value>(
                   llvm::errorCodeToError(text.getError()));
    if (!json || !json->getAsObject())
      return printError("the collectives' times could not be read");
    double r = double(options.ranks), steps = r - 1;
    const llvm::json::Object &times = *json->getAsObject();
    if (const llvm::json::Object *programs = times.getObject("programs"))
      for (auto [name, steps] : kPrograms)
        seconds[name] = programs->getNumber(name).value_or(0);
    // The all-reduce decides the bus bandwidth the cost model charges every
    // collective with; the sends give a transfer's latency.
    auto [busBandwidth, busLatency] =
        fitLink(*times.getArray("all_reduce"), 2 * steps / r,
                2 * std::ceil(std::log2(r)));
    auto [sendBandwidth, sendLatency] = fitLink(*times.getArray("send"), 1, 1);
    linkBandwidth = busBandwidth;
    linkLatency = busLatency;
    // And the all-reduces' times themselves, at what each rank sent: the
    // bandwidth of a buffer in the cache is not that of one in memory.
    for (const llvm::json::Value &p : *times.getArray("all_reduce")) {
      const llvm::json::Array *pair = p.getAsArray();
      linkTimes.push_back(llvm::json::Array{
          *(*pair)[0].getAsNumber() * 2 * steps / r, *(*pair)[1].getAsNumber()});
    }
    collectivesNote =
        llvm::formatv("all-reduce over {0} MPI ranks fitted to ring traffic "
                      "({1:F2} GB/s bus bandwidth, {2:F1} us per step); "
                      "sends {3:F2} GB/s, {4:F1} us",
                      options.ranks, busBandwidth / 1e9, busLatency * 1e6,
                      sendBandwidth / 1e9, sendLatency * 1e6)
            .str();
  }
  for (auto [name, steps] : kPrograms)
    if (!(seconds.lookup(name) > 0))
      return printError(std::string("the program '") + name +
                        "' was not timed");
  double productFlops = 2.0 * n * n * n * products;
  double f32Rate = productFlops / seconds["products-f32"],
         bf16Rate = productFlops / seconds["products-bf16"];
  double bandwidth = 3.0 * 4.0 * double(elements) * adds / seconds["bandwidth"];
  double opOverhead = seconds["overhead"] / tiny;
  double vectorFlops = double(vectorElements * vectorOps);
  double vectorRate = vectorFlops / seconds["vector"];
  summary << llvm::formatv(
      "  products: {0:F1} GFLOP/s f32, {1:F1} GFLOP/s "
      "bf16; element-wise {5:F1} GFLOP/s; memory {2:F1} GB/s; {3:F2} us "
      "per op{4}\n",
      f32Rate / 1e9, bf16Rate / 1e9, bandwidth / 1e9, opOverhead * 1e6,
      options.ranks > 1 ? " (each rank, all at once)" : "", vectorRate / 1e9);
  if (options.ranks > 1)
    summary << "  " << collectivesNote << "\n";
  std::string opsNote;
  llvm::json::Object opRates =
      fitOpCosts(dir, f32Rate, vectorRate, bandwidth, opsNote);
  // The slower element-wise kinds' arithmetic, where the training steps
  // did not give their kind a rate of flops.
  for (auto [name, op] : kVectorPrograms) {
    if (llvm::StringRef(op) == "graph.add")
      continue;
    llvm::json::Object *costs = opRates.getObject(op);
    if (!costs) {
      opRates[op] = llvm::json::Object{};
      costs = opRates.getObject(op);
    }
    if (!costs->get("flops_per_second"))
      (*costs)["flops_per_second"] = vectorFlops / seconds[name];
  }
  summary << "  " << opsNote << "\n";

  // The description.
  double memory = double(sysconf(_SC_PHYS_PAGES)) *
                  double(sysconf(_SC_PAGESIZE)) / double(options.ranks);
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  auto rates = [](double rate) {
    return llvm::json::Object{{"peak", rate}, {"achievable", rate}};
  };
  auto linkDescription = [&] {
    llvm::json::Object link{{"bytes_per_second", linkBandwidth},
                            {"latency_seconds", linkLatency}};
    if (!linkTimes.empty())
      link["measured"] = llvm::json::Array(linkTimes);
    return link;
  };
  llvm::json::Object description{
      {"name", options.name},
      {"description",
       llvm::formatv("This machine as pcc calibrate measured it on {0}: {1} "
                     "rank(s) of {2} thread(s) on one host",
                     date, options.ranks, threads)
           .str()},
      {"sources",
       llvm::json::Array{
           llvm::formatv("products: {0} [{1}, {1}] x [{1}, {1}] products "
                         "compiled by pcc, f32 and bf16 (--dtype), the "
                         "fastest of 4 steps, on every rank at once",
                         products, n)
               .str(),
           llvm::formatv("memory: {0} element-wise adds over {1} floats; op "
                         "overhead: {2} adds over 16 floats (unfused)",
                         adds, elements, tiny)
               .str(),
           llvm::formatv("element-wise: {0} additions over {1} floats, "
                         "fused; divisions and square roots the same, each "
                         "its kind's rate",
                         vectorOps, vectorElements)
               .str(),
           collectivesNote, opsNote,
           "between nodes: not measured (one host); taken as inside it"}},
      {"devices_per_node", options.ranks},
      {"memory_bytes", memory},
      {"memory_bytes_per_second", bandwidth},
      {"matrix_flops_per_second", llvm::json::Object{{"f32", rates(f32Rate)},
                                                     {"bf16", rates(bf16Rate)},
                                                     {"f16", rates(bf16Rate)}}},
      {"op_overhead_seconds", opOverhead},
      {"vector_flops_per_second", vectorRate},
      {"ops", std::move(opRates)},
      {"intra_node", linkDescription()},
      {"inter_node", linkDescription()}};
  std::string out =
      llvm::formatv("{0:2}", llvm::json::Value(std::move(description))).str() +
      "\n";
  llvm::SmallString<128> parent(options.outFile);
  llvm::sys::path::remove_filename(parent);
  if (failed(writePlanFile(parent.empty() ? "." : parent.str(),
                           llvm::sys::path::filename(options.outFile), out)))
    return llvm::failure();
  // The description must load as one.
  if (llvm::Expected<CostModel> check =
          CostModel::forMachine(options.outFile, "f32");
      !check)
    return printError("the description written does not load: " +
                      llvm::toString(check.takeError()));
  summary << "pcc: wrote " << options.outFile << " (use --machine "
          << options.outFile << ")\n";
  return llvm::success();
}
