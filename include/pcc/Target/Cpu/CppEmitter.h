//===- CppEmitter.h - Graph dialect to C++ for the CPU target ---*- C++ -*-===//
//
// The entry function of the program the emitter receives is either an
// inference graph (arguments and results named by `onnx.name`) or a training
// step, whose signature also carries the model's persistent state
// (GraphTraining.h):
//  - an argument with `graph.state = "<name>"` and `graph.init = <elements>`
//    is a piece of state (parameter, optimizer moment, step counter): a
//    STATE entry of the weights table, initialized from graph.init;
//  - a result with `graph.update = <argument>` is that state's value after
//    the step, written back into the state buffer at the end of the run;
//  - a result with `graph.grad = <argument>` is a GRAD output named by the
//    parameter; every other result is an OUTPUT.
// The functions it calls take and give plain buffers (their attributes do
// not matter), and may read weights: all share the one weights table.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_CPU_CPPEMITTER_H
#define PCC_TARGET_CPU_CPPEMITTER_H

#include "pcc/Target/AbiTables.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
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
  /// The entry's workspace and the deepest chain of its callees'.
  uint64_t workspaceBytes = 0;
};

/// Emits the program of `module` (Graph ops on static tensors) as a C++17
/// translation unit implementing the pccrt ABI
/// (runtime/include/pccrt/pccrt.h). The entry, the module's one public
/// func.func, becomes `<prefix>_model_run`; every private func.func a static
/// function
///
///   static int fn_NAME(const pccrt_context *ctx, void *const *args,
///                      void *const *results, char *ws);
///
/// that reads the buffers `args`, never writes them, computes its results
/// into the buffers `results` (in place where its buffer plan allows,
/// otherwise copied there at the end), works in the workspace `ws`, and
/// returns a pccrt error code that its callers return. A func.call passes
/// the workspace after the caller's own, so the program's workspace is the
/// entry's plus the deepest chain of callees'. Emits a diagnostic at the
/// offending op and fails on anything it cannot lower (a call of a missing,
/// public or external function, recursion) or on malformed state
/// attributes.
llvm::FailureOr<CppEmitResult> emitCpp(mlir::ModuleOp module,
                                       llvm::raw_ostream &os,
                                       const CppEmitOptions &options = {});
/// The same with `entry` as the entry (which may be one of several public
/// functions): it and every private func.func of its module.
llvm::FailureOr<CppEmitResult> emitCpp(mlir::func::FuncOp entry,
                                       llvm::raw_ostream &os,
                                       const CppEmitOptions &options = {});

/// The text of the kernel header the generated code includes
/// ("pcc_kernels.h"), and of the ABI header ("pccrt.h").
llvm::StringRef getKernelHeader();
llvm::StringRef getAbiHeader();

} // namespace pcc

#endif // PCC_TARGET_CPU_CPPEMITTER_H
