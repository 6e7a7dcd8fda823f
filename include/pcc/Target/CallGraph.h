//===- CallGraph.h - The functions one generated program holds --*- C++ -*-===//
//
// A program is compiled from a module. Its entries are the module's public
// func.func ops, whose signatures are the model's interface (inputs,
// outputs, state): one, the step every rank runs, or, for a pipeline, one
// per coordinate of the pipeline axis, marked `dist.rank` (each rank runs
// its stage's step). A program of several steps that share the weights (a
// generation build's prefill and decode) has several entry points, each a
// name (`pcc.entry` on its public functions, "main" where there is none)
// and its own public function or functions per pipeline rank. The private
// func.func ops are functions the entries
// reach through func.call (a pipeline stage's forward, backward or
// optimizer step). Every target compiles each function on its own (its own
// BufferPlan) and gives a call the workspace after the caller's own, so
// calls must form a DAG of defined functions. This checks that and orders
// the functions callees first.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_CALLGRAPH_H
#define PCC_TARGET_CALLGRAPH_H

#include "pcc/Dialect/Dist/IR/DistNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace pcc {

/// The module's entry functions: its one public func.func, or one per
/// coordinate of a pipeline axis of `numStages` ranks, in coordinate order,
/// each marked `dist.rank = <coordinate>`; for a program of several entry
/// points, those of every entry point in turn. Fails with a diagnostic when
/// there is no public function, when several are not all marked, or when
/// the marks are not the coordinates 0 .. numStages - 1, each once (a
/// missing one is reported at the mesh).
mlir::FailureOr<llvm::SmallVector<mlir::func::FuncOp>>
getEntryFunctions(mlir::ModuleOp module, int64_t numStages);

/// The attribute that names a public function's entry point.
inline constexpr llvm::StringLiteral kEntryPointAttr = "pcc.entry";

/// An entry point of a program: its name and its public functions, one or
/// one per pipeline rank (in coordinate order).
struct EntryPoint {
  std::string name;
  llvm::SmallVector<mlir::func::FuncOp> functions;
};

/// The module's entry points, by their names (kEntryPointAttr) in the order
/// their first functions come; the functions of each as getEntryFunctions
/// requires them. Fails with a diagnostic where those are not, or where a
/// function is named by something other than a string.
mlir::FailureOr<llvm::SmallVector<EntryPoint>>
getEntryPoints(mlir::ModuleOp module, int64_t numStages);

/// Whether `entries` (from getEntryFunctions) are a pipeline's.
inline bool isPipeline(llvm::ArrayRef<mlir::func::FuncOp> entries) {
  return llvm::any_of(entries, [](mlir::func::FuncOp f) {
    return f->hasAttr(dist::kRankAttr);
  });
}

class ProgramCallGraph {
public:
  /// The program of `entries` and every private func.func with a body in
  /// their module. Fails with a diagnostic at the call when a func.call
  /// names no function of the module, a function without a body, a public
  /// function or an entry, or when calls recurse.
  static mlir::FailureOr<ProgramCallGraph>
  build(llvm::ArrayRef<mlir::func::FuncOp> entries);

  llvm::ArrayRef<mlir::func::FuncOp> getEntries() const { return entries; }
  bool isEntry(mlir::func::FuncOp f) const {
    return llvm::is_contained(entries, f);
  }
  /// Every function of the program, each after all functions it calls; the
  /// entries last, in their order.
  llvm::ArrayRef<mlir::func::FuncOp> getFunctions() const { return functions; }
  /// The function `call` calls.
  mlir::func::FuncOp getCallee(mlir::func::CallOp call) const {
    return callees.lookup(call);
  }
  /// `from` and every function it reaches through calls.
  llvm::SetVector<mlir::func::FuncOp>
  getReachable(mlir::func::FuncOp from) const;
  /// The workspace each function needs for itself and the calls it makes,
  /// when every call gets the workspace after its caller's own: a
  /// function's own bytes (`ownBytes`) plus the most any of its callees
  /// needs.
  llvm::DenseMap<mlir::func::FuncOp, int64_t> getWorkspaceWithCallees(
      const llvm::DenseMap<mlir::func::FuncOp, int64_t> &ownBytes) const;
  /// Per function, the most times one run of an entry calls it (an entry:
  /// once): a pipeline rank's stage function, once per microbatch. A call
  /// inside another op's region (a loop) counts once.
  llvm::DenseMap<mlir::func::FuncOp, int64_t> getCallsPerRun() const;

private:
  llvm::SmallVector<mlir::func::FuncOp> entries;
  llvm::SmallVector<mlir::func::FuncOp> functions;
  llvm::DenseMap<mlir::func::CallOp, mlir::func::FuncOp> callees;
};

} // namespace pcc

#endif // PCC_TARGET_CALLGRAPH_H
