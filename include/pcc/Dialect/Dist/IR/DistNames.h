//===- DistNames.h - Attribute names of pipeline programs -------*- C++ -*-===//
//
// The discardable attributes that the pipeline passes write on a rank's
// step and the targets read, named once for both (targets do not depend on
// the Transforms headers).
//
//===----------------------------------------------------------------------===//

#ifndef PCC_DIALECT_DIST_IR_DISTNAMES_H
#define PCC_DIALECT_DIST_IR_DISTNAMES_H

#include "llvm/ADT/StringRef.h"

namespace pcc::dist {

/// The device mesh the passes create (`dist.mesh @mesh`), and its axes:
/// data parallelism, pipeline stages and tensor parallelism, in the order
/// the mesh lists them (major to minor: a stage's tensor-parallel ranks are
/// neighbours, and so are a replica's stages).
inline constexpr llvm::StringLiteral kMeshName = "mesh";
inline constexpr llvm::StringLiteral kDataAxis = "dp";
inline constexpr llvm::StringLiteral kPipelineAxis = "pp";
inline constexpr llvm::StringLiteral kTensorAxis = "tp";
inline constexpr llvm::StringLiteral kMeshAxisOrder[] = {
    kDataAxis, kPipelineAxis, kTensorAxis};
/// A pipeline rank's step (and its optimizer function): its coordinate
/// along the pipeline axis.
inline constexpr llvm::StringLiteral kRankAttr = "dist.rank";
/// A call of a stage function: the scheduled action ("F0", "B1", "W0", "O").
inline constexpr llvm::StringLiteral kActionAttr = "dist.action";
/// A result of a rank's step: its index among the whole step's results,
/// which orders the outputs table the ranks share.
inline constexpr llvm::StringLiteral kResultIndexAttr = "dist.result_index";

} // namespace pcc::dist

#endif // PCC_DIALECT_DIST_IR_DISTNAMES_H
