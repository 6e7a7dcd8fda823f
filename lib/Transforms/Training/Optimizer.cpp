//===- Optimizer.cpp - AdamW and SGD updates as Graph ops -----------------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace pcc::graph;

namespace pcc {
#define GEN_PASS_DEF_OPTIMIZER
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

namespace {
/// Builds the update ops and the state they read and write.
class UpdateBuilder {
public:
  UpdateBuilder(func::FuncOp func, Operation *ret)
      : func(func), b(ret), loc(NameLoc::get(b.getStringAttr("optimizer"))) {}

  /// A new state argument named `name` starting at `init`.
  Value state(StringRef name, ElementsAttr init) {
    Block &body = func.getBody().front();
    unsigned index = func.getNumArguments();
    DictionaryAttr attrs = b.getDictionaryAttr(
        {b.getNamedAttr(pcc::kStateAttr, b.getStringAttr(name)),
         b.getNamedAttr(pcc::kStateInitAttr, init)});
    (void)func.insertArgument(index, init.getType(), attrs, loc);
    return body.getArgument(index);
  }
  Value zerosState(StringRef name, Type type) {
    auto t = cast<RankedTensorType>(type);
    return state(name,
                 DenseElementsAttr::get(t, b.getZeroAttr(t.getElementType())));
  }
  void update(StringRef name, Value value) {
    results.push_back(value);
    attrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(pcc::kStateUpdateAttr, b.getStringAttr(name))));
  }
  Value scalar(double v, Type et) {
    return ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, et),
                               b.getFloatAttr(et, v)));
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, x.getType(), x); }
  Value pow(Value x, Value y) { return PowOp::create(b, loc, x, y); }

  func::FuncOp func;
  OpBuilder b;
  Location loc;
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> attrs;
};
} // namespace

LogicalResult pcc::applyOptimizer(func::FuncOp func, const OptimizerConfig &o) {
  if (o.kind != "adamw" && o.kind != "sgd")
    return func.emitError("unknown optimizer '")
           << o.kind << "' (adamw or sgd)";
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  llvm::StringMap<WeightOp> weights;
  for (WeightOp w : body.getOps<WeightOp>())
    if (!weights.try_emplace(w.getName(), w).second)
      return w.emitError("two parameters are named '") << w.getName() << "'";
  SmallVector<std::pair<WeightOp, Value>> trained;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (auto name = func.getResultAttrOfType<StringAttr>(i, kGradAttr)) {
      auto it = weights.find(name.getValue());
      if (it == weights.end())
        return func.emitError("gradient of unknown parameter '")
               << name.getValue() << "'";
      trained.push_back({it->second, ret->getOperand(i)});
    }
  if (trained.empty())
    return func.emitError("pcc-optimizer: no gradients (run pcc-autodiff "
                          "first)");

  UpdateBuilder u(func, ret);
  bool adamw = o.kind == "adamw";
  double wd = o.weightDecay >= 0 ? o.weightDecay : (adamw ? 0.01 : 0.0);
  Type f32 = u.b.getF32Type();
  // AdamW's bias correction: t = step + 1, c1 = 1 - b1^t, c2 = 1 - b2^t.
  Value c1, c2;
  if (adamw) {
    Value step = u.zerosState("pcc.step", RankedTensorType::get({}, f32));
    Value t = u.add(step, u.scalar(1, f32));
    u.update("pcc.step", t);
    c1 = u.sub(u.scalar(1, f32), u.pow(u.scalar(o.beta1, f32), t));
    c2 = u.sub(u.scalar(1, f32), u.pow(u.scalar(o.beta2, f32), t));
  }
  for (auto [w, g] : trained) {
    std::string name = w.getName().str();
    Type et = getElementTypeOrSelf(w.getType());
    auto sc = [&](double v) { return u.scalar(v, et); };
    Value p = u.state(name, w.getValue());
    w.getResult().replaceAllUsesWith(p);
    w.erase();
    Value updated;
    if (adamw) {
      Value m = u.zerosState(name + ".adamw.m", p.getType());
      Value v = u.zerosState(name + ".adamw.v", p.getType());
      Value m2 = u.add(u.mul(sc(o.beta1), m), u.mul(sc(1 - o.beta1), g));
      Value v2 =
          u.add(u.mul(sc(o.beta2), v), u.mul(sc(1 - o.beta2), u.mul(g, g)));
      Value decayed = wd ? u.mul(p, sc(1 - o.lr * wd)) : p;
      Value c1e = et == f32 ? c1
                            : CastOp::create(u.b, u.loc,
                                             RankedTensorType::get({}, et), c1)
                                  .getResult();
      Value c2e = et == f32 ? c2
                            : CastOp::create(u.b, u.loc,
                                             RankedTensorType::get({}, et), c2)
                                  .getResult();
      Value denom = u.add(u.div(u.sqrt(v2), u.sqrt(c2e)), sc(o.eps));
      Value stepSize = u.div(sc(o.lr), c1e);
      updated = u.sub(decayed, u.mul(stepSize, u.div(m2, denom)));
      u.update(name + ".adamw.m", m2);
      u.update(name + ".adamw.v", v2);
    } else {
      Value d = wd ? u.add(g, u.mul(sc(wd), p)) : g;
      if (o.momentum) {
        Value buf = u.zerosState(name + ".sgd.momentum", p.getType());
        d = u.add(u.mul(sc(o.momentum), buf), d);
        u.update(name + ".sgd.momentum", d);
      }
      updated = u.sub(p, u.mul(sc(o.lr), d));
    }
    u.update(name, updated);
  }
  appendResults(func, u.results, u.attrs);
  return success();
}

namespace {
struct OptimizerPass : pcc::impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;
  void runOnOperation() override {
    pcc::OptimizerConfig o;
    o.kind = kind;
    o.lr = lr;
    o.beta1 = beta1;
    o.beta2 = beta2;
    o.eps = eps;
    o.weightDecay = weightDecay;
    o.momentum = momentum;
    if (failed(pcc::applyOptimizer(getOperation(), o)))
      signalPassFailure();
  }
};
} // namespace
