//===- GraphSharding.cpp - Factor-based sharding rules of the Graph ops ---===//
//
// ShardingRuleOpInterface per op family: element-wise ops share one factor
// per result dimension (broadcast dimensions of extent 1 get none),
// contractions add a reduction factor, normalizations keep their normalized
// dimensions whole. The sharding passes are generic over these rules.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace pcc::graph;

void ShardingRule::print(llvm::raw_ostream &os) const {
  auto name = [](int64_t f) {
    std::string s(1, char('i' + f % 18));
    if (f >= 18)
      s += std::to_string(f / 18);
    return s;
  };
  auto list = [&](ArrayRef<SmallVector<int64_t>> groups) {
    os << "(";
    llvm::interleaveComma(groups, os, [&](ArrayRef<int64_t> dims) {
      os << "[";
      llvm::interleaveComma(dims, os, [&](int64_t f) {
        os << (f == kNoFactor ? std::string("_") : name(f));
      });
      os << "]";
    });
    os << ")";
  };
  list(operandFactors);
  os << " -> ";
  list(resultFactors);
  os << " {";
  for (size_t f = 0; f < factorSizes.size(); ++f)
    os << (f ? ", " : "") << name(f) << "=" << factorSizes[f];
  os << "}";
  SmallVector<std::string> reductions;
  for (size_t f = 0; f < factorKinds.size(); ++f)
    if (factorKinds[f] == FactorKind::Reduction)
      reductions.push_back(name(f));
  if (!reductions.empty()) {
    os << " reduction={";
    llvm::interleaveComma(reductions, os);
    os << "}";
  }
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

int64_t ShardingRule::addFactor(int64_t size, FactorKind kind) {
  factorSizes.push_back(size);
  factorKinds.push_back(kind);
  return factorSizes.size() - 1;
}

/// One parallel factor per dimension of `v`.
static SmallVector<int64_t> freshFactors(ShardingRule &rule, Value v) {
  SmallVector<int64_t> f;
  for (int64_t d : shapeOf(v))
    f.push_back(rule.addFactor(d));
  return f;
}

/// Operands aligned to the result's trailing dimensions; broadcast
/// dimensions of extent 1 get no factor.
static ShardingRule broadcastRule(Operation *op) {
  ShardingRule rule;
  Value out = op->getResult(0);
  SmallVector<int64_t> outF = freshFactors(rule, out);
  ArrayRef<int64_t> outShape = shapeOf(out);
  for (Value in : op->getOperands()) {
    ArrayRef<int64_t> s = shapeOf(in);
    SmallVector<int64_t> f;
    for (size_t i = 0; i < s.size(); ++i) {
      size_t o = i + outShape.size() - s.size();
      f.push_back(s[i] == outShape[o] ? outF[o] : ShardingRule::kNoFactor);
    }
    rule.operandFactors.push_back(f);
  }
  rule.resultFactors.push_back(outF);
  return rule;
}

#define PCC_BROADCAST_RULE(Op)                                                 \
  ShardingRule Op::getShardingRule() { return broadcastRule(*this); }
PCC_BROADCAST_RULE(SqrtOp)
PCC_BROADCAST_RULE(ReciprocalOp)
PCC_BROADCAST_RULE(NegOp)
PCC_BROADCAST_RULE(AbsOp)
PCC_BROADCAST_RULE(ErfOp)
PCC_BROADCAST_RULE(TanhOp)
PCC_BROADCAST_RULE(SigmoidOp)
PCC_BROADCAST_RULE(ExpOp)
PCC_BROADCAST_RULE(LogOp)
PCC_BROADCAST_RULE(ReluOp)
PCC_BROADCAST_RULE(FloorOp)
PCC_BROADCAST_RULE(CeilOp)
PCC_BROADCAST_RULE(SinOp)
PCC_BROADCAST_RULE(CosOp)
PCC_BROADCAST_RULE(NotOp)
PCC_BROADCAST_RULE(AddOp)
PCC_BROADCAST_RULE(SubOp)
PCC_BROADCAST_RULE(MulOp)
PCC_BROADCAST_RULE(DivOp)
PCC_BROADCAST_RULE(PowOp)
PCC_BROADCAST_RULE(MaxOp)
PCC_BROADCAST_RULE(MinOp)
PCC_BROADCAST_RULE(AndOp)
PCC_BROADCAST_RULE(OrOp)
PCC_BROADCAST_RULE(XorOp)
PCC_BROADCAST_RULE(EqualOp)
PCC_BROADCAST_RULE(LessOp)
PCC_BROADCAST_RULE(LessOrEqualOp)
PCC_BROADCAST_RULE(GreaterOp)
PCC_BROADCAST_RULE(GreaterOrEqualOp)
PCC_BROADCAST_RULE(WhereOp)
PCC_BROADCAST_RULE(CastOp)
PCC_BROADCAST_RULE(IsNaNOp)
#undef PCC_BROADCAST_RULE

// The summed axis stays whole.
ShardingRule CumSumOp::getShardingRule() {
  ShardingRule rule = broadcastRule(*this);
  rule.operandFactors[0][getAxis()] = ShardingRule::kNoFactor;
  rule.resultFactors[0][getAxis()] = ShardingRule::kNoFactor;
  return rule;
}

ShardingRule SoftmaxOp::getShardingRule() {
  ShardingRule rule = broadcastRule(*this);
  rule.operandFactors[0][getAxis()] = ShardingRule::kNoFactor;
  rule.resultFactors[0][getAxis()] = ShardingRule::kNoFactor;
  return rule;
}

ShardingRule LogSoftmaxOp::getShardingRule() {
  ShardingRule rule = broadcastRule(*this);
  rule.operandFactors[0][getAxis()] = ShardingRule::kNoFactor;
  rule.resultFactors[0][getAxis()] = ShardingRule::kNoFactor;
  return rule;
}

ShardingRule LayerNormOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int64_t> f = freshFactors(rule, getInput());
  for (size_t i = getAxis(); i < f.size(); ++i)
    f[i] = ShardingRule::kNoFactor;
  rule.operandFactors.push_back(f);
  for (Value v : {getScale(), getBias()})
    if (v)
      rule.operandFactors.push_back(
          SmallVector<int64_t>(shapeOf(v).size(), ShardingRule::kNoFactor));
  for (int i = 0; i < 3; ++i)
    rule.resultFactors.push_back(f);
  return rule;
}

template <typename ReduceOpT> static ShardingRule reduceRule(ReduceOpT op) {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(op.getInput());
  ArrayRef<int64_t> axes = op.getAxes();
  SmallVector<int64_t> inF, outF;
  for (size_t i = 0; i < in.size(); ++i) {
    bool reduced = llvm::is_contained(axes, int64_t(i));
    int64_t f =
        rule.addFactor(in[i], reduced ? ShardingRule::FactorKind::Reduction
                                      : ShardingRule::FactorKind::Parallel);
    inF.push_back(f);
    if (!reduced)
      outF.push_back(f);
    else if (op.getKeepdims())
      outF.push_back(ShardingRule::kNoFactor);
  }
  rule.operandFactors.push_back(inF);
  rule.resultFactors.push_back(outF);
  return rule;
}

ShardingRule ReduceMeanOp::getShardingRule() { return reduceRule(*this); }
ShardingRule ReduceSumOp::getShardingRule() { return reduceRule(*this); }
ShardingRule ReduceMaxOp::getShardingRule() { return reduceRule(*this); }
ShardingRule ReduceMinOp::getShardingRule() { return reduceRule(*this); }

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int64_t> in = freshFactors(rule, getInput());
  SmallVector<int64_t> out;
  for (int64_t p : getPerm())
    out.push_back(in[p]);
  rule.operandFactors.push_back(in);
  rule.resultFactors.push_back(out);
  return rule;
}

ShardingRule MatMulOp::getShardingRule() {
  // Batch dimensions broadcast like an element-wise op; m, n parallel and k
  // a reduction.
  ShardingRule rule;
  ArrayRef<int64_t> a = shapeOf(getLhs()), b = shapeOf(getRhs());
  ArrayRef<int64_t> c = shapeOf(getOutput());
  int64_t k = rule.addFactor(a.back(), ShardingRule::FactorKind::Reduction);
  int64_t m =
      a.size() >= 2 ? rule.addFactor(a[a.size() - 2]) : ShardingRule::kNoFactor;
  int64_t n =
      b.size() >= 2 ? rule.addFactor(b.back()) : ShardingRule::kNoFactor;
  size_t cBatch = c.size() - (a.size() >= 2) - (b.size() >= 2);
  SmallVector<int64_t> batch;
  for (size_t i = 0; i < cBatch; ++i)
    batch.push_back(rule.addFactor(c[i]));
  auto batchOf = [&](ArrayRef<int64_t> s, size_t matDims) {
    SmallVector<int64_t> f;
    size_t nb = s.size() - matDims;
    for (size_t i = 0; i < nb; ++i) {
      size_t o = i + cBatch - nb;
      f.push_back(s[i] == c[o] ? batch[o] : ShardingRule::kNoFactor);
    }
    return f;
  };
  SmallVector<int64_t> fa = batchOf(a, std::min<size_t>(a.size(), 2));
  if (a.size() >= 2)
    fa.push_back(m);
  fa.push_back(k);
  SmallVector<int64_t> fb = batchOf(b, std::min<size_t>(b.size(), 2));
  fb.push_back(k);
  if (b.size() >= 2)
    fb.push_back(n);
  SmallVector<int64_t> fc(batch);
  if (a.size() >= 2)
    fc.push_back(m);
  if (b.size() >= 2)
    fc.push_back(n);
  rule.operandFactors = {fa, fb};
  rule.resultFactors = {fc};
  return rule;
}

ShardingRule GemmOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> c = shapeOf(getOutput());
  ArrayRef<int64_t> a = shapeOf(getA());
  int64_t m = rule.addFactor(c[0]), n = rule.addFactor(c[1]);
  int64_t k = rule.addFactor(getTransA() ? a[0] : a[1],
                             ShardingRule::FactorKind::Reduction);
  rule.operandFactors.push_back(getTransA() ? SmallVector<int64_t>{k, m}
                                            : SmallVector<int64_t>{m, k});
  rule.operandFactors.push_back(getTransB() ? SmallVector<int64_t>{n, k}
                                            : SmallVector<int64_t>{k, n});
  if (Value bias = getC()) {
    ArrayRef<int64_t> s = shapeOf(bias);
    SmallVector<int64_t> f;
    for (size_t i = 0; i < s.size(); ++i) {
      size_t o = i + 2 - s.size();
      f.push_back(s[i] == c[o] ? (o == 0 ? m : n) : ShardingRule::kNoFactor);
    }
    rule.operandFactors.push_back(f);
  }
  rule.resultFactors.push_back({m, n});
  return rule;
}

