//===- Math.cpp - Import contractions, normalizations and reductions ------===//

#include "NodeImporter.h"

#include <numeric>

using namespace mlir;
using namespace pcc;
using namespace pcc::import;

static LogicalResult importMatMul(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto r = n.create1<graph::MatMulOp>({n.input(0), n.input(1)});
  return n.setResult(r);
}

static LogicalResult importGemm(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  SmallVector<Value> operands{n.input(0), n.input(1)};
  if (n.input(2))
    operands.push_back(n.input(2));
  SmallVector<NamedAttribute> attrs{
      n.b.getNamedAttr("alpha", n.b.getF32FloatAttr(n.attrFloat("alpha", 1))),
      n.b.getNamedAttr("beta", n.b.getF32FloatAttr(n.attrFloat("beta", 1))),
      n.b.getNamedAttr("transA", n.b.getBoolAttr(n.attrInt("transA", 0))),
      n.b.getNamedAttr("transB", n.b.getBoolAttr(n.attrInt("transB", 0)))};
  auto r = n.create1<graph::GemmOp>(operands, attrs);
  return n.setResult(r);
}

/// Softmax and LogSoftmax. Before opset 13 they flattened the input to 2-D
/// at `axis` (default 1) and normalized over the whole trailing block.
template <typename OpTy> static LogicalResult importSoftmax(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  RankedTensorType type = n.inputType(0);
  int64_t rank = type.getRank();
  auto axis = n.normalizeAxis(n.attrInt("axis", n.opset < 13 ? 1 : -1),
                              std::max<int64_t>(rank, 1));
  if (failed(axis))
    return failure();
  Value x = n.input(0);
  bool flatten = n.opset < 13 && *axis != rank - 1;
  if (flatten) {
    ArrayRef<int64_t> s = type.getShape();
    int64_t outer = std::accumulate(s.begin(), s.begin() + *axis, int64_t(1),
                                    std::multiplies<int64_t>());
    int64_t inner = type.getNumElements() / std::max<int64_t>(outer, 1);
    auto flat = RankedTensorType::get({outer, inner}, type.getElementType());
    auto r = n.create1WithType(graph::ReshapeOp::getOperationName(), flat, x);
    if (failed(r))
      return failure();
    x = *r;
  }
  int64_t opAxis = flatten ? 1 : *axis;
  auto r = n.createWithTypes(
      OpTy::getOperationName(), x.getType(), x,
      n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(opAxis)));
  if (failed(r))
    return failure();
  Value y = (*r)[0];
  if (flatten) {
    auto back =
        n.create1WithType(graph::ReshapeOp::getOperationName(), type, y);
    if (failed(back))
      return failure();
    y = *back;
  }
  n.results = {y};
  return success();
}

static LogicalResult importLayerNorm(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto axis = n.normalizeAxis(n.attrInt("axis", -1), n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  SmallVector<Value> operands{n.input(0), n.input(1)};
  if (n.input(2))
    operands.push_back(n.input(2));
  auto r = n.create<graph::LayerNormOp>(
      operands,
      {n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(*axis)),
       n.b.getNamedAttr("epsilon",
                        n.b.getF32FloatAttr(n.attrFloat("epsilon", 1e-5f)))});
  return n.setResults(r);
}

/// ReduceSum took its axes as an input from opset 13, the other reductions
/// from opset 18. Reduces `x` (the node's input, or a transform of it).
template <typename OpTy>
static LogicalResult importReduceOf(NodeImporter &n, Value x) {
  bool axesAsInput =
      n.opset >= 18 || (n.opset >= 13 && n.node.op_type() == "ReduceSum");
  SmallVector<int64_t> axes;
  if (axesAsInput && n.attr("axes"))
    return emitError(n.loc) << n.node.op_type() << ": opset " << n.opset
                            << " takes axes as an input, not an attribute",
           failure();
  if (!axesAsInput && n.input(1))
    return emitError(n.loc) << n.node.op_type() << ": opset " << n.opset
                            << " takes axes as an attribute, not an input",
           failure();
  if (axesAsInput) {
    if (n.input(1)) {
      auto c = n.constInts(1, "axes");
      if (failed(c))
        return failure();
      axes = *c;
    }
  } else if (auto a = n.attrInts("axes")) {
    axes = *a;
  }
  int64_t rank = n.inputType(0).getRank();
  if (axes.empty()) {
    if (n.attrInt("noop_with_empty_axes", 0)) {
      n.results = {x};
      return success();
    }
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  for (int64_t &a : axes) {
    auto na = n.normalizeAxis(a, rank);
    if (failed(na))
      return failure();
    a = *na;
  }
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return emitError(n.loc) << n.node.op_type() << ": repeated axis", failure();
  auto r = n.create1<OpTy>(
      x, {n.b.getNamedAttr("axes", n.b.getDenseI64ArrayAttr(axes)),
          n.b.getNamedAttr("keepdims",
                           n.b.getBoolAttr(n.attrInt("keepdims", 1) != 0))});
  return n.setResult(r);
}

template <typename OpTy> static LogicalResult importReduce(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  return importReduceOf<OpTy>(n, n.input(0));
}

/// ReduceL1, ReduceL2 and ReduceSumSquare: sums of |x| or x * x (the square
/// root of the latter for L2; of the input itself where noop_with_empty_axes
/// leaves it unreduced, as ONNX's reference does).
enum class Norm { L1, L2, SumSquare };
template <Norm Kind> static LogicalResult importReduceNorm(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  Value x = n.input(0);
  if (!isa<FloatType, IntegerType>(getElementTypeOrSelf(x.getType())))
    return emitError(n.loc) << n.node.op_type() << ": input of element type "
                            << getElementTypeOrSelf(x.getType()),
           failure();
  auto terms =
      Kind == Norm::L1
          ? n.create1WithType(graph::AbsOp::getOperationName(), x.getType(), x)
          : n.create1<graph::MulOp>({x, x});
  if (failed(terms) || failed(importReduceOf<graph::ReduceSumOp>(n, *terms)))
    return failure();
  if (Kind != Norm::L2)
    return success();
  auto root = n.create1WithType(graph::SqrtOp::getOperationName(),
                                n.results[0].getType(), n.results[0]);
  return n.setResult(root);
}

static LogicalResult importCumSum(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto axisValue = n.constInts(1, "axis");
  if (failed(axisValue))
    return failure();
  if (axisValue->size() != 1)
    return emitError(n.loc) << "CumSum: axis must hold one value", failure();
  auto axis = n.normalizeAxis((*axisValue)[0], n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  auto r = n.createWithTypes(
      graph::CumSumOp::getOperationName(), n.input(0).getType(), n.input(0),
      {n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(*axis)),
       n.b.getNamedAttr("exclusive",
                        n.b.getBoolAttr(n.attrInt("exclusive", 0) != 0)),
       n.b.getNamedAttr("reverse",
                        n.b.getBoolAttr(n.attrInt("reverse", 0) != 0))});
  return n.setResults(r);
}

/// TopK: k from the attribute before opset 10, from the second input
/// after (a constant); `largest` from opset 11. The values come sorted
/// whatever `sorted` says (an order is one that ONNX allows).
static LogicalResult importTopK(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  int64_t k;
  if (n.opset < 10) {
    k = n.attrInt("k", -1);
  } else {
    if (failed(n.requireInputs(2)))
      return failure();
    auto c = n.constInts(1, "k");
    if (failed(c))
      return failure();
    if (c->size() != 1)
      return emitError(n.loc) << "TopK: k must hold one value", failure();
    k = (*c)[0];
  }
  RankedTensorType type = n.inputType(0);
  auto axis = n.normalizeAxis(n.attrInt("axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  if (!isa<FloatType, IntegerType>(type.getElementType()) ||
      type.getElementType().isInteger(1))
    return emitError(n.loc)
               << "TopK: input of element type " << type.getElementType()
               << " (numbers are compared)",
           failure();
  auto r = n.create<graph::TopKOp>(
      n.input(0),
      {n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(*axis)),
       n.b.getNamedAttr("k", n.b.getI64IntegerAttr(k)),
       n.b.getNamedAttr("largest",
                        n.b.getBoolAttr(n.attrInt("largest", 1) != 0))});
  return n.setResults(r);
}

/// ArgMax and ArgMin: the indices of a TopK of one along the axis (its ties
/// give the lowest index, as select_last_index 0 asks), without the axis
/// unless keepdims. select_last_index 1 takes it over the axis reversed (a
/// slice of step -1): n - 1 minus that index.
template <bool Largest>
static LogicalResult importArgExtremum(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  StringRef name = Largest ? "ArgMax" : "ArgMin";
  RankedTensorType type = n.inputType(0);
  auto axis = n.normalizeAxis(n.attrInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  if (!isa<FloatType, IntegerType>(type.getElementType()) ||
      type.getElementType().isInteger(1))
    return emitError(n.loc)
               << name << ": input of element type " << type.getElementType()
               << " (numbers are compared)",
           failure();
  if (type.getDimSize(*axis) == 0)
    return emitError(n.loc) << name << ": the axis is empty", failure();
  int64_t extent = type.getDimSize(*axis);
  bool last = n.attrInt("select_last_index", 0) != 0;
  Value input = n.input(0);
  if (last) {
    SmallVector<int64_t> starts(type.getRank(), 0), sizes(type.getShape()),
        steps(type.getRank(), 1);
    starts[*axis] = extent - 1;
    steps[*axis] = -1;
    auto reversed = n.create1<graph::SliceOp>(
        input, {n.b.getNamedAttr("starts", n.b.getDenseI64ArrayAttr(starts)),
                n.b.getNamedAttr("sizes", n.b.getDenseI64ArrayAttr(sizes)),
                n.b.getNamedAttr("steps", n.b.getDenseI64ArrayAttr(steps))});
    if (failed(reversed))
      return failure();
    input = *reversed;
  }
  auto top = n.create<graph::TopKOp>(
      input, {n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(*axis)),
              n.b.getNamedAttr("k", n.b.getI64IntegerAttr(1)),
              n.b.getNamedAttr("largest", n.b.getBoolAttr(Largest))});
  if (failed(top))
    return failure();
  Value indices = (*top)[1];
  if (last) {
    Type it = getElementTypeOrSelf(indices.getType());
    auto fromEnd =
        n.create1<graph::SubOp>({n.scalar(it, double(extent - 1)), indices});
    if (failed(fromEnd))
      return failure();
    indices = *fromEnd;
  }
  if (n.attrInt("keepdims", 1) != 0) {
    n.results = {indices};
    return success();
  }
  SmallVector<int64_t> shape(type.getShape());
  shape.erase(shape.begin() + *axis);
  auto reshaped = n.create1WithType(
      graph::ReshapeOp::getOperationName(),
      RankedTensorType::get(shape, getElementTypeOrSelf(indices.getType())),
      indices);
  return n.setResult(reshaped);
}

void pcc::import::registerMathImporters(ImporterMap &map) {
  map["MatMul"] = importMatMul;
  map["Gemm"] = importGemm;
  map["CumSum"] = importCumSum;
  map["TopK"] = importTopK;
  map["ArgMax"] = importArgExtremum<true>;
  map["ArgMin"] = importArgExtremum<false>;
  map["Softmax"] = importSoftmax<graph::SoftmaxOp>;
  map["LogSoftmax"] = importSoftmax<graph::LogSoftmaxOp>;
  map["LayerNormalization"] = importLayerNorm;
  map["ReduceMean"] = importReduce<graph::ReduceMeanOp>;
  map["ReduceSum"] = importReduce<graph::ReduceSumOp>;
  map["ReduceMax"] = importReduce<graph::ReduceMaxOp>;
  map["ReduceMin"] = importReduce<graph::ReduceMinOp>;
  map["ReduceL1"] = importReduceNorm<Norm::L1>;
  map["ReduceL2"] = importReduceNorm<Norm::L2>;
  map["ReduceSumSquare"] = importReduceNorm<Norm::SumSquare>;
}
