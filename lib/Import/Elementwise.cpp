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
  auto scalarType = RankedTensorType::get({}, et);
  DenseElementsAttr count =
      isa<FloatType>(et)
          ? DenseElementsAttr::get(scalarType,
                                   FloatAttr::get(et, double(n.numInputs())))
          : DenseElementsAttr::get(
                scalarType, IntegerAttr::get(et, int64_t(n.numInputs())));
  auto r = n.create1<graph::DivOp>({n.results[0], n.constant(count)});
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
  auto scalar = [&](double v) {
    return n.constant(DenseElementsAttr::get(RankedTensorType::get({}, et),
                                             FloatAttr::get(et, v)));
  };
  auto mul = [&](Value a, Value b) { return n.create1<graph::MulOp>({a, b}); };
  FailureOr<Value> inner;
  if (approximate == "tanh") {
    auto x2 = mul(x, x);
    if (failed(x2))
      return failure();
    auto x3 = mul(*x2, x);
    if (failed(x3))
      return failure();
    auto cubic = mul(*x3, scalar(0.044715));
    if (failed(cubic))
      return failure();
    auto sum = n.create1<graph::AddOp>({x, *cubic});
    if (failed(sum))
      return failure();
    auto scaled = mul(*sum, scalar(std::sqrt(2.0 / M_PI)));
    if (failed(scaled))
      return failure();
    inner = n.create1WithType(graph::TanhOp::getOperationName(), x.getType(),
                              *scaled);
  } else {
    auto scaled = mul(x, scalar(M_SQRT1_2));
    if (failed(scaled))
      return failure();
    inner = n.create1WithType(graph::ErfOp::getOperationName(), x.getType(),
                              *scaled);
  }
  if (failed(inner))
    return failure();
  auto onePlus = n.create1<graph::AddOp>({*inner, scalar(1.0)});
  if (failed(onePlus))
    return failure();
  auto half = mul(x, scalar(0.5));
  if (failed(half))
    return failure();
  return n.setResult(mul(*half, *onePlus));
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
}
