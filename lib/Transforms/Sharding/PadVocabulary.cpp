//===- PadVocabulary.cpp - Vocabularies that tensor parallelism divides ---===//
//
// Megatron's vocabulary padding: a table looked up by token ids whose
// vocabulary tp does not divide (GPT-2's 50257) gets zero rows up to the
// next multiple of tp, so that it splits evenly. Everything computed from
// the padded extent keeps it (the LM head that shares or mirrors the table
// makes padded logits), a softmax over it masks the padding out (the loss
// never sees it), and the step's results are cut back to the real extent.
// The padded parameter records its real extent (`dist.padding = [dim,
// extent]`), so the weights file, checkpoints, gradients and dumps never
// show the padding. A table is padded only when every use of the padded
// extent is one this pass knows to be safe; otherwise it stays as it is
// (whole on every rank).
//
//===----------------------------------------------------------------------===//

#include "ShardingSolver.h"

#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstring>

namespace pcc {
#define GEN_PASS_DEF_PADVOCABULARY
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

namespace {
/// The values of one padding: which dimension of each is padded, the
/// softmaxes to mask and the results to cut back.
struct Padding {
  int64_t extent = 0, padded = 0;
  llvm::MapVector<Value, int64_t> values; ///< value -> padded dimension
  llvm::SetVector<Operation *> weights;   ///< weights to pad
  llvm::SetVector<Operation *> masked;    ///< softmaxes over the padding
  llvm::SetVector<unsigned> results;      ///< results to cut back
};
} // namespace

/// Follows the padded dimension `dim` of `v` through its users; false when
/// a use is not known to be safe.
static bool follow(Value v, int64_t dim, Padding &p) {
  auto it = p.values.find(v);
  if (it != p.values.end())
    return it->second == dim;
  p.values[v] = dim;
  auto isPadded = [&](Value x, int64_t d) {
    return d >= 0 && d < int64_t(shapeOf(x).size()) &&
           shapeOf(x)[d] == p.extent;
  };
  for (OpOperand &use : v.getUses()) {
    Operation *op = use.getOwner();
    unsigned index = use.getOperandNumber();
    bool ok =
        llvm::TypeSwitch<Operation *, bool>(op)
            .Case([&](GatherOp g) {
              // Token ids pick real rows only.
              if (index != 0)
                return false;
              if (int64_t(g.getAxis()) == dim)
                return true;
              int64_t r = dim < int64_t(g.getAxis())
                              ? dim
                              : dim + shapeOf(g.getIndices()).size() - 1;
              return follow(g.getOutput(), r, p);
            })
            .Case([&](GatherElementsOp g) {
              // Labels pick real entries only.
              return index == 0 && int64_t(g.getAxis()) == dim &&
                     shapeOf(g.getIndices())[dim] == 1;
            })
            .Case([&](TransposeOp t) {
              for (auto [i, d] : llvm::enumerate(t.getPerm()))
                if (d == dim)
                  return follow(t.getOutput(), i, p);
              return false;
            })
            .Case([&](ReshapeOp r) {
              // Only a reshape that leaves the dimension as it is.
              ArrayRef<int64_t> in = shapeOf(r.getInput()),
                                out = shapeOf(r.getOutput());
              int64_t before = 1;
              for (int64_t d = 0; d < dim; ++d)
                before *= in[d];
              int64_t acc = 1;
              for (size_t k = 0; k < out.size(); ++k) {
                if (acc == before && out[k] == in[dim])
                  return follow(r.getOutput(), k, p);
                acc *= out[k];
              }
              return false;
            })
            .Case([&](SliceOp s) {
              return s.getStarts()[dim] == 0 && s.getSizes()[dim] == p.extent &&
                     s.getSteps()[dim] == 1 && follow(s.getOutput(), dim, p);
            })
            .Case([&](MatMulOp m) {
              int64_t ra = shapeOf(m.getLhs()).size(),
                      rb = shapeOf(m.getRhs()).size(),
                      rc = shapeOf(m.getOutput()).size();
              if (index == 1 && rb >= 2 && dim == rb - 1)
                return follow(m.getOutput(), rc - 1, p);
              if (index == 0 && ra >= 2 && dim == ra - 2)
                return follow(m.getOutput(), rc - 2, p);
              return false;
            })
            .Case<LogSoftmaxOp, SoftmaxOp>([&](auto s) {
              if (int64_t(s.getAxis()) == dim)
                p.masked.insert(s);
              return follow(s.getOutput(), dim, p);
            })
            .Case([&](func::ReturnOp) {
              p.results.insert(index);
              return true;
            })
            .Case<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, WhereOp>(
                [&](Operation *o) {
                  Value out = o->getResult(0);
                  int64_t r = dim + shapeOf(out).size() - shapeOf(v).size();
                  // The other operands broadcast along the padded
                  // dimension, or are parameters padded alike (an LM
                  // head's bias).
                  for (Value other : o->getOperands()) {
                    if (other == v)
                      continue;
                    int64_t d = r + shapeOf(other).size() - shapeOf(out).size();
                    if (d < 0 || shapeOf(other)[d] == 1)
                      continue;
                    auto w = other.getDefiningOp<WeightOp>();
                    if (!w || !isPadded(other, d))
                      return false;
                    p.weights.insert(w);
                    if (!follow(other, d, p))
                      return false;
                  }
                  return follow(out, r, p);
                })
            .Default([&](Operation *o) {
              // Element-wise ops of one operand keep the dimension.
              if (o->getNumOperands() == 1 && o->getNumResults() == 1 &&
                  isa<RankedTensorType>(o->getResult(0).getType()) &&
                  shapeOf(o->getResult(0)) == shapeOf(v) &&
                  isa<DifferentiableOpInterface>(o) &&
                  !isa<CumSumOp, TriluOp>(o))
                return follow(o->getResult(0), dim, p);
              return false;
            });
    if (!ok)
      return false;
  }
  return true;
}

static RankedTensorType withExtent(Type t, int64_t dim, int64_t extent) {
  auto rt = cast<RankedTensorType>(t);
  SmallVector<int64_t> shape(rt.getShape());
  shape[dim] = extent;
  return RankedTensorType::get(shape, rt.getElementType());
}

/// `value` with zeros appended along `dim` up to `extent`.
static DenseElementsAttr padValue(ElementsAttr value, int64_t dim,
                                  int64_t extent) {
  auto type = cast<RankedTensorType>(value.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  auto padded = withExtent(type, dim, extent);
  if (auto dense = dyn_cast<DenseElementsAttr>(value); dense && dense.isSplat())
    return dense.resizeSplat(padded);
  // Rows copied as bytes, padding zero-filled: a float's zero is all zero
  // bits. (Going through one attribute per element made a 50k x 768 table
  // cost seconds.)
  size_t width = type.getElementTypeBitWidth() / 8;
  ArrayRef<char> raw = *getStoredBytes(value);
  std::vector<char> out(size_t(outer * extent * inner) * width, 0);
  size_t rowBytes = size_t(shape[dim] * inner) * width;
  size_t paddedRowBytes = size_t(extent * inner) * width;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out.data() + o * paddedRowBytes, raw.data() + o * rowBytes,
                rowBytes);
  return DenseElementsAttr::getFromRawBuffer(padded, out);
}

LogicalResult pcc::padVocabulary(func::FuncOp func, int64_t tp) {
  if (tp <= 1)
    return success();
  Block &body = func.getBody().front();
  // Vocabularies: the looked-up extents of tables tp does not divide.
  SmallVector<std::pair<WeightOp, int64_t>> tables;
  for (auto g : body.getOps<GatherOp>())
    if (auto w = g.getData().getDefiningOp<WeightOp>()) {
      int64_t e = shapeOf(w.getOutput())[g.getAxis()];
      if (e % tp != 0 && isa<FloatType>(getElementTypeOrSelf(w.getType())) &&
          !w->hasAttr(dist::kPaddingAttr))
        tables.push_back({w, int64_t(g.getAxis())});
    }
  llvm::DenseSet<Operation *> done;
  for (auto [table, axis] : tables) {
    if (done.contains(table))
      continue;
    Padding p;
    p.extent = shapeOf(table.getOutput())[axis];
    p.padded = (p.extent + tp - 1) / tp * tp;
    p.weights.insert(table);
    // Every weight with the vocabulary's extent along some dimension is
    // examined with the table (an untied LM head mirrors it).
    bool safe = follow(table.getOutput(), axis, p);
    for (auto w : body.getOps<WeightOp>()) {
      if (!safe || p.weights.contains(w) ||
          !isa<FloatType>(getElementTypeOrSelf(w.getType())))
        continue;
      ArrayRef<int64_t> s = shapeOf(w.getOutput());
      for (int64_t d = 0; d < int64_t(s.size()); ++d)
        if (s[d] == p.extent) {
          Padding trial = p;
          trial.weights.insert(w);
          if (follow(w.getOutput(), d, trial))
            p = std::move(trial);
          break;
        }
    }
    for (Operation *w : p.weights)
      done.insert(w);
    if (!safe)
      continue;

    // Rewrite: padded weights, padded types, masks, cut results.
    OpBuilder b(func.getContext());
    for (Operation *op : p.weights) {
      auto w = cast<WeightOp>(op);
      int64_t dim = p.values.lookup(w.getOutput());
      ElementsAttr value = w.getValue();
      bool splat = isa<DenseElementsAttr>(value) && value.isSplat();
      if (!splat && !getStoredBytes(value))
        return w.emitError("cannot pad a weight without stored elements");
      w.setValueAttr(padValue(value, dim, p.padded));
      w->setAttr(dist::kPaddingAttr, b.getDenseI64ArrayAttr({dim, p.extent}));
    }
    for (auto [v, dim] : p.values) {
      v.setType(withExtent(v.getType(), dim, p.padded));
      if (auto s = v.getDefiningOp<SliceOp>()) {
        SmallVector<int64_t> sizes(s.getSizes());
        sizes[dim] = p.padded;
        s.setSizes(sizes);
      }
    }
    for (Operation *op : p.masked) {
      // x where the entry is real, the lowest float where it is padding:
      // exp() of it is 0, so a softmax ignores the padding.
      b.setInsertionPoint(op);
      Value x = op->getOperand(0);
      int64_t dim = p.values.lookup(op->getResult(0));
      auto xt = cast<RankedTensorType>(x.getType());
      SmallVector<int64_t> maskShape(xt.getRank(), 1);
      maskShape[dim] = p.padded;
      SmallVector<bool> real(p.padded);
      for (int64_t i = 0; i < p.padded; ++i)
        real[i] = i < p.extent;
      auto maskType = RankedTensorType::get(maskShape, b.getI1Type());
      Value mask = ConstantOp::create(
          b, op->getLoc(), DenseElementsAttr::get(maskType, ArrayRef(real)));
      auto et = cast<FloatType>(xt.getElementType());
      Value lowest = ConstantOp::create(
          b, op->getLoc(),
          DenseElementsAttr::get(
              RankedTensorType::get({}, et),
              APFloat::getLargest(et.getFloatSemantics(), /*Negative=*/true)));
      Value masked = WhereOp::create(b, op->getLoc(), mask, x, lowest);
      op->setOperand(0, masked);
    }
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    bool training = getLossIndex(func).has_value();
    for (unsigned k : p.results) {
      Value v = ret.getOperand(k);
      int64_t dim = p.values.lookup(v);
      if (training) {
        // A training step's outputs stay split (no rank holds the whole
        // vocabulary): the runtime cuts the padding when it gathers them.
        func.setResultAttr(k, dist::kPaddingAttr,
                           b.getDenseI64ArrayAttr({dim, p.extent}));
        continue;
      }
      b.setInsertionPoint(ret);
      SmallVector<int64_t> starts(shapeOf(v).size(), 0), sizes(shapeOf(v)),
          steps(shapeOf(v).size(), 1);
      sizes[dim] = p.extent;
      ret.setOperand(k, SliceOp::create(b, ret.getLoc(),
                                        withExtent(v.getType(), dim, p.extent),
                                        v, starts, sizes, steps));
    }
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 ret.getOperandTypes()));
  return success();
}

namespace {
struct PadVocabularyPass : pcc::impl::PadVocabularyBase<PadVocabularyPass> {
  using PadVocabularyBase::PadVocabularyBase;
  void runOnOperation() override {
    if (failed(padVocabulary(getOperation(), tp)))
      signalPassFailure();
  }
};
} // namespace
