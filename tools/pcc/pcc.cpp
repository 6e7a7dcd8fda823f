//===- pcc.cpp - The pcc command: compile and run models ------------------===//

#include "pcc/Driver/Driver.h"
#include "pcc/Driver/GenerationRequests.h"
#include "pcc/Planning/Plan.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

using namespace pcc;

#ifndef PCC_VERSION
#define PCC_VERSION "unknown"
#endif

static const char kSynopsis[] =
    R"(usage: pcc compile MODEL.onnx -o OUT [options]
       pcc run OUT [--input FILE ...] [--data FILE] [--steps K] [--dump DIR]
               [--load CKPT] [--save CKPT] [--timeout S]
       pcc generate OUT --prompts FILE.jsonl [-o OUT.jsonl]
                    [--tokenizer tokenizer.json] [--max-new-tokens N]
                    [--temperature T] [--top-k K] [--top-p P] [--seed S]
                    [--repetition-penalty R] [--presence-penalty P]
                    [--frequency-penalty F] [--min-new-tokens N]
                    [--stop ID ...] [--generation-config FILE]
                    [--chat-template FILE]
                             (generates with a build of compile --generate)
       pcc serve OUT [--port P] [--host H] [--tokenizer tokenizer.json]
                 [--api-key KEY] [--max-queue N] [--model-name NAME]
                 [--generation-config FILE] [--chat-template FILE]
                             (the OpenAI completions and chat completions
                              API over a build of compile --generate, at
                              any tp x pp)
       pcc plan (MODEL.onnx | --model gpt:layers=L,hidden=H,heads=N,vocab=V,
                 seq=S,batch=B) -o DIR [compile options]
                             (stages, schedule, bubble and memory per rank,
                              without code: DIR/plan.json, DIR/schedule.svg)
       pcc calibrate -o FILE [--ranks N] [--name NAME]
                             (measures this machine: products, memory,
                              collectives over N MPI ranks (default 2);
                              writes its description for --machine FILE)
       pcc import MODEL.onnx [--bind NAME=FILE.pb] [--dim NAME=N]
                  [--shape INPUT=AxB...] [--no-retie]
                             (prints the imported Graph dialect IR)
       pcc COMMAND --help | pcc --version
)";

/// One command's synopsis, for its --help.
static llvm::StringRef usageOf(llvm::StringRef command) {
  // The synopsis's lines from `pcc COMMAND` to the next command's.
  llvm::StringRef synopsis = kSynopsis;
  size_t at = synopsis.find("pcc " + command.str() + " ");
  size_t end = synopsis.find("\n       pcc ", at);
  return synopsis.slice(at, end == llvm::StringRef::npos ? synopsis.size()
                                                         : end + 1);
}

static const char kPlanNote[] = R"(
plan takes the compile options that decide the layout and the schedule;
those of code generation (--cpu, --threads, --no-fuse, --cuda-arch,
--cuda-emulate, --eval, --profile-ops) do not apply to it.
)";

/// The options that decide a layout, which --devices searches.
static const char *const kLayoutOptions[] = {"--dp",
                                             "--tp",
                                             "--pp",
                                             "--microbatches",
                                             "--schedule",
                                             "--virtual-stages",
                                             "--zero",
                                             "--recompute",
                                             "--memory-budget",
                                             "--pp-split",
                                             "--sequence-parallel"};

/// The compile options that only code generation reads: `pcc plan --help`
/// leaves them out.
static const char *const kCodegenOptions[] = {
    "--cpu",          "--threads", "--no-fuse", "--cuda-arch",
    "--cuda-emulate", "--eval",    "--auto",    "--profile-ops"};

static const char kCompileHelp[] = R"(
compile options:
  -o OUT                 output folder (replaced only by a complete result)
  --target cpu|cuda      code generation target (default cpu); cuda writes
                         model.cu and builds it with nvcc ($PATH, else
                         /usr/local/cuda/bin) against cuBLASLt
  --dtype f32|bf16       element type of the matrix products (default f32);
                         bf16 keeps f32 master weights, optimizer state,
                         norms, softmax and the loss, and accumulates the
                         products in f32
  --cuda-arch ARCH       with --target cuda: the GPU architecture (default
                         sm_90)
  --cuda-emulate         with --target cuda: also build the CUDA code as
                         host C++ under pcc's CUDA emulation
                         (libmodel-emulated.so), which `pcc run` runs on a
                         machine without a GPU: a test of the generated
                         code's numbers, not a fast way to run it
  --tp N, --pp N         tensor / pipeline parallel degree (default 1)
  --dp N                 data parallel degree (default 1): each of N
                         replicas computes its share of the batch, and the
                         gradients are summed over them; the ranks are
                         row-major over dp x pp x tp (tp ranks adjacent)
  --zero 1|2|3           with --dp: the optimizer state (1), the
                         gradients too (2), and the parameters too (3),
                         split over the replicas (ZeRO)
  --bucket-mb M          with --dp: gradients are all-reduced in buckets of
                         at most M MiB (default 25; 0: one per gradient)
  --shard 'REGEX=col|row|rep'
                         with --tp: split the initializers named by REGEX
                         by their output (col) or reduced/looked-up (row)
                         dimension, or keep them whole (rep), whatever the
                         strategy decides; several separated by ';'
  --sequence-parallel    with --tp: split the activations between
                         tensor-parallel regions along the sequence
                         (all-gather + reduce-scatter replace all-reduce)
  --microbatches M       microbatches per step (default pp)
  --schedule S           gpipe|1f1b|interleaved|zb-h1|2bw|chimera (default
                         1f1b); 2bw (PipeDream-2BW, no flush between steps,
                         weights one update old) needs --train, chimera
                         (two pipelines in opposite directions) an even
                         --pp and --microbatches
  --virtual-stages V     chunks per rank for the interleaved schedule
  --pp-split A,B,...     end pipeline stages after these ONNX nodes instead
                         of where the cost model balances them
  --head-pieces N        with --train --pp: compute the LM head and the
                         loss in N parts of the sequence, which the stages
                         share (default: of 1 to 4 pieces, the count whose
                         planned step is the shortest on --machine's cost
                         model; 1: whole, the step returning the logits)
  --cost-table FILE      measured throughputs for the cost model (JSON)
  --auto                 with --devices N: search the layout (dp, tp, pp,
                         microbatches, schedule, sequence parallelism,
                         ZeRO, recomputation) for N devices of --machine M
                         (default cpu) as pcc plan --devices does, and
                         compile the best
  --devices N            search the layout for N devices instead of
                         giving --dp, --tp, --pp and the rest: pcc plan
                         writes the ranked layouts to DIR/search.json and
                         the best one's plan to DIR/plan.json (needs
                         --train and --machine; with --generate, the tp x
                         pp layout that serves best, see --objective)
  --objective O          with pcc plan --generate --devices N: what the
                         serving layout optimizes, throughput (tokens/s,
                         default) or latency (decode time per token)
  --machine M            time the stages on machine M (a100-80gb, h100-80gb,
                         cpu or a JSON description, docs/Machines.md); pcc
                         plan then predicts the step's time, tokens/s, MFU
                         and memory there
  --threads N            threads of each rank's loops and GEMMs (default:
                         the machine's cores shared among its ranks, or
                         OMP_NUM_THREADS at run time)
  --cpu native|generic   build for this machine's processor (default) or
                         for any of its architecture
  --no-fuse              one loop nest per element-wise op (no pcc-fuse)
  --profile-ops          trace every op: pcc run --trace then records each
                         op's time, named by its kind and ONNX node (and,
                         with --machine, the time the cost model predicts);
                         bench/op_profile.py sums a trace by op kind
  --no-fuse-attention    keep exported attention as its ops (the scores and
                         probabilities stored), instead of one fused op
  --bind NAME=FILE.pb    fix graph input NAME to a tensor at compile time
  --dim NAME=N           give every input dimension named NAME (symbolic in
                         the model, e.g. batch_size) the extent N
  --shape INPUT=AxB...   give graph input INPUT this whole shape
  --no-retie             keep transposed duplicate initializers separate
  --train                compile a training step: causal-LM loss, backward
                         and optimizer update
  --eval                 with --train: also build the evaluation step (the
                         forward and its loss, entry 'eval' of the same
                         program, sharing the parameters), for pcc run
                         --eval-data
  --optimizer adamw|sgd  (default adamw) with --lr X (1e-3), --weight-decay X
                         (0.01 for adamw, 0 for sgd), --beta1, --beta2, --eps,
                         --momentum (sgd)
  --clip-grad X          scale the gradients so that their global L2 norm is
                         at most X (PyTorch's clip_grad_norm_)
  --recompute none|selective|full|auto
                         with full, the backward recomputes each block's
                         activations (between the checkpoints the forward
                         keeps, a transformer's layer inputs) instead of
                         keeping them from the forward; with selective,
                         only the large ones made without a product with a
                         weight (attention's scores and probabilities, the
                         MLP's activation); with auto, what each rank (each
                         pipeline stage) must recompute to fit
                         --memory-budget, at the least added work; default
                         none
  --memory-budget SIZE   with --recompute auto: the bytes each rank may hold
                         (80GB, 3.5GiB, 2e9)
  --lr-schedule constant|linear|cosine
                         with --warmup-steps W (linear warmup, lr * (s+1)/W),
                         --decay-steps N and --min-lr M: decay from --lr to M
                         over steps W..N, M after; the step count is in the
                         checkpoint, and pcc run prints the rate
  --trainable REGEX      initializers to train whatever pcc decides
  --freeze REGEX         initializers not to train (wins over --trainable);
                         the compile prints each decision and its reason
  --untie REGEX          give each op that uses an initializer named by REGEX
                         its own copy, named INITIALIZER@NODE: parameters
                         the exporter merged (a fresh model) train apart
  --labels NAME, --logits NAME
                         the loss's tensors, when not found by type
)";

static const char kRunHelp[] = R"(
run options:
  --input FILE           a TensorProto .pb (binds inputs in order) or a
                         .safetensors file (binds inputs by name); every
                         input needs one, except the token input that
                         --data feeds
  --steps K              run K times (default 1); a training build
                         prints each step's loss and time
  --dump DIR             write DIR/outputs.safetensors (first step) and, for
                         a training build, DIR/grads.safetensors (the first
                         step's gradients, before the update)
  --data FILE            feed the first input (int64 [B,T] token ids) a new
                         batch each step, sampled from a flat token file
  --data-dtype T         uint16 (default, nanoGPT/llm.c) or int32 tokens
  --seed N               seed of the --data batch sampler (default 0)
  --load CKPT            restore weights, optimizer state and step count;
                         on a forward build, load the trained parameters
  --weights-only         with --load on a training build: its trained
                         parameters alone, from step 0 (a checkpoint of
                         another optimizer or layout)
  --strip-prefix P       with --load: match names that differ by the prefix
                         P (an exporter's wrapper, as "m.")
  --lr X, --min-lr X, --warmup-steps N, --decay-steps N
                         a training build's learning rate and its schedule's
                         length from this run on, in place of the build's
                         (or the checkpoint's) values; checkpoints keep them
  --save CKPT            write them after the last step (training builds),
                         and, when the run is interrupted (Ctrl-C, SIGTERM),
                         after the step that is running
  --save-every N         with --save: also write it every N steps
  --log-every N          one line per N steps: mean loss, learning rate,
                         tokens/s and step time (default: a line per step)
  --eval-data FILE       held-out tokens (as --data): a build compiled with
                         --eval prints their loss on the trained parameters,
                         the forward only, after the last step or every N
                         steps (--eval-every N)
  --trace FILE           write a Chrome trace (chrome://tracing, Perfetto) of
                         each rank's pipeline actions with their real times
  --timeout S            seconds a rank may wait in one collective before
                         all ranks are ended (default 300)
  --fault rank=R,step=K,kind=exit|hang
                         for testing: rank R exits or hangs as step K begins
A build of several ranks (pcc compile --tp/--pp) runs one process per rank:
pcc starts them under mpirun, unless a launcher (mpirun, srun) started it,
or RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun) name its rank:
then the ranks connect over TCP, without MPI.
)";

static const char kImportHelp[] = R"(
import options:
  --bind NAME=FILE.pb    fix graph input NAME to a tensor at compile time
  --dim NAME=N           give every input dimension named NAME the extent N
  --shape INPUT=AxB...   give graph input INPUT this whole shape
  --no-retie             keep transposed duplicate initializers separate
)";

namespace {
/// Walks argv, with one-line errors for anything malformed.
class Args {
public:
  Args(int argc, char **argv) : args(argv + 2, argv + argc) {}
  bool done() const { return pos >= args.size(); }
  /// The arguments not yet read, as given.
  std::vector<std::string> rest() const {
    std::vector<std::string> out;
    for (size_t i = pos; i < args.size(); ++i)
      out.push_back(args[i].str());
    return out;
  }
  llvm::StringRef next() { return args[pos++]; }
  /// The next argument, not read.
  llvm::StringRef peek() const { return args[pos]; }
  bool value(llvm::StringRef flag, std::string &out) {
    if (done()) {
      llvm::errs() << "pcc: error: " << flag << " needs a value\n";
      return false;
    }
    out = next().str();
    return true;
  }
  bool integer(llvm::StringRef flag, int64_t &out, int64_t min) {
    std::string v;
    if (!value(flag, v))
      return false;
    if (llvm::StringRef(v).getAsInteger(10, out) || out < min) {
      llvm::errs() << "pcc: error: " << flag << " expects an integer >= " << min
                   << ", got '" << v << "'\n";
      return false;
    }
    return true;
  }
  /// A positive number of seconds (--timeout).
  bool seconds(llvm::StringRef flag, double &out) {
    std::string v;
    if (!value(flag, v))
      return false;
    double seconds = 0;
    if (llvm::StringRef(v).getAsDouble(seconds) || !(seconds > 0) ||
        seconds > 1e9) {
      llvm::errs() << "pcc: error: " << flag
                   << " expects a positive number of seconds, got '" << v
                   << "'\n";
      return false;
    }
    out = seconds;
    return true;
  }
  bool number(llvm::StringRef flag, double &d) {
    std::string v;
    if (!value(flag, v))
      return false;
    if (llvm::StringRef(v).getAsDouble(d) || d < 0) {
      llvm::errs() << "pcc: error: " << flag
                   << " expects a non-negative number, got '" << v << "'\n";
      return false;
    }
    return true;
  }
  /// A size in bytes: a number with an optional unit, decimal (KB, MB, GB,
  /// TB) or binary (KiB, MiB, GiB, TiB): "80GB", "3.5GiB", "2e9".
  bool bytes(llvm::StringRef flag, int64_t &out) {
    std::string v;
    if (!value(flag, v))
      return false;
    llvm::StringRef text(v);
    size_t digits = text.find_first_not_of("0123456789.eE+-");
    // An exponent's "e" stays with the number only when digits follow.
    llvm::StringRef number = text.take_front(digits),
                    unit = text.drop_front(number.size());
    static const std::pair<llvm::StringRef, double> units[] = {
        {"", 1},
        {"B", 1},
        {"KB", 1e3},
        {"MB", 1e6},
        {"GB", 1e9},
        {"TB", 1e12},
        {"KiB", 1 << 10},
        {"MiB", 1 << 20},
        {"GiB", double(1 << 30)},
        {"TiB", double(1ll << 40)}};
    double d = 0;
    auto found = llvm::find_if(
        units, [&](const auto &u) { return unit.equals_insensitive(u.first); });
    if (number.getAsDouble(d) || d <= 0 || found == std::end(units) ||
        d * found->second > 9e18) {
      llvm::errs() << "pcc: error: " << flag
                   << " expects a size in bytes such as 80GB, 3.5GiB or "
                      "2e9, got '"
                   << v << "'\n";
      return false;
    }
    out = int64_t(d * found->second);
    return true;
  }

private:
  std::vector<llvm::StringRef> args;
  size_t pos = 0;
};
} // namespace

static int unknown(llvm::StringRef arg);

/// A folder as given, without trailing slashes (`out/` is `out`), so that
/// the paths made from it read `out/weights.safetensors`.
static std::string folderPath(llvm::StringRef arg) {
  llvm::StringRef trimmed = arg.rtrim('/');
  return trimmed.empty() && !arg.empty() ? "/" : trimmed.str();
}

static bool isHelp(llvm::StringRef a) { return a == "--help" || a == "-h"; }

/// `--dim NAME=N` or `--shape INPUT=AxBxC` (`flag`) with its value `v`
/// into `out`; false, after a one-line error, on a malformed value. The
/// name is what precedes the last '=' (a dimension may be named by an
/// expression).
static bool parseShapeFlag(llvm::StringRef flag, llvm::StringRef v,
                           InputShapes &out) {
  bool isDim = flag == "--dim";
  auto [name, text] = v.rsplit('=');
  auto fail = [&](const llvm::Twine &why) {
    llvm::errs() << "pcc: error: " << flag << " '" << v << "': " << why << "\n";
    return false;
  };
  if (name.empty() || text.empty() || !v.contains('='))
    return fail(isDim ? "expected NAME=N" : "expected INPUT=AxB...");
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, 'x', -1, /*KeepEmpty=*/true);
  std::vector<int64_t> extents;
  for (llvm::StringRef part : parts) {
    int64_t n = 0;
    if (part.getAsInteger(10, n) || n < 1)
      return fail("extents are positive integers" +
                  llvm::Twine(isDim ? "" : ", separated by 'x'"));
    extents.push_back(n);
  }
  if (isDim) {
    if (extents.size() != 1)
      return fail("expected NAME=N");
    out.dims[name.str()] = extents[0];
  } else {
    out.shapes[name.str()] = extents;
  }
  return true;
}

namespace cli {
/// How the command line reads an option of PipelineOptions.def.
struct Kind {
  enum { Internal, Flag, Integer, Number, Positive, Bytes, Text, Choice } kind;
  /// Integer: the least value; Choice: the values, '|'-separated.
  int64_t min = 0;
  llvm::StringRef choices;
};
Kind Internal() { return {Kind::Internal}; }
Kind Flag() { return {Kind::Flag}; }
Kind Integer(int64_t min) { return {Kind::Integer, min}; }
Kind Number() { return {Kind::Number}; }
Kind Positive() { return {Kind::Positive}; }
Kind Bytes() { return {Kind::Bytes}; }
Kind Text() { return {Kind::Text}; }
Kind Choice(llvm::StringRef choices) { return {Kind::Choice, 0, choices}; }
} // namespace cli

/// Whether `arg` is one of the pipeline's options that `pcc compile`
/// reads (PipelineOptions.def): what a build is compiled with.
static bool isCompileOption(llvm::StringRef arg) {
#define PCC_OPTION(TYPE, FIELD, NAME, DEFAULT, CLI, DESCRIPTION)               \
  if (cli::CLI.kind != cli::Kind::Internal && arg == "--" NAME)                \
    return true;
#include "pcc/Transforms/PipelineOptions.def"
  return false;
}

/// An option the command does not take; a compile option given to another
/// command is named as one (the build holds its value).
static int unknown(llvm::StringRef arg) {
  if (isCompileOption(arg)) {
    llvm::errs() << "pcc: error: " << arg
                 << " is an option of pcc compile: the build holds its "
                    "value; compile again to change it\n";
    return 1;
  }
  llvm::errs() << "pcc: error: unknown option '" << arg
               << "' (see pcc --help)\n";
  return 1;
}

/// Reads the value of pipeline option `flag` of `kind` into `field`; false
/// after a one-line error.
template <typename T>
static bool readOption(Args &args, llvm::StringRef flag, T &field,
                       cli::Kind kind) {
  if constexpr (std::is_same_v<T, bool>) {
    field = true;
    return true;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return kind.kind == cli::Kind::Bytes ? args.bytes(flag, field)
                                         : args.integer(flag, field, kind.min);
  } else if constexpr (std::is_same_v<T, double>) {
    if (!args.number(flag, field))
      return false;
    if (kind.kind == cli::Kind::Positive && field <= 0) {
      llvm::errs() << "pcc: error: " << flag << " must be positive\n";
      return false;
    }
    return true;
  } else {
    if (!args.value(flag, field))
      return false;
    if (kind.kind != cli::Kind::Choice)
      return true;
    llvm::SmallVector<llvm::StringRef> choices;
    kind.choices.split(choices, '|');
    if (llvm::is_contained(choices, field))
      return true;
    llvm::errs() << "pcc: error: " << flag << " must be ";
    for (auto [i, choice] : llvm::enumerate(choices))
      llvm::errs() << (i == 0                    ? ""
                       : i + 1 == choices.size() ? " or "
                                                 : ", ")
                   << choice;
    llvm::errs() << ", got '" << field << "'\n";
    return false;
  }
}

/// `pcc compile`, or with `planOnly` `pcc plan`, which takes the same
/// options and `--model SPEC` in place of a model file.
static int compileCommand(Args &args, bool planOnly = false) {
  CompileOptions o;
  std::string modelSpec;
  // The layout options given: a search (--devices) chooses them.
  std::vector<std::string> layoutGiven;
  while (!args.done()) {
    llvm::StringRef a = args.next();
    if (isHelp(a)) {
      llvm::outs() << "usage: " << usageOf(planOnly ? "plan" : "compile");
      if (!planOnly) {
        llvm::outs() << kCompileHelp;
        return 0;
      }
      // The compile options' entries (each starts with "  -" and runs to
      // the next), without those of code generation.
      llvm::outs() << kPlanNote;
      llvm::SmallVector<llvm::StringRef> lines;
      llvm::StringRef(kCompileHelp).split(lines, '\n');
      bool skipping = false;
      for (llvm::StringRef line : lines) {
        if (line.starts_with("  -"))
          skipping = llvm::any_of(kCodegenOptions, [&](const char *name) {
            llvm::StringRef option = line.ltrim().split(' ').first;
            return option == name;
          });
        if (!skipping)
          llvm::outs() << line << "\n";
      }
      return 0;
    }
    std::string v;
    bool ok = true;
    if (llvm::is_contained(kLayoutOptions, a))
      layoutGiven.push_back(a.str());
    // The pipeline's options, as PipelineOptions.def declares them.
    bool read = false;
#define PCC_OPTION(TYPE, FIELD, NAME, DEFAULT, CLI, DESCRIPTION)               \
  if (!read && cli::CLI.kind != cli::Kind::Internal && a == "--" NAME) {       \
    read = true;                                                               \
    ok = readOption(args, a, o.FIELD, cli::CLI);                               \
  }
#include "pcc/Transforms/PipelineOptions.def"
    if (read) {
      // Read above.
    } else if (a == "-o" || a == "--output") {
      ok = args.value(a, o.outDir);
      o.outDir = folderPath(o.outDir);
    } else if (planOnly && a == "--model")
      ok = args.value(a, modelSpec);
    else if (a == "--bucket-mb") {
      int64_t mb = 0;
      ok = args.integer(a, mb, 0);
      o.bucketBytes = mb << 20;
    } else if (a == "--devices")
      ok = args.integer(a, o.devices, 1);
    else if (planOnly && a == "--objective")
      ok = args.value(a, o.objective);
    else if (!planOnly && a == "--auto")
      o.autoLayout = true;
    else if (a == "--shard") {
      ok = args.value(a, v);
      if (ok)
        o.shard += (o.shard.empty() ? "" : ";") + v;
    } else if (a == "--threads")
      ok = args.integer(a, o.threads, 1);
    else if (a == "--cpu") {
      ok = args.value(a, o.cpu);
      if (ok && o.cpu != "native" && o.cpu != "generic") {
        llvm::errs() << "pcc: error: --cpu must be native or generic\n";
        return 1;
      }
    } else if (a == "--no-fuse")
      o.fuse = false;
    else if (a == "--profile-ops")
      o.profileOps = true;
    else if (a == "--no-fuse-attention")
      o.fuseAttention = false;
    else if (a == "--cuda-arch") {
      ok = args.value(a, o.cudaArch);
      if (ok && !llvm::StringRef(o.cudaArch).starts_with("sm_")) {
        llvm::errs() << "pcc: error: --cuda-arch takes sm_NN (e.g. sm_90)\n";
        return 1;
      }
    } else if (a == "--cuda-emulate")
      o.cudaEmulate = true;
    else if (a == "--bind") {
      ok = args.value(a, v);
      size_t eq = v.find('=');
      if (ok && (eq == std::string::npos || eq == 0 || eq + 1 == v.size())) {
        llvm::errs() << "pcc: error: --bind expects NAME=FILE.pb, got '" << v
                     << "'\n";
        return 1;
      }
      if (ok)
        o.bindings[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--dim" || a == "--shape") {
      if (!args.value(a, v) || !parseShapeFlag(a, v, o.inputShapes))
        return 1;
    } else if (a == "--no-retie")
      o.retie = false;
    else if (a == "--eval")
      o.eval = true;
    else if (a.starts_with("-"))
      return unknown(a);
    else if (o.model.empty())
      o.model = a.str();
    else {
      llvm::errs() << "pcc: error: more than one model given ('" << o.model
                   << "', '" << a << "')\n";
      return 1;
    }
    if (!ok)
      return 1;
  }
  if (o.allowAsync && o.devices < 1) {
    llvm::errs() << "pcc: error: --allow-async lets the search of --devices "
                    "N consider 2bw: give --devices (or choose it yourself "
                    "with --schedule 2bw)\n";
    return 1;
  }
  if (o.devices > 0 || o.autoLayout) {
    if (!layoutGiven.empty()) {
      llvm::errs() << "pcc: error: " << layoutGiven.front()
                   << " is a layout option, which the search of --devices "
                      "chooses: leave it out\n";
      return 1;
    }
    if (o.autoLayout && o.devices < 1) {
      llvm::errs() << "pcc: error: --auto searches the layout for "
                      "--devices N devices: give --devices\n";
      return 1;
    }
    if (!o.autoLayout && !planOnly) {
      llvm::errs() << "pcc: error: --devices is the search's: give --auto "
                      "to compile the layout it chooses\n";
      return 1;
    }
  }
  if (planOnly) {
    if (o.model.empty() == modelSpec.empty() || o.outDir.empty()) {
      llvm::errs() << "pcc: error: plan needs MODEL.onnx or --model SPEC "
                      "(one of them) and -o DIR\n";
      return 1;
    }
    return failed(plan(o, modelSpec, llvm::outs())) ? 1 : 0;
  }
  if (o.model.empty() || o.outDir.empty()) {
    llvm::errs() << "pcc: error: compile needs MODEL.onnx and -o OUT\n";
    return 1;
  }
  return failed(compile(o, llvm::outs())) ? 1 : 0;
}

static int importCommand(Args &args) {
  std::string model;
  ImportOptions options;
  while (!args.done()) {
    llvm::StringRef a = args.next();
    std::string v;
    if (isHelp(a)) {
      llvm::outs() << "usage: " << usageOf("import") << kImportHelp;
      return 0;
    }
    if (a == "--bind") {
      if (!args.value(a, v))
        return 1;
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
        llvm::errs() << "pcc: error: --bind expects NAME=FILE.pb, got '" << v
                     << "'\n";
        return 1;
      }
      options.bindings[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--dim" || a == "--shape") {
      if (!args.value(a, v) || !parseShapeFlag(a, v, options.inputShapes))
        return 1;
    } else if (a == "--no-retie") {
      options.retie = false;
    } else if (a.starts_with("-")) {
      return unknown(a);
    } else if (model.empty()) {
      model = a.str();
    } else {
      llvm::errs() << "pcc: error: more than one model given\n";
      return 1;
    }
  }
  if (model.empty()) {
    llvm::errs() << "pcc: error: import needs MODEL.onnx\n";
    return 1;
  }
  return failed(importAndPrint(model, options, llvm::outs())) ? 1 : 0;
}

/// Parses "rank=R,step=K,kind=exit|hang": each key once, nothing else.
static bool parseFault(llvm::StringRef spec, RunOptions &o) {
  RunOptions::Fault fault;
  bool haveRank = false, haveStep = false, haveKind = false;
  llvm::SmallVector<llvm::StringRef> items;
  spec.split(items, ',');
  for (llvm::StringRef item : items) {
    auto [key, value] = item.split('=');
    if (!item.contains('=') || value.empty())
      return false;
    if (key == "rank" && !haveRank) {
      haveRank = true;
      if (value.getAsInteger(10, fault.rank) || fault.rank < 0)
        return false;
    } else if (key == "step" && !haveStep) {
      haveStep = true;
      if (value.getAsInteger(10, fault.step) || fault.step < 1)
        return false;
    } else if (key == "kind" && !haveKind) {
      haveKind = true;
      if (value != "exit" && value != "hang")
        return false;
      fault.hang = value == "hang";
    } else {
      return false;
    }
  }
  if (!haveRank || !haveStep || !haveKind)
    return false;
  o.fault = fault;
  return true;
}

/// `pcc calibrate`.
static int calibrateCommand(Args &args) {
  CalibrateOptions o;
  while (!args.done()) {
    llvm::StringRef a = args.next();
    bool ok = true;
    if (isHelp(a)) {
      llvm::outs() << "usage: " << usageOf("calibrate");
      return 0;
    }
    if (a == "-o" || a == "--output")
      ok = args.value(a, o.outFile);
    else if (a == "--ranks")
      ok = args.integer(a, o.ranks, 1);
    else if (a == "--name")
      ok = args.value(a, o.name);
    else if (a == "--collectives-rank")
      ok = args.value(a, o.collectivesFile);
    else
      return unknown(a);
    if (!ok)
      return 1;
  }
  return failed(calibrate(o, llvm::outs())) ? 1 : 0;
}

/// The compiled folder OUT, given once: false, said in one line, if \p dir
/// has it already.
static bool takeFolder(llvm::StringRef arg, std::string &dir) {
  if (!dir.empty()) {
    llvm::errs() << "pcc: error: '" << arg
                 << "': more than one compiled folder given (after '" << dir
                 << "')\n";
    return false;
  }
  dir = folderPath(arg);
  return true;
}

static const char kGenerateHelp[] = R"(
generate options:
  --prompts FILE         one request a line: {"prompt": [token ids]} (or
                         {"prompt": "text"} with --tokenizer, or
                         {"messages": [...]} with a chat template), and
                         any of the options below for that request alone
                         (max_new_tokens, min_new_tokens, temperature,
                         top_k, top_p, repetition_penalty, presence_penalty,
                         frequency_penalty, seed, stop), and arrival_step (the scheduler step it
                         joins at)
  -o FILE                write one line per request, in input order:
                         {"tokens": [...], "finish_reason": "length"|"stop"}
                         and "text" with --tokenizer (default: standard
                         output)
  --tokenizer FILE       a Hugging Face tokenizer.json (byte-level BPE, as
                         GPT-2, Llama 3 and Qwen2's, or BPE with byte
                         fallback, as Llama 2 and Mistral's): text prompts
                         in, text out
  --chat-template FILE   the chat template of requests of
                         {"messages": [...]}: a Jinja file, or a
                         tokenizer_config.json (default: the
                         tokenizer_config.json beside --tokenizer)
  --max-new-tokens N     tokens to generate per request (default 16)
  --temperature T        0 (the default): greedy; otherwise sample
  --top-k K              sample among the K most likely tokens
  --top-p P              sample among the most likely tokens of mass P
  --seed S               the draws of each request (the same tokens at any
                         layout and batch)
  --repetition-penalty R transformers' and vLLM's: the logits of the tokens
                         of the prompt and of those generated so far are
                         divided by R where positive, multiplied where
                         negative, before a token is chosen (default 1)
  --presence-penalty P   OpenAI's: P is subtracted from the logit of every
                         token generated so far (in [-2, 2], default 0)
  --frequency-penalty F  OpenAI's: F times the count of each token generated
                         so far is subtracted from its logit (in [-2, 2],
                         default 0)
  --stop ID ...          token ids that end a request
  --min-new-tokens N     no stop token is chosen before N tokens
  --generation-config FILE
                         the defaults of a Hugging Face
                         generation_config.json, as transformers' generate()
                         takes them (greedy unless do_sample; eos_token_id
                         ends a request; repetition_penalty, max_new_tokens,
                         min_new_tokens); the other options override them
  --load CKPT            serve the trained parameters of a checkpoint that
                         pcc run --save wrote (with --strip-prefix P as for
                         pcc run)
  --timeout S            as for pcc run, on a build of several ranks
)";

/// The sampling defaults of the --generation-config among \p arguments (a
/// flag after it overrides what it says), into \p sampling; false after
/// an error.
static bool readGenerationConfigFlag(const std::vector<std::string> &arguments,
                                     pccrt::Sampling &sampling) {
  for (size_t i = 0; i + 1 < arguments.size(); ++i)
    if (arguments[i] == "--generation-config") {
      try {
        sampling = pcc::readGenerationConfig(arguments[i + 1], sampling);
      } catch (const pccrt::Error &e) {
        llvm::errs() << "pcc: error: " << e.what() << "\n";
        return false;
      }
    }
  return true;
}

static int generateCommand(Args &args) {
  RunOptions o;
  o.arguments = args.rest();
  GenerateOptions g;
  if (!readGenerationConfigFlag(o.arguments, g.sampling))
    return 1;
  while (!args.done()) {
    llvm::StringRef a = args.next();
    std::string v;
    bool ok = true;
    if (isHelp(a)) {
      llvm::outs() << "usage: " << usageOf("generate") << kGenerateHelp;
      return 0;
    }
    if (a == "--prompts")
      ok = args.value(a, g.prompts);
    else if (a == "--load")
      ok = args.value(a, o.loadCheckpoint);
    else if (a == "--strip-prefix")
      ok = args.value(a, o.stripPrefix);
    else if (a == "--tokenizer")
      ok = args.value(a, g.tokenizer);
    else if (a == "--chat-template")
      ok = args.value(a, g.chatTemplate);
    else if (a == "-o")
      ok = args.value(a, g.output);
    else if (a == "--max-new-tokens")
      ok = args.integer(a, g.sampling.maxNewTokens, 1);
    else if (a == "--min-new-tokens")
      ok = args.integer(a, g.sampling.minNewTokens, 0);
    else if (a == "--generation-config")
      ok = args.value(a, v); // read before the other flags
    else if (a == "--temperature")
      ok = args.number(a, g.sampling.temperature);
    else if (a == "--top-k")
      ok = args.integer(a, g.sampling.topK, 0);
    else if (a == "--top-p")
      ok = args.number(a, g.sampling.topP);
    else if (a == "--repetition-penalty")
      ok = args.number(a, g.sampling.repetitionPenalty);
    else if (a == "--presence-penalty")
      ok = args.number(a, g.sampling.presencePenalty);
    else if (a == "--frequency-penalty")
      ok = args.number(a, g.sampling.frequencyPenalty);
    else if (a == "--seed") {
      int64_t seed = 0;
      ok = args.integer(a, seed, 0);
      g.sampling.seed = uint64_t(seed);
    } else if (a == "--stop") {
      // One or more ids, up to the next option.
      int64_t id = 0;
      ok = args.integer(a, id, 0);
      g.sampling.stop.push_back(id);
      while (ok && !args.done() && !args.peek().starts_with("-") &&
             !args.peek().getAsInteger(10, id)) {
        args.next();
        g.sampling.stop.push_back(id);
      }
    } else if (a == "--timeout") {
      ok = args.seconds(a, o.timeoutSeconds);
    } else if (a.starts_with("-"))
      return unknown(a);
    else if (!takeFolder(a, o.dir))
      return 1;
    if (!ok)
      return 1;
  }
  if (o.dir.empty()) {
    llvm::errs() << "pcc: error: generate needs the compiled folder OUT\n";
    return 1;
  }
  if (g.prompts.empty()) {
    llvm::errs() << "pcc: error: generate needs --prompts FILE.jsonl\n";
    return 1;
  }
  // The request's keys, as flags (top_p: --top-p).
  if (std::string range = g.sampling.rangeError(); !range.empty()) {
    std::string flag = "--" + range.substr(0, range.find(' '));
    std::replace(flag.begin(), flag.end(), '_', '-');
    llvm::errs() << "pcc: error: " << flag << range.substr(range.find(' '))
                 << "\n";
    return 1;
  }
  o.generation = std::move(g);
  return failed(pcc::run(o, llvm::outs())) ? 1 : 0;
}

static const char kServeHelp[] = R"(
serve options:
  --port P               the TCP port (default 8000; 0: a free one, which
                         the first line printed names)
  --host H               the address to listen on (default 127.0.0.1: this
                         machine alone; 0.0.0.0 for every interface)
  --tokenizer FILE       a Hugging Face tokenizer.json: text prompts, stop
                         strings and text in the answers (without it,
                         prompts are token ids and answers carry token_ids)
  --api-key KEY          requests to /v1/ must send Authorization: Bearer
                         KEY (401 otherwise)
  --max-queue N          prompts that may wait for a place in the batch;
                         further requests are answered 503 (default 64)
  --model-name NAME      the model's name in /v1/models and requests
                         (default: OUT's folder name)
  --generation-config FILE
                         what a request leaves unset takes from a Hugging
                         Face generation_config.json, as for pcc generate
                         (without it, OpenAI's defaults: 16 tokens,
                         temperature 1)
  --chat-template FILE   the chat template of /v1/chat/completions: a Jinja
                         file, or a tokenizer_config.json whose
                         chat_template (and bos_token, eos_token) it takes
                         (default: the tokenizer_config.json beside
                         --tokenizer, if it has a chat_template)
  --load CKPT            serve the trained parameters of a checkpoint that
                         pcc run --save wrote (with --strip-prefix P as for
                         pcc run)
  --timeout S            as for pcc run, on a build of several ranks

endpoints: POST /v1/completions (OpenAI's, with vLLM's return_token_ids and
stop_token_ids), GET /v1/models, GET /health, GET /metrics (Prometheus).
SIGINT or SIGTERM stops it: running requests get up to 6 s to finish.
)";

static int serveCommand(Args &args) {
  RunOptions o;
  o.arguments = args.rest();
  GenerateOptions g;
  ServeOptions serve;
  while (!args.done()) {
    llvm::StringRef a = args.next();
    bool ok = true;
    if (isHelp(a)) {
      llvm::outs() << "usage: " << usageOf("serve") << kServeHelp;
      return 0;
    }
    if (a == "--port")
      ok = args.integer(a, serve.port, 0);
    else if (a == "--host")
      ok = args.value(a, serve.host);
    else if (a == "--tokenizer")
      ok = args.value(a, g.tokenizer);
    else if (a == "--api-key")
      ok = args.value(a, serve.apiKey);
    else if (a == "--max-queue")
      ok = args.integer(a, serve.maxQueue, 1);
    else if (a == "--model-name")
      ok = args.value(a, serve.modelName);
    else if (a == "--chat-template")
      ok = args.value(a, g.chatTemplate);
    else if (a == "--generation-config") {
      std::string path;
      pccrt::Sampling defaults;
      ok = args.value(a, path) &&
           readGenerationConfigFlag({"--generation-config", path}, defaults);
      serve.defaults = defaults;
    } else if (a == "--load")
      ok = args.value(a, o.loadCheckpoint);
    else if (a == "--strip-prefix")
      ok = args.value(a, o.stripPrefix);
    else if (a == "--timeout")
      ok = args.seconds(a, o.timeoutSeconds);
    else if (a.starts_with("-"))
      return unknown(a);
    else if (!takeFolder(a, o.dir))
      return 1;
    if (!ok)
      return 1;
  }
  if (o.dir.empty()) {
    llvm::errs() << "pcc: error: serve needs the compiled folder OUT\n";
    return 1;
  }
  if (serve.port > 65535) {
    llvm::errs() << "pcc: error: --port must be at most 65535\n";
    return 1;
  }
  g.serve = std::move(serve);
  o.generation = std::move(g);
  return failed(pcc::run(o, llvm::outs())) ? 1 : 0;
}

/// `pcc follow OUT [--timeout S]`: what import pcc starts as the ranks
/// other than 0 of a session of several ranks (not in the synopsis: no
/// user runs it by hand).
static int followCommand(Args &args) {
  RunOptions o;
  o.follow = true;
  o.arguments = args.rest();
  while (!args.done()) {
    llvm::StringRef a = args.next();
    bool ok = true;
    if (a == "--timeout")
      ok = args.seconds(a, o.timeoutSeconds);
    else if (a.starts_with("-"))
      return unknown(a);
    else if (o.dir.empty())
      o.dir = folderPath(a);
    else
      return unknown(a);
    if (!ok)
      return 1;
  }
  if (o.dir.empty()) {
    llvm::errs() << "pcc: error: follow needs the compiled folder OUT\n";
    return 1;
  }
  return failed(pcc::run(o, llvm::outs())) ? 1 : 0;
}

static int runCommand(Args &args) {
  RunOptions o;
  o.arguments = args.rest();
  while (!args.done()) {
    llvm::StringRef a = args.next();
    std::string v;
    bool ok = true;
    if (isHelp(a)) {
      llvm::outs() << "usage: " << usageOf("run") << kRunHelp;
      return 0;
    }
    if (a == "--input") {
      ok = args.value(a, v);
      o.inputs.push_back(v);
    } else if (a == "--dump")
      ok = args.value(a, o.dumpDir);
    else if (a == "--steps")
      ok = args.integer(a, o.steps, 1);
    else if (a == "--data")
      ok = args.value(a, o.dataFile);
    else if (a == "--data-dtype") {
      ok = args.value(a, o.dataDtype);
      if (ok && o.dataDtype != "uint16" && o.dataDtype != "int32") {
        llvm::errs() << "pcc: error: --data-dtype must be uint16 or int32, "
                        "got '"
                     << o.dataDtype << "'\n";
        return 1;
      }
    } else if (a == "--seed") {
      int64_t seed = 0;
      ok = args.integer(a, seed, 0);
      o.seed = uint64_t(seed);
    } else if (a == "--load")
      ok = args.value(a, o.loadCheckpoint);
    else if (a == "--weights-only")
      o.weightsOnly = true;
    else if (a == "--strip-prefix")
      ok = args.value(a, o.stripPrefix);
    else if (a == "--save")
      ok = args.value(a, o.saveCheckpoint);
    else if (a == "--lr" || a == "--min-lr" || a == "--warmup-steps" ||
             a == "--decay-steps") {
      double value = 0;
      ok = args.number(a, value);
      o.rateOptions.push_back({a.str(), value});
    } else if (a == "--eval-data")
      ok = args.value(a, o.evalData);
    else if (a == "--eval-every")
      ok = args.integer(a, o.evalEvery, 1);
    else if (a == "--save-every")
      ok = args.integer(a, o.saveEvery, 1);
    else if (a == "--log-every")
      ok = args.integer(a, o.logEvery, 1);
    else if (a == "--trace")
      ok = args.value(a, o.traceFile);
    else if (a == "--timeout")
      ok = args.seconds(a, o.timeoutSeconds);
    else if (a == "--fault") {
      ok = args.value(a, v);
      if (ok && !parseFault(v, o)) {
        llvm::errs() << "pcc: error: --fault expects "
                        "rank=R,step=K,kind=exit|hang (R >= 0, K >= 1), got '"
                     << v << "'\n";
        return 1;
      }
    } else if (a.starts_with("-"))
      return unknown(a);
    else if (o.dir.empty())
      o.dir = folderPath(a);
    else {
      // A second file after --input's one, more likely than a second OUT.
      if (!o.inputs.empty() && a != o.dir)
        llvm::errs() << "pcc: error: '" << a
                     << "': an argument of no option (--input takes one "
                        "file; give --input once per input)\n";
      else
        llvm::errs() << "pcc: error: '" << a
                     << "': more than one compiled folder given (after '"
                     << o.dir << "')\n";
      return 1;
    }
    if (!ok)
      return 1;
  }
  if (o.dir.empty()) {
    llvm::errs() << "pcc: error: run needs the compiled folder OUT\n";
    return 1;
  }
  if ((o.weightsOnly || !o.stripPrefix.empty()) && o.loadCheckpoint.empty()) {
    llvm::errs() << "pcc: error: "
                 << (o.weightsOnly ? "--weights-only" : "--strip-prefix")
                 << " says how --load loads a checkpoint: give --load CKPT\n";
    return 1;
  }
  return failed(pcc::run(o, llvm::outs())) ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    llvm::errs() << kSynopsis;
    return 1;
  }
  llvm::StringRef cmd = argv[1];
  if (isHelp(cmd) || cmd == "help") {
    llvm::outs() << kSynopsis << kCompileHelp << kRunHelp << kGenerateHelp
                 << kServeHelp << kImportHelp;
    return 0;
  }
  if (cmd == "--version") {
    llvm::outs() << "pcc " << PCC_VERSION << "\n";
    return 0;
  }
  Args args(argc, argv);
  if (cmd == "compile")
    return compileCommand(args);
  if (cmd == "plan")
    return compileCommand(args, /*planOnly=*/true);
  if (cmd == "calibrate")
    return calibrateCommand(args);
  if (cmd == "run")
    return runCommand(args);
  if (cmd == "generate")
    return generateCommand(args);
  if (cmd == "serve")
    return serveCommand(args);
  if (cmd == "follow")
    return followCommand(args);
  if (cmd == "import")
    return importCommand(args);
  llvm::errs()
      << "pcc: error: unknown command '" << cmd
      << "' (expected compile, run, generate, serve, plan, calibrate or "
         "import; "
         "see pcc --help)\n";
  return 1;
}
