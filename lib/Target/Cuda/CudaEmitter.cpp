//===- CudaEmitter.cpp - Graph dialect to CUDA C++ ------------------------===//

#include "pcc/Target/Cuda/CudaEmitter.h"

#include "CudaTargetHooks.h"

using namespace mlir;
using namespace pcc;

static const char kCudaKernelHeader[] =
#include "EmbeddedCudaKernels.inc"
    ;

static const char kCudaEmulationHeader[] =
#include "EmbeddedCudaEmulation.inc"
    ;

StringRef pcc::getCudaKernelHeader() { return kCudaKernelHeader; }
StringRef pcc::getCudaEmulationHeader() { return kCudaEmulationHeader; }

FailureOr<CppEmitResult> pcc::emitCuda(ModuleOp module, raw_ostream &os,
                                       CppEmitOptions options) {
  // Host arrays are out of the device's reach: every constant goes to the
  // weights file (splats are filled in the workspace).
  options.maxInlineElements = 0;
  CudaTargetHooks hooks;
  return emitProgram(module, os, options, hooks);
}
