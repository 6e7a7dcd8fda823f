//===- AttachLoss.cpp - Appends the causal-LM cross-entropy loss ----------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"

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

LogicalResult pcc::attachLoss(func::FuncOp func, StringRef labelsName,
                              StringRef logitsName) {
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
  // Predict token i+1 from position i: logits[:, :-1] against labels[:, 1:].
  Value z = SliceOp::create(builder, loc, logits, ArrayRef<int64_t>{0, 0, 0},
                            ArrayRef<int64_t>{b, t - 1, v},
                            ArrayRef<int64_t>{1, 1, 1});
  Value y =
      SliceOp::create(builder, loc, labels, ArrayRef<int64_t>{0, 1},
                      ArrayRef<int64_t>{b, t - 1}, ArrayRef<int64_t>{1, 1});
  auto idxType = RankedTensorType::get({b, t - 1, 1}, builder.getI64Type());
  if (!lt.getElementType().isInteger(64))
    y = CastOp::create(builder, loc,
                       RankedTensorType::get({b, t - 1}, builder.getI64Type()),
                       y);
  Value idx = ReshapeOp::create(builder, loc, idxType, y);
  Value logp = LogSoftmaxOp::create(builder, loc, z.getType(), z, 2);
  Value picked = GatherElementsOp::create(builder, loc, logp, idx, 2);
  Value mean = ReduceMeanOp::create(builder, loc, picked,
                                    ArrayRef<int64_t>{0, 1, 2}, false);
  Value loss = NegOp::create(builder, loc, mean.getType(), mean);
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
    if (failed(pcc::attachLoss(getOperation(), labels, logits)))
      signalPassFailure();
  }
};
} // namespace
