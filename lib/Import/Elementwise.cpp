//===- Elementwise.cpp - Import element-wise ONNX operators ---------------===//

#include "NodeImporter.h"

#include <cmath>

using namespace mlir;
using namespace pcc;
using namespace pcc::import;

template <typename OpTy> static LogicalResult importUnary(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  auto r = n.createWithTypes(OpTy::getOperationName(), n.input(0).getType(),
                             n.input(0));
  return n.setResults(r);
}

template <typename OpTy> static LogicalResult importBinary(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto r = n.create1<OpTy>({n.input(0), n.input(1)});
  return n.setResult(r);
}

/// Sum, Max, Min, Mean take any number of operands: a chain of binaries.
template <typename OpTy> static LogicalResult importVariadic(NodeImporter &n) {
  if (failed(n.requireInputs(std::max<size_t>(1, n.numInputs()))))
    return failure();
  Value acc = n.input(0);
  for (size_t i = 1; i < n.numInputs(); ++i) {
    auto r = n.create1<OpTy>({acc, n.input(i)});
    if (failed(r))
      return failure();
    acc = *r;
  }
  n.results = {acc};
  return success();
}

static LogicalResult importMean(NodeImporter &n) {
  if (failed(importVariadic<graph::AddOp>(n)))
    return failure();
  if (n.numInputs() == 1)
    return success();
  Type et = getElementTypeOrSelf(n.results[0].getType());
  auto r = n.create1<graph::DivOp>(
      {n.results[0], n.scalar(et, double(n.numInputs()))});
  return n.setResult(r);
}

static LogicalResult importWhere(NodeImporter &n) {
  if (failed(n.requireInputs(3)))
    return failure();
  auto r = n.create1<graph::WhereOp>({n.input(0), n.input(1), n.input(2)});
  return n.setResult(r);
}

static LogicalResult importCast(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  int64_t to = n.attrInt("to", 0);
  Type et = convertElementType(n.b.getContext(), int32_t(to));
  if (!et)
    return emitError(n.loc) << "Cast: unsupported target type "
                            << describeElementType(int32_t(to)),
           failure();
  auto type = RankedTensorType::get(n.inputType(0).getShape(), et);
  auto r =
      n.create1WithType(graph::CastOp::getOperationName(), type, n.input(0));
  return n.setResult(r);
}

/// CastLike: a Cast to the element type of the second operand.
static LogicalResult importCastLike(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto type = RankedTensorType::get(n.inputType(0).getShape(),
                                    n.inputType(1).getElementType());
  auto r =
      n.create1WithType(graph::CastOp::getOperationName(), type, n.input(0));
  return n.setResult(r);
}

static LogicalResult importIsNaN(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  if (!isa<FloatType>(n.inputType(0).getElementType()))
    return emitError(n.loc)
               << "IsNaN: input must be a float tensor, got " << n.inputType(0),
           failure();
  auto type = RankedTensorType::get(n.inputType(0).getShape(), n.b.getI1Type());
  auto r =
      n.create1WithType(graph::IsNaNOp::getOperationName(), type, n.input(0));
  return n.setResult(r);
}

namespace {
/// Builds a composite of Graph ops (which autodiff knows) on `x`, its
/// scalars of x's element type, failing at the first op that does not
/// build.
class Composer {
public:
  Composer(NodeImporter &n, Value x)
      : n(n), et(cast<RankedTensorType>(x.getType()).getElementType()) {}

  Value scalar(double v) { return n.scalar(et, v); }
  template <typename OpTy> Value unary(Value a) {
    if (!a)
      return {};
    auto r = n.createWithTypes(OpTy::getOperationName(), a.getType(), a);
    return succeeded(r) ? (*r)[0] : Value();
  }
  template <typename OpTy> Value binary(Value a, Value b) {
    if (!a || !b)
      return {};
    auto r = n.create1<OpTy>({a, b});
    return succeeded(r) ? *r : Value();
  }
  /// `a` where `cond` holds, else `b`.
  Value select(Value cond, Value a, Value b) {
    if (!cond || !a || !b)
      return {};
    return n.create1<graph::WhereOp>({cond, a, b}).value_or(Value());
  }
  Value mul(Value a, Value b) { return binary<graph::MulOp>(a, b); }
  Value add(Value a, Value b) { return binary<graph::AddOp>(a, b); }
  /// log(1 + exp(x)) as relu(x) + log(1 + exp(-|x|)): exp never overflows.
  /// (Each op is made in its own statement, so that the IR's order does
  /// not depend on the order in which a compiler evaluates arguments.)
  Value softplus(Value x) {
    Value e = unary<graph::ExpOp>(unary<graph::NegOp>(unary<graph::AbsOp>(x)));
    Value one = scalar(1);
    Value tail = unary<graph::LogOp>(add(e, one));
    Value relu = unary<graph::ReluOp>(x);
    return add(relu, tail);
  }
  /// max(0, min(1, alpha x + beta)).
  Value hardSigmoid(Value x, double alpha, double beta) {
    Value a = scalar(alpha);
    Value b = scalar(beta);
    Value line = add(mul(x, a), b);
    Value one = scalar(1);
    Value upper = binary<graph::MinOp>(line, one);
    Value zero = scalar(0);
    return binary<graph::MaxOp>(upper, zero);
  }
  /// `negative` where x < 0, else x.
  Value belowZero(Value x, Value negative) {
    if (!negative)
      return {};
    Value zero = scalar(0);
    Value less = binary<graph::LessOp>(x, zero);
    return select(less, negative, x);
  }

private:
  NodeImporter &n;
  Type et;
};
} // namespace

/// Mod of integers, from the truncating division: r = a - (a / b) * b has
/// the dividend's sign (fmod 1, C's %); fmod 0 (Python's %, the divisor's
/// sign) adds b to a nonzero r whose sign differs from b's. Floats (fmod 1,
/// C's fmod) are refused: a - trunc(a / b) * b in floats is not exact.
static LogicalResult importMod(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  Type et = getElementTypeOrSelf(n.input(0).getType());
  if (!isa<IntegerType>(et))
    return emitError(n.loc) << "Mod: operands of " << et
                            << " are not supported (integers only)",
           failure();
  Value a = n.input(0), b = n.input(1);
  Composer c(n, a);
  Value quotient = c.binary<graph::DivOp>(a, b);
  Value product = c.mul(quotient, b);
  Value rest = c.binary<graph::SubOp>(a, product);
  if (rest && n.attrInt("fmod", 0) == 0) {
    Value zero = c.scalar(0);
    Value restNegative = c.binary<graph::LessOp>(rest, zero);
    Value divisorNegative = c.binary<graph::LessOp>(b, zero);
    Value signsDiffer = c.binary<graph::XorOp>(restNegative, divisorNegative);
    Value restZero = c.binary<graph::EqualOp>(rest, zero);
    Value restNonzero = c.unary<graph::NotOp>(restZero);
    Value moved = c.binary<graph::AndOp>(signsDiffer, restNonzero);
    Value shifted = c.add(rest, b);
    rest = c.select(moved, shifted, rest);
  }
  if (!rest)
    return failure();
  n.results = {rest};
  return success();
}

/// Sign: 1 above zero, -1 below, 0 at zero and NaN at a NaN, of the
/// input's type.
static LogicalResult importSign(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  Value x = n.input(0);
  Type et = getElementTypeOrSelf(x.getType());
  if (!isa<FloatType, IntegerType>(et) || et.isInteger(1))
    return emitError(n.loc) << "Sign: input of element type " << et, failure();
  Composer c(n, x);
  Value zero = c.scalar(0);
  Value positive = c.binary<graph::GreaterOp>(x, zero);
  Value negative = c.binary<graph::LessOp>(x, zero);
  // Where neither test holds x is zero or a NaN: x * 0 is its sign, with
  // a gradient of zero, as Sign's everywhere.
  Value rest = c.mul(x, zero);
  Value minusOne = c.scalar(-1);
  Value belowOrRest = c.select(negative, minusOne, rest);
  Value one = c.scalar(1);
  Value y = c.select(positive, one, belowOrRest);
  if (!y)
    return failure();
  n.results = {y};
  return success();
}

/// Gelu (opset 20) in Graph ops, which autodiff already knows:
/// 0.5 x (1 + erf(x / sqrt 2)), or with approximate="tanh"
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
static LogicalResult importGelu(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  Value x = n.input(0);
  Type et = n.inputType(0).getElementType();
  if (!isa<FloatType>(et))
    return emitError(n.loc) << "Gelu: input must be a float tensor", failure();
  std::string approximate = n.attrString("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return emitError(n.loc) << "Gelu: unknown approximate '" << approximate
                            << "' (none or tanh)",
           failure();
  Composer c(n, x);
  Value inner;
  if (approximate == "tanh") {
    Value cube = c.mul(c.mul(x, x), x);
    Value k = c.scalar(0.044715);
    Value sum = c.add(x, c.mul(cube, k));
    Value scale = c.scalar(std::sqrt(2.0 / M_PI));
    inner = c.unary<graph::TanhOp>(c.mul(sum, scale));
  } else {
    Value scale = c.scalar(M_SQRT1_2);
    inner = c.unary<graph::ErfOp>(c.mul(x, scale));
  }
  Value one = c.scalar(1.0);
  Value onePlus = c.add(inner, one);
  Value half = c.scalar(0.5);
  Value y = c.mul(c.mul(x, half), onePlus);
  if (!y)
    return failure();
  n.results = {y};
  return success();
}

/// Clip (torch.clamp): Max(x, min) then Min(that, max), each where its
/// bound is given: as inputs from opset 11 (scalars, either may be ""), as
/// float attributes before. Autodiff knows Max and Min: x keeps its
/// gradient where it equals a bound, as under torch.clamp.
static LogicalResult importClip(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  Value y = n.input(0);
  Type et = n.inputType(0).getElementType();
  Composer c(n, y);
  Value bounds[2];
  if (n.opset < 11) {
    if (!isa<FloatType>(et))
      return emitError(n.loc) << "Clip: input must be a float tensor before "
                                 "opset 11, got "
                              << n.inputType(0),
             failure();
    const char *names[] = {"min", "max"};
    for (int i = 0; i < 2; ++i)
      if (n.attr(names[i]))
        bounds[i] = c.scalar(n.attrFloat(names[i], 0));
  } else {
    for (int i = 0; i < 2; ++i) {
      bounds[i] = n.input(size_t(i) + 1);
      if (!bounds[i])
        continue;
      auto type = n.inputType(size_t(i) + 1);
      if (type.getNumElements() != 1 || type.getElementType() != et)
        return emitError(n.loc)
                   << "Clip: its " << (i ? "max" : "min")
                   << " must be one element of the input's type, got " << type,
               failure();
    }
  }
  if (bounds[0])
    y = c.binary<graph::MaxOp>(y, bounds[0]);
  if (bounds[1])
    y = c.binary<graph::MinOp>(y, bounds[1]);
  if (!y)
    return failure();
  n.results = {y};
  return success();
}

/// The activations that ONNX defines as functions of one float input, and
/// their attributes' defaults: each a composite of Graph ops.
static LogicalResult importActivation(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  Value x = n.input(0);
  StringRef op = n.node.op_type();
  if (!isa<FloatType>(n.inputType(0).getElementType()))
    return emitError(n.loc) << op << ": input must be a float tensor, got "
                            << n.inputType(0),
           failure();
  Composer c(n, x);
  Value y;
  if (op == "Softplus") {
    y = c.softplus(x);
  } else if (op == "Softsign") {
    Value one = c.scalar(1);
    Value denominator = c.add(c.unary<graph::AbsOp>(x), one);
    y = c.binary<graph::DivOp>(x, denominator);
  } else if (op == "Mish") {
    y = c.mul(x, c.unary<graph::TanhOp>(c.softplus(x)));
  } else if (op == "HardSigmoid") {
    y = c.hardSigmoid(x, n.attrFloat("alpha", 0.2f), n.attrFloat("beta", 0.5f));
  } else if (op == "HardSwish") {
    y = c.mul(x, c.hardSigmoid(x, 1.0 / 6, 0.5));
  } else if (op == "LeakyRelu") {
    Value alpha = c.scalar(n.attrFloat("alpha", 0.01f));
    y = c.belowZero(x, c.mul(x, alpha));
  } else {
    // Elu: alpha (exp(x) - 1) below zero, of exp(min(x, 0)), so that
    // neither the value nor its gradient meets exp of a large x.
    Value zero = c.scalar(0);
    Value e = c.unary<graph::ExpOp>(c.binary<graph::MinOp>(x, zero));
    Value one = c.scalar(1);
    Value below = c.binary<graph::SubOp>(e, one);
    Value alpha = c.scalar(n.attrFloat("alpha", 1.0f));
    y = c.belowZero(x, c.mul(below, alpha));
  }
  if (!y)
    return failure();
  n.results = {y};
  return success();
}

void pcc::import::registerElementwiseImporters(ImporterMap &map) {
  map["Sqrt"] = importUnary<graph::SqrtOp>;
  map["Reciprocal"] = importUnary<graph::ReciprocalOp>;
  map["Neg"] = importUnary<graph::NegOp>;
  map["Abs"] = importUnary<graph::AbsOp>;
  map["Erf"] = importUnary<graph::ErfOp>;
  map["Tanh"] = importUnary<graph::TanhOp>;
  map["Sigmoid"] = importUnary<graph::SigmoidOp>;
  map["Exp"] = importUnary<graph::ExpOp>;
  map["Log"] = importUnary<graph::LogOp>;
  map["Relu"] = importUnary<graph::ReluOp>;
  map["Floor"] = importUnary<graph::FloorOp>;
  map["Ceil"] = importUnary<graph::CeilOp>;
  map["Sin"] = importUnary<graph::SinOp>;
  map["Cos"] = importUnary<graph::CosOp>;
  map["Not"] = importUnary<graph::NotOp>;
  map["Add"] = importBinary<graph::AddOp>;
  map["Sub"] = importBinary<graph::SubOp>;
  map["Mul"] = importBinary<graph::MulOp>;
  map["Div"] = importBinary<graph::DivOp>;
  map["Pow"] = importBinary<graph::PowOp>;
  map["Mod"] = importMod;
  map["Sign"] = importSign;
  map["And"] = importBinary<graph::AndOp>;
  map["Or"] = importBinary<graph::OrOp>;
  map["Xor"] = importBinary<graph::XorOp>;
  map["Equal"] = importBinary<graph::EqualOp>;
  map["Less"] = importBinary<graph::LessOp>;
  map["LessOrEqual"] = importBinary<graph::LessOrEqualOp>;
  map["Greater"] = importBinary<graph::GreaterOp>;
  map["GreaterOrEqual"] = importBinary<graph::GreaterOrEqualOp>;
  map["Max"] = importVariadic<graph::MaxOp>;
  map["Min"] = importVariadic<graph::MinOp>;
  map["Sum"] = importVariadic<graph::AddOp>;
  map["Mean"] = importMean;
  map["Where"] = importWhere;
  map["Cast"] = importCast;
  map["CastLike"] = importCastLike;
  map["IsNaN"] = importIsNaN;
  map["Gelu"] = importGelu;
  map["Clip"] = importClip;
  for (const char *op : {"Softplus", "Softsign", "Mish", "HardSigmoid",
                         "HardSwish", "LeakyRelu", "Elu"})
    map[op] = importActivation;
}
