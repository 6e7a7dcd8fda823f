//===- LowerSchedule.cpp - Each pipeline rank's step as a function --------===//
//
// Compiles a verified dist.schedule into one public function per pipeline
// rank: its action list in order, each compute action a call of an outlined
// stage function on one microbatch, each transfer a dist.send or dist.recv
// of the tensors that cross that stage boundary (a value that skips stages
// is relayed by the ranks between). Inputs are sliced per microbatch,
// outputs joined and the loss averaged over them; gradients accumulate over
// the microbatches on the stage that computes them. After the flush, the
// ranks holding a parameter exchange the parts of its gradient that other
// stages computed (a tied embedding and LM head: Megatron's embedding
// group), all summing them in rank order so that every copy stays equal,
// divide by the microbatches and run the optimizer. Nothing of the
// schedule remains to interpret at run time.
//
//===----------------------------------------------------------------------===//

#include "pcc/Analysis/StepPhases.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Target/CallGraph.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipeline/Pipeline.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

namespace pcc {
#define GEN_PASS_DEF_LOWERSCHEDULE
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;

namespace {
/// Message tags: transfers between two ranks match in order, per tag.
enum Tag : int64_t { kActTag = 0, kGradTag = 1, kOptimizerTag = 2 };

struct StageFunctions {
  func::FuncOp forward, backward, weight;
};

/// Where the values that cross functions go.
struct Routes {
  /// Per virtual stage, the value ids its act (to stage + 1) and grad (to
  /// stage - 1) transfers carry, in id order.
  std::vector<std::vector<int64_t>> act, grad;
  llvm::DenseMap<int64_t, Type> types;
};

class Lowering {
public:
  Lowering(func::FuncOp step, dist::ScheduleOp schedule, int64_t pp)
      : step(step), schedule(schedule), pp(pp),
        ctx(step.getContext()) {}
  LogicalResult run();

private:
  LogicalResult collect();
  LogicalResult lowerRank(int64_t rank, dist::RankOp actions);
  bool holds(unsigned arg, int64_t rank);
  Value mb(OpBuilder &b, Value whole, unsigned arg, int64_t k);

  func::FuncOp step;
  dist::ScheduleOp schedule;
  int64_t pp, stages = 1, microbatches = 1;
  MLIRContext *ctx;
  std::vector<StageFunctions> stageFns;
  std::map<int64_t, func::FuncOp> optimizerFns;
  Routes routes;
  /// Per gradient result: the ranks whose backward contributes to it.
  std::map<int64_t, llvm::SmallDenseSet<int64_t, 2>> gradProducers;
};
} // namespace

static std::optional<int64_t> roleOf(DictionaryAttr attrs, StringRef role) {
  if (!attrs)
    return std::nullopt;
  if (auto i = attrs.getAs<IntegerAttr>(role))
    return i.getInt();
  return std::nullopt;
}

LogicalResult Lowering::collect() {
  auto module = step->getParentOfType<ModuleOp>();
  stages = step->getAttrOfType<IntegerAttr>(kNumStagesAttr).getInt();
  if (auto m = step->getAttrOfType<IntegerAttr>(kMicrobatchesAttr))
    microbatches = m.getInt();
  if (int64_t(schedule.getMicrobatches()) != microbatches)
    return schedule.emitError("the schedule has ")
           << schedule.getMicrobatches() << " microbatches, the step "
           << microbatches;
  if (int64_t(schedule.getRanks() * schedule.getVirtualStages()) != stages)
    return schedule.emitError("the schedule has ")
           << schedule.getRanks() * schedule.getVirtualStages()
           << " stages, the step " << stages;
  stageFns.resize(stages);
  // Producers and consumers of every value id, by stage.
  struct Ends {
    int64_t producer = -1;
    bool byForward = true;
    SmallVector<std::pair<int64_t, bool>> consumers; // (stage, forward)
  };
  std::map<int64_t, Ends> ends;
  StringRef base = step.getSymName();
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto phase = fn->getAttrOfType<StringAttr>(kPhaseAttr);
    if (!phase || !fn.getSymName().starts_with(base))
      continue;
    if (phase.getValue() == "optimizer") {
      optimizerFns[fn->getAttrOfType<IntegerAttr>(dist::kRankAttr).getInt()] = fn;
      continue;
    }
    int64_t s = fn->getAttrOfType<IntegerAttr>(kStageAttr).getInt();
    bool forward = phase.getValue() == "forward";
    (forward                         ? stageFns[s].forward
     : phase.getValue() == "weight" ? stageFns[s].weight
                                     : stageFns[s].backward) = fn;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto id = roleOf(fn.getArgAttrDict(i), kValueRole))
        ends[*id].consumers.push_back({s, forward});
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      if (auto id = roleOf(fn.getResultAttrDict(i), kValueRole)) {
        ends[*id].producer = s;
        ends[*id].byForward = forward;
        routes.types[*id] = fn.getResultTypes()[i];
      }
      if (auto k = roleOf(fn.getResultAttrDict(i), kGradRole))
        gradProducers[*k].insert(s % pp);
    }
  }
  for (int64_t s = 0; s < stages; ++s)
    if (!stageFns[s].forward)
      return step.emitError("no forward function for stage ") << s;
  bool hasW = false;
  schedule.walk([&](dist::ComputeOp c) {
    hasW |= c.getPhase() == dist::Phase::W;
  });
  if (!hasW && llvm::any_of(stageFns, [](const StageFunctions &f) {
        return bool(f.weight);
      }))
    return schedule.emitError("the backward is split into input and weight "
                              "gradients but the schedule has no W actions");
  routes.act.assign(stages, {});
  routes.grad.assign(stages, {});
  for (auto &[id, e] : ends) {
    if (e.producer < 0)
      return step.emitError("value ") << id << " has no producer";
    int64_t fwdTo = e.producer, bwdTo = e.producer;
    for (auto [s, forward] : e.consumers) {
      if (s > e.producer) {
        if (!e.byForward)
          return step.emitError("a backward value of stage ")
                 << e.producer << " is read by stage " << s;
        fwdTo = std::max(fwdTo, s);
      } else if (s < e.producer) {
        if (forward)
          return step.emitError("a value of stage ")
                 << e.producer << " is read by the forward of stage " << s;
        bwdTo = std::min(bwdTo, s);
      }
    }
    for (int64_t s = e.producer; s < fwdTo; ++s)
      routes.act[s].push_back(id);
    for (int64_t s = e.producer; s > bwdTo; --s)
      routes.grad[s].push_back(id);
  }
  return success();
}

bool Lowering::holds(unsigned arg, int64_t rank) {
  return pipeline::holdsState(step, arg, rank, pp);
}

Value Lowering::mb(OpBuilder &b, Value whole, unsigned arg, int64_t k) {
  auto dim = step.getArgAttrOfType<IntegerAttr>(arg, kBatchDimAttr);
  if (!dim || microbatches == 1)
    return whole;
  auto t = cast<RankedTensorType>(whole.getType());
  int64_t d = dim.getInt(), size = t.getDimSize(d) / microbatches;
  SmallVector<int64_t> starts(t.getRank(), 0), sizes(t.getShape()),
      steps(t.getRank(), 1);
  starts[d] = k * size;
  sizes[d] = size;
  return graph::SliceOp::create(b, whole.getLoc(), whole, starts, sizes,
                                steps);
}

LogicalResult Lowering::lowerRank(int64_t rank, dist::RankOp actions) {
  Block &stepBody = step.getBody().front();
  auto stepRet = cast<func::ReturnOp>(stepBody.getTerminator());
  // The rank's signature: every graph input (sliced per microbatch), the
  // state it holds, and the results it makes.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  llvm::DenseMap<unsigned, unsigned> newArg;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    bool state = bool(step.getArgAttr(i, graph::kStateAttr));
    if (state && !holds(i, rank))
      continue;
    newArg[i] = argTypes.size();
    // The rank takes the whole batch of a sliced input.
    auto t = cast<RankedTensorType>(step.getArgumentTypes()[i]);
    if (auto dim = step.getArgAttrOfType<IntegerAttr>(i, kBatchDimAttr)) {
      SmallVector<int64_t> shape(t.getShape());
      shape[dim.getInt()] *= microbatches;
      t = RankedTensorType::get(shape, t.getElementType());
    }
    argTypes.push_back(t);
  }
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    if (!newArg.count(i))
      continue;
    NamedAttrList attrs(step.getArgAttrDict(i));
    attrs.erase(kStagesAttr);
    attrs.erase(kBatchDimAttr);
    if (auto of = attrs.get(graph::kStateOfAttr))
      attrs.set(graph::kStateOfAttr,
                IntegerAttr::get(IntegerType::get(ctx, 64),
                                 newArg[cast<IntegerAttr>(of).getInt()]));
    argAttrs.push_back(attrs.getDictionary(ctx));
  }
  std::string name = llvm::formatv("{0}_rank{1}", step.getSymName(), rank);
  OpBuilder mb0(step);
  auto fn = func::FuncOp::create(mb0, step.getLoc(), name,
                                 FunctionType::get(ctx, argTypes, {}));
  fn->setAttr(dist::kRankAttr, IntegerAttr::get(IntegerType::get(ctx, 64), rank));
  if (Attribute entry = step->getAttr(kEntryPointAttr))
    fn->setAttr(kEntryPointAttr, entry);
  // What the step says of itself that reports read.
  if (Attribute pieces = step->getAttr(graph::kLossPiecesAttr))
    fn->setAttr(graph::kLossPiecesAttr, pieces);
  Block *body = fn.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockEnd(body);
  Location loc = step.getLoc();
  auto meshRef = FlatSymbolRefAttr::get(ctx, dist::kMeshName);
  ArrayAttr ppAxes = b.getStrArrayAttr({dist::kPipelineAxis});

  std::map<std::pair<int64_t, int64_t>, Value> values; // (id, microbatch)
  std::map<std::pair<unsigned, int64_t>, Value> slices;
  std::map<int64_t, SmallVector<Value>> outputs;        // result -> parts
  std::map<int64_t, Value> accumulated;                 // grad result
  auto argFor = [&](func::FuncOp callee, unsigned i,
                    int64_t k) -> FailureOr<Value> {
    DictionaryAttr attrs = callee.getArgAttrDict(i);
    if (auto in = roleOf(attrs, kInputRole)) {
      auto key = std::make_pair(unsigned(*in), k);
      Value &v = slices[key];
      if (!v)
        v = mb(b, body->getArgument(newArg[*in]), *in, k);
      return v;
    }
    if (auto st = roleOf(attrs, kStateRole)) {
      auto it = newArg.find(*st);
      if (it == newArg.end())
        return callee.emitError("pipeline rank ")
               << rank << " runs @" << callee.getSymName() << ", which reads "
               << pipeline::describeState(step, unsigned(*st))
               << " that the rank does not hold";
      return Value(body->getArgument(it->second));
    }
    if (auto id = roleOf(attrs, kValueRole)) {
      Value v = values[{*id, k}];
      if (!v)
        return callee.emitError("microbatch ")
               << k << ": value " << *id << " is not on rank " << rank
               << " when the schedule calls this function";
      return v;
    }
    return callee.emitError("argument ") << i << " has no role";
  };

  auto peerOf = [&](int64_t stage) { return stage % pp; };
  // What each scheduled send sent (payload, stage, microbatch), for its
  // wait.
  std::map<std::tuple<bool, int64_t, int64_t>, SmallVector<Value>> sent;
  // An inference build runs the forward actions only.
  bool training = llvm::any_of(
      stageFns, [](const StageFunctions &f) { return bool(f.backward); });
  // The stage function an action calls.
  auto calleeOf = [&](dist::ComputeOp compute) {
    const StageFunctions &fns = stageFns[compute.getStageAttr().getInt()];
    switch (compute.getPhase()) {
    case dist::Phase::F:
      return fns.forward;
    case dist::Phase::B:
      return fns.backward;
    case dist::Phase::W:
      return fns.weight;
    }
    llvm_unreachable("unknown phase");
  };
  // A gradient part still to be summed over other mesh axes is summed once,
  // right after the last action that adds to it on this rank, so that the
  // sum overlaps the rest of the flush.
  llvm::DenseMap<Operation *, SmallVector<int64_t>> lastContribution;
  std::map<int64_t, ArrayAttr> reduceAxes;
  if (training) {
    std::map<int64_t, Operation *> last;
    for (Operation &action : actions.getBody().front()) {
      auto compute = dyn_cast<dist::ComputeOp>(action);
      if (!compute || compute.getPhase() == dist::Phase::F)
        continue;
      func::FuncOp callee = calleeOf(compute);
      if (!callee)
        continue;
      for (unsigned i = 0; i < callee.getNumResults(); ++i) {
        DictionaryAttr attrs = callee.getResultAttrDict(i);
        if (auto g = roleOf(attrs, kGradRole))
          if (auto axes = attrs.getAs<ArrayAttr>(kReduceAxesAttr)) {
            last[*g] = &action;
            reduceAxes[*g] = axes;
          }
      }
    }
    for (auto [g, action] : last)
      lastContribution[action].push_back(g);
  }
  for (Operation &action : actions.getBody().front()) {
    if (auto compute = dyn_cast<dist::ComputeOp>(action)) {
      int64_t s = compute.getStageAttr().getInt();
      int64_t k = compute.getMicrobatchAttr().getInt();
      if (!training && compute.getPhase() != dist::Phase::F)
        continue;
      bool split = bool(stageFns[s].weight);
      if ((compute.getPhase() == dist::Phase::W) != false && !split)
        return compute.emitError("a W action needs the backward split into "
                                 "input and weight gradients "
                                 "(pcc-pipeline-outline split-backward)");
      func::FuncOp callee = calleeOf(compute);
      if (!callee)
        return compute.emitError("stage ") << s << " has no such function";
      SmallVector<Value> operands;
      for (unsigned i = 0; i < callee.getNumArguments(); ++i) {
        FailureOr<Value> v = argFor(callee, i, k);
        if (failed(v))
          return failure();
        operands.push_back(*v);
      }
      auto call = func::CallOp::create(b, loc, callee, operands);
      call->setAttr(dist::kActionAttr,
                    b.getStringAttr(llvm::formatv(
                        "{0}{1}", stringifyPhase(compute.getPhase()), k)));
      for (unsigned i = 0; i < callee.getNumResults(); ++i) {
        DictionaryAttr attrs = callee.getResultAttrDict(i);
        Value r = call.getResult(i);
        if (auto id = roleOf(attrs, kValueRole))
          values[{*id, k}] = r;
        if (auto out = roleOf(attrs, kOutputRole))
          outputs[*out].push_back(r);
        if (auto g = roleOf(attrs, kGradRole)) {
          Value &acc = accumulated[*g];
          acc = acc ? graph::AddOp::create(b, loc, acc, r).getResult() : r;
        }
      }
      for (int64_t g : lastContribution.lookup(&action)) {
        Value &acc = accumulated[g];
        acc = dist::AllReduceOp::create(
            b, loc, acc.getType(), acc, meshRef, reduceAxes[g],
            dist::ReductionKindAttr::get(ctx, dist::ReductionKind::Sum));
      }
      continue;
    }
    auto transfer = cast<dist::TransferOp>(action);
    int64_t s = transfer.getStageAttr().getInt();
    int64_t k = transfer.getMicrobatchAttr().getInt();
    bool act = transfer.getPayload() == dist::Payload::Act;
    if (!training && !act)
      continue;
    const std::vector<int64_t> &ids = act ? routes.act[s] : routes.grad[s];
    int64_t tag = act ? kActTag : kGradTag;
    // Where this rank sends the stage's output (or whence it receives).
    int64_t peer = transfer.holdsStage() ? peerOf(act ? s + 1 : s - 1)
                                         : transfer.getPeerAttr().getInt();
    if (transfer.getDirection() == dist::Direction::Send) {
      for (int64_t id : ids) {
        Value v = values[{id, k}];
        if (!v)
          return transfer.emitError("value ")
                 << id << " of microbatch " << k << " is not on rank "
                 << rank << " when it is sent";
        dist::SendOp::create(b, loc, v, meshRef, ppAxes,
                             b.getI64IntegerAttr(peer),
                             b.getI64IntegerAttr(tag));
        sent[{act, s, k}].push_back(v);
      }
    } else if (transfer.getDirection() == dist::Direction::Wait) {
      // The sends complete: what they read is free from here. (A value
      // relayed back to this rank by a later chunk is another value by
      // then, so the wait names what was sent.)
      for (Value v : sent[{act, s, k}])
        dist::WaitSendOp::create(b, loc, v, meshRef, ppAxes,
                                 b.getI64IntegerAttr(peer),
                                 b.getI64IntegerAttr(tag));
    } else {
      for (int64_t id : ids)
        values[{id, k}] = dist::RecvOp::create(
            b, loc, routes.types[id], meshRef, ppAxes,
            b.getI64IntegerAttr(peer), b.getI64IntegerAttr(tag));
    }
  }

  // After the flush: whole gradients on every rank holding the parameter.
  SmallVector<Type> resultTypes;
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  std::map<int64_t, Value> wholeGrads;
  auto needs = [&](int64_t k) {
    return holds(*graph::getStateIndex(step, k, graph::kGradAttr), rank);
  };
  auto gradResults = [&]() {
    SmallVector<int64_t> ks;
    for (unsigned k = 0; k < step.getNumResults(); ++k)
      if (step.getResultAttr(k, graph::kGradAttr))
        ks.push_back(k);
    return ks;
  }();
  for (int64_t k : gradResults) {
    if (!accumulated.count(k))
      continue;
    for (int64_t q = 0; q < pp; ++q)
      if (q != rank &&
          holds(*graph::getStateIndex(step, k, graph::kGradAttr), q))
        dist::SendOp::create(b, loc, accumulated[k], meshRef, ppAxes,
                             b.getI64IntegerAttr(q),
                             b.getI64IntegerAttr(kOptimizerTag));
  }
  for (int64_t k : gradResults) {
    if (!needs(k))
      continue;
    Type t = stepRet.getOperand(k).getType();
    Value sum;
    for (int64_t q : llvm::seq<int64_t>(0, pp)) {
      if (!gradProducers[k].contains(q))
        continue;
      Value part = q == rank ? accumulated[k]
                             : dist::RecvOp::create(
                                   b, loc, t, meshRef, ppAxes,
                                   b.getI64IntegerAttr(q),
                                   b.getI64IntegerAttr(kOptimizerTag))
                                   .getResult();
      sum = sum ? graph::AddOp::create(b, loc, sum, part).getResult() : part;
    }
    if (!sum)
      return step.emitError("gradient result ") << k << " has no producer";
    wholeGrads[k] = sum;
  }
  auto scalar = [&](Type t, double v) -> Value {
    auto elem = cast<RankedTensorType>(t).getElementType();
    auto st = RankedTensorType::get({}, elem);
    return graph::ConstantOp::create(
        b, loc, DenseElementsAttr::get(st, FloatAttr::get(elem, v)));
  };
  if (microbatches > 1)
    for (auto &[k, g] : wholeGrads)
      g = graph::DivOp::create(b, loc, g.getType(), g,
                               scalar(g.getType(), microbatches));

  std::map<int64_t, Value> updates, stepOutputs;
  if (auto it = optimizerFns.find(rank); it != optimizerFns.end()) {
    func::FuncOp opt = it->second;
    SmallVector<Value> operands;
    for (unsigned i = 0; i < opt.getNumArguments(); ++i) {
      DictionaryAttr attrs = opt.getArgAttrDict(i);
      if (auto g = roleOf(attrs, kGradRole)) {
        if (!wholeGrads.count(*g))
          return opt.emitError("rank ")
                 << rank << " lacks gradient result " << *g;
        operands.push_back(wholeGrads[*g]);
        continue;
      }
      FailureOr<Value> v = argFor(opt, i, 0);
      if (failed(v))
        return failure();
      operands.push_back(*v);
    }
    auto call = func::CallOp::create(b, loc, opt, operands);
    call->setAttr(dist::kActionAttr, b.getStringAttr("O"));
    for (unsigned i = 0; i < opt.getNumResults(); ++i) {
      if (auto u = roleOf(opt.getResultAttrDict(i), kUpdateRole))
        updates[*u] = call.getResult(i);
      // An output of the step as a whole (the scheduled learning rate).
      if (auto out = roleOf(opt.getResultAttrDict(i), kOutputRole))
        stepOutputs[*out] = call.getResult(i);
    }
  }

  for (unsigned k = 0; k < step.getNumResults(); ++k) {
    Value v;
    if (step.getResultAttr(k, graph::kGradAttr)) {
      if (!needs(k))
        continue;
      v = wholeGrads[k];
    } else if (auto state =
                   graph::getStateIndex(step, k, graph::kUpdateAttr)) {
      // Written in place by the stage it was passed to.
      if (!newArg.count(*state) || pipeline::isUpdatedInPlace(step, k))
        continue;
      v = updates[k];
      if (!v)
        return step.emitError("pipeline rank ")
               << rank << " holds " << pipeline::describeState(step, *state)
               << " but its optimizer makes no update of it";
    } else if (auto made = stepOutputs.find(k); made != stepOutputs.end()) {
      v = made->second;
    } else {
      auto it = outputs.find(k);
      if (it == outputs.end())
        continue;
      SmallVector<Value> &parts = it->second;
      if (int64_t(parts.size()) != microbatches)
        return step.emitError("result ")
               << k << " has " << parts.size() << " microbatch parts";
      auto dim = step.getResultAttrOfType<IntegerAttr>(k, kBatchDimAttr);
      if (parts.size() == 1) {
        v = parts[0];
      } else if (dim) {
        v = graph::ConcatOp::create(b, loc, parts, dim.getInt());
      } else if (step.getResultAttr(k, graph::kLossAttr)) {
        v = parts[0];
        for (Value p : ArrayRef(parts).drop_front())
          v = graph::AddOp::create(b, loc, v, p);
        v = graph::DivOp::create(b, loc, v.getType(), v,
                                 scalar(v.getType(), microbatches));
      } else {
        v = parts.back();
      }
    }
    NamedAttrList attrs(step.getResultAttrDict(k));
    for (StringRef a : {graph::kGradAttr, graph::kUpdateAttr})
      if (auto i = attrs.get(a))
        attrs.set(a, IntegerAttr::get(IntegerType::get(ctx, 64),
                                      newArg[cast<IntegerAttr>(i).getInt()]));
    attrs.erase(kBatchDimAttr);
    // The position in the step's results: the ranks' tables share it.
    attrs.set(dist::kResultIndexAttr, IntegerAttr::get(IntegerType::get(ctx, 64), k));
    results.push_back(v);
    resultTypes.push_back(v.getType());
    resultAttrs.push_back(attrs.getDictionary(ctx));
  }
  func::ReturnOp::create(b, loc, results);
  fn.setType(FunctionType::get(ctx, argTypes, resultTypes));
  fn.setAllArgAttrs(argAttrs);
  fn.setAllResultAttrs(resultAttrs);
  return success();
}

LogicalResult Lowering::run() {
  if (failed(collect()))
    return failure();
  for (auto rankOp : schedule.getBody().front().getOps<dist::RankOp>())
    if (failed(lowerRank(rankOp.getIndex(), rankOp)))
      return failure();
  return success();
}

LogicalResult pcc::lowerSchedule(ModuleOp module) {
  SmallVector<dist::ScheduleOp> schedules(module.getOps<dist::ScheduleOp>());
  SmallVector<func::FuncOp> steps;
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr(kNumStagesAttr))
      steps.push_back(func);
  if (steps.empty())
    return success();
  auto mesh = module.lookupSymbol<dist::MeshOp>(dist::kMeshName);
  int64_t pp = mesh ? mesh.getAxisSize(dist::kPipelineAxis).value_or(1) : 1;
  // One step and one schedule, or steps that each name theirs.
  if (steps.size() == 1 && schedules.size() == 1 &&
      !steps[0]->hasAttr(dist::kStepScheduleAttr)) {
    if (failed(Lowering(steps[0], schedules[0], pp).run()))
      return failure();
    steps[0].erase();
    return success();
  }
  for (func::FuncOp step : steps) {
    auto name = step->getAttrOfType<FlatSymbolRefAttr>(dist::kStepScheduleAttr);
    auto schedule =
        name ? module.lookupSymbol<dist::ScheduleOp>(name) : dist::ScheduleOp();
    if (!schedule)
      return step.emitError("pcc-lower-schedule: a program of several "
                            "pipelined steps needs each to name its "
                            "dist.schedule (")
             << dist::kStepScheduleAttr << ")";
    if (failed(Lowering(step, schedule, pp).run()))
      return failure();
  }
  for (func::FuncOp step : steps)
    step.erase();
  return success();
}

namespace {
struct LowerSchedulePass : pcc::impl::LowerScheduleBase<LowerSchedulePass> {
  void runOnOperation() override {
    if (failed(lowerSchedule(getOperation())))
      signalPassFailure();
  }
};
} // namespace
