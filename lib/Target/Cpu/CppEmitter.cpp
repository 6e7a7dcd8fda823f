//===- CppEmitter.cpp - Graph dialect to C++ for the CPU target -----------===//
//
// The program emitter with the CPU's hooks, and the headers its code
// includes and the kernels it links, embedded in the compiler.
//
//===----------------------------------------------------------------------===//

#include "pcc/Target/Cpu/CppEmitter.h"

#include "CpuTargetHooks.h"

using namespace mlir;
using namespace pcc;

static const char kKernelHeader[] =
#include "EmbeddedKernels.inc"
    ;
static const char kKernelSource[] =
#include "EmbeddedKernelSource.inc"
    ;
static const char kAbiHeader[] =
#include "EmbeddedAbi.inc"
    ;

StringRef pcc::getKernelHeader() { return kKernelHeader; }
StringRef pcc::getKernelSource() { return kKernelSource; }
StringRef pcc::getAbiHeader() { return kAbiHeader; }

FailureOr<CppEmitResult> pcc::emitCpp(ModuleOp module, raw_ostream &os,
                                      const CppEmitOptions &options) {
  CpuTargetHooks hooks;
  return emitProgram(module, os, options, hooks);
}

FailureOr<CppEmitResult> pcc::emitCpp(func::FuncOp entry, raw_ostream &os,
                                      const CppEmitOptions &options) {
  CpuTargetHooks hooks;
  return emitProgram(entry, os, options, hooks);
}
