//===- Passes.h - pcc's passes ----------------------------------*- C++ -*-===//

#ifndef PCC_TRANSFORMS_PASSES_H
#define PCC_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace pcc {

#define GEN_PASS_DECL
#include "pcc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pcc/Transforms/Passes.h.inc"

/// Checks that every value in `func` is a statically shaped tensor of a
/// supported element type; emits an error at the first that is not.
llvm::LogicalResult checkStaticShapes(mlir::func::FuncOp func);

} // namespace pcc

#endif // PCC_TRANSFORMS_PASSES_H
