//===- AttachLoss.cpp - Appends the causal-LM cross-entropy loss ----------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Analysis/CostModel.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"

#include "mlir/IR/IRMapping.h"

#include <cmath>

using namespace mlir;
using namespace pcc::graph;

namespace pcc {
#define GEN_PASS_DEF_ATTACHLOSS
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

void pcc::appendResults(func::FuncOp func, ValueRange values,
                        ArrayRef<DictionaryAttr> attrs) {
  Operation *ret = func.getBody().front().getTerminator();
  // Insertion indices refer to the old result list: all go at its end.
  SmallVector<unsigned> indices(values.size(), func.getNumResults());
  (void)func.insertResults(indices, values.getTypes(), attrs);
  ret->insertOperands(ret->getNumOperands(), values);
}

static StringRef onnxName(DictionaryAttr attrs) {
  if (!attrs)
    return {};
  if (auto name = attrs.getAs<StringAttr>(pcc::kOnnxNameAttr))
    return name.getValue();
  return {};
}

/// `labels[:, 1:]` as int64: the token each position predicts.
static Value shiftedLabels(OpBuilder &builder, Location loc, Value labels) {
  auto lt = cast<RankedTensorType>(labels.getType());
  int64_t b = lt.getDimSize(0), t = lt.getDimSize(1);
  Value y =
      SliceOp::create(builder, loc, labels, ArrayRef<int64_t>{0, 1},
                      ArrayRef<int64_t>{b, t - 1}, ArrayRef<int64_t>{1, 1});
  if (!lt.getElementType().isInteger(64))
    y = CastOp::create(builder, loc,
                       RankedTensorType::get({b, t - 1}, builder.getI64Type()),
                       y);
  return y;
}

namespace {
/// The ops that make the logits from an earlier [batch, seq, features]
/// value row by row (each position's logits from that position's
/// features alone, through weights): the LM head. Computing the loss in
/// pieces of the sequence computes these ops in pieces too.
struct RowChain {
  /// The [batch, seq, features] value the chain starts from (the logits
  /// themselves when no op makes them row by row).
  Value source;
  /// From `source` to the logits, in program order.
  SmallVector<Operation *> ops;
};
} // namespace

/// Whether `v` is computed from the function's arguments (the inputs)
/// rather than from weights and constants alone.
static bool dependsOnInputs(Value v, llvm::DenseMap<Value, bool> &memo) {
  if (isa<BlockArgument>(v))
    return true;
  auto [it, inserted] = memo.try_emplace(v, false);
  if (!inserted)
    return it->second;
  bool depends = false;
  for (Value operand : v.getDefiningOp()->getOperands())
    if (dependsOnInputs(operand, memo)) {
      depends = true;
      break;
    }
  memo[v] = depends;
  return depends;
}

/// Whether `v` holds rows of positions: [b, t, c], or [b * t, c].
static bool isRows(Value v, int64_t b, int64_t t) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return false;
  if (type.getRank() == 3)
    return type.getDimSize(0) == b && type.getDimSize(1) == t;
  return type.getRank() == 2 && type.getDimSize(0) == b * t;
}

/// The row-by-row chain that makes `logits` ([b, t, vocab]). Each op in it
/// reads one value of rows (its first operand) and weights, and writes
/// rows; every value on it but the logits has that op as its only user.
static RowChain findRowChain(Value logits) {
  auto shape = cast<RankedTensorType>(logits.getType()).getShape();
  int64_t b = shape[0], t = shape[1];
  llvm::DenseMap<Value, bool> memo;
  auto isWeight = [&](Value w) { return !w || !dependsOnInputs(w, memo); };
  RowChain chain{logits, {}};
  SmallVector<Operation *> walked;
  Value v = logits;
  while (Operation *op = v.getDefiningOp()) {
    if (op->getNumResults() != 1 || op->getNumOperands() == 0)
      break;
    Value rows = op->getOperand(0);
    bool rowWise = false;
    if (auto mm = dyn_cast<MatMulOp>(op))
      rowWise = cast<RankedTensorType>(mm.getRhs().getType()).getRank() == 2 &&
                isWeight(mm.getRhs());
    else if (auto gemm = dyn_cast<GemmOp>(op))
      rowWise =
          !gemm.getTransA() && isWeight(gemm.getB()) && isWeight(gemm.getC());
    else if (isa<ReshapeOp>(op))
      rowWise = cast<RankedTensorType>(rows.getType()).getShape().back() ==
                cast<RankedTensorType>(v.getType()).getShape().back();
    else if (op->hasTrait<pcc::graph::OpTrait::Elementwise>())
      rowWise = llvm::all_of(op->getOperands().drop_front(), [&](Value w) {
        return cast<RankedTensorType>(w.getType()).getRank() <= 1 &&
               isWeight(w);
      });
    if (!rowWise || !isRows(rows, b, t) || !isRows(v, b, t) ||
        (v != logits && !v.hasOneUse()))
      break;
    walked.push_back(op);
    v = rows;
    if (cast<RankedTensorType>(v.getType()).getRank() == 3) {
      chain.source = v;
      chain.ops.assign(walked.rbegin(), walked.rend());
    }
  }
  return chain;
}

/// `v`'s type over `tokens` of its positions.
static RankedTensorType rowsType(Value v, int64_t b, int64_t tokens) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  if (type.getRank() == 3)
    shape[1] = tokens;
  else
    shape[0] = b * tokens;
  return type.clone(shape);
}

/// The least time of the slowest of `chunks` contiguous chunks that
/// `units` (times, in order) can be cut into.
static double leastSlowestChunk(ArrayRef<double> units, int64_t chunks) {
  SmallVector<double> prefix{0};
  double largest = 0;
  for (double u : units) {
    prefix.push_back(prefix.back() + u);
    largest = std::max(largest, u);
  }
  // Whether chunks of at most `limit` each cover the units: each chunk
  // takes as many as fit (greedily, which is exact for contiguous cuts).
  auto fits = [&](double limit) {
    size_t at = 0;
    for (int64_t c = 0; c < chunks && at < units.size(); ++c)
      at = size_t(std::upper_bound(prefix.begin() + at, prefix.end(),
                                   prefix[at] + limit) -
                  prefix.begin()) -
           1;
    return at == units.size();
  };
  double lo = std::max(largest, prefix.back() / double(chunks));
  double hi = lo + largest;
  if (fits(lo))
    return lo;
  for (int i = 0; i < 50 && hi - lo > 1e-6 * hi; ++i) {
    double mid = (lo + hi) / 2;
    (fits(mid) ? hi : lo) = mid;
  }
  return hi;
}

/// How many pieces of the sequence the LM head and the loss take, by the
/// cost model, for a forward cut into `chunks` shares. A piece of k runs
/// each op of the head on 1/k of the rows but reads its weights whole
/// (a product packs the whole weight again), and computes its part of the
/// loss. Each count's best cut of the forward (its other ops in program
/// order, in blocks, then the k pieces) into `chunks` contiguous chunks
/// has a slowest chunk, and a count pays where that is within 1% of the
/// fastest any count gives. One piece where one pays; else the smallest
/// count that pays with pieces of at most a sixth of a mean chunk. At
/// most one piece per predicted position.
static int64_t autoPieces(func::FuncOp func, Value logits, int64_t chunks,
                          const pcc::CostModel &cost) {
  if (chunks < 2)
    return 1;
  RowChain chain = findRowChain(logits);
  llvm::SmallPtrSet<Operation *, 8> inChain(chain.ops.begin(),
                                            chain.ops.end());
  auto zt = cast<RankedTensorType>(logits.getType());
  double logitBytes = double(pcc::getTensorBytes(zt));
  double logitElements = double(zt.getNumElements());
  // An op's forward with its backward, which is not built yet: a product
  // has two products for its backward (the input's gradient and the
  // weight's), another op about one op of its size.
  auto withBackward = [](Operation *op, double forward) {
    auto c = dyn_cast<CostOpInterface>(op);
    return forward * (c && c.runsOnMatrixUnits() ? 3 : 2);
  };
  // One piece of k: the head's ops on a k-th of the rows, the weights
  // whole, and the loss (a log-softmax over the logits, a pick and a sum).
  auto piece = [&](int64_t k) {
    double seconds = 0;
    for (Operation *op : chain.ops) {
      auto c = dyn_cast<CostOpInterface>(op);
      if (!c)
        continue;
      double weights = 0, weightElements = 0;
      for (Value v : op->getOperands())
        if (v != chain.source && !inChain.contains(v.getDefiningOp())) {
          weights += double(pcc::getTensorBytes(v.getType()));
          weightElements +=
              double(cast<RankedTensorType>(v.getType()).getNumElements());
        }
      double bytes = double(c.getBytesAccessed());
      seconds += withBackward(
          op, cost.time(op->getName().getStringRef(),
                        double(c.getFlops()) / double(k),
                        weights + std::max(0.0, bytes - weights) / double(k),
                        c.runsOnMatrixUnits()));
      // Each piece's product also makes a gradient of the whole weight,
      // which is added to the other pieces' (and microbatches'): a pass
      // over the weight's size that does not shrink with the piece.
      if (c.runsOnMatrixUnits() && weights > 0)
        seconds += cost.time("graph.add", weightElements, 3 * weights,
                             /*matrix=*/false);
    }
    seconds += 2 * (cost.time("graph.log_softmax", 5 * logitElements / double(k),
                              2 * logitBytes / double(k), /*matrix=*/false) +
                    cost.time("graph.gather_elements", 0, 0, false) +
                    cost.time("graph.reduce_sum", 0, 0, false));
    return seconds;
  };
  // The rest of the forward in program order, in segments between the
  // places where a pipeline cuts it: where no more of the activations
  // cross than the head's input (between blocks, on the residual stream).
  // A cut inside a block would send more, and the partition avoids it.
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front().without_terminator())
    if (!inChain.contains(&op))
      ops.push_back(&op);
  llvm::DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = i;
  // crossing[i]: the bytes of activations made before op i and read at
  // or after it (by the head: at the end).
  SmallVector<double> crossing(ops.size() + 2, 0);
  llvm::DenseMap<Value, bool> memo;
  for (auto [i, op] : llvm::enumerate(ops))
    for (Value r : op->getResults()) {
      if (!dependsOnInputs(r, memo))
        continue;
      size_t last = i;
      for (Operation *user : r.getUsers())
        last = std::max(last, position.lookup_or(user, ops.size()));
      double bytes = double(pcc::getTensorBytes(r.getType()));
      crossing[i + 1] += bytes;
      crossing[last + 1] -= bytes;
    }
  for (size_t c = 1; c < crossing.size(); ++c)
    crossing[c] += crossing[c - 1];
  double cheap = double(pcc::getTensorBytes(chain.source.getType()));
  SmallVector<double> units{0};
  for (auto [i, op] : llvm::enumerate(ops)) {
    if (i > 0 && crossing[i] <= cheap && units.back() > 0)
      units.push_back(0);
    units.back() += withBackward(op, cost.time(op));
  }
  size_t rest = units.size();
  auto slowest = [&](int64_t k) {
    units.resize(rest);
    units.append(size_t(k), piece(k));
    return leastSlowestChunk(units, chunks);
  };
  // A split must buy more than the rounding of a partition into blocks
  // and the cost model's own error: 1% of the slowest chunk.
  int64_t positions = zt.getDimSize(1) - 1;
  SmallVector<double> slowestFor{0};
  for (int64_t k = 1; k <= positions; ++k)
    slowestFor.push_back(slowest(k));
  double least = *std::min_element(slowestFor.begin() + 1, slowestFor.end());
  auto pays = [&](int64_t k) { return slowestFor[k] <= 1.01 * least; };
  if (pays(1))
    return 1;
  // Where it pays, pieces of at most a sixth of a mean chunk: the
  // partition then has room to even the stages around them (pieces of a
  // quarter or half a chunk left the last stage up to 1.13 x the mean,
  // bench/RESULTS.md), unless that many no longer pay.
  double total = 0;
  for (double unit : ArrayRef<double>(units).take_front(rest))
    total += unit;
  double head = piece(1);
  auto fine = std::min<int64_t>(
      positions,
      int64_t(std::ceil(6 * head * double(chunks) / (total + head))));
  for (int64_t k = std::max<int64_t>(fine, 1); k <= positions; ++k)
    if (pays(k))
      return k;
  int64_t best = 1;
  while (!pays(best))
    ++best;
  return best;
}

/// The loss computed over `pieces` consecutive parts of the sequence, each
/// through its own copy of the LM head (the row-by-row chain that makes
/// the logits), and the logits taken out of the results: no position's
/// logits for the whole sequence are ever made. A pipeline can then place
/// the pieces on consecutive stages.
static Value buildPieces(func::FuncOp func, OpBuilder &builder, Location loc,
                         Value labels, Value logits, int64_t pieces) {
  auto zt = cast<RankedTensorType>(logits.getType());
  int64_t b = zt.getDimSize(0), t = zt.getDimSize(1);
  int64_t positions = t - 1;
  pieces = std::min(pieces, positions);
  RowChain chain = findRowChain(logits);
  // Positions 0 .. t-2 in `pieces` near-equal runs; the last position
  // predicts nothing.
  SmallVector<int64_t> sizes;
  for (int64_t i = 0; i < pieces; ++i)
    sizes.push_back(positions / pieces + (i < positions % pieces ? 1 : 0));
  auto splitTypes = [&](Value v, ArrayRef<int64_t> extents) {
    SmallVector<Type> types;
    for (int64_t n : extents)
      types.push_back(rowsType(v, b, n));
    return types;
  };
  SmallVector<int64_t> sourceSizes(sizes);
  sourceSizes.push_back(1);
  auto rows =
      SplitOp::create(builder, loc, splitTypes(chain.source, sourceSizes),
                      chain.source, 1, sourceSizes);
  Value shifted = shiftedLabels(builder, loc, labels);
  SmallVector<Type> idTypes;
  for (int64_t n : sizes)
    idTypes.push_back(RankedTensorType::get({b, n}, builder.getI64Type()));
  auto ids = SplitOp::create(builder, loc, idTypes, shifted, 1, sizes);
  Value sum;
  for (int64_t i = 0; i < pieces; ++i) {
    IRMapping map;
    map.map(chain.source, rows.getResult(i));
    Value z = rows.getResult(i);
    for (Operation *op : chain.ops) {
      Operation *copy = builder.clone(*op, map);
      copy->getResult(0).setType(rowsType(op->getResult(0), b, sizes[i]));
      z = copy->getResult(0);
    }
    auto idxType =
        RankedTensorType::get({b, sizes[i], 1}, builder.getI64Type());
    Value idx = ReshapeOp::create(builder, loc, idxType, ids.getResult(i));
    Value logp = LogSoftmaxOp::create(builder, loc, z.getType(), z, 2);
    Value picked = GatherElementsOp::create(builder, loc, logp, idx, 2);
    Value part = ReduceSumOp::create(builder, loc, picked,
                                     ArrayRef<int64_t>{0, 1, 2}, false);
    sum = sum ? AddOp::create(builder, loc, sum, part).getResult() : part;
  }
  auto st = cast<RankedTensorType>(sum.getType());
  Value count = ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(
          st, FloatAttr::get(st.getElementType(), double(b * positions))));
  Value mean = DivOp::create(builder, loc, st, sum, count);
  Value loss = NegOp::create(builder, loc, st, mean);

  // The logits leave the results; the whole-sequence head is then dead.
  Operation *ret = func.getBody().front().getTerminator();
  for (OpOperand &use : llvm::make_early_inc_range(logits.getUses()))
    if (use.getOwner() == ret) {
      unsigned k = use.getOperandNumber();
      ret->eraseOperand(k);
      (void)func.eraseResult(k);
    }
  for (Operation *op : llvm::reverse(chain.ops))
    if (op->use_empty())
      op->erase();
  func->setAttr(kLossPiecesAttr, builder.getI64IntegerAttr(pieces));
  return loss;
}

LogicalResult pcc::attachLoss(func::FuncOp func, StringRef labelsName,
                              StringRef logitsName, int64_t pieces,
                              int64_t chunks, const CostModel *cost) {
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  Value labels, logits;
  for (BlockArgument arg : body.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t)
      continue;
    StringRef name = onnxName(func.getArgAttrDict(arg.getArgNumber()));
    bool match = labelsName.empty()
                     ? t.getRank() == 2 && t.getElementType().isInteger(64)
                     : name == labelsName;
    if (match) {
      labels = arg;
      break;
    }
  }
  for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t)
      continue;
    StringRef name = onnxName(func.getResultAttrDict(i));
    bool match = logitsName.empty()
                     ? t.getRank() == 3 && isa<FloatType>(t.getElementType())
                     : name == logitsName;
    if (match) {
      logits = v;
      break;
    }
  }
  if (!labels)
    return func.emitError("training needs the labels: ")
           << (labelsName.empty() ? "the model has no int64 [batch, seq] input"
                                  : "no graph input named '" + labelsName + "'")
           << " (--labels NAME)";
  if (!logits)
    return func.emitError("training needs the logits: ")
           << (logitsName.empty()
                   ? "the model has no float [batch, seq, vocab] output"
                   : "no graph output named '" + logitsName + "'")
           << " (--logits NAME)";
  auto lt = cast<RankedTensorType>(labels.getType());
  auto zt = cast<RankedTensorType>(logits.getType());
  if (!lt.hasStaticShape() || !zt.hasStaticShape())
    return func.emitError("training needs static shapes, got labels ")
           << lt << " and logits " << zt;
  if (lt.getRank() != 2 || !isa<IntegerType>(lt.getElementType()) ||
      zt.getRank() != 3 || !isa<FloatType>(zt.getElementType()))
    return func.emitError("training needs integer labels [batch, seq] and "
                          "float logits [batch, seq, vocab]");
  int64_t b = zt.getDimSize(0), t = zt.getDimSize(1), v = zt.getDimSize(2);
  if (lt.getDimSize(0) != b || lt.getDimSize(1) != t || t < 2)
    return func.emitError("labels ")
           << lt << " and logits " << zt
           << " disagree on [batch, seq] (or seq < 2)";

  OpBuilder builder(ret);
  Location loc = NameLoc::get(builder.getStringAttr("loss"));
  // The labels are positions in the vocabulary: the runtime checks them
  // before a step, as pcc-bound-indices has the model's own indices.
  if (auto labelsArg = dyn_cast<BlockArgument>(labels)) {
    unsigned n = labelsArg.getArgNumber();
    auto known = func.getArgAttrOfType<IntegerAttr>(n, kIndexBoundAttr);
    if (!known || known.getInt() > v) {
      func.setArgAttr(n, kIndexBoundAttr, builder.getI64IntegerAttr(v));
      func.setArgAttr(n, kIndexNodeAttr, builder.getStringAttr("loss"));
    }
  }
  Value loss;
  if (pieces == 0)
    pieces = autoPieces(func, logits, chunks,
                        cost ? *cost : pcc::CostModel::forTarget("cpu"));
  if (pieces <= 1) {
    // Predict token i+1 from position i: logits[:, :-1] against
    // labels[:, 1:].
    Value z = SliceOp::create(builder, loc, logits, ArrayRef<int64_t>{0, 0, 0},
                              ArrayRef<int64_t>{b, t - 1, v},
                              ArrayRef<int64_t>{1, 1, 1});
    Value y = shiftedLabels(builder, loc, labels);
    auto idxType = RankedTensorType::get({b, t - 1, 1}, builder.getI64Type());
    Value idx = ReshapeOp::create(builder, loc, idxType, y);
    Value logp = LogSoftmaxOp::create(builder, loc, z.getType(), z, 2);
    Value picked = GatherElementsOp::create(builder, loc, logp, idx, 2);
    Value mean = ReduceMeanOp::create(builder, loc, picked,
                                      ArrayRef<int64_t>{0, 1, 2}, false);
    loss = NegOp::create(builder, loc, mean.getType(), mean);
  } else {
    loss = buildPieces(func, builder, loc, labels, logits, pieces);
  }
  if (!zt.getElementType().isF32())
    loss = CastOp::create(
        builder, loc, RankedTensorType::get({}, builder.getF32Type()), loss);
  appendResults(
      func, loss,
      builder.getDictionaryAttr(
          {builder.getNamedAttr(kOnnxNameAttr, builder.getStringAttr("loss")),
           builder.getNamedAttr(kLossAttr, builder.getUnitAttr())}));
  return success();
}

namespace {
struct AttachLossPass : pcc::impl::AttachLossBase<AttachLossPass> {
  using AttachLossBase::AttachLossBase;
  void runOnOperation() override {
    llvm::Expected<pcc::CostModel> cost =
        pcc::CostModel::get(target, costTable, machine, dtype);
    if (!cost) {
      getOperation().emitError(llvm::toString(cost.takeError()));
      return signalPassFailure();
    }
    if (failed(pcc::attachLoss(getOperation(), labels, logits, pieces, chunks,
                               &*cost)))
      signalPassFailure();
  }
};
} // namespace
