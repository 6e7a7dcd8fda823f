//===- CppEmitter.h - Graph dialect to C++ for the CPU target ---*- C++ -*-===//
//
// The CPU target: the program emitter (ProgramEmitter.h) with the CPU's
// hooks, whose code includes pcc_kernels.h and pccrt.h.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_CPU_CPPEMITTER_H
#define PCC_TARGET_CPU_CPPEMITTER_H

#include "pcc/Target/ProgramEmitter.h"

namespace pcc {

/// emitProgram with the CPU target's hooks.
llvm::FailureOr<CppEmitResult> emitCpp(mlir::ModuleOp module,
                                       llvm::raw_ostream &os,
                                       const CppEmitOptions &options = {});
llvm::FailureOr<CppEmitResult> emitCpp(mlir::func::FuncOp entry,
                                       llvm::raw_ostream &os,
                                       const CppEmitOptions &options = {});

/// The text of the kernel header the generated code includes
/// ("pcc_kernels.h"), of the kernels it is linked with ("pcc_kernels.cpp"),
/// and of the ABI header ("pccrt.h").
llvm::StringRef getKernelHeader();
llvm::StringRef getKernelSource();
llvm::StringRef getAbiHeader();

} // namespace pcc

#endif // PCC_TARGET_CPU_CPPEMITTER_H
