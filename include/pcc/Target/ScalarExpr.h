//===- ScalarExpr.h - Per-element expressions -------------------*- C++ -*-===//
//
// The body of an element-wise op's loop nest is one expression over one
// element of each operand, in the C-family syntax that every target's
// generated code shares (C++ on the CPU, CUDA C++ on GPUs); the spelling of
// types and math functions comes from the target's hooks. Constants print
// as literals of that syntax too.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_SCALAREXPR_H
#define PCC_TARGET_SCALAREXPR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

#include <optional>
#include <string>

namespace pcc {

class TargetHooks;

/// The value of element-wise `op`'s result element as an expression of its
/// operands' elements `operands` (one expression each), or std::nullopt
/// when `op` is not element-wise.
std::optional<std::string> getScalarExpr(mlir::Operation *op,
                                         llvm::ArrayRef<std::string> operands,
                                         const TargetHooks &hooks);

/// A floating-point literal, exact (hexadecimal), of type float or double.
std::string getFloatLiteral(double value, bool isFloat);
/// An integer literal of type `type` (bool for i1).
std::string getIntLiteral(int64_t value, mlir::Type type);
/// The elements of a constant as a comma-separated list of literals.
std::string getLiterals(mlir::DenseElementsAttr value);

} // namespace pcc

#endif // PCC_TARGET_SCALAREXPR_H
