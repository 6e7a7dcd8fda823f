//===- GraphSharding.cpp - Factor-based sharding rules of the Graph ops ---===//
//
// ShardingRuleOpInterface per op family: element-wise ops share one factor
// per result dimension (broadcast dimensions of extent 1 get none),
// contractions and reductions add reduction factors with their reduction
// kind, normalizations keep their normalized dimensions whole, reshapes map
// split and merged dimensions to compound factors, and data movement marks
// what it cuts. The sharding passes are generic over these rules.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include <numeric>

using namespace mlir;
using namespace pcc::graph;

using FactorKind = ShardingRule::FactorKind;
using ReductionKind = ShardingRule::ReductionKind;
using DimFactors = ShardingRule::DimFactors;
using TensorFactors = ShardingRule::TensorFactors;

//===----------------------------------------------------------------------===//
// ShardingRule
//===----------------------------------------------------------------------===//

int64_t ShardingRule::addFactor(int64_t size, FactorKind kind,
                                ReductionKind reduction) {
  factors.push_back({size, kind, reduction});
  return factors.size() - 1;
}

void ShardingRule::print(llvm::raw_ostream &os) const {
  auto name = [](int64_t f) {
    std::string s(1, char('i' + f % 18));
    if (f >= 18)
      s += std::to_string(f / 18);
    return s;
  };
  auto list = [&](ArrayRef<TensorFactors> tensors) {
    os << "(";
    llvm::interleaveComma(tensors, os, [&](const TensorFactors &dims) {
      os << "[";
      llvm::interleaveComma(dims, os, [&](const DimFactors &fs) {
        if (fs.empty())
          os << "_";
        for (int64_t f : fs)
          os << name(f);
      });
      os << "]";
    });
    os << ")";
  };
  list(operandFactors);
  os << " -> ";
  list(resultFactors);
  os << " {";
  for (size_t f = 0; f < factors.size(); ++f)
    os << (f ? ", " : "") << name(f) << "=" << factors[f].size;
  os << "}";
  auto kindList = [&](StringRef label, FactorKind kind) {
    SmallVector<std::string> names;
    for (size_t f = 0; f < factors.size(); ++f) {
      if (factors[f].kind != kind)
        continue;
      std::string n = name(f);
      if (kind == FactorKind::Reduction) {
        switch (factors[f].reduction) {
        case ReductionKind::Sum:
          break;
        case ReductionKind::Max:
          n += ":max";
          break;
        case ReductionKind::Min:
          n += ":min";
          break;
        case ReductionKind::Mean:
          n += ":mean";
          break;
        }
      }
      names.push_back(n);
    }
    if (names.empty())
      return;
    os << " " << label << "={";
    llvm::interleaveComma(names, os);
    os << "}";
  };
  kindList("reduction", FactorKind::Reduction);
  kindList("need_replication", FactorKind::NeedReplication);
  kindList("permutation", FactorKind::Permutation);
}

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

static DimFactors one(int64_t f) { return DimFactors{f}; }

/// One factor of `kind` per dimension of `v` (none for extent 1).
static TensorFactors freshFactors(ShardingRule &rule, Value v,
                                  FactorKind kind = FactorKind::Parallel) {
  TensorFactors t;
  for (int64_t d : shapeOf(v))
    t.push_back(d == 1 ? DimFactors{} : one(rule.addFactor(d, kind)));
  return t;
}

/// Marks the factors of dimension `dim` of `t` as `kind`.
static void mark(ShardingRule &rule, const TensorFactors &t, size_t dim,
                 FactorKind kind) {
  for (int64_t f : t[dim])
    rule.factors[f].kind = kind;
}

/// Operands aligned to the result's trailing dimensions; broadcast
/// dimensions of extent 1 get no factor.
static ShardingRule broadcastRule(Operation *op) {
  ShardingRule rule;
  Value out = op->getResult(0);
  TensorFactors outF = freshFactors(rule, out);
  ArrayRef<int64_t> outShape = shapeOf(out);
  for (Value in : op->getOperands()) {
    ArrayRef<int64_t> s = shapeOf(in);
    TensorFactors f;
    for (size_t i = 0; i < s.size(); ++i) {
      size_t o = i + outShape.size() - s.size();
      f.push_back(s[i] == outShape[o] ? outF[o] : DimFactors{});
    }
    rule.operandFactors.push_back(f);
  }
  rule.resultFactors.push_back(outF);
  return rule;
}

/// A rule where dimension `axis` of the (single) operand and result must
/// stay whole.
static ShardingRule wholeAlong(Operation *op, ArrayRef<int64_t> axes) {
  ShardingRule rule = broadcastRule(op);
  for (int64_t a : axes)
    mark(rule, rule.resultFactors[0], a, FactorKind::NeedReplication);
  return rule;
}

//===----------------------------------------------------------------------===//
// Element-wise ops
//===----------------------------------------------------------------------===//

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
// Expand is a broadcast of its one operand.
PCC_BROADCAST_RULE(ExpandOp)
#undef PCC_BROADCAST_RULE

// A running sum along the axis needs the whole axis.
ShardingRule CumSumOp::getShardingRule() {
  return wholeAlong(*this, {int64_t(getAxis())});
}

// Selection along the axis needs it whole; the k kept places are a
// dimension of their own, whole too. The other dimensions are parallel.
ShardingRule TopKOp::getShardingRule() {
  ShardingRule rule;
  int64_t axis = getAxis();
  TensorFactors in = freshFactors(rule, getInput());
  mark(rule, in, axis, FactorKind::NeedReplication);
  TensorFactors out(in);
  out[axis] = getK() == 1
                  ? DimFactors{}
                  : one(rule.addFactor(getK(), FactorKind::NeedReplication));
  rule.operandFactors = {in};
  rule.resultFactors = {out, out};
  return rule;
}

// Masking by row and column index needs both whole.
ShardingRule TriluOp::getShardingRule() {
  int64_t rank = shapeOf(getInput()).size();
  return wholeAlong(*this, {rank - 2, rank - 1});
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

// A constant or a weight can be cut anywhere at compile time.
ShardingRule ConstantOp::getShardingRule() {
  ShardingRule rule;
  rule.resultFactors.push_back(freshFactors(rule, getOutput()));
  return rule;
}

ShardingRule WeightOp::getShardingRule() {
  ShardingRule rule;
  rule.resultFactors.push_back(freshFactors(rule, getOutput()));
  return rule;
}

//===----------------------------------------------------------------------===//
// Normalizations and reductions
//===----------------------------------------------------------------------===//

ShardingRule SoftmaxOp::getShardingRule() {
  return wholeAlong(*this, {int64_t(getAxis())});
}

// The axis may be split: the op's partition all-reduces the maximum and the
// sum of exponentials (the vocabulary-parallel cross-entropy).
ShardingRule LogSoftmaxOp::getShardingRule() { return broadcastRule(*this); }

// Normalized dimensions stay whole, and the scale and bias share their
// factors; the statistics keep the batch dimensions.
ShardingRule LayerNormOp::getShardingRule() {
  ShardingRule rule;
  TensorFactors in = freshFactors(rule, getInput());
  size_t rank = in.size();
  for (size_t i = getAxis(); i < rank; ++i)
    mark(rule, in, i, FactorKind::NeedReplication);
  rule.operandFactors.push_back(in);
  for (Value v : {getScale(), getBias()}) {
    if (!v)
      continue;
    ArrayRef<int64_t> s = shapeOf(v);
    TensorFactors f;
    for (size_t i = 0; i < s.size(); ++i) {
      size_t o = i + rank - s.size();
      f.push_back(s[i] == shapeOf(getInput())[o] ? in[o] : DimFactors{});
    }
    rule.operandFactors.push_back(f);
  }
  TensorFactors stats(in);
  for (size_t i = getAxis(); i < rank; ++i)
    stats[i].clear();
  rule.resultFactors = {in, stats, stats};
  return rule;
}

template <typename ReduceOpT>
static ShardingRule reduceRule(ReduceOpT op, ReductionKind kind) {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(op.getInput());
  ArrayRef<int64_t> axes = op.getAxes();
  TensorFactors inF, outF;
  for (size_t i = 0; i < in.size(); ++i) {
    bool reduced = llvm::is_contained(axes, int64_t(i));
    DimFactors f;
    if (in[i] != 1)
      f.push_back(rule.addFactor(
          in[i], reduced ? FactorKind::Reduction : FactorKind::Parallel, kind));
    inF.push_back(f);
    if (!reduced)
      outF.push_back(f);
    else if (op.getKeepdims())
      outF.push_back({});
  }
  rule.operandFactors.push_back(inF);
  rule.resultFactors.push_back(outF);
  return rule;
}

ShardingRule ReduceMeanOp::getShardingRule() {
  return reduceRule(*this, ReductionKind::Mean);
}
ShardingRule ReduceSumOp::getShardingRule() {
  return reduceRule(*this, ReductionKind::Sum);
}
ShardingRule ReduceMaxOp::getShardingRule() {
  return reduceRule(*this, ReductionKind::Max);
}
ShardingRule ReduceMinOp::getShardingRule() {
  return reduceRule(*this, ReductionKind::Min);
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

ShardingRule MatMulOp::getShardingRule() {
  // Batch dimensions broadcast like an element-wise op; m, n parallel and k
  // a sum.
  ShardingRule rule;
  ArrayRef<int64_t> a = shapeOf(getLhs()), b = shapeOf(getRhs());
  ArrayRef<int64_t> c = shapeOf(getOutput());
  DimFactors k = one(rule.addFactor(a.back(), FactorKind::Reduction));
  DimFactors m, n;
  if (a.size() >= 2)
    m = one(rule.addFactor(a[a.size() - 2]));
  if (b.size() >= 2)
    n = one(rule.addFactor(b.back()));
  size_t cBatch = c.size() - (a.size() >= 2) - (b.size() >= 2);
  TensorFactors batch;
  for (size_t i = 0; i < cBatch; ++i)
    batch.push_back(c[i] == 1 ? DimFactors{} : one(rule.addFactor(c[i])));
  auto batchOf = [&](ArrayRef<int64_t> s, size_t matDims) {
    TensorFactors f;
    size_t nb = s.size() - matDims;
    for (size_t i = 0; i < nb; ++i) {
      size_t o = i + cBatch - nb;
      f.push_back(s[i] == c[o] ? batch[o] : DimFactors{});
    }
    return f;
  };
  TensorFactors fa = batchOf(a, std::min<size_t>(a.size(), 2));
  if (a.size() >= 2)
    fa.push_back(m);
  fa.push_back(k);
  TensorFactors fb = batchOf(b, std::min<size_t>(b.size(), 2));
  fb.push_back(k);
  if (b.size() >= 2)
    fb.push_back(n);
  TensorFactors fc(batch);
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
  DimFactors m = one(rule.addFactor(c[0])), n = one(rule.addFactor(c[1]));
  DimFactors k =
      one(rule.addFactor(getTransA() ? a[0] : a[1], FactorKind::Reduction));
  rule.operandFactors.push_back(getTransA() ? TensorFactors{k, m}
                                            : TensorFactors{m, k});
  rule.operandFactors.push_back(getTransB() ? TensorFactors{n, k}
                                            : TensorFactors{k, n});
  if (Value bias = getC()) {
    ArrayRef<int64_t> s = shapeOf(bias);
    TensorFactors f;
    for (size_t i = 0; i < s.size(); ++i) {
      size_t o = i + 2 - s.size();
      f.push_back(s[i] == c[o] ? (o == 0 ? m : n) : DimFactors{});
    }
    rule.operandFactors.push_back(f);
  }
  rule.resultFactors.push_back({m, n});
  return rule;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Attention's factors: batch, key/value heads and the query heads per
/// key/value head (query heads are the two, major to minor), the query and
/// key sequences, and the query/key and value features. Batch and heads
/// split (heads as tensor parallelism splits them); a sequence or feature
/// split would need the softmax's running statistics combined across ranks,
/// so those stay whole.
struct AttentionFactors {
  /// Each factor's index, or -1 where its extent is 1 (no factor).
  int64_t b, g, r, tq, tk, d, e;
  static DimFactors at(int64_t f) {
    return f < 0 ? DimFactors{} : DimFactors{f};
  }
  DimFactors heads() const {
    DimFactors h = at(g);
    llvm::append_range(h, at(r));
    return h;
  }
  TensorFactors query() const { return {at(b), heads(), at(tq), at(d)}; }
  TensorFactors key() const { return {at(b), at(g), at(tk), at(d)}; }
  TensorFactors value() const { return {at(b), at(g), at(tk), at(e)}; }
  TensorFactors output() const { return {at(b), heads(), at(tq), at(e)}; }
  TensorFactors lse() const { return {at(b), heads(), at(tq)}; }
  /// A bias's dimensions, right-aligned to [B, H, Tq, Tk]; a broadcast one
  /// has no factor.
  TensorFactors bias(Value v) const {
    TensorFactors scores{at(b), heads(), at(tq), at(tk)};
    ArrayRef<int64_t> shape = shapeOf(v);
    TensorFactors f;
    for (size_t i = 0; i < shape.size(); ++i)
      f.push_back(shape[i] == 1 ? DimFactors{}
                                : scores[i + 4 - shape.size()]);
    return f;
  }
};

static AttentionFactors attentionFactors(ShardingRule &rule,
                                         ArrayRef<int64_t> q,
                                         ArrayRef<int64_t> k,
                                         ArrayRef<int64_t> v) {
  auto add = [&](int64_t size, FactorKind kind = FactorKind::Parallel) {
    return size == 1 ? int64_t(-1) : rule.addFactor(size, kind);
  };
  AttentionFactors f;
  f.b = add(q[0]);
  f.g = add(k[1]);
  f.r = add(q[1] / k[1]);
  f.tq = add(q[2], FactorKind::NeedReplication);
  f.tk = add(k[2], FactorKind::NeedReplication);
  f.d = add(q[3], FactorKind::NeedReplication);
  f.e = add(v[3], FactorKind::NeedReplication);
  return f;
}

ShardingRule AttentionOp::getShardingRule() {
  ShardingRule rule;
  bool swap = getSequenceFirst();
  // Sequence-first operands: their factors in [B, H, T, D] order, swapped
  // back.
  auto layout = [&](ShardingRule::TensorFactors f) {
    if (swap)
      std::swap(f[1], f[2]);
    return f;
  };
  AttentionFactors f =
      attentionFactors(rule, swapHeadsSequence(shapeOf(getQuery()), swap),
                       swapHeadsSequence(shapeOf(getKey()), swap),
                       swapHeadsSequence(shapeOf(getValue()), swap));
  rule.operandFactors = {layout(f.query()), layout(f.key()), layout(f.value())};
  if (getBias())
    rule.operandFactors.push_back(f.bias(getBias()));
  // Attention sinks split with the query heads.
  if (getSinks())
    rule.operandFactors.push_back({f.heads()});
  rule.resultFactors = {layout(f.output()), f.lse()};
  return rule;
}

/// The factors of a paged cache's index operands: slots and positions by
/// the token factor `n`, the block table whole.
static void addPagedIndexFactors(ShardingRule &rule, const DimFactors &n,
                                 Value blockTables) {
  ArrayRef<int64_t> t = shapeOf(blockTables);
  rule.operandFactors.push_back({n});
  rule.operandFactors.push_back({n});
  rule.operandFactors.push_back(
      {DimFactors{rule.addFactor(t[0], FactorKind::NeedReplication)},
       DimFactors{rule.addFactor(t[1], FactorKind::NeedReplication)}});
}

/// A cache's heads split like attention's key/value heads; its blocks, its
/// positions, its features and the tokens stay whole.
ShardingRule CacheWriteOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> c = shapeOf(getCache()), r = shapeOf(getRows());
  auto whole = [&](int64_t size) {
    return DimFactors{rule.addFactor(size, FactorKind::NeedReplication)};
  };
  DimFactors g{rule.addFactor(c[1])};
  TensorFactors cache{whole(c[0]), g, whole(c[2]), whole(c[3])};
  DimFactors n = whole(r[2]);
  rule.operandFactors = {cache, {{}, g, n, cache[3]}};
  addPagedIndexFactors(rule, n, getBlockTables());
  rule.resultFactors = {cache};
  return rule;
}

/// Query heads split as attention's ([G, H / G]), the caches' heads with
/// their groups.
ShardingRule PagedAttentionOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> q = shapeOf(getQuery()), k = shapeOf(getKeyCache());
  auto whole = [&](int64_t size) {
    return DimFactors{rule.addFactor(size, FactorKind::NeedReplication)};
  };
  DimFactors g{rule.addFactor(k[1])};
  DimFactors heads = g;
  if (q[1] / k[1] > 1)
    heads.push_back(rule.addFactor(q[1] / k[1]));
  DimFactors blocks = whole(k[0]), slot = whole(k[2]), d = whole(k[3]);
  DimFactors e = whole(shapeOf(getValueCache())[3]);
  DimFactors n = whole(q[2]);
  rule.operandFactors = {{{}, heads, n, d},
                         {blocks, g, slot, d},
                         {blocks, g, slot, e}};
  addPagedIndexFactors(rule, n, getBlockTables());
  // ALiBi's slopes and attention sinks split with the query heads.
  for (Value perHead : {getSlopes(), getSinks()})
    if (perHead)
      rule.operandFactors.push_back({heads});
  rule.resultFactors = {{{}, heads, n, e}};
  return rule;
}

ShardingRule AttentionGradOp::getShardingRule() {
  ShardingRule rule;
  AttentionFactors f = attentionFactors(rule, shapeOf(getQuery()),
                                        shapeOf(getKey()), shapeOf(getValue()));
  rule.operandFactors = {f.query(), f.key(),    f.value(),
                         f.output(), f.lse(), f.output()};
  if (getBias())
    rule.operandFactors.push_back(f.bias(getBias()));
  rule.resultFactors = {f.query(), f.key(), f.value()};
  return rule;
}

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule rule;
  TensorFactors in = freshFactors(rule, getInput());
  TensorFactors out;
  for (int64_t p : getPerm())
    out.push_back(in[p]);
  rule.operandFactors.push_back(in);
  rule.resultFactors.push_back(out);
  return rule;
}

/// Reshape: the dimensions fall into groups of equal element counts. A group
/// that splits one dimension into several ([H*D] -> [H, D]) or merges
/// several into one gives the single dimension a compound factor of the
/// others', so a head sharding survives the reshape; a group that does both
/// ([6, 4] -> [4, 6]) must stay whole.
ShardingRule ReshapeOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getOutput());
  TensorFactors inF(in.size()), outF(out.size());
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    // Dimensions of extent 1 carry no factor.
    if (i < in.size() && in[i] == 1) {
      ++i;
      continue;
    }
    if (o < out.size() && out[o] == 1) {
      ++o;
      continue;
    }
    if (i == in.size() || o == out.size())
      break;
    size_t i0 = i, o0 = o;
    int64_t pi = in[i++], po = out[o++];
    while (pi != po) {
      if (pi < po && i < in.size())
        pi *= in[i++];
      else if (po < pi && o < out.size())
        po *= out[o++];
      else
        break;
    }
    size_t ni = i - i0, no = o - o0;
    if (ni == 1 || no == 1) {
      // One side is a single dimension: it is the compound of the other's.
      bool splitIn = ni == 1;
      ArrayRef<int64_t> many = splitIn ? out.slice(o0, no) : in.slice(i0, ni);
      TensorFactors &manyF = splitIn ? outF : inF;
      size_t manyStart = splitIn ? o0 : i0;
      DimFactors compound;
      for (size_t k = 0; k < many.size(); ++k) {
        if (many[k] == 1)
          continue;
        int64_t f = rule.addFactor(many[k]);
        manyF[manyStart + k] = one(f);
        compound.push_back(f);
      }
      (splitIn ? inF[i0] : outF[o0]) = compound;
      continue;
    }
    for (size_t k = 0; k < ni; ++k)
      if (in[i0 + k] != 1)
        inF[i0 + k] =
            one(rule.addFactor(in[i0 + k], FactorKind::NeedReplication));
    for (size_t k = 0; k < no; ++k)
      if (out[o0 + k] != 1)
        outF[o0 + k] =
            one(rule.addFactor(out[o0 + k], FactorKind::NeedReplication));
  }
  rule.operandFactors.push_back(inF);
  rule.resultFactors.push_back(outF);
  return rule;
}

/// A dimension cut into `parts` equal parts of `chunk` elements, as a
/// compound [parts, chunk] whose `chunk` factor the parts share: sharding
/// it shards every part alike (fused QKV columns by heads, rotary halves).
static DimFactors equalParts(ShardingRule &rule, int64_t parts, int64_t chunk,
                             FactorKind partsKind, int64_t &chunkFactor) {
  chunkFactor = rule.addFactor(chunk);
  if (parts == 1)
    return one(chunkFactor);
  return DimFactors{rule.addFactor(parts, partsKind), chunkFactor};
}

// Untouched dimensions are parallel; a dimension cut into one of several
// equal, aligned parts is a compound [parts, chunk]; any other cut must stay
// whole.
ShardingRule SliceOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput());
  TensorFactors inF, outF;
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t start = getStarts()[d], size = getSizes()[d], step = getSteps()[d];
    if (in[d] == 1 || size == 0) {
      inF.push_back({});
      outF.push_back(
          size > 1 ? one(rule.addFactor(size, FactorKind::NeedReplication))
                   : DimFactors{});
      continue;
    }
    if (start == 0 && size == in[d] && step == 1) {
      DimFactors f = one(rule.addFactor(in[d]));
      inF.push_back(f);
      outF.push_back(f);
      continue;
    }
    if (step == 1 && in[d] % size == 0 && start % size == 0) {
      int64_t chunk;
      inF.push_back(equalParts(rule, in[d] / size, size,
                               FactorKind::NeedReplication, chunk));
      outF.push_back(one(chunk));
      continue;
    }
    inF.push_back(one(rule.addFactor(in[d], FactorKind::NeedReplication)));
    outF.push_back(size > 1
                       ? one(rule.addFactor(size, FactorKind::NeedReplication))
                       : DimFactors{});
  }
  rule.operandFactors.push_back(inF);
  rule.resultFactors.push_back(outF);
  return rule;
}

// The inverse of a slice: the result is the source's shape outside the
// inserted dimensions.
ShardingRule InsertSliceOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> src = shapeOf(getSource()), out = shapeOf(getOutput());
  TensorFactors srcF, outF;
  for (size_t d = 0; d < out.size(); ++d) {
    if (src[d] == out[d] && getSteps()[d] == 1) {
      DimFactors f = out[d] == 1 ? DimFactors{} : one(rule.addFactor(out[d]));
      srcF.push_back(f);
      outF.push_back(f);
      continue;
    }
    srcF.push_back(
        src[d] == 1 ? DimFactors{}
                    : one(rule.addFactor(src[d], FactorKind::NeedReplication)));
    outF.push_back(one(rule.addFactor(out[d], FactorKind::NeedReplication)));
  }
  rule.operandFactors.push_back(srcF);
  rule.resultFactors.push_back(outF);
  return rule;
}

/// Concat and split along `axis`: the other dimensions are shared; equal
/// parts make the axis a compound [parts, chunk] (parts a permutation),
/// unequal ones keep it whole.
static ShardingRule partsRule(ValueRange parts, Value whole, int64_t axis,
                              bool wholeIsResult) {
  ShardingRule rule;
  TensorFactors wholeF;
  ArrayRef<int64_t> w = shapeOf(whole);
  for (size_t d = 0; d < w.size(); ++d)
    wholeF.push_back(d == size_t(axis) || w[d] == 1
                         ? DimFactors{}
                         : one(rule.addFactor(w[d])));
  int64_t first = shapeOf(parts.front())[axis];
  bool equal =
      llvm::all_of(parts, [&](Value p) { return shapeOf(p)[axis] == first; });
  SmallVector<TensorFactors> partF(parts.size(), wholeF);
  if (equal && first == 1) {
    wholeF[axis] = one(rule.addFactor(parts.size(), FactorKind::Permutation));
    for (TensorFactors &f : partF)
      f[axis] = {};
  } else if (equal && first > 0) {
    int64_t chunk;
    wholeF[axis] =
        equalParts(rule, parts.size(), first, FactorKind::Permutation, chunk);
    for (TensorFactors &f : partF)
      f[axis] = first == 1 ? DimFactors{} : one(chunk);
  } else {
    wholeF[axis] = one(rule.addFactor(w[axis], FactorKind::NeedReplication));
    for (auto [f, p] : llvm::zip(partF, parts)) {
      int64_t n = shapeOf(p)[axis];
      f[axis] = n > 1 ? one(rule.addFactor(n, FactorKind::NeedReplication))
                      : DimFactors{};
    }
  }
  if (wholeIsResult) {
    rule.operandFactors.assign(partF.begin(), partF.end());
    rule.resultFactors.push_back(wholeF);
  } else {
    rule.operandFactors.push_back(wholeF);
    rule.resultFactors.assign(partF.begin(), partF.end());
  }
  return rule;
}

ShardingRule ConcatOp::getShardingRule() {
  return partsRule(getInputs(), getOutput(), getAxis(),
                   /*wholeIsResult=*/true);
}

ShardingRule SplitOp::getShardingRule() {
  return partsRule(getResults(), getInput(), getAxis(),
                   /*wholeIsResult=*/false);
}

/// Gather and its adjoint: the result is the indices' shape in place of the
/// data's `axis`. The table's `axis` may be sharded: a gather then looks up
/// only its rows (masking the others) and the partial results sum (the
/// vocabulary-parallel embedding); a scatter_add fills only its rows. A
/// scatter_add of split indices (a batch split over data parallelism)
/// leaves partial tables.
static ShardingRule lookupRule(Value table, Value indices, Value rows,
                               int64_t axis, bool tableIsResult) {
  ShardingRule rule;
  ArrayRef<int64_t> t = shapeOf(table), idx = shapeOf(indices);
  TensorFactors tableF, idxF, rowsF;
  DimFactors v =
      t[axis] == 1
          ? DimFactors{}
          : one(rule.addFactor(t[axis], tableIsResult ? FactorKind::Parallel
                                                      : FactorKind::Reduction));
  for (int64_t d = 0; d < axis; ++d) {
    DimFactors f = t[d] == 1 ? DimFactors{} : one(rule.addFactor(t[d]));
    tableF.push_back(f);
    rowsF.push_back(f);
  }
  tableF.push_back(v);
  // A scatter_add sums the rows of every index into the table: split
  // indices leave partial tables.
  for (int64_t d : idx) {
    DimFactors f =
        d == 1 ? DimFactors{}
               : one(rule.addFactor(d, tableIsResult ? FactorKind::Reduction
                                                     : FactorKind::Parallel));
    idxF.push_back(f);
    rowsF.push_back(f);
  }
  for (size_t d = axis + 1; d < t.size(); ++d) {
    DimFactors f = t[d] == 1 ? DimFactors{} : one(rule.addFactor(t[d]));
    tableF.push_back(f);
    rowsF.push_back(f);
  }
  assert(shapeOf(rows).size() == rowsF.size() && "gather rows mismatch");
  if (tableIsResult) {
    rule.operandFactors = {rowsF, idxF};
    rule.resultFactors = {tableF};
  } else {
    rule.operandFactors = {tableF, idxF};
    rule.resultFactors = {rowsF};
  }
  return rule;
}

ShardingRule GatherOp::getShardingRule() {
  return lookupRule(getData(), getIndices(), getOutput(), getAxis(),
                    /*tableIsResult=*/false);
}

ShardingRule ScatterAddOp::getShardingRule() {
  return lookupRule(getOutput(), getIndices(), getUpdates(), getAxis(),
                    /*tableIsResult=*/true);
}

/// Element-wise gathers: indices and result share every dimension; the
/// data's other dimensions share them where the extents agree. The data's
/// `axis` must stay whole, unless one index is picked per position (the
/// label of a cross-entropy): then it may be split, each rank picking from
/// its block and masking the rest, and the picks are partial sums (the
/// scatter of the adjoint fills only the rank's block).
static ShardingRule elementLookupRule(Value data, Value indices, int64_t axis,
                                      bool dataIsResult) {
  ShardingRule rule;
  ArrayRef<int64_t> ds = shapeOf(data), is = shapeOf(indices);
  TensorFactors dataF, idxF;
  for (size_t d = 0; d < is.size(); ++d) {
    DimFactors f = is[d] == 1 ? DimFactors{} : one(rule.addFactor(is[d]));
    idxF.push_back(f);
    if (d == size_t(axis) && is[d] == 1 && ds[d] != 1)
      dataF.push_back(one(rule.addFactor(
          ds[d], dataIsResult ? FactorKind::Parallel : FactorKind::Reduction)));
    else if (d == size_t(axis) || ds[d] != is[d])
      dataF.push_back(
          ds[d] == 1 ? DimFactors{}
                     : one(rule.addFactor(ds[d], FactorKind::NeedReplication)));
    else
      dataF.push_back(f);
  }
  if (dataIsResult) {
    rule.operandFactors = {idxF, idxF};
    rule.resultFactors = {dataF};
  } else {
    rule.operandFactors = {dataF, idxF};
    rule.resultFactors = {idxF};
  }
  return rule;
}

ShardingRule GatherElementsOp::getShardingRule() {
  return elementLookupRule(getData(), getIndices(), getAxis(),
                           /*dataIsResult=*/false);
}

ShardingRule ScatterElementsAddOp::getShardingRule() {
  return elementLookupRule(getOutput(), getIndices(), getAxis(),
                           /*dataIsResult=*/true);
}
