//===- Run.cpp - The `pcc run` command ------------------------------------===//
//
// A single-rank build runs in this process. A build whose mesh has several
// ranks runs one process per rank: started by an MPI launcher (mpirun,
// srun), this process is one rank; started by a torchrun-style launcher
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment), it is one
// rank over TCP sockets, without MPI; otherwise it starts its ranks itself
// under mpirun and reports how they ended (pccrt/Launch.h).
//
//===----------------------------------------------------------------------===//

#include "pcc/Driver/Driver.h"

#include "pccrt/Comm.h"
#include "pccrt/Launch.h"
#include "pccrt/Runtime.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <optional>
#include <unistd.h>

using namespace pcc;

/// Set by SIGINT or SIGTERM while a run that saves its checkpoint goes on:
/// the run stops after the step that is running, and saves.
static volatile sig_atomic_t stopRequested = 0;
static void requestStop(int) { stopRequested = 1; }

/// The value of the scalar float32 output `name` ("loss", or the scheduled
/// "learning_rate"), if the model has one.
static std::optional<float> scalarOf(const std::vector<pccrt::Tensor> &outputs,
                                     llvm::StringRef name) {
  for (const pccrt::Tensor &t : outputs)
    if (t.name == name && t.kind == PCCRT_KIND_OUTPUT && t.dtype == PCCRT_F32 &&
        t.data.size() == sizeof(float)) {
      float value;
      std::memcpy(&value, t.data.data(), sizeof value);
      return value;
    }
  return std::nullopt;
}

/// Whether output `i` is the scalar named `name` that the log prints.
static bool isLogged(const pccrt_model_info &info, int32_t i) {
  llvm::StringRef name = info.outputs[i].name;
  return (name == "loss" || name == "learning_rate") &&
         info.outputs[i].kind == PCCRT_KIND_OUTPUT;
}

/// Which outputs a step's line reads: the scalars it prints.
static std::vector<bool> loggedOutputs(const pccrt_model_info &info) {
  std::vector<bool> read;
  for (int32_t i = 0; i < info.num_outputs; ++i)
    read.push_back(isLogged(info, i));
  return read;
}

static std::vector<pccrt::Tensor> ofKind(const std::vector<pccrt::Tensor> &all,
                                         int32_t kind) {
  std::vector<pccrt::Tensor> selected;
  for (const pccrt::Tensor &t : all)
    if (t.kind == kind)
      selected.push_back(t);
  return selected;
}

/// Every rank's recorded actions as one Chrome trace (a process per rank,
/// times in microseconds), written by rank 0: the others send theirs to it.
/// Steps are numbered as the run prints them: after `firstStep`, the step
/// a loaded checkpoint had reached.
static void writeTrace(const std::string &path, const pccrt::Model &model,
                       pccrt::Communicator *comm, uint64_t firstStep) {
  std::string mine;
  for (const auto &e : model.traceEvents())
    mine += llvm::formatv("{0}\t{1:F3}\t{2:F3}\t{3}\n", e.name, e.begin, e.end,
                          e.step + firstStep)
                .str();
  int rank = comm ? comm->rank() : 0, size = comm ? comm->numRanks() : 1;
  uint32_t all = comm ? uint32_t((uint64_t(1) << comm->meshShape().size()) - 1)
                      : 0;
  if (rank != 0) {
    int64_t n = int64_t(mine.size());
    comm->send(all, 0, 91, &n, 1, PCCRT_I64);
    if (n)
      comm->send(all, 0, 92, mine.data(), n, PCCRT_U8);
    return;
  }
  llvm::json::Array events;
  for (int r = 0; r < size; ++r) {
    std::string text = mine;
    if (r != 0) {
      int64_t n = 0;
      comm->recv(all, r, 91, &n, 1, PCCRT_I64);
      text.assign(size_t(n), '\0');
      if (n)
        comm->recv(all, r, 92, text.data(), n, PCCRT_U8);
    }
    llvm::SmallVector<llvm::StringRef> lines;
    llvm::StringRef(text).split(lines, '\n', -1, false);
    for (llvm::StringRef line : lines) {
      llvm::SmallVector<llvm::StringRef, 4> f;
      line.split(f, '\t');
      double begin = 0, end = 0;
      int64_t step = 0;
      if (f.size() != 4 || f[1].getAsDouble(begin) || f[2].getAsDouble(end) ||
          f[3].getAsInteger(10, step))
        continue;
      events.push_back(llvm::json::Object{{"name", f[0].str()},
                                          {"ph", "X"},
                                          {"ts", begin},
                                          {"dur", end - begin},
                                          {"pid", r},
                                          {"tid", 0},
                                          {"args", llvm::json::Object{
                                                       {"step", step}}}});
    }
    events.push_back(llvm::json::Object{
        {"name", "process_name"},
        {"ph", "M"},
        {"pid", r},
        {"args", llvm::json::Object{{"name", "rank " + std::to_string(r)}}}});
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    throw pccrt::Error("cannot write the trace " + path + ": " + ec.message());
  os << llvm::json::Value(llvm::json::Object{
            {"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}})
     << "\n";
}

/// Prints `pcc: error: rank R: message` in one write, so that the lines of
/// ranks that share a terminal (with no launcher to collect them) do not
/// mix.
static void printRankError(int rank, const std::string &message) {
  llvm::errs() << ("pcc: error: rank " + std::to_string(rank) + ": " + message +
                   "\n");
  llvm::errs().flush();
}

namespace {
/// Where this process stands among the ranks: alone (no communicator), or
/// one rank that reports its failures so that every rank stops.
struct RankContext {
  pccrt::Communicator *comm = nullptr;
  pccrt::RankMonitor *monitor = nullptr;
  /// What the generated code communicates through, if not `comm`: the NCCL
  /// communicator of a CUDA build on GPUs.
  pccrt::Communicator *runComm = nullptr;

  bool alone() const { return !comm; }
  int rank() const { return comm ? comm->rank() : 0; }

  /// An error that may leave other ranks waiting for this one: reported,
  /// then every rank is ended. The launcher, when there is one, prints it
  /// (once for all ranks that have it); otherwise this rank does.
  [[noreturn]] void fatal(const std::string &message) const {
    llvm::outs().flush();
    if (monitor && monitor->sharedWithLauncher()) {
      monitor->setError(pccrt::RankMonitor::Phase::Error, message, false);
    } else {
      printRankError(rank(), message);
      if (monitor)
        monitor->setError(pccrt::RankMonitor::Phase::Error, message, true);
    }
    comm->abort(1);
    // Backends never return from abort; the compiler cannot see that
    // through a virtual call.
    _exit(1);
  }

  /// Every rank says whether its setup succeeded (\p error empty). If one
  /// did not, rank 0 prints each distinct error once (naming the ranks that
  /// had it unless all did, or rank 0 alone) and all return false.
  bool agree(const std::string &error) const {
    std::vector<std::string> errors = comm->agree(error);
    std::map<std::string, std::vector<int>> byMessage;
    for (size_t r = 0; r < errors.size(); ++r)
      if (!errors[r].empty())
        byMessage[errors[r]].push_back(int(r));
    if (byMessage.empty())
      return true;
    if (rank() == 0) {
      for (const auto &[message, ranks] : byMessage) {
        llvm::errs() << "pcc: error: ";
        if (ranks.size() != errors.size() && ranks != std::vector<int>{0}) {
          llvm::errs() << (ranks.size() == 1 ? "rank " : "ranks ");
          for (size_t i = 0; i < ranks.size(); ++i)
            llvm::errs() << (i == 0                  ? ""
                             : i + 1 == ranks.size() ? " and "
                                                     : ", ")
                         << ranks[i];
          llvm::errs() << ": ";
        }
        llvm::errs() << message << "\n";
      }
      llvm::errs().flush();
    }
    if (!error.empty() && monitor)
      monitor->setError(pccrt::RankMonitor::Phase::Error, error, true);
    return false;
  }
};
} // namespace

/// The token file `path` (given as `flag`: --data, --eval-data) that feeds
/// the first input of `info`'s model: `input` becomes that input as a whole
/// [B,T] tensor (its shape in `shape`), and every token of the file is
/// checked against the positions the input indexes (its index_bound: the
/// embedding's rows, the loss's vocabulary), before any step runs.
static std::unique_ptr<pccrt::TokenData>
openTokens(llvm::StringRef flag, const std::string &path,
           const RunOptions &options, const pccrt_model_info &info,
           pccrt_tensor_info &input, std::vector<int64_t> &shape) {
  int32_t dtype = pccrt::TokenData::dtypeFromName(options.dataDtype);
  if (!dtype)
    throw pccrt::Error("--data-dtype must be uint16 or int32, got '" +
                       options.dataDtype + "'");
  if (info.num_inputs < 1)
    throw pccrt::Error(flag.str() + ": " + options.dir + " takes no inputs");
  // Batches are whole inputs, like those read from files.
  input = info.inputs[0];
  shape = pccrt::wholeShape(info, info.inputs[0]);
  input.shape = shape.empty() ? nullptr : shape.data();
  input.shard_axes = 0;
  pccrt::TokenData::checkInput(input);
  auto tokens = std::make_unique<pccrt::TokenData>(path, dtype, options.seed);
  tokens->check(input);
  tokens->checkIndices(input);
  return tokens;
}

/// Applies `pcc run`'s learning-rate options (--lr, --min-lr,
/// --warmup-steps, --decay-steps) to the f32 scalar state the optimizer
/// keeps each in, and checks the schedule they make with the values the
/// others keep. Reads and writes this rank's copies alone: no collective.
static void applyRateOptions(const RunOptions &options, pccrt::Model &model,
                             bool training, llvm::raw_ostream &summary) {
  if (options.rateOptions.empty())
    return;
  static const std::pair<const char *, const char *> kStates[] = {
      {"--lr", "pcc.lr"},
      {"--min-lr", "pcc.min_lr"},
      {"--warmup-steps", "pcc.warmup_steps"},
      {"--decay-steps", "pcc.decay_steps"}};
  auto indexOf = [&](const std::string &flag) {
    for (auto [name, state] : kStates)
      if (flag == name)
        return model.findWeight(state);
    return int32_t(-1);
  };
  auto valueOf = [&](const char *flag) -> std::optional<double> {
    int32_t index = indexOf(flag);
    if (index < 0)
      return std::nullopt;
    const pccrt::Tensor &held = model.localWeights()[size_t(index)];
    if (held.data.size() != sizeof(float))
      return std::nullopt;
    float v;
    std::memcpy(&v, held.data.data(), sizeof v);
    return double(v);
  };
  for (const auto &[flag, value] : options.rateOptions) {
    int32_t index = indexOf(flag);
    if (index < 0 && !training)
      throw pccrt::Error(flag + " sets a training build's learning rate: " +
                         options.dir + " has no training step");
    if (index < 0 && (flag == "--min-lr" || flag == "--decay-steps"))
      throw pccrt::Error(flag + ": the learning rate of " + options.dir +
                         " does not decay (it was compiled with "
                         "--lr-schedule constant); compile it with "
                         "--lr-schedule linear or cosine");
    if (index < 0)
      throw pccrt::Error(flag + ": the learning rate of " + options.dir +
                         " has no warmup (it was compiled with neither "
                         "--warmup-steps nor --lr-schedule); compile it "
                         "with --warmup-steps N");
    if (flag != "--lr" && flag != "--min-lr" && value != std::floor(value))
      throw pccrt::Error(flag + " expects a whole number of steps, got " +
                         llvm::formatv("{0}", llvm::format("%g", value))
                             .str());
    if (flag == "--lr" && value <= 0)
      throw pccrt::Error("--lr must be positive");
    pccrt::Tensor t;
    t.name = model.info().weights[index].name;
    t.dtype = PCCRT_F32;
    float v = float(value);
    t.data.resize(sizeof v);
    std::memcpy(t.data.data(), &v, sizeof v);
    model.setWeight(index, t);
  }
  std::optional<double> lr = valueOf("--lr"), minLr = valueOf("--min-lr"),
                        warmup = valueOf("--warmup-steps"),
                        decay = valueOf("--decay-steps");
  auto g = [](double v) { return llvm::format("%g", v); };
  if (lr && minLr && *minLr > *lr)
    throw pccrt::Error(llvm::formatv("--min-lr ({0}) must not exceed the "
                                     "learning rate ({1})",
                                     g(*minLr), g(*lr))
                           .str());
  if (warmup && decay && *decay <= *warmup)
    throw pccrt::Error(llvm::formatv("--decay-steps ({0}) must be above "
                                     "--warmup-steps ({1})",
                                     g(*decay), g(*warmup))
                           .str());
  if (lr) {
    summary << "pcc: learning rate " << g(*lr);
    if (warmup)
      summary << ", warmup " << g(*warmup) << " steps";
    if (decay && minLr)
      summary << ", decaying to " << g(*minLr) << " at step " << g(*decay);
    summary << "\n";
  }
}

namespace {
/// What the phases of one run share: the options and ranks, the model
/// with the inputs and token data that feed it, the evaluation step, and
/// what the steps left.
struct StepRun {
  StepRun(const RunOptions &options, const RankContext &ranks,
          llvm::raw_ostream &summary)
      : options(options), ranks(ranks), summary(summary) {}

  const RunOptions &options;
  const RankContext &ranks;
  llvm::raw_ostream &summary;
  std::unique_ptr<pccrt::Model> model;
  std::unique_ptr<pccrt::TokenData> data;
  /// --eval-data: the build's evaluation step (its entry, and the model's
  /// info with that entry's inputs: the vocabulary is still checked against
  /// the training step's logits), the training step's input
  /// that feeds each of its inputs, its held-out tokens and the token input
  /// they feed.
  int32_t evalEntry = -1;
  /// A build whose pipeline runs without a flush (--schedule 2bw): the
  /// entries that start a step, end one while starting the next, and end
  /// the last; whether a step is started and not ended, and the batch of
  /// the step the next call starts.
  int32_t startEntry = -1, overlapEntry = -1, finishEntry = -1;
  bool inFlight = false;
  std::vector<pccrt::Tensor> nextInputs;
  pccrt_model_info evalInfo{};
  std::vector<int32_t> evalInputOf;
  std::unique_ptr<pccrt::TokenData> evalData;
  pccrt_tensor_info evalTokenInput{};
  std::vector<int64_t> evalTokenShape;
  /// The held-out batches evaluated so far.
  uint64_t evaluations = 0;
  /// The step's inputs, and the token input that --data feeds (the first)
  /// as a whole tensor.
  std::vector<pccrt::Tensor> inputs;
  pccrt_tensor_info tokenInput{};
  std::vector<int64_t> tokenShape;
  bool training = false;
  /// Whether the build has state to checkpoint (a training build).
  bool hasState = false;
  /// Steps count on from the checkpoint, so that a resumed run samples
  /// and reports what an uninterrupted one would.
  uint64_t firstStep = 0;
  /// The last step's outputs and, for --dump, the first's; the steps'
  /// milliseconds and how many completed.
  std::vector<pccrt::Tensor> outputs, first;
  double total = 0;
  int64_t completed = 0;
};

/// What the step lines report: --log-every's window of steps, the tokens
/// of one step, and the communicator whose collectives they time.
struct StepLog {
  /// The tokens of one step (the first input's whole extent), for
  /// --log-every.
  int64_t tokens = 1;
  double windowLoss = 0, windowMs = 0;
  /// What the generated code communicates through, and the time this rank
  /// had spent in its collectives when the window began.
  pccrt::Communicator *stepComm = nullptr;
  int64_t windowCommStart = 0;
  int64_t windowSteps = 0;
};
} // namespace

/// Loads the model of `lib` with `weights`, and checks, before the first
/// step, that the run can write what it was asked for.
static void loadModel(StepRun &run, const std::string &lib,
                      const std::string &weights) {
  const RunOptions &options = run.options;
  run.model = pccrt::Model::load(lib, weights, "pcc", run.ranks.comm);
  pccrt::Model &model = *run.model;
  if (run.ranks.runComm)
    model.setRunCommunicator(run.ranks.runComm);
  const pccrt_model_info &info = model.info();
  // A run without --dump reads only the loss it prints: no step writes
  // out its gradients, and on a device nothing else comes back either.
  // With --dump, the first step's outputs are read whole (runStepLoop).
  if (options.dumpDir.empty())
    model.setOutputsRead(loggedOutputs(info));
  run.training = model.isTraining();
  // The calls of a pipeline without a flush, named after the step's entry.
  if (model.numEntries() > 1) {
    std::string step = model.entry(0).name ? model.entry(0).name : "";
    run.startEntry = model.findEntry(step + "_start");
    run.overlapEntry = model.findEntry(step + "_overlap");
    run.finishEntry = model.findEntry(step + "_finish");
    if ((run.startEntry < 0) != (run.overlapEntry < 0) ||
        (run.startEntry < 0) != (run.finishEntry < 0))
      throw pccrt::Error(options.dir + ": the build has some of the entries '" +
                         step + "_start', '" + step + "_overlap' and '" + step +
                         "_finish' of a pipeline without a flush, not "
                         "all three");
    // The calls that end a step return what the step does.
    for (int32_t e : {run.overlapEntry, run.finishEntry}) {
      if (e < 0)
        continue;
      const pccrt_entry_info &ends = model.entry(e);
      bool same = ends.num_outputs == info.num_outputs;
      for (int32_t i = 0; same && i < info.num_outputs; ++i)
        same = llvm::StringRef(ends.outputs[i].name) == info.outputs[i].name;
      if (!same)
        throw pccrt::Error(options.dir + ": entry '" + ends.name +
                           "' returns other outputs than the step's");
    }
  }
  for (int32_t i = 0; i < info.num_weights; ++i)
    run.hasState |= pccrt::isModelState(info.weights[i]);
  if (!options.saveCheckpoint.empty() && !run.hasState)
    throw pccrt::Error("--save needs a training build (pcc compile "
                       "--train): " +
                       options.dir + " has no state to checkpoint");
  // Where results go is checked before the first step, so that a long
  // run never ends in a path it cannot write. Rank 0 writes them.
  if (run.ranks.rank() == 0) {
    if (!options.saveCheckpoint.empty())
      pccrt::checkWritableFile(options.saveCheckpoint);
    if (!options.dumpDir.empty())
      pccrt::checkWritableDirectory(options.dumpDir);
  }
}

/// Inputs: --data feeds the first one a batch per step, --input files
/// bind the others.
static void bindRunInputs(StepRun &run) {
  const RunOptions &options = run.options;
  const pccrt_model_info &info = run.model->info();
  if (!options.dataFile.empty() && !run.training)
    llvm::errs() << "pcc: warning: --data on a forward build: each step "
                    "runs the forward on a new batch and trains nothing "
                    "(pcc compile --train builds a training step)\n";
  if (!options.dataFile.empty()) {
    run.data = openTokens("--data", options.dataFile, options, info,
                          run.tokenInput, run.tokenShape);
    if (info.num_inputs == 1 && !options.inputs.empty())
      throw pccrt::Error("--input " + options.inputs.front() +
                         ": the model's only input is fed by --data");
    pccrt_model_info rest = info;
    rest.num_inputs -= 1;
    rest.inputs += 1;
    run.inputs = pccrt::bindInputs(rest, options.inputs);
    run.inputs.insert(run.inputs.begin(), pccrt::Tensor());
  } else {
    run.inputs = pccrt::bindInputs(info, options.inputs);
  }
}

/// Loads --load's checkpoint: its trained parameters alone into a forward
/// build (or with --weights-only), else the whole state and the step it
/// had reached.
static void loadRunCheckpoint(StepRun &run) {
  const RunOptions &options = run.options;
  if (run.hasState && !options.weightsOnly && !options.stripPrefix.empty())
    throw pccrt::Error("--strip-prefix loads trained parameters by name: "
                       "on a training build, give --weights-only too");
  if (!options.loadCheckpoint.empty() &&
      (!run.hasState || options.weightsOnly)) {
    // A forward build serves the trained parameters; a training build
    // of another optimizer or layout starts from them.
    size_t loaded = pccrt::loadCheckpointParameters(
        options.loadCheckpoint, *run.model, options.stripPrefix);
    run.summary << "pcc: loaded " << loaded << " trained parameter(s) from "
                << options.loadCheckpoint << "\n";
  } else if (!options.loadCheckpoint.empty()) {
    std::map<std::string, std::string> metadata =
        pccrt::loadCheckpoint(options.loadCheckpoint, *run.model);
    auto step = metadata.find("step");
    if (step != metadata.end() &&
        llvm::StringRef(step->second).getAsInteger(10, run.firstStep))
      throw pccrt::Error(options.loadCheckpoint +
                         ": bad \"step\" in checkpoint metadata: '" +
                         step->second + "'");
    run.summary << "pcc: loaded checkpoint " << options.loadCheckpoint
                << " (step " << run.firstStep << ")\n";
  }
}

/// --eval-data: finds the build's evaluation step, the training step's
/// input that feeds each of its inputs, and opens the held-out tokens.
static void openEvalData(StepRun &run) {
  const RunOptions &options = run.options;
  pccrt::Model &model = *run.model;
  const pccrt_model_info &info = model.info();
  if (!run.training || !run.hasState)
    throw pccrt::Error("--eval-data needs a training build: " + options.dir +
                       " has no training step");
  run.evalEntry = model.findEntry("eval");
  if (run.evalEntry < 0)
    throw pccrt::Error("--eval-data: " + options.dir +
                       " has no evaluation step (compile it with "
                       "pcc compile --train --eval)");
  // The evaluation step reads the training step's inputs (those its
  // loss depends on), the tokens first.
  const pccrt_entry_info &e = model.entry(run.evalEntry);
  run.evalInfo = info;
  run.evalInfo.num_inputs = e.num_inputs;
  run.evalInfo.inputs = e.inputs;
  for (int32_t j = 0; j < e.num_inputs; ++j) {
    int32_t i = 0;
    while (i < info.num_inputs &&
           llvm::StringRef(info.inputs[i].name) != e.inputs[j].name)
      ++i;
    if (i == info.num_inputs || (j == 0) != (i == 0))
      throw pccrt::Error("--eval-data: the evaluation step of " + options.dir +
                         " reads '" + e.inputs[j].name +
                         "' where the training step reads its tokens");
    run.evalInputOf.push_back(i);
  }
  run.evalData =
      openTokens("--eval-data", options.evalData, options, run.evalInfo,
                 run.evalTokenInput, run.evalTokenShape);
}

/// Loads the model, binds its inputs, loads the checkpoint, applies the
/// rate options and opens the evaluation data. Alone, a failure throws;
/// among ranks, every rank fails where one's setup did.
static llvm::LogicalResult setUpRun(StepRun &run, const std::string &lib,
                                    const std::string &weights) {
  const RunOptions &options = run.options;
  const RankContext &ranks = run.ranks;
  // Setup involves no collective, so a rank that fails here only has to
  // tell the others at the agreement below.
  std::string setupError;
  try {
    loadModel(run, lib, weights);
    bindRunInputs(run);
    loadRunCheckpoint(run);
    applyRateOptions(options, *run.model, run.training && run.hasState,
                     run.summary);
    if (!options.evalData.empty())
      openEvalData(run);
  } catch (const pccrt::Error &e) {
    if (ranks.alone())
      throw;
    setupError = e.what();
  }
  if (!ranks.alone() && !ranks.agree(setupError))
    return llvm::failure();
  run.summary.flush();
  return llvm::success();
}

/// The loss of one batch of held-out tokens (the n-th), by the evaluation
/// step on the training step's current parameters, reported as after
/// `afterSteps` steps. Collective.
static void evaluateHeldOut(StepRun &run, uint64_t afterSteps) {
  pccrt::Model &model = *run.model;
  try {
    std::vector<pccrt::Tensor> evalInputs;
    for (int32_t i : run.evalInputOf)
      evalInputs.push_back(run.inputs[size_t(i)]);
    auto [first, count] = model.heldRows(run.evalInfo.inputs[0]);
    evalInputs[0] = run.evalData->batch(run.evalTokenInput, run.evaluations++,
                                        first, count);
    std::vector<pccrt::Tensor> outputs;
    model.run(run.evalEntry, evalInputs, outputs);
    const pccrt_entry_info &e = model.entry(run.evalEntry);
    for (int32_t i = 0; i < e.num_outputs; ++i)
      if (llvm::StringRef(e.outputs[i].name) == "loss") {
        std::optional<float> loss =
            scalarOf({model.gatherOutput(run.evalEntry, outputs, i)}, "loss");
        if (loss)
          run.summary << llvm::formatv("step {0}: validation loss {1:F6}\n",
                                       afterSteps, *loss);
      }
    run.summary.flush();
  } catch (const pccrt::Error &e) {
    if (!run.ranks.alone())
      run.ranks.fatal(e.what());
    throw;
  }
}

/// Writes the checkpoint of `steps` completed steps (every rank gathers,
/// rank 0 writes).
static void saveCheckpointAt(const StepRun &run, uint64_t steps) {
  try {
    pccrt::saveCheckpoint(run.options.saveCheckpoint, *run.model,
                          {{"step", std::to_string(steps)}});
  } catch (const pccrt::Error &e) {
    if (!run.ranks.alone() && run.ranks.rank() != 0)
      run.ranks.fatal(e.what());
    throw;
  }
}

/// --fault: at step `number`, the rank it names dies or stops without a
/// word, as a crash or a deadlock would: only its status says what
/// happened. Returns on every other rank and step.
static void injectFault(const StepRun &run, uint64_t number) {
  const RunOptions &options = run.options;
  const RankContext &ranks = run.ranks;
  if (!options.fault || options.fault->rank != ranks.rank() ||
      options.fault->step != int64_t(number + 1))
    return;
  using Phase = pccrt::RankMonitor::Phase;
  if (ranks.monitor)
    ranks.monitor->setPhase(options.fault->hang ? Phase::FaultHang
                                                : Phase::FaultExit);
  llvm::outs().flush();
  // Leave the others time to block in this step's first collective, so
  // that the report (where they waited) does not depend on timing.
  if (!options.fault->hang) {
    usleep(300 * 1000);
    _exit(1);
  }
  for (;;)
    pause();
}

/// Runs the step on batch `number` of --data, if it feeds the model, and
/// returns its milliseconds (without reading the batch). Without a flush
/// (`last`: whether the run's steps end with it), a step that is not in
/// flight yet starts, and the call that ends it starts the next one, on
/// batch `number + 1`, unless it is the last: the step's time includes
/// its start when it had to.
static double runStep(StepRun &run, uint64_t number, bool last) {
  pccrt::Model &model = *run.model;
  auto start = std::chrono::steady_clock::now();
  double batchMs = 0;
  auto batchOf = [&](uint64_t n, std::vector<pccrt::Tensor> &inputs) {
    if (!run.data)
      return;
    auto begin = std::chrono::steady_clock::now();
    // This rank's rows only (a data-parallel replica's share).
    auto [first, count] = model.heldRows(model.info().inputs[0]);
    inputs[0] = run.data->batch(run.tokenInput, n, first, count);
    batchMs += std::chrono::duration<double, std::milli>(
                   std::chrono::steady_clock::now() - begin)
                   .count();
  };
  try {
    if (run.overlapEntry < 0) {
      batchOf(number, run.inputs);
      model.run(run.inputs, run.outputs);
    } else {
      std::vector<pccrt::Tensor> none;
      if (!run.inFlight) {
        batchOf(number, run.inputs);
        model.run(run.startEntry, run.inputs, none);
      }
      if (last) {
        model.run(run.finishEntry, {}, run.outputs);
        run.inFlight = false;
      } else {
        if (run.nextInputs.empty())
          run.nextInputs = run.inputs;
        batchOf(number + 1, run.nextInputs);
        model.run(run.overlapEntry, run.nextInputs, run.outputs);
        run.inFlight = true;
      }
    }
  } catch (const pccrt::Error &e) {
    // The others may be waiting in a collective of this step.
    if (!run.ranks.alone())
      run.ranks.fatal(e.what());
    throw;
  }
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
             .count() -
         batchMs;
}

/// Prints the line of step `step` (`number` counted over the checkpoint's
/// steps), which took `ms` and made `loss` and `rate`; with --log-every,
/// one line per window of `log`.
static void logStep(StepRun &run, StepLog &log, int64_t step, uint64_t number,
                    double ms, std::optional<float> loss,
                    std::optional<float> rate) {
  const RunOptions &options = run.options;
  llvm::raw_ostream &summary = run.summary;
  log.windowLoss += loss.value_or(0);
  log.windowMs += ms;
  ++log.windowSteps;
  if (options.logEvery > 0) {
    // One line per window: its mean loss, the last rate, and throughput.
    if (log.windowSteps == options.logEvery || step + 1 == options.steps) {
      summary << llvm::formatv("step {0}:", number + 1);
      if (loss)
        summary << llvm::formatv(" loss {0:F6},",
                                 log.windowLoss / log.windowSteps);
      if (rate)
        summary << llvm::formatv(" lr {0:E3},", *rate);
      summary << llvm::formatv(" {0:F0} tokens/s, {1:F3} ms/step",
                               log.tokens * log.windowSteps /
                                   (log.windowMs / 1000),
                               log.windowMs / log.windowSteps);
      // Rank 0's time in collectives that its work did not hide.
      if (log.stepComm) {
        int64_t now = log.stepComm->collectiveNanoseconds();
        summary << llvm::formatv(", {0:F3} ms/step in collectives",
                                 double(now - log.windowCommStart) * 1e-6 /
                                     log.windowSteps);
        log.windowCommStart = now;
      }
      summary << "\n";
      log.windowLoss = log.windowMs = 0;
      log.windowSteps = 0;
    }
  } else if (loss && rate) {
    summary << llvm::formatv("step {0}: loss {1:F6}, lr {2:E3}, {3:F3} ms\n",
                             number + 1, *loss, *rate, ms);
  } else if (loss) {
    summary << llvm::formatv("step {0}: loss {1:F6}, {2:F3} ms\n", number + 1,
                             *loss, ms);
  } else if (run.training || options.steps > 1) {
    summary << llvm::formatv("step {0}: {1:F3} ms\n", number + 1, ms);
  }
}

/// Whether an interrupt on any rank stops every rank after this step.
static bool stopRequestedOnAnyRank(const StepRun &run) {
  bool stop = stopRequested;
  if (!run.ranks.alone()) {
    std::vector<std::string> votes = run.ranks.comm->agree(stop ? "stop" : "");
    stop = llvm::any_of(votes, [](const std::string &v) { return !v.empty(); });
  }
  return stop;
}

/// Runs --steps steps, each with its line, evaluating and saving the
/// checkpoint between them where asked, until they end or an interrupt
/// stops them.
static void runStepLoop(StepRun &run) {
  const RunOptions &options = run.options;
  const RankContext &ranks = run.ranks;
  pccrt::Model &model = *run.model;
  const pccrt_model_info &info = model.info();
  if (!options.traceFile.empty())
    model.startTrace();
  // A run that saves its checkpoint saves it when interrupted too.
  if (!options.saveCheckpoint.empty()) {
    struct sigaction action {};
    action.sa_handler = requestStop;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
  }
  StepLog log;
  if (info.num_inputs > 0)
    for (int64_t d : pccrt::wholeShape(info, info.inputs[0]))
      log.tokens *= d;
  log.stepComm = ranks.runComm ? ranks.runComm : ranks.comm;
  log.windowCommStart =
      log.stepComm ? log.stepComm->collectiveNanoseconds() : 0;
  for (int64_t step = 0; step < options.steps; ++step) {
    uint64_t number = run.firstStep + uint64_t(step);
    if (ranks.monitor)
      ranks.monitor->setStep(int64_t(number + 1));
    injectFault(run, number);
    double ms = runStep(run, number, step + 1 == options.steps);
    run.total += ms;
    if (options.stepMilliseconds && (ranks.alone() || ranks.rank() == 0))
      options.stepMilliseconds->push_back(ms);
    // What --dump writes: the first step's outputs, copied only when a
    // later step will overwrite them (a training step's gradients are as
    // large as the model).
    if (step == 0 && !options.dumpDir.empty() && options.steps > 1) {
      run.first = run.outputs;
      model.setOutputsRead(loggedOutputs(info));
    }
    // A pipeline's loss is made on its last stage.
    std::optional<float> loss, rate;
    if (run.training)
      for (int32_t i = 0; i < info.num_outputs; ++i)
        if (isLogged(info, i)) {
          llvm::StringRef name = info.outputs[i].name;
          (name == "loss" ? loss : rate) =
              scalarOf({model.gatherOutput(run.outputs, i)}, name);
        }
    run.completed = step + 1;
    logStep(run, log, step, number, ms, loss, rate);
    run.summary.flush();
    if (run.evalEntry >= 0 &&
        ((options.evalEvery > 0 && (step + 1) % options.evalEvery == 0) ||
         (options.evalEvery == 0 && step + 1 == options.steps))) {
      int64_t before = log.stepComm ? log.stepComm->collectiveNanoseconds() : 0;
      evaluateHeldOut(run, number + 1);
      // The window's collectives are the training steps'.
      if (log.stepComm)
        log.windowCommStart += log.stepComm->collectiveNanoseconds() - before;
    }
    if (options.saveCheckpoint.empty() || step + 1 == options.steps)
      continue;
    if (stopRequestedOnAnyRank(run)) {
      run.summary << llvm::formatv("pcc: interrupted after step {0}\n",
                                   number + 1);
      break;
    }
    if (options.saveEvery > 0 && (step + 1) % options.saveEvery == 0) {
      saveCheckpointAt(run, number + 1);
      if (ranks.alone() || ranks.rank() == 0)
        run.summary << "pcc: saved checkpoint " << options.saveCheckpoint
                    << " (step " << number + 1 << ")\n";
    }
  }
}

/// Prints what a forward build's outputs are, and the steps' total time.
static void printRunTotals(const StepRun &run) {
  const pccrt_model_info &info = run.model->info();
  if (!run.training)
    for (int32_t i = 0; i < info.num_outputs; ++i)
      run.summary << "output '" << info.outputs[i].name << "': "
                  << pccrt::describeType(
                         info.outputs[i].dtype,
                         pccrt::wholeShape(info, info.outputs[i]))
                  << "\n";
  run.summary << llvm::formatv("pcc: ran {0} step(s) of {1} in {2:F3} ms\n",
                               run.completed, run.options.dir, run.total);
}

/// --trace: writes every rank's recorded actions (rank 0 writes).
static void writeRunTrace(const StepRun &run) {
  const RunOptions &options = run.options;
  const RankContext &ranks = run.ranks;
  if (options.traceFile.empty())
    return;
  try {
    writeTrace(options.traceFile, *run.model, ranks.comm, run.firstStep);
  } catch (const pccrt::Error &e) {
    if (!ranks.alone() && ranks.rank() != 0)
      ranks.fatal(e.what());
    throw;
  }
  if (ranks.rank() == 0)
    run.summary << "pcc: wrote the trace " << options.traceFile << " ("
                << run.model->traceEvents().size() << " actions on rank 0)\n";
}

/// Writes what the run was asked for after its steps: --dump's first
/// outputs and gradients, and --save's checkpoint.
static llvm::LogicalResult writeResults(StepRun &run) {
  const RunOptions &options = run.options;
  const RankContext &ranks = run.ranks;
  llvm::raw_ostream &summary = run.summary;
  if (run.completed == 1)
    run.first = std::move(run.outputs);
  uint64_t last = run.firstStep + uint64_t(run.completed);
  auto dump = [&](const std::vector<pccrt::Tensor> &whole) {
    pccrt::dumpOutputs(options.dumpDir, ofKind(whole, PCCRT_KIND_OUTPUT));
    summary << "pcc: wrote " << options.dumpDir << "/outputs.safetensors\n";
    if (run.training) {
      pccrt::dumpGrads(options.dumpDir, ofKind(whole, PCCRT_KIND_GRAD));
      summary << "pcc: wrote " << options.dumpDir << "/grads.safetensors\n";
    }
  };
  auto saved = [&] {
    summary << "pcc: saved checkpoint " << options.saveCheckpoint << " (step "
            << last << ")\n";
  };
  if (ranks.alone()) {
    if (!options.dumpDir.empty())
      dump(run.first);
    if (!options.saveCheckpoint.empty()) {
      saveCheckpointAt(run, last);
      saved();
    }
    return llvm::success();
  }
  // Every rank takes part in gathering what is written, then rank 0 writes,
  // so that a failure to write leaves no rank waiting for it.
  std::vector<pccrt::Tensor> whole;
  try {
    if (!options.dumpDir.empty())
      whole = run.model->gather(run.first);
    if (!options.saveCheckpoint.empty())
      pccrt::saveCheckpoint(options.saveCheckpoint, *run.model,
                            {{"step", std::to_string(last)}});
  } catch (const pccrt::Error &e) {
    // Rank 0 also fails here when it cannot write the checkpoint, after
    // every gather: then the others are not waiting for it.
    if (ranks.rank() != 0)
      ranks.fatal(e.what());
    throw;
  }
  if (ranks.rank() != 0)
    return llvm::success();
  if (!options.dumpDir.empty())
    dump(whole);
  if (!options.saveCheckpoint.empty())
    saved();
  return llvm::success();
}

/// Loads OUT, runs the steps and writes what was asked for: the whole of
/// `pcc run` on one rank, and each rank's part of it on several.
static llvm::LogicalResult runSteps(const RunOptions &options,
                                    const std::string &lib,
                                    const std::string &weights,
                                    const RankContext &ranks,
                                    llvm::raw_ostream &summary) {
  StepRun run(options, ranks, summary);
  if (failed(setUpRun(run, lib, weights)))
    return llvm::failure();
  runStepLoop(run);
  printRunTotals(run);
  writeRunTrace(run);
  return writeResults(run);
}

/// Starts the ranks of OUT under mpirun, each running this executable with
/// the same arguments, and reports how they ended.
static llvm::LogicalResult launch(const RunOptions &options, int64_t ranks) {
  if (!pccrt::haveMpi())
    throw pccrt::Error(options.dir + " runs on " + std::to_string(ranks) +
                       " ranks, but this pcc was built without MPI (install "
                       "libopenmpi-dev and rebuild)");
  // The path of this executable, not "/proc/self/exe": mpirun would read
  // that link as its own.
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    throw pccrt::Error(std::string("cannot find the pcc executable: ") +
                       std::strerror(errno));
  pccrt::LaunchOptions launch;
  launch.ranks = ranks;
  launch.command = {std::string(self, size_t(n)),
                    options.generation
                        ? (options.generation->serve ? "serve" : "generate")
                        : "run"};
  launch.command.insert(launch.command.end(), options.arguments.begin(),
                        options.arguments.end());
  launch.timeoutSeconds = options.timeoutSeconds;
  // Ranks that save their checkpoint when interrupted end on their own,
  // after the step that is running and the save.
  if (!options.saveCheckpoint.empty())
    launch.graceSeconds = options.timeoutSeconds;
  // A server finishes or answers its requests, then ends every rank.
  if (options.generation && options.generation->serve)
    launch.graceSeconds = 9;
  llvm::outs().flush();
  std::vector<std::string> errors;
  int status = pccrt::launchRanks(launch, errors);
  for (const std::string &line : errors)
    llvm::errs() << "pcc: error: " << line << "\n";
  return status == 0 ? llvm::success() : llvm::failure();
}

/// This rank's index among the ranks on its host, as the launcher tells it
/// (Open MPI, MPICH's Hydra, Slurm, torchrun); \p rank where none does.
static int localRank(int rank) {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "SLURM_LOCALID", "LOCAL_RANK"}) {
    int local = 0;
    if (std::optional<std::string> value = llvm::sys::Process::GetEnv(name))
      if (!llvm::StringRef(*value).getAsInteger(10, local) && local >= 0)
        return local;
  }
  return rank;
}

/// Runs this process as one rank of OUT's mesh, communicating through
/// \p comm on host memory, however the ranks found one another: recorded in
/// \p monitor and watched for --timeout, through NCCL on device memory on
/// the \p localRank-th GPU when \p onGpus (OUT is a CUDA build running on
/// GPUs), and ended by \p finalize, which waits for every rank (the
/// communicator and the watchdog live until it returns).
static llvm::LogicalResult
runAsRank(const RunOptions &options, const std::string &lib,
          const std::string &weights, bool onGpus, int localRank,
          std::unique_ptr<pccrt::Communicator> comm,
          std::unique_ptr<pccrt::RankMonitor> monitor,
          llvm::function_ref<llvm::LogicalResult(pccrt::Communicator &,
                                                 pccrt::RankMonitor &)>
              finalize,
          llvm::raw_ostream &summary) {
  int rank = comm->rank();
  comm->setMonitor(monitor.get());
  monitor->setPhase(pccrt::RankMonitor::Phase::Running);
  pccrt::Communicator *commPtr = comm.get();
  pccrt::RankMonitor *monitorPtr = monitor.get();
  monitor->startWatchdog(options.timeoutSeconds, [=](pccrt::CommOp op,
                                                     double waited) {
    int64_t step = monitorPtr->step();
    std::string message =
        llvm::formatv("waited {0:F0} s in {1} {2}; another rank failed or hung",
                      waited, pccrt::commOpName(op),
                      step > 0 ? "at step " + std::to_string(step)
                               : std::string("before the first step"))
            .str();
    bool launcher = monitorPtr->sharedWithLauncher();
    if (!launcher)
      printRankError(commPtr->rank(), message);
    monitorPtr->setError(pccrt::RankMonitor::Phase::TimedOut, message,
                         !launcher);
    commPtr->abort(1);
  });

  RankContext context{comm.get(), monitor.get()};
  // Before the model is loaded: the NCCL communicator picks this rank's GPU,
  // where the model's buffers then go. Every rank says whether it has one,
  // so that all stop if one cannot.
  std::unique_ptr<pccrt::Communicator> gpuComm;
  bool ready = true;
  if (onGpus) {
    std::string error;
    try {
      gpuComm =
          pccrt::loadNcclCommunicator(*comm, localRank, options.timeoutSeconds);
    } catch (const pccrt::Error &e) {
      error = e.what();
    }
    ready = context.agree(error);
    context.runComm = gpuComm.get();
  }
  llvm::LogicalResult result = llvm::failure();
  try {
    if (ready && options.follow)
      result = runFollower(options, lib, weights, context.comm,
                           context.runComm, llvm::nulls());
    else if (ready)
      result = options.generation
                   ? (options.generation->serve ? runServer : runGeneration)(
                         options, lib, weights, context.comm,
                                   context.runComm,
                                   rank == 0 ? summary : llvm::nulls())
                   : runSteps(options, lib, weights, context,
                              rank == 0 ? summary : llvm::nulls());
  } catch (const pccrt::Error &e) {
    // After the agreement and outside the steps only rank 0's own writing
    // fails here, and nobody waits for it.
    if (rank != 0)
      printRankError(rank, e.what());
    else
      llvm::errs() << "pcc: error: " << e.what() << "\n";
    monitor->setError(pccrt::RankMonitor::Phase::Error, e.what(), true);
  }
  summary.flush();
  // The model that used it is gone; the NCCL communicator waits for its
  // streams and frees its resources while every rank is still here.
  gpuComm.reset();
  // The watchdog may have to end the job from inside the shutdown, where a
  // rank that hung holds the others.
  if (failed(finalize(*comm, *monitor)))
    result = llvm::failure();
  if (succeeded(result))
    monitor->setPhase(pccrt::RankMonitor::Phase::Done);
  monitor.reset();
  comm.reset();
  return result;
}

/// Runs this process as one rank of OUT's mesh, started by an MPI launcher.
static llvm::LogicalResult
runRank(const RunOptions &options, const std::string &lib,
        const std::string &weights, const std::vector<int64_t> &mesh,
        int64_t ranks, bool onGpus, llvm::raw_ostream &summary) {
  int rank = 0, size = 0;
  pccrt::initMpi(&rank, &size);
  std::unique_ptr<pccrt::RankMonitor> monitor;
  try {
    monitor = pccrt::RankMonitor::forRank(rank);
  } catch (const pccrt::Error &e) {
    llvm::errs() << "pcc: error: rank " << rank << ": " << e.what() << "\n";
    return llvm::failure();
  }
  if (size != ranks) {
    // Every rank sees it; one says it.
    if (rank == 0)
      llvm::errs() << "pcc: error: " << options.dir << " runs on " << ranks
                   << " ranks (mesh " << pccrt::formatShape(mesh)
                   << "), but the launcher started " << size << "\n";
    monitor->setError(pccrt::RankMonitor::Phase::Error, "wrong world size",
                      true);
    pccrt::finalizeMpi(monitor.get());
    return llvm::failure();
  }
  return runAsRank(
      options, lib, weights, onGpus, localRank(rank),
      pccrt::createMpiCommunicator(mesh), std::move(monitor),
      [](pccrt::Communicator &, pccrt::RankMonitor &monitor) {
        pccrt::finalizeMpi(&monitor);
        return llvm::success();
      },
      summary);
}

/// Runs this process as the rank of OUT's mesh that a torchrun-style
/// launcher named in the environment, over TCP sockets (no MPI). No
/// launcher reads a status of it: a rank that fails says so itself.
static llvm::LogicalResult
runSocketRank(const RunOptions &options, const std::string &lib,
              const std::string &weights, const std::vector<int64_t> &mesh,
              int64_t ranks, bool onGpus, llvm::raw_ostream &summary) {
  pccrt::SocketBootstrap bootstrap = pccrt::SocketBootstrap::fromEnvironment();
  if (bootstrap.worldSize != ranks)
    throw pccrt::Error(options.dir + " runs on " + std::to_string(ranks) +
                       " ranks (mesh " + pccrt::formatShape(mesh) +
                       "), but WORLD_SIZE is " +
                       std::to_string(bootstrap.worldSize));
  bootstrap.timeoutSeconds = options.timeoutSeconds;
  std::unique_ptr<pccrt::Communicator> comm;
  try {
    comm = pccrt::createSocketCommunicator(mesh, bootstrap);
  } catch (const pccrt::Error &e) {
    printRankError(bootstrap.rank, e.what());
    return llvm::failure();
  }
  return runAsRank(
      options, lib, weights, onGpus, localRank(bootstrap.rank), std::move(comm),
      std::make_unique<pccrt::RankMonitor>(),
      [](pccrt::Communicator &comm, pccrt::RankMonitor &monitor) {
        // As MPI_Finalize: no rank closes its connections before every
        // rank is done with them.
        pccrt::CommOp previous = monitor.enter(pccrt::CommOp::Finalize);
        try {
          comm.agree("");
        } catch (const pccrt::Error &e) {
          printRankError(comm.rank(), e.what());
          return llvm::failure();
        }
        monitor.leave(previous);
        return llvm::success();
      },
      summary);
}

/// Whether a CUDA driver with at least one device is here (without linking
/// CUDA into pcc: the driver library is opened if present).
static bool hasCudaDevice() {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver)
    return false;
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int *);
  auto init = reinterpret_cast<InitFn>(dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(driver, "cuDeviceGetCount"));
  int devices = 0;
  bool found = init && count && init(0) == 0 && count(&devices) == 0 &&
               devices > 0;
  dlclose(driver);
  return found;
}

/// The library `pcc run` loads from `dir`: `lib`, except for a CUDA build
/// (model.cu) where no GPU is in use (none here, or PCC_CUDA_EMULATE set),
/// which runs its host emulation when it was built (--cuda-emulate), saying
/// so when `announce`. `emulated` tells which it chose.
static std::string selectCudaLibrary(const std::string &dir,
                                     const std::string &lib, bool announce,
                                     bool &emulated) {
  emulated = false;
  if (!llvm::sys::fs::exists(dir + "/model.cu"))
    return lib;
  if (hasCudaDevice() && !llvm::sys::Process::GetEnv("PCC_CUDA_EMULATE"))
    return lib;
  std::string emulation = dir + "/" + kEmulatedLibrary;
  if (!llvm::sys::fs::exists(emulation))
    throw pccrt::Error(dir + ": a CUDA build and no GPU in use here; compile "
                             "with --cuda-emulate to run its host emulation");
  if (announce)
    llvm::errs() << "pcc: no GPU in use: running the host emulation of the "
                    "CUDA build ("
                 << kEmulatedLibrary << ")\n";
  emulated = true;
  return emulation;
}

llvm::LogicalResult pcc::run(const RunOptions &options,
                             llvm::raw_ostream &summary) {
  try {
    if (!llvm::sys::fs::exists(options.dir))
      throw pccrt::Error(options.dir + ": no such folder");
    if (!llvm::sys::fs::is_directory(options.dir))
      throw pccrt::Error(options.dir + ": not a compiled pcc output folder "
                                       "(a file; pcc run takes the folder "
                                       "that pcc compile -o wrote)");
    std::string lib = options.dir + "/libmodel.so";
    std::string weights = options.dir + "/weights.safetensors";
    if (!llvm::sys::fs::exists(lib))
      throw pccrt::Error(options.dir +
                         ": no libmodel.so (not a pcc compile output)");
    // One process tells what it runs: this one, or rank 0 of those a
    // launcher started.
    int64_t launchedRanks = 0;
    bool announce = !pccrt::startedByLauncher(&launchedRanks);
    if (announce && pccrt::SocketBootstrap::inEnvironment()) {
      const char *rank = std::getenv("RANK");
      announce = rank && std::strcmp(rank, "0") == 0;
    }
    bool emulated = false;
    bool cudaBuild = llvm::sys::fs::exists(options.dir + "/model.cu");
    lib = selectCudaLibrary(options.dir, lib, announce, emulated);
    if (!llvm::sys::fs::exists(weights))
      weights.clear();
    if (options.steps < 1)
      throw pccrt::Error("--steps must be at least 1");
    if (options.saveEvery > 0 && options.saveCheckpoint.empty())
      throw pccrt::Error("--save-every needs --save");
    if (options.evalEvery > 0 && options.evalData.empty())
      throw pccrt::Error("--eval-every needs --eval-data (the held-out "
                         "tokens to evaluate on)");
    std::vector<int64_t> mesh = pccrt::Model::meshOf(lib);
    int64_t ranks = 1;
    for (int64_t size : mesh)
      ranks *= size;
    // The emulation communicates on host memory, through MPI or sockets
    // like the CPU target; the GPUs need NCCL.
    bool onGpus = cudaBuild && !emulated;
    if (options.follow &&
        (ranks <= 1 || (!pccrt::startedByLauncher(&launchedRanks) &&
                        !pccrt::SocketBootstrap::inEnvironment())))
      throw pccrt::Error("pcc follow runs a rank of a session of several "
                         "ranks, started by import pcc");
    if (ranks <= 1) {
      if (options.fault)
        throw pccrt::Error("--fault: " + options.dir +
                           " runs on one rank; faults are injected into "
                           "programs of several ranks");
      return options.generation
                 ? (options.generation->serve ? runServer : runGeneration)(
                       options, lib, weights, nullptr, nullptr,
                                 summary)
                 : runSteps(options, lib, weights, RankContext(), summary);
    }
    if (options.fault && options.fault->rank >= ranks)
      throw pccrt::Error("--fault rank=" + std::to_string(options.fault->rank) +
                         ": " + options.dir + " runs on " +
                         std::to_string(ranks) + " ranks");
    int64_t worldSize = 0;
    if (pccrt::startedByLauncher(&worldSize))
      return runRank(options, lib, weights, mesh, ranks, onGpus, summary);
    if (pccrt::SocketBootstrap::inEnvironment())
      return runSocketRank(options, lib, weights, mesh, ranks, onGpus, summary);
    return launch(options, ranks);
  } catch (const pccrt::Error &e) {
    llvm::errs() << "pcc: error: " << e.what() << "\n";
    return llvm::failure();
  }
}
