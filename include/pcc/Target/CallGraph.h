//===- CallGraph.h - The functions one generated program holds --*- C++ -*-===//
//
// A program is compiled from a module: its entry is the one public
// func.func (whose signature is the model's interface: inputs, outputs,
// state), and the private func.func ops are functions it reaches through
// func.call (a pipeline stage's forward, backward or optimizer step). Every
// target compiles each function on its own (its own BufferPlan) and
// gives a call the workspace after the caller's own, so calls must form a
// DAG of defined functions. This checks that and orders the functions
// callees first.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_CALLGRAPH_H
#define PCC_TARGET_CALLGRAPH_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

namespace pcc {

/// The module's entry function: its one public func.func. Fails with a
/// diagnostic when there is none or more than one.
mlir::FailureOr<mlir::func::FuncOp> getEntryFunction(mlir::ModuleOp module);

class ProgramCallGraph {
public:
  /// The program of `entry` and every private func.func with a body in its
  /// module. Fails with a diagnostic at the call when a func.call names no
  /// function of the module, a function without a body, a public function
  /// or the entry, or when calls recurse.
  static mlir::FailureOr<ProgramCallGraph> build(mlir::func::FuncOp entry);

  mlir::func::FuncOp getEntry() const { return functions.back(); }
  /// Every function of the program, each after all functions it calls; the
  /// entry last.
  llvm::ArrayRef<mlir::func::FuncOp> getFunctions() const { return functions; }
  /// The function `call` calls.
  mlir::func::FuncOp getCallee(mlir::func::CallOp call) const {
    return callees.lookup(call);
  }
  /// The workspace each function needs for itself and the calls it makes,
  /// when every call gets the workspace after its caller's own: a
  /// function's own bytes (`ownBytes`) plus the most any of its callees
  /// needs.
  llvm::DenseMap<mlir::func::FuncOp, int64_t> getWorkspaceWithCallees(
      const llvm::DenseMap<mlir::func::FuncOp, int64_t> &ownBytes) const;

private:
  llvm::SmallVector<mlir::func::FuncOp> functions;
  llvm::DenseMap<mlir::func::CallOp, mlir::func::FuncOp> callees;
};

} // namespace pcc

#endif // PCC_TARGET_CALLGRAPH_H
