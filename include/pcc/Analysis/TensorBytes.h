//===- TensorBytes.h - The bytes a tensor holds -----------------*- C++ -*-===//
//
// What the memory and cost analyses count a value as: one definition, so
// that the buffer plan, the cost model and the reports agree.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_ANALYSIS_TENSORBYTES_H
#define PCC_ANALYSIS_TENSORBYTES_H

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <cstdint>

namespace pcc {

/// The bytes of a statically shaped tensor type, an i1 taking a byte; 0 for
/// any other type.
inline int64_t getTensorBytes(mlir::Type type) {
  auto t = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return 0;
  int64_t bits = t.getElementType().getIntOrFloatBitWidth();
  return t.getNumElements() * std::max<int64_t>(1, bits / 8);
}

} // namespace pcc

#endif // PCC_ANALYSIS_TENSORBYTES_H
