//===- pcc-translate.cpp - mlir-translate with pcc's target emitters ------===//
//
// `pcc-translate --graph-to-cpp in.mlir` prints the C++ that `pcc compile`
// would build for the module's program (its public entry function and the
// private functions it calls), so that lit tests can pin the emitted code
// without going through ONNX; `--graph-to-cuda` prints the CUDA target's
// .cu file. `--weights FILE` also writes the weights file
// the code reads (as OUT/weights.safetensors), which lets tests build and
// run hand-written functions with `pcc run`.
//
//===----------------------------------------------------------------------===//

#include "pcc/InitAll.h"
#include "pcc/Target/Cpu/CppEmitter.h"
#include "pcc/Target/Cuda/CudaEmitter.h"
#include "pcc/Target/WeightTensors.h"

#include "pccrt/Runtime.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;

static llvm::cl::opt<std::string>
    symbolPrefix("symbol-prefix",
                 llvm::cl::desc("prefix of the exported model symbols"),
                 llvm::cl::init("pcc"));
static llvm::cl::opt<int64_t> maxInlineElements(
    "max-inline-elements",
    llvm::cl::desc("largest anonymous constant emitted inline"),
    llvm::cl::init(1024));
static llvm::cl::opt<std::string> functionName(
    "function",
    llvm::cl::desc("the entry function (default: the module's only public "
                   "function)"));
static llvm::cl::opt<std::string>
    weightsFile("weights",
                llvm::cl::desc("also write the weights the code reads to this "
                               "safetensors file"));

/// After an emitter ran: the weights file, if asked for.
static LogicalResult finish(ModuleOp module,
                            FailureOr<pcc::CppEmitResult> emitted) {
  if (failed(emitted))
    return failure();
  if (weightsFile.empty())
    return success();
  try {
    std::deque<std::vector<uint8_t>> storage;
    pccrt::writeSafetensorRefs(weightsFile,
                               pcc::getWeightTensors(*emitted, storage),
                               {{"format", "pcc"}});
  } catch (const pccrt::Error &e) {
    return module.emitError(e.what());
  }
  return success();
}

int main(int argc, char **argv) {
  TranslateFromMLIRRegistration graphToCpp(
      "graph-to-cpp", "Graph dialect to C++ for the CPU target (pccrt ABI)",
      [](ModuleOp module, raw_ostream &os) -> LogicalResult {
        pcc::CppEmitOptions options;
        options.symbolPrefix = symbolPrefix;
        options.maxInlineElements = maxInlineElements;
        FailureOr<pcc::CppEmitResult> emitted;
        if (functionName.empty()) {
          emitted = pcc::emitCpp(module, os, options);
        } else {
          auto entry = module.lookupSymbol<func::FuncOp>(functionName);
          if (!entry)
            return module.emitError("no function named '")
                   << functionName << "'";
          emitted = pcc::emitCpp(entry, os, options);
        }
        return finish(module, emitted);
      },
      [](DialectRegistry &registry) { pcc::registerAllDialects(registry); });
  TranslateFromMLIRRegistration graphToCuda(
      "graph-to-cuda", "Graph dialect to CUDA C++ for the CUDA target",
      [](ModuleOp module, raw_ostream &os) -> LogicalResult {
        pcc::CppEmitOptions options;
        options.symbolPrefix = symbolPrefix;
        return finish(module, pcc::emitCuda(module, os, options));
      },
      [](DialectRegistry &registry) { pcc::registerAllDialects(registry); });
  return failed(mlirTranslateMain(argc, argv, "pcc translation driver"));
}
