//===- Optimizer.cpp - AdamW and SGD updates as Graph ops -----------------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/StringMap.h"

#include <cmath>

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

  /// A new state argument named `name` starting at `init`; `of` is the
  /// argument index of the parameter it is optimizer state of.
  BlockArgument state(StringRef name, ElementsAttr init,
                      std::optional<unsigned> of = std::nullopt) {
    return addStateArgument(func, name, init, of, loc);
  }
  BlockArgument zerosState(StringRef name, Type type,
                           std::optional<unsigned> of = std::nullopt) {
    auto t = cast<RankedTensorType>(type);
    return state(
        name, DenseElementsAttr::get(t, b.getZeroAttr(t.getElementType())), of);
  }
  /// `value` becomes the new value of state argument `arg`.
  void update(BlockArgument arg, Value value) {
    results.push_back(value);
    attrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kUpdateAttr, b.getI64IntegerAttr(arg.getArgNumber()))));
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

/// Checks a schedule and clipping before anything is built.
static LogicalResult checkConfig(func::FuncOp func,
                                 const pcc::OptimizerConfig &o) {
  if (o.kind != "adamw" && o.kind != "sgd")
    return func.emitError("unknown optimizer '")
           << o.kind << "' (adamw or sgd)";
  if (o.clipGrad < 0)
    return func.emitError("--clip-grad must be positive, got ") << o.clipGrad;
  if (o.lrSchedule != "constant" && o.lrSchedule != "linear" &&
      o.lrSchedule != "cosine")
    return func.emitError("unknown --lr-schedule '")
           << o.lrSchedule << "' (constant, linear or cosine)";
  if (o.warmupSteps < 0)
    return func.emitError("--warmup-steps must not be negative");
  if (o.lrSchedule == "constant" && (o.decaySteps || o.minLr))
    return func.emitError("--decay-steps and --min-lr need --lr-schedule "
                          "linear or cosine");
  if (o.lrSchedule != "constant" && o.decaySteps <= o.warmupSteps)
    return func.emitError("--decay-steps (")
           << o.decaySteps << ") must be above --warmup-steps ("
           << o.warmupSteps << ")";
  if (o.minLr < 0 || (o.lrSchedule != "constant" && o.minLr > o.lr))
    return func.emitError("--min-lr must be between 0 and --lr");
  return success();
}

/// The learning rate's hyperparameters, as f32 scalar state: `pcc run`
/// may change them when it resumes (--lr, --min-lr, --warmup-steps,
/// --decay-steps) without a new build, and checkpoints keep them. Those a
/// schedule does not read are null.
struct RateState {
  Value lr, minLr, warmupSteps, decaySteps;
};

static RateState makeRateState(UpdateBuilder &u,
                               const pcc::OptimizerConfig &o) {
  Type f32 = u.b.getF32Type();
  auto t = RankedTensorType::get({}, f32);
  auto hyper = [&](StringRef name, double v) -> Value {
    return u.state(name, DenseElementsAttr::get(t, u.b.getFloatAttr(f32, v)));
  };
  RateState r;
  r.lr = hyper("pcc.lr", o.lr);
  if (o.lrSchedule != "constant" || o.warmupSteps > 0)
    r.warmupSteps = hyper("pcc.warmup_steps", double(o.warmupSteps));
  if (o.lrSchedule != "constant") {
    r.minLr = hyper("pcc.min_lr", o.minLr);
    r.decaySteps = hyper("pcc.decay_steps", double(o.decaySteps));
  }
  return r;
}

/// The learning rate after `s` completed steps (an f32 scalar), as the
/// schedule says.
static Value scheduledRate(UpdateBuilder &u, const pcc::OptimizerConfig &o,
                           const RateState &r, Value s) {
  Type f32 = u.b.getF32Type();
  auto sc = [&](double v) { return u.scalar(v, f32); };
  Value lr = r.lr;
  if (o.lrSchedule != "constant") {
    // Progress through the decay, clamped to [0, 1].
    Value p = u.div(u.sub(s, r.warmupSteps),
                    u.sub(r.decaySteps, r.warmupSteps));
    p = MinOp::create(u.b, u.loc, MaxOp::create(u.b, u.loc, p, sc(0)), sc(1));
    Value fall; // from 1 down to 0
    if (o.lrSchedule == "cosine")
      fall = u.mul(sc(0.5), u.add(sc(1), CosOp::create(u.b, u.loc, p.getType(),
                                                       u.mul(sc(M_PI), p))));
    else
      fall = u.sub(sc(1), p);
    lr = u.add(r.minLr, u.mul(u.sub(r.lr, r.minLr), fall));
  }
  if (r.warmupSteps) {
    // lr * (s + 1) / w while s < w; a warmup of 0 steps never takes it.
    Value warm =
        u.div(u.mul(r.lr, u.add(s, sc(1))),
              MaxOp::create(u.b, u.loc, r.warmupSteps, sc(1)));
    Value warming = LessOp::create(u.b, u.loc, s, r.warmupSteps);
    lr = WhereOp::create(u.b, u.loc, warming, warm, lr);
  }
  return lr;
}

LogicalResult pcc::applyOptimizer(func::FuncOp func, const OptimizerConfig &o) {
  if (failed(checkConfig(func, o)))
    return failure();
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  llvm::StringMap<WeightOp> weights;
  for (WeightOp w : body.getOps<WeightOp>())
    if (!weights.try_emplace(w.getName(), w).second)
      return w.emitError("two parameters are named '") << w.getName() << "'";
  // The trained parameters: state arguments that have a gradient result.
  SmallVector<std::pair<BlockArgument, Value>> trained;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (std::optional<unsigned> arg = getStateIndex(func, i, kGradAttr)) {
      StringRef name = getStateName(func, *arg);
      for (unsigned j = 0; j < func.getNumResults(); ++j)
        if (getStateIndex(func, j, kUpdateAttr) == *arg)
          return func.emitError("pcc-optimizer: parameter '")
                 << name << "' already has an update (the optimizer ran "
                 << "before)";
      if (weights.count(name))
        return weights.lookup(name).emitError("two parameters are named '")
               << name << "'";
      trained.push_back({body.getArgument(*arg), ret->getOperand(i)});
    }
  if (trained.empty())
    return func.emitError("pcc-optimizer: no gradients (run pcc-autodiff "
                          "first)");

  UpdateBuilder u(func, ret);
  bool adamw = o.kind == "adamw";
  bool scheduled = o.lrSchedule != "constant" || o.warmupSteps > 0;
  double wd = o.weightDecay >= 0 ? o.weightDecay : (adamw ? 0.01 : 0.0);
  Type f32 = u.b.getF32Type();
  auto toType = [&](Value v, Type et) -> Value {
    if (getElementTypeOrSelf(v.getType()) == et)
      return v;
    return CastOp::create(u.b, u.loc, RankedTensorType::get({}, et), v);
  };
  // The steps taken so far: AdamW's bias correction (t = step + 1,
  // c1 = 1 - b1^t, c2 = 1 - b2^t) and the schedule read it.
  Value c1, c2, lr;
  BlockArgument step;
  if (adamw || scheduled)
    step = u.zerosState("pcc.step", RankedTensorType::get({}, f32));
  RateState rates = makeRateState(u, o);
  if (step) {
    Value t = u.add(step, u.scalar(1, f32));
    u.update(step, t);
    if (adamw) {
      c1 = u.sub(u.scalar(1, f32), u.pow(u.scalar(o.beta1, f32), t));
      c2 = u.sub(u.scalar(1, f32), u.pow(u.scalar(o.beta2, f32), t));
    }
    if (scheduled)
      lr = scheduledRate(u, o, rates, step);
  }
  // Clipping: one scale for every gradient, from their global norm.
  Value clip;
  if (o.clipGrad > 0) {
    Value total;
    for (auto [p, g] : trained) {
      auto t = cast<RankedTensorType>(g.getType());
      auto axes = llvm::to_vector(llvm::seq<int64_t>(0, t.getRank()));
      Value squares = ReduceSumOp::create(u.b, u.loc, u.mul(g, g), axes, false);
      squares = toType(squares, f32);
      total = total ? u.add(total, squares) : squares;
    }
    total.getDefiningOp()->setAttr(kGradientNormAttr, u.b.getUnitAttr());
    Value norm = u.sqrt(total);
    clip = MinOp::create(
        u.b, u.loc, u.scalar(1, f32),
        u.div(u.scalar(o.clipGrad, f32), u.add(norm, u.scalar(1e-6, f32))));
  }
  for (auto [p, g] : trained) {
    std::string name = getStateName(func, p.getArgNumber()).str();
    unsigned param = p.getArgNumber();
    Type et = getElementTypeOrSelf(p.getType());
    auto sc = [&](double v) { return u.scalar(v, et); };
    // The rate and its products with constants, as scalars of the
    // parameter's type.
    Value rate = toType(lr ? lr : rates.lr, et);
    if (clip)
      g = u.mul(g, toType(clip, et));
    Value updated;
    if (adamw) {
      BlockArgument m = u.zerosState(name + ".adamw.m", p.getType(), param);
      BlockArgument v = u.zerosState(name + ".adamw.v", p.getType(), param);
      Value m2 = u.add(u.mul(sc(o.beta1), m), u.mul(sc(1 - o.beta1), g));
      Value v2 =
          u.add(u.mul(sc(o.beta2), v), u.mul(sc(1 - o.beta2), u.mul(g, g)));
      Value decayed =
          wd ? u.mul(p, u.sub(sc(1), u.mul(rate, sc(wd)))) : p;
      Value c1e = toType(c1, et), c2e = toType(c2, et);
      Value denom = u.add(u.div(u.sqrt(v2), u.sqrt(c2e)), sc(o.eps));
      Value stepSize = u.div(rate, c1e);
      updated = u.sub(decayed, u.mul(stepSize, u.div(m2, denom)));
      u.update(m, m2);
      u.update(v, v2);
    } else {
      Value d = wd ? u.add(g, u.mul(sc(wd), p)) : g;
      if (o.momentum) {
        BlockArgument buf =
            u.zerosState(name + ".sgd.momentum", p.getType(), param);
        d = u.add(u.mul(sc(o.momentum), buf), d);
        u.update(buf, d);
      }
      updated = u.sub(p, u.mul(rate, d));
    }
    u.update(p, updated);
  }
  // A scheduled rate is an output of the step, for the log.
  if (lr) {
    u.results.push_back(lr);
    u.attrs.push_back(u.b.getDictionaryAttr(
        u.b.getNamedAttr("onnx.name", u.b.getStringAttr("learning_rate"))));
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
    o.clipGrad = clipGrad;
    o.lrSchedule = lrSchedule;
    o.warmupSteps = warmupSteps;
    o.decaySteps = decaySteps;
    o.minLr = minLr;
    if (failed(pcc::applyOptimizer(getOperation(), o)))
      signalPassFailure();
  }
};
} // namespace
