//===- GraphVjp.cpp - Vector-Jacobian products of the Graph ops -----------===//
//
// DifferentiableOpInterface for every differentiable Graph op, built from
// other Graph ops. A null result gradient means zero; a null operand
// gradient means "not differentiable" or zero (integer operands, indices).
// Operand gradients have the operand's shape: broadcasting is undone by
// summing over the broadcast dimensions.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

using namespace mlir;
using namespace pcc::graph;

namespace {
/// Terse construction of the ops that VJPs are made of.
class VjpBuilder {
public:
  VjpBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  static ArrayRef<int64_t> shape(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }
  static Type elem(Value v) { return getElementTypeOrSelf(v.getType()); }

  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x.getType(), x); }
  Value exp(Value x) { return ExpOp::create(b, loc, x.getType(), x); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, x.getType(), x); }
  Value where(Value c, Value x, Value y) {
    return WhereOp::create(b, loc, c, x, y);
  }
  /// A scalar of `v`'s element type.
  Value scalar(Value like, double value) {
    auto t = RankedTensorType::get({}, elem(like));
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(t, FloatAttr::get(elem(like), value)));
  }
  Value reshape(Value v, ArrayRef<int64_t> s) {
    if (shape(v) == s)
      return v;
    return ReshapeOp::create(b, loc, RankedTensorType::get(s, elem(v)), v);
  }
  Value expand(Value v, ArrayRef<int64_t> s) {
    if (shape(v) == s)
      return v;
    return ExpandOp::create(b, loc, RankedTensorType::get(s, elem(v)), v);
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    return TransposeOp::create(b, loc, v, perm);
  }
  Value transposeLast2(Value v) {
    return TransposeOp::createSwapLastTwo(b, loc, v);
  }
  Value reduceSum(Value v, ArrayRef<int64_t> axes, bool keep) {
    return ReduceSumOp::create(b, loc, v, axes, keep);
  }
  Value reduceMean(Value v, ArrayRef<int64_t> axes, bool keep) {
    return ReduceMeanOp::create(b, loc, v, axes, keep);
  }
  /// Sums `g` over the dimensions that broadcasting added or stretched to
  /// give a tensor of shape `target`.
  Value sumTo(Value g, ArrayRef<int64_t> target) {
    ArrayRef<int64_t> gs = shape(g);
    if (gs == target)
      return g;
    size_t lead = gs.size() - target.size();
    SmallVector<int64_t> axes;
    for (size_t i = 0; i < gs.size(); ++i)
      if (i < lead || (target[i - lead] == 1 && gs[i] != 1))
        axes.push_back(i);
    Value r = axes.empty() ? g : reduceSum(g, axes, /*keep=*/true);
    return reshape(r, target);
  }
  Value sumTo(Value g, Value like) { return sumTo(g, shape(like)); }
  Value zerosLike(Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(t, b.getZeroAttr(t.getElementType())));
  }
  /// `g` where `cond` holds, else zero.
  Value maskedOrZero(Value cond, Value g, bool whereTrue) {
    Value zero = scalar(g, 0);
    return whereTrue ? where(cond, g, zero) : where(cond, zero, g);
  }

  OpBuilder &b;
  Location loc;
};

bool isFloatTensor(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}
} // namespace

/// Unary ops: operandGrad = g * f'(x), written with the result y where
/// that is cheaper.
#define PCC_UNARY_VJP(Op, BODY)                                                \
  LogicalResult Op::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,  \
                             SmallVectorImpl<Value> &operandGrads) {           \
    Value g = resultGrads[0];                                                  \
    if (!g || !isFloatTensor(getInput())) {                                    \
      operandGrads.push_back({});                                              \
      return success();                                                        \
    }                                                                          \
    VjpBuilder v(builder, getLoc());                                           \
    Value x = getInput(), y = getOutput();                                     \
    (void)x;                                                                   \
    (void)y;                                                                   \
    operandGrads.push_back(BODY);                                              \
    return success();                                                          \
  }

PCC_UNARY_VJP(SqrtOp, v.div(v.mul(g, v.scalar(g, 0.5)), y))
PCC_UNARY_VJP(ReciprocalOp, v.neg(v.mul(g, v.mul(y, y))))
PCC_UNARY_VJP(NegOp, v.neg(g))
PCC_UNARY_VJP(AbsOp, v.mul(g, v.where(LessOp::create(builder, getLoc(), x,
                                                     v.scalar(x, 0)),
                                      v.scalar(x, -1), v.scalar(x, 1))))
PCC_UNARY_VJP(ErfOp, v.mul(g, v.mul(v.scalar(g, 2.0 / std::sqrt(M_PI)),
                                    v.exp(v.neg(v.mul(x, x))))))
PCC_UNARY_VJP(TanhOp, v.mul(g, v.sub(v.scalar(y, 1), v.mul(y, y))))
PCC_UNARY_VJP(SigmoidOp, v.mul(g, v.mul(y, v.sub(v.scalar(y, 1), y))))
PCC_UNARY_VJP(ExpOp, v.mul(g, y))
PCC_UNARY_VJP(LogOp, v.div(g, x))
PCC_UNARY_VJP(ReluOp, v.maskedOrZero(GreaterOp::create(builder, getLoc(), x,
                                                       v.scalar(x, 0)),
                                     g, true))
PCC_UNARY_VJP(FloorOp, Value())
PCC_UNARY_VJP(CeilOp, Value())
PCC_UNARY_VJP(SinOp, v.mul(g, CosOp::create(builder, getLoc(), x.getType(), x)))
PCC_UNARY_VJP(CosOp,
              v.neg(v.mul(g, SinOp::create(builder, getLoc(), x.getType(), x))))
PCC_UNARY_VJP(NotOp, Value())
#undef PCC_UNARY_VJP

/// Binary ops: each operand's gradient, summed back to the operand's shape.
#define PCC_BINARY_VJP(Op, LHS, RHS)                                           \
  LogicalResult Op::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,  \
                             SmallVectorImpl<Value> &operandGrads) {           \
    Value g = resultGrads[0];                                                  \
    Value l = getLhs(), r = getRhs(), y = getOutput();                         \
    (void)y;                                                                   \
    if (!g || !isFloatTensor(y)) {                                             \
      operandGrads.append(2, Value());                                         \
      return success();                                                        \
    }                                                                          \
    VjpBuilder v(builder, getLoc());                                           \
    operandGrads.push_back(isFloatTensor(l) ? v.sumTo(LHS, l) : Value());      \
    operandGrads.push_back(isFloatTensor(r) ? v.sumTo(RHS, r) : Value());      \
    return success();                                                          \
  }

PCC_BINARY_VJP(AddOp, g, g)
PCC_BINARY_VJP(SubOp, g, v.neg(g))
PCC_BINARY_VJP(MulOp, v.mul(g, r), v.mul(g, l))
PCC_BINARY_VJP(DivOp, v.div(g, r), v.neg(v.div(v.mul(g, y), r)))
PCC_BINARY_VJP(MaxOp,
               v.maskedOrZero(GreaterOrEqualOp::create(builder, getLoc(), l, r),
                              g, true),
               v.maskedOrZero(GreaterOrEqualOp::create(builder, getLoc(), l, r),
                              g, false))
PCC_BINARY_VJP(MinOp,
               v.maskedOrZero(LessOrEqualOp::create(builder, getLoc(), l, r), g,
                              true),
               v.maskedOrZero(LessOrEqualOp::create(builder, getLoc(), l, r), g,
                              false))
PCC_BINARY_VJP(AndOp, Value(), Value())
PCC_BINARY_VJP(OrOp, Value(), Value())
PCC_BINARY_VJP(XorOp, Value(), Value())
PCC_BINARY_VJP(EqualOp, Value(), Value())
PCC_BINARY_VJP(LessOp, Value(), Value())
PCC_BINARY_VJP(LessOrEqualOp, Value(), Value())
PCC_BINARY_VJP(GreaterOp, Value(), Value())
PCC_BINARY_VJP(GreaterOrEqualOp, Value(), Value())
#undef PCC_BINARY_VJP

/// Only the base is differentiated: exponents are constants of the model
/// (x^2 in RMSNorm, x^3 in tanh-GELU), as in PyTorch, where `x ** 3.0` has
/// no gradient for the exponent; d/dr l^r = l^r log(l) is not even defined
/// for the negative bases those ops see.
LogicalResult PowOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0], l = getLhs(), r = getRhs();
  if (!g || !isFloatTensor(l)) {
    operandGrads.append(2, Value());
    return success();
  }
  VjpBuilder v(builder, getLoc());
  // d/dl l^r = r * l^(r-1); an integer exponent is cast to the base type.
  Value rf = r;
  if (!isFloatTensor(r) || v.elem(r) != v.elem(l))
    rf = CastOp::create(builder, getLoc(),
                        RankedTensorType::get(v.shape(r), v.elem(l)), r);
  Value lPow = PowOp::create(builder, getLoc(), l, v.sub(rf, v.scalar(rf, 1)));
  operandGrads.push_back(v.sumTo(v.mul(g, v.mul(rf, lPow)), l));
  operandGrads.push_back({});
  return success();
}

LogicalResult WhereOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back({});
  if (!g || !isFloatTensor(getOutput())) {
    operandGrads.append(2, Value());
    return success();
  }
  VjpBuilder v(builder, getLoc());
  operandGrads.push_back(
      v.sumTo(v.maskedOrZero(getCondition(), g, true), getLhs()));
  operandGrads.push_back(
      v.sumTo(v.maskedOrZero(getCondition(), g, false), getRhs()));
  return success();
}

LogicalResult CastOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  if (!g || !isFloatTensor(getInput()) || !isFloatTensor(getOutput())) {
    operandGrads.push_back({});
    return success();
  }
  operandGrads.push_back(
      CastOp::create(builder, getLoc(), getInput().getType(), g));
  return success();
}

LogicalResult MatMulOp::buildVjp(OpBuilder &builder,
                                 ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0], a = getLhs(), b = getRhs();
  if (!g) {
    operandGrads.append(2, Value());
    return success();
  }
  VjpBuilder v(builder, getLoc());
  if (v.shape(a).size() < 2 || v.shape(b).size() < 2)
    return emitOpError("reverse mode needs operands of rank >= 2");
  // dA = dC B^T and dB = A^T dC, summed over broadcast batch dimensions.
  Value ga = MatMulOp::create(builder, getLoc(), g, v.transposeLast2(b));
  ArrayRef<int64_t> as = v.shape(a), gs = v.shape(g);
  if (as.size() > 2 && v.shape(b).size() == 2) {
    // A matrix B shared by every matrix of A (a linear layer over [batch,
    // tokens, features]): the sum over the batch of A_i^T dC_i is one
    // product over all of A's rows, whose K is every row, not a batch of
    // products summed after (a [batch, K, N] temporary as large as the
    // batch times the weight, then a reduction of it).
    int64_t rows = 1;
    for (int64_t d : as.drop_back())
      rows *= d;
    Value flatA = v.reshape(a, {rows, as.back()});
    Value flatG = v.reshape(g, {rows, gs.back()});
    operandGrads.push_back(v.sumTo(ga, a));
    operandGrads.push_back(
        MatMulOp::create(builder, getLoc(), v.transposeLast2(flatA), flatG));
    return success();
  }
  Value gb = MatMulOp::create(builder, getLoc(), v.transposeLast2(a), g);
  operandGrads.push_back(v.sumTo(ga, a));
  operandGrads.push_back(v.sumTo(gb, b));
  return success();
}

LogicalResult GemmOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  unsigned n = getC() ? 3 : 2;
  if (!g) {
    operandGrads.append(n, Value());
    return success();
  }
  VjpBuilder v(builder, getLoc());
  APFloat alpha = getAlpha(), zero(0.0f);
  // With A' = op(A), B' = op(B): dA' = alpha dC B'^T, dB' = alpha A'^T dC.
  Value ga = GemmOp::create(builder, getLoc(), g, getB(), Value(), alpha, zero,
                            false, !getTransB());
  Value gb = GemmOp::create(builder, getLoc(), getA(), g, Value(), alpha, zero,
                            !getTransA(), false);
  operandGrads.push_back(getTransA() ? v.transpose(ga, {1, 0}) : ga);
  operandGrads.push_back(getTransB() ? v.transpose(gb, {1, 0}) : gb);
  if (Value c = getC()) {
    Value gc = v.mul(g, v.scalar(g, getBeta().convertToFloat()));
    operandGrads.push_back(v.sumTo(gc, c));
  }
  return success();
}

LogicalResult SoftmaxOp::buildVjp(OpBuilder &builder,
                                  ArrayRef<Value> resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0], y = getOutput();
  if (!g) {
    operandGrads.push_back({});
    return success();
  }
  VjpBuilder v(builder, getLoc());
  // PyTorch's attention exports replace the NaN rows of a fully masked
  // softmax (every input -inf) by zeros: where(isnan(y), 0, y). Where the
  // graph guards y so, the backward reads the guarded y too, so that those
  // rows get zero gradient (as PyTorch's kernel gives them) and no NaN
  // reaches the parameters' gradients.
  if (llvm::any_of(y.getUsers(),
                   [](Operation *u) { return isa<IsNaNOp>(u); })) {
    auto type = cast<RankedTensorType>(y.getType());
    Value nan = IsNaNOp::create(
        builder, getLoc(),
        RankedTensorType::get(type.getShape(), builder.getI1Type()), y);
    y = v.where(nan, v.scalar(y, 0.0), y);
  }
  // dx = y * (g - sum(g * y)) along the axis.
  Value dot = v.reduceSum(v.mul(g, y), {int64_t(getAxis())}, true);
  operandGrads.push_back(v.mul(y, v.sub(g, dot)));
  return success();
}

// FlashAttention's backward: the probabilities are recomputed from the
// saved log-sum-exp. The bias (a mask, ALiBi) gets no gradient; where a
// trained parameter reaches it, reverse mode refuses.
LogicalResult AttentionOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  if (resultGrads[1])
    return emitOpError("reverse mode through the log-sum-exp result is not "
                       "supported");
  // attention_grad reads [B, H, T, D]; code generation's layout pass, which
  // sets sequence_first, runs after reverse mode.
  if (getSequenceFirst())
    return emitOpError("reverse mode takes attention in the [B, H, T, D] "
                       "layout, not sequence_first");
  if (!g) {
    operandGrads.append(getNumOperands(), Value());
    return success();
  }
  // The bias's gradient would be the [query, key] scores' one, which the
  // fused op exists not to make.
  if (Value bias = getBias()) {
    SmallVector<Value> work{bias};
    llvm::DenseSet<Value> seen;
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def || !seen.insert(v).second)
        continue;
      if (auto w = dyn_cast<WeightOp>(def); w && w.getTrainable())
        return emitOpError("reverse mode: the bias of a fused attention "
                           "depends on trained parameter '")
               << w.getName()
               << "', whose gradient it does not make; compile with "
                  "--no-fuse-attention";
      llvm::append_range(work, def->getOperands());
    }
  }
  auto grad = AttentionGradOp::create(
      builder, getLoc(), getQuery(), getKey(), getValue(), getOutput(),
      getLse(), g, getBias(), getScaleAttr(), getCausalAttr(), getSoftcapAttr(),
      getWindowAttr());
  llvm::append_range(operandGrads, grad.getResults());
  if (getBias())
    operandGrads.push_back({});
  if (Value sinks = getSinks()) {
    // The sinks' column takes P_sink = exp(sink - lse) of each row and adds
    // nothing to the output, so d sink = -sum over the rows of P_sink *
    // (output_grad . output): the same delta the other gradients use, from
    // values the forward kept. Summed in f32, as lse is.
    VjpBuilder v(builder, getLoc());
    auto f32 = [&](Value x) -> Value {
      auto type = cast<RankedTensorType>(x.getType());
      if (type.getElementType().isF32())
        return x;
      return CastOp::create(builder, getLoc(), type.clone(builder.getF32Type()),
                            x);
    };
    Value delta = f32(v.reduceSum(v.mul(g, getOutput()), {3}, false));
    Value sink = v.reshape(f32(sinks), {1, v.shape(sinks)[0], 1});
    Value weight = v.exp(v.sub(sink, getLse()));
    Value grad = v.neg(v.reduceSum(v.mul(weight, delta), {0, 2}, false));
    auto type = cast<RankedTensorType>(sinks.getType());
    operandGrads.push_back(
        type.getElementType().isF32()
            ? grad
            : Value(CastOp::create(builder, getLoc(), type, grad)));
  }
  return success();
}

LogicalResult LogSoftmaxOp::buildVjp(OpBuilder &builder,
                                     ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0], y = getOutput();
  if (!g) {
    operandGrads.push_back({});
    return success();
  }
  VjpBuilder v(builder, getLoc());
  // dx = g - softmax(x) * sum(g) along the axis.
  Value sum = v.reduceSum(g, {int64_t(getAxis())}, true);
  operandGrads.push_back(v.sub(g, v.mul(v.exp(y), sum)));
  return success();
}

LogicalResult LayerNormOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  unsigned n = getBias() ? 3 : 2;
  if (resultGrads[1] || resultGrads[2])
    return emitOpError("reverse mode through the mean and inverse standard "
                       "deviation results is not supported");
  if (!g) {
    operandGrads.append(n, Value());
    return success();
  }
  VjpBuilder v(builder, getLoc());
  Value x = getInput(), scale = getScale();
  SmallVector<int64_t> axes;
  for (int64_t i = getAxis(), r = v.shape(x).size(); i < r; ++i)
    axes.push_back(i);
  // xhat = (x - mean) * invstd, gs = g * scale, and
  // dx = invstd * (gs - mean(gs) - xhat * mean(gs * xhat)).
  Value xhat = v.mul(v.sub(x, getMean()), getInvStdDev());
  Value gs = v.mul(g, scale);
  Value dx =
      v.mul(getInvStdDev(),
            v.sub(v.sub(gs, v.reduceMean(gs, axes, true)),
                  v.mul(xhat, v.reduceMean(v.mul(gs, xhat), axes, true))));
  operandGrads.push_back(dx);
  operandGrads.push_back(v.sumTo(v.mul(g, xhat), scale));
  if (Value bias = getBias())
    operandGrads.push_back(v.sumTo(g, bias));
  return success();
}

/// The gradient of a reduction broadcast back over the reduced dimensions.
template <typename ReduceOpT>
static Value expandReduced(VjpBuilder &v, ReduceOpT op, Value g) {
  ArrayRef<int64_t> in = v.shape(op.getInput());
  SmallVector<int64_t> kept(in);
  for (int64_t a : op.getAxes())
    kept[a] = 1;
  return v.expand(v.reshape(g, kept), in);
}

LogicalResult ReduceSumOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  VjpBuilder v(builder, getLoc());
  operandGrads.push_back(g ? expandReduced(v, *this, g) : Value());
  return success();
}

LogicalResult ReduceMeanOp::buildVjp(OpBuilder &builder,
                                     ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  if (!g) {
    operandGrads.push_back({});
    return success();
  }
  VjpBuilder v(builder, getLoc());
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= v.shape(getInput())[a];
  operandGrads.push_back(
      v.div(expandReduced(v, *this, g), v.scalar(g, double(count))));
  return success();
}

/// Max and min pass the gradient to every element equal to the extremum.
template <typename ReduceOpT>
static LogicalResult extremumVjp(ReduceOpT op, OpBuilder &builder,
                                 ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  if (!g) {
    operandGrads.push_back({});
    return success();
  }
  VjpBuilder v(builder, op.getLoc());
  Value y = expandReduced(v, op, op.getOutput());
  Value hit = EqualOp::create(builder, op.getLoc(), op.getInput(), y);
  operandGrads.push_back(v.maskedOrZero(hit, expandReduced(v, op, g), true));
  return success();
}

LogicalResult ReduceMaxOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  return extremumVjp(*this, builder, resultGrads, operandGrads);
}

LogicalResult ReduceMinOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  return extremumVjp(*this, builder, resultGrads, operandGrads);
}

LogicalResult ReshapeOp::buildVjp(OpBuilder &builder,
                                  ArrayRef<Value> resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  VjpBuilder v(builder, getLoc());
  operandGrads.push_back(g ? v.reshape(g, v.shape(getInput())) : Value());
  return success();
}

LogicalResult TransposeOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  if (!g) {
    operandGrads.push_back({});
    return success();
  }
  SmallVector<int64_t> inverse(getPerm().size());
  for (auto [i, p] : llvm::enumerate(getPerm()))
    inverse[p] = i;
  operandGrads.push_back(VjpBuilder(builder, getLoc()).transpose(g, inverse));
  return success();
}

LogicalResult ExpandOp::buildVjp(OpBuilder &builder,
                                 ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  VjpBuilder v(builder, getLoc());
  operandGrads.push_back(g ? v.sumTo(g, getInput()) : Value());
  return success();
}

LogicalResult SliceOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(
      g ? Value(InsertSliceOp::create(builder, getLoc(), getInput().getType(),
                                      g, getStarts(), getSteps()))
        : Value());
  return success();
}

LogicalResult ConcatOp::buildVjp(OpBuilder &builder,
                                 ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  int64_t at = 0, axis = getAxis();
  for (Value in : getInputs()) {
    ArrayRef<int64_t> s = VjpBuilder::shape(in);
    if (g) {
      SmallVector<int64_t> starts(s.size(), 0), steps(s.size(), 1);
      starts[axis] = at;
      operandGrads.push_back(
          SliceOp::create(builder, getLoc(), g, starts, s, steps));
    } else {
      operandGrads.push_back({});
    }
    at += s[axis];
  }
  return success();
}

LogicalResult SplitOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  if (llvm::all_of(resultGrads, [](Value g) { return !g; })) {
    operandGrads.push_back({});
    return success();
  }
  VjpBuilder v(builder, getLoc());
  SmallVector<Value> parts;
  for (auto [g, r] : llvm::zip(resultGrads, getResults()))
    parts.push_back(g ? g : v.zerosLike(r));
  operandGrads.push_back(ConcatOp::create(builder, getLoc(), parts, getAxis()));
  return success();
}

LogicalResult GatherOp::buildVjp(OpBuilder &builder,
                                 ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(
      g && isFloatTensor(getData())
          ? Value(ScatterAddOp::create(builder, getLoc(), getData().getType(),
                                       g, getIndices(), getAxis()))
          : Value());
  operandGrads.push_back({});
  return success();
}

LogicalResult GatherElementsOp::buildVjp(OpBuilder &builder,
                                         ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(g && isFloatTensor(getData())
                             ? Value(ScatterElementsAddOp::create(
                                   builder, getLoc(), getData().getType(), g,
                                   getIndices(), getAxis()))
                             : Value());
  operandGrads.push_back({});
  return success();
}

/// A scatter's updates were added at the indices: their gradient is read
/// back from there (the gather it is the adjoint of); the indices have
/// none.
LogicalResult ScatterAddOp::buildVjp(OpBuilder &builder,
                                     ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(
      g && isFloatTensor(getUpdates())
          ? Value(GatherOp::create(builder, getLoc(), getUpdates().getType(), g,
                                   getIndices(), getAxis()))
          : Value());
  operandGrads.push_back({});
  return success();
}

LogicalResult
ScatterElementsAddOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(g && isFloatTensor(getUpdates())
                             ? Value(GatherElementsOp::create(
                                   builder, getLoc(), getUpdates().getType(), g,
                                   getIndices(), getAxis()))
                             : Value());
  operandGrads.push_back({});
  return success();
}

/// The values' gradient goes back to the places they were taken from; the
/// indices have none.
LogicalResult TopKOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(g && isFloatTensor(getInput())
                             ? Value(ScatterElementsAddOp::create(
                                   builder, getLoc(), getInput().getType(), g,
                                   getIndices(), getAxis()))
                             : Value());
  return success();
}

/// The adjoint of a running sum is the running sum the other way.
LogicalResult CumSumOp::buildVjp(OpBuilder &builder,
                                 ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(
      g && isFloatTensor(getInput())
          ? Value(CumSumOp::create(builder, getLoc(), g.getType(), g, getAxis(),
                                   getExclusive(), !getReverse()))
          : Value());
  return success();
}

LogicalResult TriluOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(
      g ? Value(TriluOp::create(builder, getLoc(), g.getType(), g, getUpper(),
                                getK()))
        : Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Operand roles (element-wise ops define theirs in ODS)
//===----------------------------------------------------------------------===//

#define PCC_OPERAND_ROLE(Op, ROLE)                                             \
  OperandRole Op::getOperandRole(unsigned index) { return ROLE; }

PCC_OPERAND_ROLE(CastOp, OperandRole::Movement)
PCC_OPERAND_ROLE(MatMulOp, OperandRole::Contraction)
PCC_OPERAND_ROLE(GemmOp, OperandRole::Contraction)
PCC_OPERAND_ROLE(SoftmaxOp, OperandRole::SoftmaxInput)
PCC_OPERAND_ROLE(LogSoftmaxOp, OperandRole::SoftmaxInput)
PCC_OPERAND_ROLE(LayerNormOp,
                 index == 0 ? OperandRole::Other : OperandRole::Affine)
PCC_OPERAND_ROLE(ReshapeOp, OperandRole::Movement)
PCC_OPERAND_ROLE(TransposeOp, OperandRole::Movement)
PCC_OPERAND_ROLE(ExpandOp, OperandRole::Movement)
PCC_OPERAND_ROLE(SliceOp, OperandRole::Movement)
PCC_OPERAND_ROLE(ConcatOp, OperandRole::Movement)
PCC_OPERAND_ROLE(SplitOp, OperandRole::Movement)
PCC_OPERAND_ROLE(TriluOp, OperandRole::Movement)
PCC_OPERAND_ROLE(CumSumOp, OperandRole::Elementwise)
PCC_OPERAND_ROLE(TopKOp, OperandRole::Other)
// A gather with indices that depend on the input looks rows up; with
// constant indices it only moves values (a position table's slice).
PCC_OPERAND_ROLE(GatherOp,
                 index == 0 ? OperandRole::Lookup : OperandRole::Other)
PCC_OPERAND_ROLE(GatherElementsOp,
                 index == 0 ? OperandRole::Lookup : OperandRole::Other)
PCC_OPERAND_ROLE(ScatterAddOp,
                 index == 0 ? OperandRole::Movement : OperandRole::Other)
PCC_OPERAND_ROLE(ScatterElementsAddOp,
                 index == 0 ? OperandRole::Movement : OperandRole::Other)
#undef PCC_OPERAND_ROLE
