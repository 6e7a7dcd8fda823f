//===- pcc.cpp - The pcc command: compile and run models ------------------===//

#include "pcc/Driver/Driver.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <string>
#include <vector>

using namespace pcc;

static const char kUsage[] =
    R"(usage: pcc compile MODEL.onnx -o OUT [options]
       pcc run OUT --input FILE [--input FILE ...] [--steps K] [--dump DIR]
       pcc import MODEL.onnx [--bind NAME=FILE.pb] [--no-retie]
                             (prints the imported Graph dialect IR)

compile options:
  -o OUT                 output folder (replaced only by a complete result)
  --target cpu|cuda      code generation target (default cpu)
  --tp N, --pp N         tensor / pipeline parallel degree (default 1)
  --microbatches M       microbatches per step (default pp)
  --schedule S           gpipe|1f1b|interleaved|zb-h1 (default 1f1b)
  --virtual-stages V     chunks per rank for the interleaved schedule
  --bind NAME=FILE.pb    fix graph input NAME to a tensor at compile time
  --no-retie             keep transposed duplicate initializers separate
  --train                compile a training step (not available yet)

run options:
  --input FILE           a TensorProto .pb (binds inputs in order) or a
                         .safetensors file (binds inputs by name)
  --steps K              run K times (default 1)
  --dump DIR             write DIR/outputs.safetensors (first step)
)";

namespace {
/// Walks argv, with one-line errors for anything malformed.
class Args {
public:
  Args(int argc, char **argv) : args(argv + 2, argv + argc) {}
  bool done() const { return pos >= args.size(); }
  llvm::StringRef next() { return args[pos++]; }
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
      llvm::errs() << "pcc: error: " << flag << " expects an integer >= "
                   << min << ", got '" << v << "'\n";
      return false;
    }
    return true;
  }
  bool number(llvm::StringRef flag) {
    std::string v;
    double d;
    if (!value(flag, v))
      return false;
    if (llvm::StringRef(v).getAsDouble(d)) {
      llvm::errs() << "pcc: error: " << flag << " expects a number, got '"
                   << v << "'\n";
      return false;
    }
    return true;
  }

private:
  std::vector<llvm::StringRef> args;
  size_t pos = 0;
};
} // namespace

static int unknown(llvm::StringRef arg) {
  llvm::errs() << "pcc: error: unknown option '" << arg
               << "' (see pcc --help)\n";
  return 1;
}

static int compileCommand(Args &args) {
  CompileOptions o;
  while (!args.done()) {
    llvm::StringRef a = args.next();
    std::string v;
    bool ok = true;
    if (a == "-o" || a == "--output")
      ok = args.value(a, o.outDir);
    else if (a == "--target") {
      ok = args.value(a, o.target);
      if (ok && o.target != "cpu" && o.target != "cuda") {
        llvm::errs() << "pcc: error: --target must be cpu or cuda\n";
        return 1;
      }
    } else if (a == "--tp")
      ok = args.integer(a, o.tp, 1);
    else if (a == "--pp")
      ok = args.integer(a, o.pp, 1);
    else if (a == "--microbatches")
      ok = args.integer(a, o.microbatches, 1);
    else if (a == "--virtual-stages")
      ok = args.integer(a, o.virtualStages, 1);
    else if (a == "--schedule") {
      ok = args.value(a, o.schedule);
      if (ok && !llvm::is_contained({"gpipe", "1f1b", "interleaved", "zb-h1"},
                                    o.schedule)) {
        llvm::errs() << "pcc: error: unknown schedule '" << o.schedule
                     << "' (gpipe, 1f1b, interleaved, zb-h1)\n";
        return 1;
      }
    } else if (a == "--bind") {
      ok = args.value(a, v);
      size_t eq = v.find('=');
      if (ok && (eq == std::string::npos || eq == 0 || eq + 1 == v.size())) {
        llvm::errs() << "pcc: error: --bind expects NAME=FILE.pb, got '" << v
                     << "'\n";
        return 1;
      }
      if (ok)
        o.bindings[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--no-retie")
      o.retie = false;
    else if (a == "--train")
      o.train = true;
    else if (a == "--optimizer" || a == "--freeze" || a == "--labels" ||
             a == "--logits")
      ok = args.value(a, v);
    else if (a == "--lr" || a == "--weight-decay" || a == "--beta1" ||
             a == "--beta2" || a == "--eps" || a == "--momentum")
      ok = args.number(a);
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

static int runCommand(Args &args) {
  RunOptions o;
  while (!args.done()) {
    llvm::StringRef a = args.next();
    std::string v;
    bool ok = true;
    if (a == "--input") {
      ok = args.value(a, v);
      o.inputs.push_back(v);
    } else if (a == "--dump")
      ok = args.value(a, o.dumpDir);
    else if (a == "--steps")
      ok = args.integer(a, o.steps, 1);
    else if (a == "--data" || a == "--data-dtype" || a == "--save" ||
             a == "--load") {
      llvm::errs() << "pcc: error: " << a
                   << " needs a training build (--train), not available yet\n";
      return 1;
    } else if (a.starts_with("-"))
      return unknown(a);
    else if (o.dir.empty())
      o.dir = a.str();
    else {
      llvm::errs() << "pcc: error: more than one output folder given\n";
      return 1;
    }
    if (!ok)
      return 1;
  }
  if (o.dir.empty()) {
    llvm::errs() << "pcc: error: run needs the compiled folder OUT\n";
    return 1;
  }
  return failed(pcc::run(o, llvm::outs())) ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    llvm::errs() << kUsage;
    return 1;
  }
  llvm::StringRef cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    llvm::outs() << kUsage;
    return 0;
  }
  Args args(argc, argv);
  if (cmd == "compile")
    return compileCommand(args);
  if (cmd == "run")
    return runCommand(args);
  if (cmd == "import")
    return importCommand(args);
  llvm::errs() << "pcc: error: unknown command '" << cmd
               << "' (expected compile, run or import; see pcc --help)\n";
  return 1;
}
