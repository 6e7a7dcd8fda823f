//===- FuseAttention.cpp - Forms graph.attention from exported graphs -----===//
//
// Exporters write scaled dot-product attention as the ops it is made of:
// a product of the queries and the transposed keys, a scale (on the scores,
// or its square root on each of the queries and the keys), a mask or bias
// added (or a `where` that puts -inf where a boolean mask is false), a
// softmax over the keys, PyTorch's guard that zeros the rows a mask empties
// (`where(isnan(p), 0, p)`), and a product with the values; grouped-query
// attention repeats each key/value head (an expand between two reshapes)
// before the products. Scores made as [B * H, Tq, Tk] (BLOOM's baddbmm)
// and reshaped for the softmax, and probabilities reshaped back to [B * H,
// Tq, Tk] for the product with the values, are read through. This pass finds
// that shape of dataflow from each softmax, whatever the nodes are named, and
// replaces it by one `graph.attention`, reading the keys and values before any
// repeat. A constant causal mask (0 on and below the diagonal, -inf or below
// -1e4 above it, the same for every batch entry and head) becomes the op's
// `causal` flag rather than a bias, and a causal mask that also hides the
// keys W or more behind each query (a sliding window) its `window`; several
// such masks added (GPT-Neo's own and transformers') intersect to one. Masks
// are read through what computes them from constants and buffers (slices,
// reshapes, element-wise arithmetic). Scores multiplied by a mask of zeros
// and ones (GPT-1's `s * b + -1e4 * (1 - b)`) are fused only where the
// causal masks added hide every score the product zeros. A tanh
// that caps the scaled scores (Gemma 2's `c * tanh(s / c)`) its `softcap`.
// Scores concatenated with one more column of a logit per head, whose
// probability is sliced off after the softmax (GPT-OSS's attention sinks),
// become the op's `sinks`; a row's maximum subtracted before the softmax
// (which the softmax does itself) is read through.
//
// Only values nothing else reads are fused: a model that returns its
// attention probabilities keeps them.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace pcc {
#define GEN_PASS_DEF_FUSEATTENTION
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// The value of a one-element float constant or non-trainable weight.
std::optional<double> getScalar(Value v) {
  ElementsAttr attr;
  if (auto c = v.getDefiningOp<ConstantOp>())
    attr = c.getValue();
  else if (auto w = v.getDefiningOp<WeightOp>(); w && !w.getTrainable())
    attr = w.getValue();
  if (!attr || attr.getNumElements() != 1 ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  DenseElementsAttr dense = getDenseValue(attr);
  if (!dense)
    return std::nullopt;
  return (*dense.getValues<APFloat>().begin()).convertToDouble();
}

/// The dense value of a constant or a non-trainable weight.
DenseElementsAttr getConstantValue(Value v) {
  ElementsAttr attr;
  if (auto c = v.getDefiningOp<ConstantOp>())
    attr = c.getValue();
  else if (auto w = v.getDefiningOp<WeightOp>(); w && !w.getTrainable())
    attr = w.getValue();
  return attr ? getDenseValue(attr) : DenseElementsAttr();
}

/// The value of a float constant or non-trainable weight whose elements
/// are all one value, or of one such expanded.
std::optional<double> getSplatScalar(Value v) {
  while (auto expand = v.getDefiningOp<ExpandOp>())
    v = expand.getInput();
  DenseElementsAttr dense = getConstantValue(v);
  if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

/// Whether `x` masks a score out: -inf, or a float's lowest values that
/// exporters use for it.
bool isMaskValue(double x) { return x <= -1e4; }

/// `values`, of shape `in`, broadcast to `shape` (numpy's rules: trailing
/// dimensions aligned, extents of 1 repeated); nullopt where they do not
/// broadcast.
std::optional<SmallVector<double>> broadcastValues(ArrayRef<double> values,
                                                   ArrayRef<int64_t> in,
                                                   ArrayRef<int64_t> shape) {
  if (in.size() > shape.size())
    return std::nullopt;
  // The stride of each of `shape`'s dimensions in `values` (0 where it
  // repeats).
  SmallVector<int64_t> strides(shape.size(), 0);
  int64_t stride = 1;
  for (size_t d = 0; d < in.size(); ++d) {
    size_t i = in.size() - 1 - d, o = shape.size() - 1 - d;
    if (in[i] != shape[o] && in[i] != 1)
      return std::nullopt;
    strides[o] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  SmallVector<double> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t at = 0, rest = i;
    for (size_t d = shape.size(); d-- > 0;) {
      at += rest % shape[d] * strides[d];
      rest /= shape[d];
    }
    out[size_t(i)] = values[size_t(at)];
  }
  return out;
}

/// The elements of the constant `dense` (integers, booleans or floats) as
/// doubles, broadcast to `shape`; nullopt where they do not broadcast.
std::optional<SmallVector<double>> broadcastConstant(DenseElementsAttr dense,
                                                     ArrayRef<int64_t> shape) {
  Type et = dense.getElementType();
  SmallVector<double> values;
  if (isa<FloatType>(et)) {
    for (APFloat e : dense.getValues<APFloat>())
      values.push_back(e.convertToDouble());
  } else if (et.isInteger(1)) {
    for (bool e : dense.getValues<bool>())
      values.push_back(e);
  } else if (isa<IntegerType>(et)) {
    for (APInt e : dense.getValues<APInt>())
      values.push_back(double(e.getSExtValue()));
  } else {
    return std::nullopt;
  }
  ArrayRef<int64_t> in = cast<ShapedType>(dense.getType()).getShape();
  if (dense.isSplat())
    return broadcastValues(values, {}, shape);
  return broadcastValues(values, in, shape);
}

/// The elements of `v`, in row-major order, where it is computed from
/// constants alone: a constant or non-trainable weight (a buffer), a
/// slice, reshape, expand or cast of such a value, or an element-wise sum,
/// difference, product or quotient of two (GPT-1's mask `-1e4 * (1 - b)`,
/// `b` a slice of its triangle buffer). Nothing for larger values than a
/// mask of 4096 x 4096.
std::optional<SmallVector<double>> evaluateConstant(Value v, int depth = 0) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (depth > 8 || !type || !type.hasStaticShape() ||
      type.getNumElements() > (int64_t(1) << 24))
    return std::nullopt;
  ArrayRef<int64_t> shape = type.getShape();
  // A parameter keeps its gradient (trainable weights are chosen after
  // this pass).
  if (auto w = v.getDefiningOp<WeightOp>();
      w && w.getExportedAs() == StringRef("parameter"))
    return std::nullopt;
  if (DenseElementsAttr dense = getConstantValue(v))
    return broadcastConstant(dense, shape);
  Operation *op = v.getDefiningOp();
  if (!op)
    return std::nullopt;
  auto operand = [&](unsigned i) {
    return evaluateConstant(op->getOperand(i), depth + 1);
  };
  if (isa<ReshapeOp>(op) ||
      (isa<CastOp>(op) && isa<FloatType>(type.getElementType())))
    return operand(0);
  if (isa<ExpandOp>(op)) {
    std::optional<SmallVector<double>> in = operand(0);
    if (!in)
      return std::nullopt;
    return broadcastValues(*in, shapeOf(op->getOperand(0)), shape);
  }
  if (auto slice = dyn_cast<SliceOp>(op)) {
    std::optional<SmallVector<double>> in = operand(0);
    if (!in)
      return std::nullopt;
    ArrayRef<int64_t> from = shapeOf(slice.getInput());
    ArrayRef<int64_t> starts = slice.getStarts(), steps = slice.getSteps();
    SmallVector<double> out(size_t(type.getNumElements()));
    for (int64_t i = 0, e = type.getNumElements(); i < e; ++i) {
      int64_t at = 0, rest = i, stride = 1;
      for (size_t d = shape.size(); d-- > 0;) {
        at += (starts[d] + rest % shape[d] * steps[d]) * stride;
        rest /= shape[d];
        stride *= from[d];
      }
      out[size_t(i)] = (*in)[size_t(at)];
    }
    return out;
  }
  if (!isa<AddOp, SubOp, MulOp, DivOp>(op))
    return std::nullopt;
  std::optional<SmallVector<double>> x, y;
  if (!(x = operand(0)) || !(y = operand(1)) ||
      !(x = broadcastValues(*x, shapeOf(op->getOperand(0)), shape)) ||
      !(y = broadcastValues(*y, shapeOf(op->getOperand(1)), shape)))
    return std::nullopt;
  for (auto [a, b] : llvm::zip_equal(*x, *y))
    a = TypeSwitch<Operation *, double>(op)
            .Case([&](AddOp) { return a + b; })
            .Case([&](SubOp) { return a - b; })
            .Case([&](MulOp) { return a * b; })
            .Default([&](Operation *) { return a / b; });
  return x;
}

/// Whether `v` is a float mask of zeros and ones computed from constants.
bool isZeroOneMask(Value v) {
  if (!isa<FloatType>(getElementTypeOrSelf(v.getType())))
    return false;
  std::optional<SmallVector<double>> values = evaluateConstant(v);
  return values && llvm::all_of(*values, [](double x) {
           return x == 0 || x == 1;
         });
}


/// A term of the bias: `coefficient * value`, or, for a `where` mask, the
/// mask itself (`select`: -inf where the mask is `!keepWhere`).
struct BiasTerm {
  Value value;
  double coefficient = 1;
  /// A `where(mask, scores, -inf)`: `value` is the i1 mask.
  bool isWhereMask = false;
  bool keepWhere = true;
  /// Scores multiplied by a mask of constant zeros and ones (GPT-1's
  /// `s * b + -1e4 * (1 - b)`): `value` is the mask. It zeros the scores
  /// it hides, so it may only go where the terms added after it hide
  /// them already. `scores`: what it multiplies.
  bool isMultipliedMask = false;
  Value scores;
};

/// What the walk from a softmax found.
struct Match {
  SmallVector<Operation *> ops; ///< to erase, once unused
  Value query, key, value;
  double scale = 1;
  /// Where the scores are made as [B * H, Tq, Tk] and reshaped to
  /// [B, H, Tq, Tk] (BLOOM's baddbmm with ALiBi): B and H; the query, the
  /// keys and the bias terms below the reshape are rank 3.
  std::optional<std::pair<int64_t, int64_t>> batchHeads;
  SmallVector<BiasTerm> bias;
  /// Soft-capping (Gemma 2): the scores are `softcap * tanh(s / softcap)`
  /// of the scaled product `s`, before the bias.
  std::optional<double> softcap;
  /// The biased scores clamped from below to a masking value (BART's
  /// decoders and XGLM: `max(s, finfo.min)`), which changes only a row
  /// whose every score is masked.
  bool clampedToMask = false;
  /// The probabilities reshaped back to [B * H, Tq, Tk] for a product with
  /// values of [B * H, Tk, E] (BLOOM's exports without the optimizer): the
  /// values and the output are rank 3, split as `batchHeads` says.
  bool mergedProbs = false;
  /// Attention sinks: a value of the logits per head that the column
  /// concatenated to the scores broadcasts ([H], or [1, H, 1, 1] and the
  /// like), read through its expands.
  Value sinks;
  /// Or, where an export folded that broadcast into a constant column,
  /// the logits it repeats, [H].
  DenseElementsAttr sinkValues;
  Operation *output = nullptr; ///< the product with the values
};

/// The single reader of `v`, if it has exactly one.
Operation *soleUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

/// `v` through a transpose of its last two dimensions (a rank-4 value):
/// composed with a transpose that makes `v`, or a new one.
Value transposeLastTwo(OpBuilder &b, Location loc, Value v) {
  SmallVector<int64_t> swap{0, 1, 3, 2};
  Value source = v;
  SmallVector<int64_t> perm = swap;
  if (auto t = v.getDefiningOp<TransposeOp>()) {
    source = t.getInput();
    ArrayRef<int64_t> inner = t.getPerm();
    for (int64_t i = 0; i < 4; ++i)
      perm[i] = inner[swap[i]];
  }
  if (perm == SmallVector<int64_t>{0, 1, 2, 3})
    return source;
  ArrayRef<int64_t> s = shapeOf(source);
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(s[p]);
  return TransposeOp::create(
      b, loc,
      RankedTensorType::get(shape, getElementTypeOrSelf(source.getType())),
      source, b.getDenseI64ArrayAttr(perm));
}

/// Key or value heads [B, H, T, F] that a grouped-query model repeats from
/// [B, G, T, F] (reshape to [B, G, 1, T, F], expand to [B, G, H/G, T, F],
/// reshape to [B, H, T, F]): the unrepeated [B, G, T, F] value, else `v`.
Value stripRepeat(OpBuilder &b, Location loc, Value v) {
  auto merge = v.getDefiningOp<ReshapeOp>();
  auto expand = merge ? merge.getInput().getDefiningOp<ExpandOp>() : nullptr;
  if (!expand)
    return v;
  ArrayRef<int64_t> out = shapeOf(v), wide = shapeOf(expand.getResult()),
                    narrow = shapeOf(expand.getInput());
  if (out.size() != 4 || wide.size() != 5 || narrow.size() != 5 ||
      narrow[2] != 1 || wide[0] != out[0] || wide[1] * wide[2] != out[1] ||
      wide[3] != out[2] || wide[4] != out[3] || narrow[0] != wide[0] ||
      narrow[1] != wide[1] || narrow[3] != wide[3] || narrow[4] != wide[4])
    return v;
  Value source = expand.getInput();
  if (auto r = source.getDefiningOp<ReshapeOp>())
    source = r.getInput();
  SmallVector<int64_t> shape{out[0], wide[1], out[2], out[3]};
  if (shapeOf(source) == ArrayRef<int64_t>(shape))
    return source;
  return ReshapeOp::create(
      b, loc,
      RankedTensorType::get(shape, getElementTypeOrSelf(source.getType())),
      source);
}

/// Whether `v` is the product of queries and transposed keys, through
/// element-wise scaling and bias ops each read once.
bool reachesScores(Value v, int depth = 0) {
  Operation *op = v.getDefiningOp();
  if (!op || depth > 8)
    return false;
  if (auto m = dyn_cast<MatMulOp>(op))
    return shapeOf(m.getLhs()).size() == shapeOf(v).size() &&
           shapeOf(m.getRhs()).size() == shapeOf(v).size();
  if (auto r = dyn_cast<ReshapeOp>(op))
    return r.getInput().hasOneUse() && shapeOf(r.getInput()).size() == 3 &&
           reachesScores(r.getInput(), depth + 1);
  if (!isa<MulOp, DivOp, AddOp, SubOp, WhereOp, TanhOp>(op))
    return false;
  return llvm::any_of(op->getOperands(), [&](Value operand) {
    return operand.hasOneUse() && shapeOf(operand) == shapeOf(v) &&
           reachesScores(operand, depth + 1);
  });
}

/// Walks from the softmax's input to the product of queries and keys,
/// collecting the scale and the bias terms. `factor` is what the terms
/// found so far multiply what lies below them. A tanh between them and the
/// product caps the scores: the factor above it is the cap, and below it
/// no bias may be added. `readers` is how many of the ops already matched
/// read `x` (a row's maximum subtracted reads it twice).
bool matchScores(Value x, Match &m, unsigned readers = 1) {
  double factor = 1;
  while (true) {
    Operation *op = x.getDefiningOp();
    if (!op || !llvm::hasNItems(x.getUses(), readers))
      return false;
    readers = 1;
    m.ops.push_back(op);
    if (auto scores = dyn_cast<MatMulOp>(op)) {
      // Under a cap c, the factor below it is scale / c.
      m.scale *= factor * m.softcap.value_or(1.0);
      // A square root of the scale on each side (PyTorch's exports).
      Value q = scores.getLhs(), k = scores.getRhs();
      for (Value *side : {&q, &k}) {
        auto mul = side->getDefiningOp<MulOp>();
        if (!mul || !side->hasOneUse())
          continue;
        for (unsigned i = 0; i < 2; ++i)
          if (std::optional<double> c = getScalar(mul->getOperand(i));
              c && shapeOf(mul->getOperand(1 - i)) == shapeOf(*side)) {
            m.scale *= *c;
            m.ops.push_back(mul);
            *side = mul->getOperand(1 - i);
            break;
          }
      }
      m.query = q;
      m.key = k; // transposed: [B, H, D, Tk]
      return true;
    }
    // Scores made per batch entry and head together, then split.
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      ArrayRef<int64_t> in = shapeOf(reshape.getInput()), out = shapeOf(x);
      if (m.batchHeads || in.size() != 3 || out.size() != 4 ||
          in[0] != out[0] * out[1] || in[1] != out[2] || in[2] != out[3])
        return false;
      m.batchHeads = {out[0], out[1]};
      x = reshape.getInput();
      continue;
    }
    // Which operand continues toward the scores.
    auto chain = [&](unsigned i) {
      Value v = op->getOperand(i);
      return v.hasOneUse() && shapeOf(v) == shapeOf(x) && reachesScores(v);
    };
    if (isa<MulOp, DivOp>(op)) {
      unsigned i = chain(0) ? 0 : 1;
      std::optional<double> c = getScalar(op->getOperand(1 - i));
      if (!c && isa<MulOp>(op) && chain(i) && factor > 0 && !m.softcap &&
          isZeroOneMask(op->getOperand(1 - i))) {
        m.bias.push_back(
            {op->getOperand(1 - i), 1.0, false, true, true, op->getOperand(i)});
        x = op->getOperand(i);
        continue;
      }
      if (!c || !chain(i) || (isa<DivOp>(op) && i != 0) || *c == 0)
        return false;
      factor *= isa<DivOp>(op) ? 1 / *c : *c;
      x = op->getOperand(i);
      continue;
    }
    if (auto tanh = dyn_cast<TanhOp>(op)) {
      if (m.softcap || factor <= 0 || !chain(0))
        return false;
      m.softcap = factor;
      factor = 1;
      x = tanh.getInput();
      continue;
    }
    if (isa<AddOp, SubOp>(op)) {
      unsigned i = chain(0) ? 0 : chain(1) ? 1 : 2;
      if (i == 2 || (isa<SubOp>(op) && i != 0) || m.softcap)
        return false;
      m.bias.push_back({op->getOperand(1 - i), isa<SubOp>(op) ? -1.0 : 1.0});
      // What lies below is scaled by the factor so far; so is this term.
      m.bias.back().coefficient *= factor;
      x = op->getOperand(i);
      continue;
    }
    if (isa<MaxOp>(op)) {
      unsigned i = chain(0) ? 0 : 1;
      std::optional<double> c = getSplatScalar(op->getOperand(1 - i));
      if (!chain(i) || !c || !isMaskValue(*c) || factor <= 0 || m.softcap ||
          m.clampedToMask)
        return false;
      m.clampedToMask = true;
      x = op->getOperand(i);
      continue;
    }
    if (auto where = dyn_cast<WhereOp>(op)) {
      // where(mask, scores, -inf) or where(mask, -inf, scores).
      bool keep = chain(1);
      unsigned i = keep ? 1 : 2;
      std::optional<double> c = getScalar(op->getOperand(keep ? 2 : 1));
      if (!chain(i) || !c || !isMaskValue(*c) || factor <= 0 || m.softcap)
        return false;
      m.bias.push_back({where.getCondition(), 1.0, true, keep});
      x = op->getOperand(i);
      continue;
    }
    return false;
  }
}

/// The logits per head that `column` ([B, H, Tq, 1], the sinks' column of
/// the scores) broadcasts, through its expands: a value whose extents,
/// aligned to the column's from the right, are 1 but for the heads'.
Value getSinkLogits(Value column) {
  Value v = column;
  while (auto expand = v.getDefiningOp<ExpandOp>())
    v = expand.getInput();
  ArrayRef<int64_t> s = shapeOf(v), c = shapeOf(column);
  if (s.size() > c.size() || !isa<FloatType>(getElementTypeOrSelf(v.getType())))
    return {};
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != 1 && i + c.size() - s.size() != 1)
      return {};
  return v;
}

/// The logits per head of a constant sinks' column [B, H, Tq, 1] (through
/// its expands) that holds one value per head for every batch entry and
/// query: a static-shape export folds the broadcast of the logits so.
DenseElementsAttr getConstantSinkLogits(Value column) {
  Value v = column;
  while (auto expand = v.getDefiningOp<ExpandOp>())
    v = expand.getInput();
  // A parameter keeps its gradient: it is not read as constant values
  // (trainable weights are chosen after this pass).
  if (auto w = v.getDefiningOp<WeightOp>();
      w && w.getExportedAs() == StringRef("parameter"))
    return {};
  DenseElementsAttr dense = getConstantValue(v);
  ArrayRef<int64_t> c = shapeOf(column);
  if (!dense || !isa<FloatType>(dense.getElementType()) || c.size() != 4)
    return {};
  // The source's extents aligned to the column's from the right, and the
  // element of the column's (b, h, t) in it.
  SmallVector<int64_t> s(4 - std::min<size_t>(4, shapeOf(v).size()), 1);
  llvm::append_range(s, shapeOf(v));
  if (s.size() != 4)
    return {};
  auto at = [&](int64_t b, int64_t h, int64_t t) {
    int64_t index = 0;
    for (auto [i, x] : llvm::enumerate(SmallVector<int64_t>{b, h, t, 0}))
      index = index * s[i] + (s[i] == 1 ? 0 : x);
    return index;
  };
  SmallVector<APFloat> values(dense.getValues<APFloat>());
  SmallVector<APFloat> logits;
  for (int64_t h = 0; h < c[1]; ++h) {
    APFloat first = values[at(0, h, 0)];
    for (int64_t b = 0; b < c[0]; ++b)
      for (int64_t t = 0; t < c[2]; ++t)
        if (!values[at(b, h, t)].bitwiseIsEqual(first))
          return {};
    logits.push_back(first);
  }
  return DenseElementsAttr::get(
      RankedTensorType::get({c[1]}, dense.getElementType()), logits);
}

/// Matches the attention that `softmax` is the core of.
std::optional<Match> matchAttention(SoftmaxOp softmax) {
  Match m;
  auto type = cast<RankedTensorType>(softmax.getType());
  if (!isa<FloatType>(type.getElementType()) ||
      int64_t(softmax.getAxis()) != type.getRank() - 1)
    return std::nullopt;
  m.ops.push_back(softmax);
  // A softmax of [B * H, Tq, Tk] (XGLM's): of scores made as [B, H, Tq, Tk]
  // and merged, its probabilities merged already.
  Value scores = softmax.getInput();
  // The row's maximum subtracted first: the softmax does it again.
  unsigned readers = 1;
  if (auto sub = scores.getDefiningOp<SubOp>()) {
    auto max = sub.getRhs().getDefiningOp<ReduceMaxOp>();
    Value x = sub.getLhs();
    if (max && max.getInput() == x && max.getKeepdims() &&
        max.getAxes() == ArrayRef<int64_t>{type.getRank() - 1} &&
        shapeOf(x) == type.getShape() && scores.hasOneUse() &&
        max->hasOneUse() && llvm::hasNItems(x.getUses(), 2)) {
      m.ops.append({sub, max});
      scores = x;
      readers = 2;
    }
  }
  // Attention sinks: the scores and a column of a logit per head,
  // concatenated, the column's probability sliced off below.
  std::optional<unsigned> sinkColumn;
  if (auto concat = scores.getDefiningOp<ConcatOp>();
      concat && type.getRank() == 4 && concat.getAxis() == 3 &&
      concat.getInputs().size() == 2 &&
      llvm::hasNItems(scores.getUses(), readers)) {
    for (unsigned i : {1u, 0u}) {
      Value column = concat.getInputs()[i], rest = concat.getInputs()[1 - i];
      if (shapeOf(column)[3] != 1 || !rest.hasOneUse() || !reachesScores(rest))
        continue;
      m.sinks = getSinkLogits(column);
      if (!m.sinks)
        m.sinkValues = getConstantSinkLogits(column);
      if (!m.sinks && !m.sinkValues)
        return std::nullopt;
      m.ops.push_back(concat);
      sinkColumn = i;
      scores = rest;
      readers = 1;
      break;
    }
  }
  std::optional<std::pair<int64_t, int64_t>> mergedScores;
  if (type.getRank() == 3) {
    auto merge = scores.getDefiningOp<ReshapeOp>();
    ArrayRef<int64_t> in =
        merge ? shapeOf(merge.getInput()) : ArrayRef<int64_t>();
    if (!merge || !scores.hasOneUse() || in.size() != 4 ||
        in[0] * in[1] != type.getDimSize(0) || in[2] != type.getDimSize(1) ||
        in[3] != type.getDimSize(2))
      return std::nullopt;
    m.ops.push_back(merge);
    mergedScores = {in[0], in[1]};
    scores = merge.getInput();
  } else if (type.getRank() != 4) {
    return std::nullopt;
  }
  // Forward: the sinks' column sliced off, the optional NaN guard, then the
  // product with the values.
  Value probs = softmax.getResult();
  if (sinkColumn) {
    auto slice = dyn_cast_or_null<SliceOp>(soleUser(probs));
    SmallVector<int64_t> sizes(type.getShape());
    --sizes[3];
    if (!slice ||
        !llvm::all_of(slice.getSteps(), [](int64_t s) { return s == 1; }) ||
        slice.getSizes() != ArrayRef<int64_t>(sizes) ||
        slice.getStarts() !=
            ArrayRef<int64_t>{0, 0, 0, *sinkColumn == 0 ? 1 : 0})
      return std::nullopt;
    m.ops.push_back(slice);
    probs = slice.getOutput();
  }
  if (llvm::any_of(probs.getUsers(),
                   [](Operation *u) { return isa<IsNaNOp>(u); })) {
    if (!llvm::hasNItems(probs.getUsers(), 2))
      return std::nullopt;
    IsNaNOp isNaN;
    WhereOp guard;
    for (Operation *u : probs.getUsers()) {
      if (auto n = dyn_cast<IsNaNOp>(u))
        isNaN = n;
      else
        guard = dyn_cast<WhereOp>(u);
    }
    std::optional<double> zero =
        guard ? getScalar(guard.getLhs()) : std::nullopt;
    if (!isNaN || !guard || !isNaN->hasOneUse() ||
        guard.getCondition() != isNaN.getResult() || !zero || *zero != 0 ||
        guard.getRhs() != probs)
      return std::nullopt;
    m.ops.append({isNaN, guard});
    probs = guard.getResult();
  }
  Operation *user = soleUser(probs);
  SmallVector<int64_t> p(shapeOf(probs));
  if (mergedScores) {
    p = {mergedScores->first, mergedScores->second, p[1], p[2]};
    m.mergedProbs = true;
  } else if (auto merge = dyn_cast_or_null<ReshapeOp>(user)) {
    if (shapeOf(merge.getOutput()) !=
        ArrayRef<int64_t>{p[0] * p[1], p[2], p[3]})
      return std::nullopt;
    m.ops.push_back(merge);
    m.mergedProbs = true;
    probs = merge.getOutput();
    user = soleUser(probs);
  }
  auto pv = dyn_cast_or_null<MatMulOp>(user);
  if (!pv || pv.getLhs() != probs ||
      shapeOf(pv.getRhs()).size() != (m.mergedProbs ? 3 : 4))
    return std::nullopt;
  m.ops.push_back(pv);
  m.output = pv;
  m.value = pv.getRhs();
  if (!matchScores(scores, m, readers))
    return std::nullopt;
  // Merged probabilities need scores split the same way.
  if (m.mergedProbs &&
      m.batchHeads != std::optional<std::pair<int64_t, int64_t>>{{p[0], p[1]}})
    return std::nullopt;
  return m;
}

/// The elements of a boolean mask computed from constants: a constant, a
/// comparison of two constants (broadcast; HuggingFace's causal mask,
/// `key_index <= query_index`, and nanoGPT's `tril == 0`), a triangle
/// (Trilu) of such a mask, or its negation.
std::optional<SmallVector<bool>> getConstantMask(Value v, int depth = 0) {
  if (depth > 4)
    return std::nullopt;
  if (DenseElementsAttr dense = getConstantValue(v)) {
    if (!dense.getElementType().isInteger(1))
      return std::nullopt;
    if (dense.isSplat())
      return SmallVector<bool>(size_t(dense.getNumElements()),
                               dense.getSplatValue<bool>());
    return SmallVector<bool>(dense.getValues<bool>());
  }
  // A triangle of a constant mask (a causal mask made by Trilu).
  if (auto t = v.getDefiningOp<TriluOp>()) {
    std::optional<SmallVector<bool>> inner =
        getConstantMask(t.getInput(), depth + 1);
    ArrayRef<int64_t> shape = shapeOf(v);
    if (!inner || shape.size() < 2)
      return std::nullopt;
    int64_t rows = shape[shape.size() - 2], cols = shape.back();
    int64_t k = static_cast<int64_t>(t.getK());
    for (int64_t i = 0, e = int64_t(inner->size()); i < e; ++i) {
      int64_t row = (i / cols) % rows, col = i % cols;
      bool kept = t.getUpper() ? col - row >= k : col - row <= k;
      (*inner)[size_t(i)] = (*inner)[size_t(i)] && kept;
    }
    return inner;
  }
  if (auto n = v.getDefiningOp<NotOp>()) {
    std::optional<SmallVector<bool>> inner =
        getConstantMask(n.getInput(), depth + 1);
    if (inner)
      for (auto &&b : *inner)
        b = !b;
    return inner;
  }
  Operation *op = v.getDefiningOp();
  if (!isa_and_nonnull<EqualOp, LessOp, LessOrEqualOp, GreaterOp,
                       GreaterOrEqualOp>(op))
    return std::nullopt;
  std::optional<SmallVector<double>> x, y;
  if (!(x = evaluateConstant(op->getOperand(0))) ||
      !(y = evaluateConstant(op->getOperand(1))) ||
      !(x = broadcastValues(*x, shapeOf(op->getOperand(0)), shapeOf(v))) ||
      !(y = broadcastValues(*y, shapeOf(op->getOperand(1)), shapeOf(v))))
    return std::nullopt;
  SmallVector<bool> mask;
  mask.reserve(x->size());
  for (auto [a, b] : llvm::zip_equal(*x, *y))
    mask.push_back(TypeSwitch<Operation *, bool>(op)
                       .Case([&](EqualOp) { return a == b; })
                       .Case([&](LessOp) { return a < b; })
                       .Case([&](LessOrEqualOp) { return a <= b; })
                       .Case([&](GreaterOp) { return a > b; })
                       .Default([&](Operation *) { return a >= b; }));
  return mask;
}

/// What the mask `v` is computed from, as getConstantMask and getKeptScores
/// read it: each op's name and, for a constant, its (uniqued) attribute; for a
/// comparison, its scalar. Equal keys mean equal masks, so that the layers
/// of a deep model, each with its own copy of one causal mask, have it
/// checked once (a [2048, 2048] mask is 4M elements per layer).
static std::string maskKey(Value v, int depth = 0) {
  std::string key;
  llvm::raw_string_ostream os(key);
  if (depth > 4)
    return "?";
  if (DenseElementsAttr dense = getConstantValue(v))
    os << "c" << dense.getAsOpaquePointer();
  else if (auto n = v.getDefiningOp<NotOp>())
    os << "not(" << maskKey(n.getInput(), depth + 1) << ")";
  else if (auto t = v.getDefiningOp<TriluOp>())
    os << "trilu(" << maskKey(t.getInput(), depth + 1) << ","
       << t.getUpper() << "," << static_cast<int64_t>(t.getK()) << ")";
  else if (isa_and_nonnull<EqualOp, LessOp, LessOrEqualOp, GreaterOp,
                           GreaterOrEqualOp, WhereOp>(v.getDefiningOp())) {
    Operation *op = v.getDefiningOp();
    os << op->getName().getStringRef() << "(";
    llvm::interleaveComma(op->getOperands(), os, [&](Value operand) {
      os << maskKey(operand, depth + 1);
    });
    os << ")";
  } else
    os << "v" << v.getAsOpaquePointer();
  return key;
}

/// Which elements of the mask `v` keep their score: a constant 0 (and a
/// masking value where not), or a boolean mask (`isWhereMask`) that keeps
/// where it is `keepWhere`; a `where` of such a mask between 0 and a
/// masking value is read through.
std::optional<SmallVector<bool>> getKeptScores(Value v, bool isWhereMask,
                                               bool keepWhere) {
  if (isWhereMask) {
    std::optional<SmallVector<bool>> mask = getConstantMask(v);
    if (mask && !keepWhere)
      for (auto &&b : *mask)
        b = !b;
    return mask;
  }
  // where(mask, 0, masked) or where(mask, masked, 0) of scalars.
  if (auto where = v.getDefiningOp<WhereOp>()) {
    std::optional<double> a = getScalar(where.getLhs()),
                          b = getScalar(where.getRhs());
    if (!a || !b || shapeOf(where.getCondition()) != shapeOf(v))
      return std::nullopt;
    if (*a == 0 && isMaskValue(*b))
      return getKeptScores(where.getCondition(), true, true);
    if (isMaskValue(*a) && *b == 0)
      return getKeptScores(where.getCondition(), true, false);
    return std::nullopt;
  }
  if (!isa<FloatType>(getElementTypeOrSelf(v.getType())))
    return std::nullopt;
  std::optional<SmallVector<double>> values = evaluateConstant(v);
  if (!values)
    return std::nullopt;
  SmallVector<bool> kept;
  kept.reserve(values->size());
  for (double x : *values) {
    if (x != 0 && !isMaskValue(x))
      return std::nullopt;
    kept.push_back(x == 0);
  }
  return kept;
}

/// A causal mask's sliding window: 0 for a mask that keeps exactly key
/// j <= query i in every [Tq, Tk] slice, W for one that keeps exactly
/// i - W < j <= i (W < Tq: a window as long as the sequence masks
/// nothing more), nothing for any other mask.
std::optional<int64_t> getWindowOfKept(ArrayRef<bool> kept,
                                       ArrayRef<int64_t> shape) {
  if (shape.size() < 2 || shape[shape.size() - 2] < 2 || kept.empty())
    return std::nullopt;
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  // The window from the last row: its first kept key.
  int64_t last = rows - 1, first = 0;
  while (first < cols && !kept[size_t(last * cols + first)])
    ++first;
  int64_t window = first == 0 ? 0 : last - first + 1;
  for (auto [i, b] : llvm::enumerate(kept)) {
    int64_t row = int64_t(i) / cols % rows, col = int64_t(i) % cols;
    if (b != (col <= row && (window == 0 || col > row - window)))
      return std::nullopt;
  }
  return window;
}

std::optional<int64_t> getCausalWindowUncached(Value v, bool isWhereMask,
                                               bool keepWhere) {
  std::optional<SmallVector<bool>> kept =
      getKeptScores(v, isWhereMask, keepWhere);
  if (!kept)
    return std::nullopt;
  return getWindowOfKept(*kept, shapeOf(v));
}

/// A bias computed from constants that masks the scores a causal mask
/// hides (with or without a window) and adds finite values to the others
/// (Falcon's ALiBi and causal mask, folded into one constant): the
/// window, and the bias with zeros where it masks. Nothing for any other.
std::optional<std::pair<int64_t, DenseElementsAttr>>
splitCausalBias(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !isa<FloatType>(type.getElementType()))
    return std::nullopt;
  std::optional<SmallVector<double>> values = evaluateConstant(v);
  if (!values)
    return std::nullopt;
  SmallVector<bool> kept;
  kept.reserve(values->size());
  for (double &x : *values) {
    kept.push_back(!isMaskValue(x));
    if (!kept.back())
      x = 0;
    else if (!std::isfinite(x))
      return std::nullopt;
  }
  std::optional<int64_t> window = getWindowOfKept(kept, type.getShape());
  if (!window)
    return std::nullopt;
  SmallVector<Attribute> elements;
  elements.reserve(values->size());
  for (double x : *values)
    elements.push_back(FloatAttr::get(type.getElementType(), x));
  return std::make_pair(*window, DenseElementsAttr::get(type, elements));
}

/// getCausalWindowUncached, once per mask (see maskKey).
std::optional<int64_t>
getCausalWindow(Value v, bool isWhereMask, bool keepWhere,
                llvm::StringMap<std::optional<int64_t>> &known) {
  std::string key =
      maskKey(v) + (isWhereMask ? "w" : "") + (keepWhere ? "k" : "");
  for (int64_t d : shapeOf(v))
    key += "x" + std::to_string(d);
  auto [it, inserted] = known.try_emplace(key, std::nullopt);
  if (inserted)
    it->second = getCausalWindowUncached(v, isWhereMask, keepWhere);
  return it->second;
}

/// Whether `v` is a constant 0 everywhere (a mask of a batch without
/// padding, folded): no bias at all.
bool isZero(Value v) {
  DenseElementsAttr dense = getConstantValue(v);
  return dense && dense.isSplat() && isa<FloatType>(dense.getElementType()) &&
         dense.getSplatValue<APFloat>().isZero();
}

/// Replaces what `m` matched by one graph.attention.
/// `v`, of rank 3 with [B * H, ...] (or [1, ...]) leading, as rank 4 with
/// [B, H, ...] (or [1, 1, ...]); `v` itself at rank 4.
Value splitBatchHeads(OpBuilder &b, Location loc, Value v,
                      std::pair<int64_t, int64_t> batchHeads) {
  ArrayRef<int64_t> s = shapeOf(v);
  if (s.size() != 3)
    return v;
  bool whole = s[0] != 1;
  SmallVector<int64_t> shape{whole ? batchHeads.first : 1,
                             whole ? batchHeads.second : 1, s[1], s[2]};
  return ReshapeOp::create(
      b, loc, RankedTensorType::get(shape, getElementTypeOrSelf(v.getType())),
      v);
}

/// Replaces what `m` matched by one graph.attention; false (and the IR
/// as it was, but for unused new views) where its keys and values do not
/// share their heads.
bool rewrite(Match &m, llvm::StringMap<std::optional<int64_t>> &knownMasks) {
  // Which terms are causal masks, with or without a window: they
  // intersect to the causal mask of the narrower window (GPT-Neo adds
  // transformers' causal mask to its own, a band in its local layers).
  // A bias that masks as a causal mask does and adds finite values
  // elsewhere is both: a causal mask, and the bias with zeros where it
  // masked (`split`).
  bool causal = false;
  int64_t window = 0;
  SmallVector<bool> isCausal;
  SmallVector<DenseElementsAttr> split;
  unsigned causalTerms = 0, otherTerms = 0;
  for (const BiasTerm &term : m.bias) {
    std::optional<int64_t> w;
    split.emplace_back();
    bool additive = !term.isMultipliedMask && !term.isWhereMask;
    if (!term.isMultipliedMask && (term.isWhereMask || term.coefficient > 0))
      w = getCausalWindow(term.value, term.isWhereMask, term.keepWhere,
                          knownMasks);
    if (!w && additive && term.coefficient > 0)
      if (auto parts = splitCausalBias(term.value)) {
        w = parts->first;
        split.back() = parts->second;
      }
    isCausal.push_back(w.has_value() && !split.back());
    if (w) {
      if (!causal || (*w && (!window || *w < window)))
        window = *w;
      causal = true;
      ++causalTerms;
    }
    if (!isCausal.back() && !term.isMultipliedMask &&
        (term.isWhereMask || !isZero(term.value)))
      ++otherTerms;
  }
  // A mask that multiplies the scores zeros those it hides; the causal
  // masks added must hide each of them (nothing else is read as one).
  for (const BiasTerm &term : m.bias) {
    if (!term.isMultipliedMask)
      continue;
    ArrayRef<int64_t> shape = shapeOf(term.scores);
    std::optional<SmallVector<double>> mask = evaluateConstant(term.value);
    if (mask)
      mask = broadcastValues(*mask, shapeOf(term.value), shape);
    if (!causal || !mask || shape.size() < 2)
      return false;
    int64_t rows = shape[shape.size() - 2], cols = shape.back();
    for (auto [i, x] : llvm::enumerate(*mask)) {
      int64_t row = int64_t(i) / cols % rows, col = int64_t(i) % cols;
      if (x == 0 && col <= row && (window == 0 || col > row - window))
        return false;
    }
  }
  // A clamp to a masking value is the identity where no row is masked
  // whole: under one causal mask alone, every query keeps its own key.
  if (m.clampedToMask && (causalTerms != 1 || otherTerms != 0))
    return false;
  Operation *anchor = m.output;
  OpBuilder b(anchor);
  SmallVector<Location> locs;
  for (Operation *op : m.ops)
    locs.push_back(op->getLoc());
  Location loc = b.getFusedLoc(locs);
  Value query = m.query, keyT = m.key;
  if (m.batchHeads) {
    query = splitBatchHeads(b, loc, query, *m.batchHeads);
    keyT = splitBatchHeads(b, loc, keyT, *m.batchHeads);
  }
  Value values = m.value;
  if (m.mergedProbs)
    values = splitBatchHeads(b, loc, values, *m.batchHeads);
  Value key = stripRepeat(b, loc, transposeLastTwo(b, loc, keyT));
  Value value = stripRepeat(b, loc, values);
  // Grouped heads only where keys and values share them.
  if (shapeOf(key)[1] != shapeOf(value)[1]) {
    key = transposeLastTwo(b, loc, keyT);
    value = values;
  }
  if (shapeOf(key)[1] != shapeOf(value)[1])
    return false;
  Type et = getElementTypeOrSelf(m.query.getType());
  auto scalar = [&](double x) {
    return ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, et),
                               FloatAttr::get(et, x)));
  };
  Value bias;
  for (auto [i, matched] : llvm::enumerate(m.bias)) {
    BiasTerm term = matched;
    if (isCausal[i] || term.isMultipliedMask ||
        (!term.isWhereMask && isZero(term.value)))
      continue;
    if (split[i])
      term.value = ConstantOp::create(b, loc, split[i]);
    // The op broadcasts its bias itself: an expanded mask is read as it was.
    while (auto expand = term.value.getDefiningOp<ExpandOp>())
      term.value = expand.getInput();
    if (m.batchHeads && !term.isWhereMask)
      term.value = splitBatchHeads(b, loc, term.value, *m.batchHeads);
    Value t = term.value;
    if (term.isWhereMask) {
      Value zero = scalar(0), masked = scalar(-INFINITY);
      t = WhereOp::create(b, loc, t, term.keepWhere ? zero : masked,
                          term.keepWhere ? masked : zero);
    } else if (term.coefficient != 1) {
      t = MulOp::create(b, loc, t, scalar(term.coefficient));
    }
    bias = bias ? Value(AddOp::create(b, loc, bias, t)) : t;
  }
  // The sinks as [H] of the query's type.
  Value sinks;
  if (m.sinkValues)
    m.sinks = ConstantOp::create(b, loc, m.sinkValues);
  if (m.sinks) {
    int64_t heads = shapeOf(query)[1];
    auto type = RankedTensorType::get({heads}, et);
    // Its elements in order, whatever shapes reshapes gave it.
    sinks = m.sinks;
    while (auto reshape = sinks.getDefiningOp<ReshapeOp>())
      sinks = reshape.getInput();
    if (getElementTypeOrSelf(sinks.getType()) != et)
      sinks = CastOp::create(
          b, loc, cast<RankedTensorType>(sinks.getType()).clone(et), sinks);
    int64_t count = cast<RankedTensorType>(sinks.getType()).getNumElements();
    if (count == heads) {
      if (shapeOf(sinks) != type.getShape())
        sinks = ReshapeOp::create(b, loc, type, sinks);
    } else {
      sinks = ExpandOp::create(
          b, loc, type,
          ReshapeOp::create(b, loc, RankedTensorType::get({1}, et), sinks));
    }
  }
  auto attention = AttentionOp::create(
      b, loc, query, key, value, bias, sinks, b.getF32FloatAttr(m.scale),
      causal ? b.getUnitAttr() : UnitAttr(),
      m.softcap ? b.getF32FloatAttr(*m.softcap) : FloatAttr(),
      window ? b.getI64IntegerAttr(window) : IntegerAttr());
  Value output = attention.getOutput();
  if (m.mergedProbs)
    output =
        ReshapeOp::create(b, loc, m.output->getResult(0).getType(), output);
  m.output->getResult(0).replaceAllUsesWith(output);
  // The matched ops, then whatever only they read, as they become unused.
  SmallVector<Operation *> dead(m.ops.rbegin(), m.ops.rend());
  while (!dead.empty()) {
    Operation *op = dead.pop_back_val();
    if (!op->use_empty() || !op->getBlock() || isa<WeightOp>(op))
      continue;
    SmallVector<Operation *> producers;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        producers.push_back(def);
    op->erase();
    for (Operation *def : producers)
      if (def->use_empty() && !isa<WeightOp>(def) &&
          (isa<ViewLikeOpInterface>(def) || isMemoryEffectFree(def)))
        dead.push_back(def);
  }
  return true;
}

struct FuseAttentionPass
    : pcc::impl::FuseAttentionBase<FuseAttentionPass> {
  using FuseAttentionBase::FuseAttentionBase;

  void runOnOperation() override {
    SmallVector<SoftmaxOp> softmaxes;
    llvm::StringMap<std::optional<int64_t>> knownMasks;
    getOperation().walk([&](SoftmaxOp s) { softmaxes.push_back(s); });
    for (SoftmaxOp softmax : softmaxes) {
      std::optional<Match> m = matchAttention(softmax);
      if (!m)
        continue;
      // The scores must be [B, H, Tq, Tk] from [B, H, Tq, D] x
      // [B, H or 1, D, Tk] and the values [B, H or 1, Tk, E]; made as
      // [B * H, ...], the query and keys are that and every bias term has
      // B * H or 1 leading.
      SmallVector<int64_t> q(shapeOf(m->query)), k(shapeOf(m->key)),
          v(shapeOf(m->value));
      if (m->batchHeads) {
        auto [batch, heads] = *m->batchHeads;
        auto leads = [&](ArrayRef<int64_t> s, bool orOne) {
          return s.size() == 3 &&
                 (s[0] == batch * heads || (orOne && s[0] == 1));
        };
        if (!leads(q, false) || !leads(k, false) ||
            llvm::any_of(m->bias, [&](const BiasTerm &t) {
              return !t.isWhereMask && shapeOf(t.value).size() == 3 &&
                     !leads(shapeOf(t.value), true);
            }))
          continue;
        q = {batch, heads, q[1], q[2]};
        k = {batch, heads, k[1], k[2]};
        if (m->mergedProbs) {
          if (!leads(v, false))
            continue;
          v = {batch, heads, v[1], v[2]};
        }
      }
      auto headsFit = [&](int64_t h) { return h == q[1] || h == 1; };
      if (q.size() != 4 || k.size() != 4 || v.size() != 4 || k[2] != q[3] ||
          v[2] != k[3] || q[0] != k[0] || !headsFit(k[1]) || v[0] != q[0] ||
          !headsFit(v[1]))
        continue;
      if (maxHeadDim > 0 && (q[3] > maxHeadDim || v[3] > maxHeadDim))
        continue;
      if (!rewrite(*m, knownMasks))
        continue;
    }
  }
};

} // namespace
