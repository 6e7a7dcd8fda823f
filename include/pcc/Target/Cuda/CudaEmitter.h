//===- CudaEmitter.h - Graph dialect to CUDA C++ ----------------*- C++ -*-===//
//
// The CUDA target: the program emitter (ProgramEmitter.h) with the CUDA
// hooks. The result is one .cu translation unit per program that includes
// pcc_cuda_kernels.cuh and pccrt.h, whose pointers (inputs, outputs,
// weights, workspace) are device memory, and whose work runs on the
// context's stream (or the library's own). Constants all live in the
// weights file (device memory), none in the code.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_CUDA_CUDAEMITTER_H
#define PCC_TARGET_CUDA_CUDAEMITTER_H

#include "pcc/Target/ProgramEmitter.h"

namespace pcc {

/// emitProgram with the CUDA target's hooks.
llvm::FailureOr<CppEmitResult> emitCuda(mlir::ModuleOp module,
                                        llvm::raw_ostream &os,
                                        CppEmitOptions options = {});

/// The text of the kernel header the generated code includes
/// ("pcc_cuda_kernels.cuh").
llvm::StringRef getCudaKernelHeader();
/// The text of the CUDA emulation header (lib/Target/Cuda), with which
/// `pcc compile --cuda-emulate` builds the generated code as host C++: a
/// test facility, not a way to run models fast.
llvm::StringRef getCudaEmulationHeader();

} // namespace pcc

#endif // PCC_TARGET_CUDA_CUDAEMITTER_H
