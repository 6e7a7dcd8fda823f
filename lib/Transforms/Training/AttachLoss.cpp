//===- AttachLoss.cpp - Appends the causal-LM cross-entropy loss ----------===//

#include "pcc/Transforms/Passes.h"

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

static int64_t flopsOf(Operation *op) {
  auto cost = dyn_cast<CostOpInterface>(op);
  return cost ? cost.getFlops() : 0;
}

/// How many pieces of the sequence the LM head and the loss take (by
/// flops, against one of `chunks` equal shares of the forward): one while
/// they fit in half a chunk, else as many as keep each piece within a
/// sixth of one, so that the partition can fill a chunk with pieces and
/// other ops; at most one per predicted position.
static int64_t autoPieces(func::FuncOp func, Value logits, int64_t chunks) {
  if (chunks < 2)
    return 1;
  RowChain chain = findRowChain(logits);
  int64_t total = 0, head = 0;
  func.walk([&](Operation *op) { total += flopsOf(op); });
  for (Operation *op : chain.ops)
    head += flopsOf(op);
  // The loss: a log-softmax, a pick and a sum per logit, about 5 flops.
  auto zt = cast<RankedTensorType>(logits.getType());
  int64_t loss = 5 * zt.getNumElements();
  head += loss;
  total += loss;
  double chunk = double(total) / double(chunks);
  if (chunk <= 0 || double(head) <= chunk / 2)
    return 1;
  int64_t positions = zt.getDimSize(1) - 1;
  return std::min<int64_t>(positions, int64_t(std::ceil(head / (chunk / 6))));
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
                              int64_t chunks) {
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
    pieces = autoPieces(func, logits, chunks);
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
    if (failed(pcc::attachLoss(getOperation(), labels, logits, pieces, chunks)))
      signalPassFailure();
  }
};
} // namespace
