//===- ScalarExpr.cpp - Per-element expressions of element-wise ops -------===//

#include "pcc/Target/ScalarExpr.h"

#include "mlir/IR/Matchers.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Target/TargetHooks.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

std::optional<std::string> pcc::getScalarExpr(Operation *op,
                                              ArrayRef<std::string> a,
                                              const TargetHooks &hooks) {
  if (op->getNumResults() != 1)
    return std::nullopt;
  Type et = getElementTypeOrSelf(op->getResult(0).getType());
  std::string t = hooks.getTypeName(et);
  bool isFloat = isa<FloatType>(et);
  auto call = [&](MathFunction fn) { return hooks.getMathCall(fn, et, a); };
  using Expr = std::optional<std::string>;
  return llvm::TypeSwitch<Operation *, Expr>(op)
      .Case([&](SqrtOp) { return call(MathFunction::Sqrt); })
      .Case([&](ReciprocalOp) { return t + "(1) / " + a[0]; })
      .Case([&](NegOp) { return t + "(-" + a[0] + ")"; })
      .Case([&](AbsOp) { return call(MathFunction::Abs); })
      .Case([&](ErfOp) { return call(MathFunction::Erf); })
      .Case([&](TanhOp) { return call(MathFunction::Tanh); })
      .Case([&](SigmoidOp) { return call(MathFunction::Sigmoid); })
      .Case([&](ExpOp) { return call(MathFunction::Exp); })
      .Case([&](LogOp) { return call(MathFunction::Log); })
      .Case([&](ReluOp) {
        return "(" + a[0] + " > " + t + "(0) ? " + a[0] + " : " + t + "(0))";
      })
      .Case([&](FloorOp) { return call(MathFunction::Floor); })
      .Case([&](CeilOp) { return call(MathFunction::Ceil); })
      .Case([&](SinOp) { return call(MathFunction::Sin); })
      .Case([&](CosOp) { return call(MathFunction::Cos); })
      .Case([&](NotOp) { return "!" + a[0]; })
      .Case([&](IsNaNOp i) {
        return hooks.getMathCall(MathFunction::IsNaN,
                                 getElementTypeOrSelf(i.getInput().getType()),
                                 a);
      })
      .Case([&](AddOp) { return t + "(" + a[0] + " + " + a[1] + ")"; })
      .Case([&](SubOp) { return t + "(" + a[0] + " - " + a[1] + ")"; })
      .Case([&](MulOp) { return t + "(" + a[0] + " * " + a[1] + ")"; })
      .Case([&](DivOp) {
        // Integer division by zero is undefined in ONNX; give 0, not a trap.
        return isFloat ? a[0] + " / " + a[1]
                       : "(" + a[1] + " ? " + t + "(" + a[0] + " / " + a[1] +
                             ") : " + t + "(0))";
      })
      .Case([&](PowOp pow) {
        // A constant small integer exponent (GELU's cube) is multiplied
        // out: exact, and free of a pow call that blocks vectorization.
        DenseElementsAttr exponent;
        if (isFloat && matchPattern(pow.getRhs(), m_Constant(&exponent)) &&
            exponent.isSplat()) {
          double e = isa<FloatType>(exponent.getElementType())
                         ? exponent.getSplatValue<APFloat>().convertToDouble()
                         : double(exponent.getSplatValue<APInt>()
                                      .getSExtValue());
          if (e == 1)
            return t + "(" + a[0] + ")";
          if (e == 2 || e == 3 || e == 4) {
            std::string product = a[0];
            for (int k = 1; k < int(e); ++k)
              product += " * " + a[0];
            return t + "(" + product + ")";
          }
        }
        return call(MathFunction::Pow);
      })
      .Case([&](MaxOp) { return call(MathFunction::Max); })
      .Case([&](MinOp) { return call(MathFunction::Min); })
      .Case([&](AndOp) { return "(" + a[0] + " && " + a[1] + ")"; })
      .Case([&](OrOp) { return "(" + a[0] + " || " + a[1] + ")"; })
      .Case([&](XorOp) { return "(" + a[0] + " != " + a[1] + ")"; })
      .Case([&](EqualOp) { return "(" + a[0] + " == " + a[1] + ")"; })
      .Case([&](LessOp) { return "(" + a[0] + " < " + a[1] + ")"; })
      .Case([&](LessOrEqualOp) { return "(" + a[0] + " <= " + a[1] + ")"; })
      .Case([&](GreaterOp) { return "(" + a[0] + " > " + a[1] + ")"; })
      .Case([&](GreaterOrEqualOp) { return "(" + a[0] + " >= " + a[1] + ")"; })
      .Case([&](WhereOp) {
        return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
      })
      .Case([&](CastOp) {
        if (et.isInteger(1))
          return "(" + a[0] + " != 0)";
        return "static_cast<" + t + ">(" + a[0] + ")";
      })
      .Default([](Operation *) { return std::nullopt; });
}

std::string pcc::getFloatLiteral(double v, bool isFloat) {
  std::string t = isFloat ? "float" : "double";
  if (std::isnan(v))
    return "std::numeric_limits<" + t + ">::quiet_NaN()";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + t +
           ">::infinity()";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", v);
  return std::string(buf) + (isFloat ? "f" : "");
}

std::string pcc::getIntLiteral(int64_t v, Type t) {
  if (t.isInteger(1))
    return v ? "true" : "false";
  if (v == std::numeric_limits<int64_t>::min())
    return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + "LL";
}

std::string pcc::getLiterals(DenseElementsAttr value) {
  std::string s;
  llvm::raw_string_ostream os(s);
  Type et = value.getElementType();
  if (isa<FloatType>(et)) {
    llvm::interleaveComma(value.getValues<APFloat>(), os, [&](APFloat f) {
      os << getFloatLiteral(f.convertToDouble(), et.isF32());
    });
  } else {
    bool u = et.isUnsignedInteger() || et.isInteger(1);
    llvm::interleaveComma(value.getValues<APInt>(), os, [&](APInt i) {
      os << getIntLiteral(u ? int64_t(i.getZExtValue()) : i.getSExtValue(), et);
    });
  }
  return s;
}
