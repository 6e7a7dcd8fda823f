//===- DistOps.h - The Dist dialect, its attributes and ops -*- C++ -*-===//

#ifndef PCC_DIALECT_DIST_IR_DISTOPS_H
#define PCC_DIALECT_DIST_IR_DISTOPS_H

#include "pcc/Dialect/Dist/IR/DistNames.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "pcc/Dialect/Dist/IR/DistEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "pcc/Dialect/Dist/IR/DistAttrs.h.inc"

#include "pcc/Dialect/Dist/IR/DistDialect.h.inc"

#define GET_OP_CLASSES
#include "pcc/Dialect/Dist/IR/DistOps.h.inc"

namespace pcc::dist {
/// A collective that starts apart from its wait (all_reduce, all_gather,
/// reduce_scatter): code may run between the two.
bool isStartedCollective(mlir::Operation *op);
/// Whether the started collective `op` completes at its `dist.wait` ops
/// (every reader of its result is one), rather than where it starts.
bool completesAtWait(mlir::Operation *op);
/// Whether every rank of a group must meet `op` in the same order as the
/// others: a Dist op with effects (a collective or a transfer), or a call,
/// which may communicate. Pure Dist ops (a rank's block, its coordinate)
/// are local.
bool keepsCommunicationOrder(mlir::Operation *op);
/// The module's `dist.mesh @mesh` with axis `axis` of `size` ranks: created
/// when missing, or rebuilt with the axis inserted where kMeshAxisOrder
/// puts it (an axis it does not list goes last). An axis already there of
/// another size is an error.
mlir::FailureOr<MeshOp> getOrAddMeshAxis(mlir::ModuleOp module,
                                         llvm::StringRef axis, int64_t size);
} // namespace pcc::dist

#endif // PCC_DIALECT_DIST_IR_DISTOPS_H
