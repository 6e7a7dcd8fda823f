//===- CppEmitter.h - Graph dialect to C++ for the CPU target ---*- C++ -*-===//
//
// The function the emitter receives is either an inference graph (arguments
// and results named by `onnx.name`) or a training step, whose signature
// also carries the model's persistent state (GraphTraining.h):
//  - an argument with `graph.state = "<name>"` and `graph.init = <elements>`
//    is a piece of state (parameter, optimizer moment, step counter): a
//    STATE entry of the weights table, initialized from graph.init;
//  - a result with `graph.update = <argument>` is that state's value after
//    the step, written back into the state buffer at the end of the run;
//  - a result with `graph.grad = <argument>` is a GRAD output named by the
//    parameter; every other result is an OUTPUT.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_CPU_CPPEMITTER_H
#define PCC_TARGET_CPU_CPPEMITTER_H

#include "pcc/Target/AbiTables.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace pcc {

struct CppEmitOptions {
  /// Prefix of the exported `<prefix>_model_info` / `<prefix>_model_run`;
  /// several models can share one translation unit with distinct prefixes.
  std::string symbolPrefix = "pcc";
  /// Anonymous constants up to this many elements are emitted inline; larger
  /// ones go to the weights file, except splats, which are filled into the
  /// workspace where they are defined.
  int64_t maxInlineElements = 1024;
};

/// What the emitter planned, for the compile report.
struct CppEmitResult {
  std::vector<WeightEntry> weights;
  /// The ranks' mesh (axis names and sizes); empty for one rank.
  std::vector<std::pair<std::string, int64_t>> mesh;
  uint64_t workspaceBytes = 0;
};

/// Emits `func` (Graph ops on static tensors) as a C++17 translation unit
/// implementing the pccrt ABI (runtime/include/pccrt/pccrt.h). Emits a
/// diagnostic at the offending op and fails on anything it cannot lower or
/// on malformed state attributes.
llvm::FailureOr<CppEmitResult> emitCpp(mlir::func::FuncOp func,
                                       llvm::raw_ostream &os,
                                       const CppEmitOptions &options = {});

/// The text of the kernel header the generated code includes
/// ("pcc_kernels.h"), and of the ABI header ("pccrt.h").
llvm::StringRef getKernelHeader();
llvm::StringRef getAbiHeader();

} // namespace pcc

#endif // PCC_TARGET_CPU_CPPEMITTER_H
