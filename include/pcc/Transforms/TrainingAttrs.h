//===- TrainingAttrs.h - Attribute names of a training step -----*- C++ -*-===//
//
// The contract between the training passes and the targets: a training step
// is a func.func whose persistent state (parameters, optimizer moments, the
// step counter) arrives as arguments marked `pcc.state = "<name>"` with
// their initial value in `pcc.init`, and leaves as results marked
// `pcc.state_update = "<name>"`; gradients are results marked
// `pcc.grad = "<parameter name>"`; backward ops carry `pcc.backward`.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TRANSFORMS_TRAININGATTRS_H
#define PCC_TRANSFORMS_TRAININGATTRS_H

#include "llvm/ADT/StringRef.h"

namespace pcc {

inline constexpr llvm::StringLiteral kStateAttr = "pcc.state";
inline constexpr llvm::StringLiteral kStateInitAttr = "pcc.init";
inline constexpr llvm::StringLiteral kStateUpdateAttr = "pcc.state_update";
inline constexpr llvm::StringLiteral kGradAttr = "pcc.grad";
inline constexpr llvm::StringLiteral kBackwardAttr = "pcc.backward";

} // namespace pcc

#endif // PCC_TRANSFORMS_TRAININGATTRS_H
