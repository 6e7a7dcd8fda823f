//===- LowerSchedule.cpp - Each pipeline rank's step as a function --------===//
//
// Compiles a verified dist.schedule into one public function per pipeline
// rank: its action list in order, each compute action a call of an outlined
// stage function on one microbatch, each transfer a dist.send or dist.recv
// of the tensors that cross that stage boundary (a value that skips stages
// is relayed by the ranks between). Inputs are sliced per microbatch,
// outputs joined and the loss averaged over them; gradients accumulate over
// the microbatches on the stage that computes them, except the products a
// stage defers (pipeline::deferProducts), which one call after the rank's
// last action computes over all microbatches' operands. After the flush, the
// ranks holding a parameter exchange the parts of its gradient that other
// stages computed (a tied embedding and LM head: Megatron's embedding
// group), all summing them in rank order so that every copy stays equal,
// and run the optimizer, which divides the sums by the microbatch count
// first (in the update's loop, once fused). Nothing of the schedule
// remains to interpret at run time.
//
// A schedule of two steps without a flush (PipeDream-2BW's) lowers to four
// functions per rank: the step itself (its fill, then its drain: a step
// with a flush), and the three calls of a run without one, each an entry
// point of its own: `<entry>_start` (the fill of a step), `<entry>_overlap`
// (the end of that step and the start of the next, whose batch it takes)
// and `<entry>_finish` (the end of the last). What one call leaves for the
// next (the stash of the forwards that ran ahead, the activations received
// for them, the batch the step reads) is state the runs keep between them
// (graph.cache). The forwards of the next step read the newest weights,
// which the step's update then keeps as the weights one update old.
//
//===----------------------------------------------------------------------===//

#include "pcc/Analysis/BufferPlan.h"
#include "pcc/Analysis/StepPhases.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Target/CallGraph.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipeline/Pipeline.h"
#include "pcc/Transforms/Pipeline/Schedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/FormatVariadic.h"

#include <functional>
#include <map>
#include <set>

namespace pcc {
#define GEN_PASS_DEF_LOWERSCHEDULE
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;

namespace {
/// Message tags: transfers between two ranks match in order, per tag.
enum Tag : int64_t {
  kActTag = 0,
  kGradTag = 1,
  kOptimizerTag = 2,
  /// A part of a step's result, to the rank that returns it.
  kOutputTag = 3
};

struct StageFunctions {
  func::FuncOp forward, backward, weight;
};

/// One function a rank's schedule lowers to.
struct Call {
  /// Appended to the step's name and to its entry point's.
  std::string suffix;
  /// The actions in order, with the ops that state them; microbatches
  /// below the step's count are the step's, those above the next step's.
  SmallVector<std::pair<Operation *, pipeline::Action>> actions;
  /// Whether the call ends the step: its update runs and it returns the
  /// step's results.
  bool endsStep = true;
  /// Whether it continues a step that an earlier call started (reading
  /// what that call left) and whether it starts one (leaving what the next
  /// call reads).
  bool continues = false, starts = false;
  /// The microbatch numbers its batch argument begins at; none when it
  /// takes no batch.
  std::optional<int64_t> batchAt = 0;
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
  LogicalResult lowerRank(int64_t rank, const Call &call);
  /// What a continuing call of rank `rank` reads that an earlier call left
  /// (the value ids by microbatch) and the inputs it reads of the step the
  /// earlier call started.
  void getCarried(const Call &call,
                  std::set<std::pair<int64_t, int64_t>> &values,
                  std::set<unsigned> &inputs);
  func::FuncOp calleeOf(const pipeline::Action &a);
  func::FuncOp getAccumulating(func::FuncOp fn);
  bool holds(unsigned arg, int64_t rank);
  Value mb(OpBuilder &b, Value whole, unsigned arg, int64_t k);
  void averageInOptimizer(func::FuncOp opt);
  /// An argument that addPartsInOptimizer added to an optimizer: part
  /// `part` (from 1) of gradient result `grad`.
  struct GradPart {
    unsigned argument;
    int64_t grad, part;
  };
  LogicalResult
  addPartsInOptimizer(func::FuncOp opt,
                      const std::map<int64_t, SmallVector<Value>> &gradParts);

  func::FuncOp step;
  dist::ScheduleOp schedule;
  int64_t pp, stages = 1, microbatches = 1;
  MLIRContext *ctx;
  std::vector<StageFunctions> stageFns;
  /// Per stage, its backward with the weight-gradient products it defers
  /// to one call a step taken out, and that call's function
  /// (pipeline::deferProducts), where the schedule and the stage allow.
  std::vector<std::optional<pipeline::DeferringBackward>> deferring;
  /// Per stage function that returns gradients, its accumulating variant
  /// (getAccumulating).
  llvm::DenseMap<Operation *, func::FuncOp> accumulatingFns;
  std::map<int64_t, func::FuncOp> optimizerFns;
  /// The optimizers that divide their gradients by the microbatch count
  /// (averageInOptimizer).
  llvm::DenseSet<Operation *> averagingOptimizers;
  /// Per optimizer, the arguments addPartsInOptimizer added.
  llvm::DenseMap<Operation *, SmallVector<GradPart>> optimizerParts;
  Routes routes;
  /// Per gradient result: the ranks whose backward contributes to it.
  std::map<int64_t, llvm::SmallDenseSet<int64_t, 2>> gradProducers;
  /// Per rank, what its calls carry from one to the next (two-step
  /// schedules only).
  std::map<int64_t, std::set<std::pair<int64_t, int64_t>>> carriedValues;
  std::map<int64_t, std::set<unsigned>> carriedInputs;
};
} // namespace

/// `sum` (a sum over `count` microbatches) divided by `count`; `sum` itself
/// for one.
static Value averageOverMicrobatches(OpBuilder &b, Location loc, Value sum,
                                     int64_t count) {
  if (count == 1)
    return sum;
  auto elem = cast<RankedTensorType>(sum.getType()).getElementType();
  auto scalarType = RankedTensorType::get({}, elem);
  Value divisor = graph::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(scalarType, FloatAttr::get(elem, double(count))));
  return graph::DivOp::create(b, loc, sum.getType(), sum, divisor);
}

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
        gradProducers[*k].insert_range(pipeline::getStageRanks(step, s, pp));
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
  // Schedules that run all of a stage's backwards in one call of its rank
  // compute the products it defers once, after its last backward.
  deferring.assign(stages, std::nullopt);
  if (!hasW && schedule.getNumSteps() == 1 &&
      pipeline::defersProducts(schedule.getKind()))
    for (int64_t s = 0; s < stages; ++s)
      if (stageFns[s].backward)
        deferring[s] = pipeline::deferProducts(stageFns[s].backward,
                                               microbatches);
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

func::FuncOp Lowering::calleeOf(const pipeline::Action &a) {
  const StageFunctions &fns = stageFns[a.stage];
  switch (a.phase) {
  case dist::Phase::F:
    return fns.forward;
  case dist::Phase::B:
    if (const auto &d = deferring[a.stage])
      return d->backward;
    return fns.backward;
  case dist::Phase::W:
    return fns.weight;
  }
  llvm_unreachable("unknown phase");
}

/// The variant of stage function `fn` that adds each gradient it returns
/// to what the microbatches before have accumulated: one more argument per
/// gradient result (its partial sum), in result order, after `fn`'s own,
/// and the sum returned in the gradient's place, made right where the
/// gradient is. The sum lives in the partial sum's buffer
/// (dist.accumulates), which the caller passes for the result too, so that
/// the product or scatter making the gradient adds it there (pcc-fuse's
/// epilogue, the program emitter) and the caller reads no gradient again.
/// Made once, beside `fn`; it is called, not scheduled (no phase or
/// stage).
func::FuncOp Lowering::getAccumulating(func::FuncOp fn) {
  func::FuncOp &variant = accumulatingFns[fn];
  if (variant)
    return variant;
  variant = fn.clone();
  variant.setSymName((fn.getSymName() + "_accumulate").str());
  variant->removeAttr(kPhaseAttr);
  variant->removeAttr(kStageAttr);
  SymbolTable(step->getParentOfType<ModuleOp>())
      .insert(variant, ++Block::iterator(fn));
  Block &body = variant.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (unsigned i = 0; i < variant.getNumResults(); ++i) {
    if (!roleOf(variant.getResultAttrDict(i), kGradRole))
      continue;
    Value gradient = ret.getOperand(i);
    unsigned at = variant.getNumArguments();
    if (failed(variant.insertArgument(at, gradient.getType(), {},
                                      gradient.getLoc())))
      return {};
    OpBuilder b(ctx);
    if (Operation *def = gradient.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&body);
    // A gradient that is a sum (a tied weight's head product and embedding
    // scatter) is added term by term, its products first, so that each
    // term adds itself into the partial sum rather than the whole gradient
    // being made and then added to it.
    SmallVector<Value> terms;
    if (gradient.hasOneUse())
      terms = getAccumulatedTerms(gradient);
    if (terms.empty())
      terms.push_back(gradient);
    Value sum = variant.getArgument(at);
    for (Value term : terms) {
      sum = graph::AddOp::create(b, gradient.getLoc(), sum, term);
      sum.getDefiningOp()->setAttr(graph::kBackwardAttr, b.getUnitAttr());
    }
    ret.setOperand(i, sum);
    // The adds of the gradient's own sum, which nothing reads now.
    SmallVector<Value> unread{gradient};
    while (!unread.empty()) {
      Value v = unread.pop_back_val();
      auto add = v.getDefiningOp<graph::AddOp>();
      if (!add || !v.use_empty())
        continue;
      unread.append({add.getLhs(), add.getRhs()});
      add->erase();
    }
    // The caller gives the sum the partial sum's buffer.
    variant.setResultAttr(i, dist::kAccumulatesAttr, b.getI64IntegerAttr(at));
  }
  return variant;
}

void Lowering::getCarried(const Call &call,
                          std::set<std::pair<int64_t, int64_t>> &values,
                          std::set<unsigned> &inputs) {
  using Kind = pipeline::Action::Kind;
  std::set<std::pair<int64_t, int64_t>> defined;
  auto read = [&](int64_t id, int64_t k) {
    if (!defined.count({id, k}))
      values.insert({id, k});
  };
  for (auto &[op, a] : call.actions) {
    int64_t k = a.microbatch;
    if (a.kind == Kind::Compute) {
      func::FuncOp callee = calleeOf(a);
      if (!callee)
        continue;
      for (unsigned i = 0; i < callee.getNumArguments(); ++i) {
        DictionaryAttr attrs = callee.getArgAttrDict(i);
        if (auto id = roleOf(attrs, kValueRole))
          read(*id, k);
        if (auto in = roleOf(attrs, kInputRole))
          if (k < microbatches)
            inputs.insert(unsigned(*in));
      }
      for (unsigned i = 0; i < callee.getNumResults(); ++i)
        if (auto id = roleOf(callee.getResultAttrDict(i), kValueRole))
          defined.insert({*id, k});
      continue;
    }
    bool act = a.payload == dist::Payload::Act;
    const std::vector<int64_t> &ids =
        act ? routes.act[a.stage] : routes.grad[a.stage];
    for (int64_t id : ids) {
      if (a.kind == Kind::Send)
        read(id, k);
      else if (a.kind == Kind::Recv)
        defined.insert({id, k});
    }
  }
}

LogicalResult Lowering::lowerRank(int64_t rank, const Call &call) {
  using Kind = pipeline::Action::Kind;
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
    if (!state && !call.batchAt)
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
  // What the calls of a run without a flush carry from one to the next:
  // state the runs keep (graph.cache), zero at first, named by the rank.
  std::map<std::pair<int64_t, int64_t>, unsigned> carriedValueArg;
  std::map<unsigned, unsigned> carriedInputArg;
  std::string stepName = step.getSymName().str();
  if (call.starts || call.continues) {
    auto addCarried = [&](RankedTensorType t, const Twine &what) {
      unsigned at = argTypes.size();
      argTypes.push_back(t);
      std::string name =
          (stepName + ".in_flight.rank" + Twine(rank) + "." + what).str();
      NamedAttrList attrs;
      attrs.set(graph::kStateAttr, StringAttr::get(ctx, name));
      attrs.set(
          graph::kInitAttr,
          DenseElementsAttr::get(t, cast<TypedAttr>(OpBuilder(ctx).getZeroAttr(
                                        t.getElementType()))));
      attrs.set(graph::kCacheAttr, UnitAttr::get(ctx));
      argAttrs.push_back(attrs.getDictionary(ctx));
      return at;
    };
    for (auto [id, k] : carriedValues[rank])
      carriedValueArg[{id, k}] =
          addCarried(cast<RankedTensorType>(routes.types[id]),
                     "value" + Twine(id) + ".microbatch" + Twine(k));
    for (unsigned i : carriedInputs[rank]) {
      // The whole batch, as the rank's argument takes it.
      auto t = cast<RankedTensorType>(step.getArgumentTypes()[i]);
      if (auto dim = step.getArgAttrOfType<IntegerAttr>(i, kBatchDimAttr)) {
        SmallVector<int64_t> shape(t.getShape());
        shape[dim.getInt()] *= microbatches;
        t = RankedTensorType::get(shape, t.getElementType());
      }
      carriedInputArg[i] = addCarried(t, "input" + Twine(i));
    }
  }
  std::string name =
      llvm::formatv("{0}{1}_rank{2}", stepName, call.suffix, rank);
  OpBuilder mb0(step);
  auto fn = func::FuncOp::create(mb0, step.getLoc(), name,
                                 FunctionType::get(ctx, argTypes, {}));
  fn->setAttr(dist::kRankAttr, IntegerAttr::get(IntegerType::get(ctx, 64), rank));
  if (Attribute entry = step->getAttr(kEntryPointAttr))
    fn->setAttr(
        kEntryPointAttr,
        StringAttr::get(ctx, cast<StringAttr>(entry).getValue() + call.suffix));
  else if (!call.suffix.empty())
    fn->setAttr(kEntryPointAttr, StringAttr::get(ctx, "main" + call.suffix));
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
  // Result -> its parts by microbatch, and where they come from: the stage
  // that computes them, and the rank that runs it on microbatch 0, which
  // returns the result (with two pipelines the others send theirs there).
  std::map<int64_t, std::map<int64_t, Value>> outputParts;
  std::set<int64_t> outputStages;
  auto outputOwner = [&](int64_t stage) {
    return schedule.getRankOf(stage, 0);
  };
  std::map<int64_t, Value> accumulated;                 // grad result
  if (call.continues)
    for (auto [key, at] : carriedValueArg)
      values[key] = body->getArgument(at);
  // State argument `index` of the step as microbatch k reads it.
  auto stateArg = [&](func::FuncOp callee, unsigned index,
                      int64_t k) -> FailureOr<Value> {
    // The next step's forwards read the newest weights, which are one
    // update old when that step runs.
    if (k >= microbatches &&
        step.getArgAttr(index, graph::kPreviousVersionAttr))
      index = unsigned(
          step.getArgAttrOfType<IntegerAttr>(index, graph::kStateOfAttr)
              .getInt());
    auto it = newArg.find(index);
    if (it == newArg.end())
      return callee.emitError("pipeline rank ")
             << rank << " runs @" << callee.getSymName() << ", which reads "
             << pipeline::describeState(step, index)
             << " that the rank does not hold";
    return Value(body->getArgument(it->second));
  };
  // The step's ops that make its invariants (Outline.cpp), by id, and the
  // values made of them here, once each (per weights' version: the next
  // step's forwards, under 2BW, read the newer weights): before the first
  // call that reads one, the ops that make it, cloned from the step.
  llvm::DenseMap<int64_t, Operation *> invariantDefs;
  step.walk([&](Operation *op) {
    if (auto id = op->getAttrOfType<IntegerAttr>(kInvariantIdAttr))
      invariantDefs[id.getInt()] = op;
  });
  std::map<std::pair<Operation *, bool>, Operation *> made;
  std::function<FailureOr<Value>(func::FuncOp, Value, int64_t)> invariant =
      [&](func::FuncOp callee, Value v, int64_t k) -> FailureOr<Value> {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (!step.getArgAttr(arg.getArgNumber(), graph::kStateAttr))
        return callee.emitError("pipeline rank ")
               << rank << ": a value made once per step reads input "
               << arg.getArgNumber() << " of the step";
      return stateArg(callee, arg.getArgNumber(), k);
    }
    auto result = cast<OpResult>(v);
    Operation *def = result.getOwner();
    Operation *&clone = made[{def, k >= microbatches}];
    if (!clone) {
      IRMapping mapping;
      for (Value o : def->getOperands()) {
        FailureOr<Value> mine = invariant(callee, o, k);
        if (failed(mine))
          return failure();
        mapping.map(o, *mine);
      }
      clone = b.clone(*def, mapping);
      clone->removeAttr(kInvariantIdAttr);
      clone->removeAttr(kStageAttr);
      clone->removeAttr(kStagesAttr);
    }
    return clone->getResult(result.getResultNumber());
  };
  auto argFor = [&](func::FuncOp callee, unsigned i,
                    int64_t k) -> FailureOr<Value> {
    DictionaryAttr attrs = callee.getArgAttrDict(i);
    if (auto in = roleOf(attrs, kInputRole)) {
      auto key = std::make_pair(unsigned(*in), k);
      Value &v = slices[key];
      if (v)
        return v;
      // The batch argument's microbatches, or those of the batch an earlier
      // call took.
      if (call.batchAt && k >= *call.batchAt) {
        v = mb(b, body->getArgument(newArg[*in]), *in, k - *call.batchAt);
        return v;
      }
      auto carried = carriedInputArg.find(unsigned(*in));
      if (!call.continues || carried == carriedInputArg.end())
        return callee.emitError("pipeline rank ")
               << rank << ": microbatch " << k
               << " reads an input that no call before this one took";
      v = mb(b, body->getArgument(carried->second), *in, k);
      return v;
    }
    if (auto st = roleOf(attrs, kStateRole))
      return stateArg(callee, unsigned(*st), k);
    if (auto id = roleOf(attrs, kInvariantRole)) {
      auto def = invariantDefs.find(*id);
      if (def == invariantDefs.end())
        return callee.emitError("argument ")
               << i << ": the step makes no invariant " << *id;
      return invariant(callee, def->second->getResult(0), k);
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
  // A gradient part still to be summed over other mesh axes is summed once,
  // right after the last action that adds to it on this rank, so that the
  // sum overlaps the rest of the flush.
  llvm::DenseMap<Operation *, SmallVector<int64_t>> lastContribution;
  std::map<int64_t, ArrayAttr> reduceAxes;
  std::set<int64_t> deferredGrads;
  if (training) {
    std::map<int64_t, Operation *> last;
    for (auto &[op, a] : call.actions) {
      if (a.kind != Kind::Compute || a.phase == dist::Phase::F)
        continue;
      func::FuncOp callee = calleeOf(a);
      if (!callee)
        continue;
      SmallVector<func::FuncOp, 2> fns{callee};
      if (a.phase == dist::Phase::B && deferring[a.stage])
        fns.push_back(deferring[a.stage]->products);
      for (func::FuncOp fn : fns)
        for (unsigned i = 0; i < fn.getNumResults(); ++i) {
          DictionaryAttr attrs = fn.getResultAttrDict(i);
          auto g = roleOf(attrs, kGradRole);
          if (!g)
            continue;
          if (fn != callee)
            deferredGrads.insert(*g);
          if (auto axes = attrs.getAs<ArrayAttr>(kReduceAxesAttr)) {
            last[*g] = op;
            reduceAxes[*g] = axes;
          }
        }
    }
    // A gradient that deferred products add to is summed after them.
    for (auto [g, op] : last)
      if (!deferredGrads.count(g))
        lastContribution[op].push_back(g);
  }
  // Per stage whose products are deferred, its last backward action and
  // the results of its backwards that those products read (dist.deferred),
  // by operand and microbatch.
  std::map<int64_t, Operation *> deferredAt;
  std::map<int64_t, std::map<int64_t, std::map<int64_t, Value>>> deferredParts;
  // Calls stage function `callee` of stage `s` (for action `op`) with
  // `operands` and adds each gradient it returns to what this rank has
  // accumulated of it. Once every gradient the function returns has a part
  // accumulated here, its accumulating variant adds to them (not where it
  // returns two parts of one gradient, which the caller adds in turn).
  auto callAdding = [&](Operation *op, int64_t s, func::FuncOp callee,
                        SmallVector<Value> operands)
      -> FailureOr<func::CallOp> {
    SmallVector<Value> partials;
    std::set<int64_t> grads;
    bool distinct = true;
    for (unsigned i = 0; i < callee.getNumResults(); ++i)
      if (auto g = roleOf(callee.getResultAttrDict(i), kGradRole)) {
        partials.push_back(accumulated.count(*g) ? accumulated[*g] : Value());
        distinct &= grads.insert(*g).second;
      }
    bool accumulates = distinct && !partials.empty() &&
                       llvm::all_of(partials, [](Value v) { return bool(v); });
    if (accumulates) {
      callee = getAccumulating(callee);
      if (!callee)
        return op->emitError("stage ") << s << ": no accumulating variant";
      llvm::append_range(operands, partials);
    }
    auto callOp = func::CallOp::create(b, loc, callee, operands);
    for (unsigned i = 0; i < callee.getNumResults(); ++i)
      if (auto g = roleOf(callee.getResultAttrDict(i), kGradRole)) {
        Value &acc = accumulated[*g];
        Value r = callOp.getResult(i);
        acc = acc && !accumulates
                  ? graph::AddOp::create(b, loc, acc, r).getResult()
                  : r;
      }
    return callOp;
  };
  for (auto &[op, a] : call.actions) {
    int64_t s = a.stage, k = a.microbatch;
    if (a.kind == Kind::Compute) {
      if (!training && a.phase != dist::Phase::F)
        continue;
      bool split = bool(stageFns[s].weight);
      if (a.phase == dist::Phase::W && !split)
        return op->emitError("a W action needs the backward split into "
                             "input and weight gradients "
                             "(pcc-pipeline-outline split-backward)");
      func::FuncOp callee = calleeOf(a);
      if (!callee)
        return op->emitError("stage ") << s << " has no such function";
      SmallVector<Value> operands;
      for (unsigned i = 0; i < callee.getNumArguments(); ++i) {
        FailureOr<Value> v = argFor(callee, i, k);
        if (failed(v))
          return failure();
        operands.push_back(*v);
      }
      // The next step's microbatches are marked as such.
      std::string label =
          k < microbatches
              ? llvm::formatv("{0}{1}", stringifyPhase(a.phase), k).str()
              : llvm::formatv("{0}{1}+", stringifyPhase(a.phase),
                              k - microbatches)
                    .str();
      FailureOr<func::CallOp> called = callAdding(op, s, callee, operands);
      if (failed(called))
        return failure();
      // (Its accumulating variant's results have the callee's roles.)
      func::CallOp callOp = *called;
      callOp->setAttr(dist::kActionAttr, b.getStringAttr(label));
      for (unsigned i = 0; i < callee.getNumResults(); ++i) {
        DictionaryAttr attrs = callee.getResultAttrDict(i);
        Value r = callOp.getResult(i);
        if (auto id = roleOf(attrs, kValueRole))
          values[{*id, k}] = r;
        if (auto j = roleOf(attrs, kDeferredRole))
          deferredParts[s][*j][k] = r;
        if (auto out = roleOf(attrs, kOutputRole)) {
          if (k >= microbatches || !call.endsStep)
            return callee.emitError("pipeline rank ")
                   << rank << " computes result " << *out
                   << " of the step in a forward that runs ahead of the "
                      "step's end; a schedule without a flush needs the "
                      "step's results from its last stage";
          outputStages.insert(s);
          if (outputOwner(s) == rank) {
            outputParts[*out][k] = r;
          } else {
            dist::SendOp::create(b, loc, r, meshRef, ppAxes,
                                 b.getI64IntegerAttr(outputOwner(s)),
                                 b.getI64IntegerAttr(kOutputTag));
          }
        }
      }
      if (a.phase == dist::Phase::B && deferring[s])
        deferredAt[s] = op;
      for (int64_t g : lastContribution.lookup(op)) {
        Value &acc = accumulated[g];
        acc = dist::AllReduceOp::create(
            b, loc, acc.getType(), acc, meshRef, reduceAxes[g],
            dist::ReductionKindAttr::get(ctx, dist::ReductionKind::Sum));
      }
      continue;
    }
    bool act = a.payload == dist::Payload::Act;
    if (!training && !act)
      continue;
    const std::vector<int64_t> &ids = act ? routes.act[s] : routes.grad[s];
    int64_t tag = act ? kActTag : kGradTag;
    // Where this rank sends the stage's output (or whence it receives).
    int64_t peer = a.peer >= 0 ? a.peer : peerOf(act ? s + 1 : s - 1);
    if (a.kind == Kind::Send) {
      for (int64_t id : ids) {
        Value v = values[{id, k}];
        if (!v)
          return op->emitError("value ")
                 << id << " of microbatch " << k << " is not on rank " << rank
                 << " when it is sent";
        dist::SendOp::create(b, loc, v, meshRef, ppAxes,
                             b.getI64IntegerAttr(peer),
                             b.getI64IntegerAttr(tag));
        sent[{act, s, k}].push_back(v);
      }
    } else if (a.kind == Kind::Wait) {
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

  // Each stage's deferred products, over all its microbatches' operands,
  // once the rank's actions are done (its sends gone), then the sums of
  // the gradients they add to over other mesh axes.
  for (auto [s, op] : deferredAt) {
    func::FuncOp products = deferring[s]->products;
    SmallVector<Value> stacks;
    for (unsigned j = 0; j < products.getNumArguments(); ++j) {
      std::map<int64_t, Value> &parts = deferredParts[s][int64_t(j)];
      if (int64_t(parts.size()) != microbatches)
        return op->emitError("stage ")
               << s << ": " << parts.size() << " of " << microbatches
               << " microbatches' operands of its deferred products on rank "
               << rank;
      SmallVector<Value> inputs;
      for (auto &[k, part] : parts)
        inputs.push_back(part);
      stacks.push_back(graph::ConcatOp::create(b, loc, inputs, 0));
    }
    FailureOr<func::CallOp> made = callAdding(op, s, products, stacks);
    if (failed(made))
      return failure();
    (*made)->setAttr(dist::kActionAttr, b.getStringAttr("W"));
  }
  for (int64_t g : deferredGrads)
    if (reduceAxes.count(g) && accumulated.count(g))
      accumulated[g] = dist::AllReduceOp::create(
          b, loc, accumulated[g].getType(), accumulated[g], meshRef,
          reduceAxes[g],
          dist::ReductionKindAttr::get(ctx, dist::ReductionKind::Sum));

  // The parts of the results that other ranks computed, in the order they
  // were sent: by microbatch, then as the stage's forward returns them.
  for (int64_t s : outputStages) {
    if (outputOwner(s) != rank)
      continue;
    func::FuncOp forward = stageFns[s].forward;
    for (int64_t k = 0; k < microbatches; ++k) {
      int64_t from = schedule.getRankOf(s, k);
      if (from == rank)
        continue;
      for (unsigned i = 0; i < forward.getNumResults(); ++i)
        if (auto out = roleOf(forward.getResultAttrDict(i), kOutputRole))
          outputParts[*out][k] = dist::RecvOp::create(
              b, loc, forward.getResultTypes()[i], meshRef, ppAxes,
              b.getI64IntegerAttr(from), b.getI64IntegerAttr(kOutputTag));
    }
  }
  std::map<int64_t, SmallVector<Value>> outputs; // result -> parts
  for (auto &[out, parts] : outputParts)
    for (auto &[k, part] : parts)
      outputs[out].push_back(part);

  SmallVector<Type> resultTypes;
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  // Returns the results, after them what this call leaves for the next: the
  // values of the step it starts (numbered from the next step's first
  // microbatch in a call that ends one), and the batch it took.
  auto finish = [&]() -> LogicalResult {
    if (call.starts) {
      int64_t shift = call.endsStep ? microbatches : 0;
      auto leave = [&](Value v, unsigned at) {
        results.push_back(v);
        resultTypes.push_back(v.getType());
        resultAttrs.push_back(b.getDictionaryAttr(
            b.getNamedAttr(graph::kUpdateAttr, b.getI64IntegerAttr(at))));
      };
      for (auto [key, at] : carriedValueArg) {
        Value v = values[{key.first, key.second + shift}];
        if (!v)
          return step.emitError("pipeline rank ")
                 << rank << ": value " << key.first << " of microbatch "
                 << key.second + shift
                 << " is not on the rank when the call ends, and the next "
                    "call reads it";
        leave(v, at);
      }
      for (auto [i, at] : carriedInputArg)
        leave(body->getArgument(newArg[i]), at);
    }
    func::ReturnOp::create(b, loc, results);
    fn.setType(FunctionType::get(ctx, argTypes, resultTypes));
    fn.setAllArgAttrs(argAttrs);
    fn.setAllResultAttrs(resultAttrs);
    return success();
  };
  if (!call.endsStep)
    return finish();

  // After the flush: whole gradients on every rank holding the parameter.
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
  // Per gradient, its parts in rank order (the order every rank adds
  // them in, so that all get the same bits).
  std::map<int64_t, SmallVector<Value>> gradParts;
  for (int64_t k : gradResults) {
    if (!needs(k))
      continue;
    Type t = stepRet.getOperand(k).getType();
    SmallVector<Value> &parts = gradParts[k];
    for (int64_t q : llvm::seq<int64_t>(0, pp)) {
      if (!gradProducers[k].contains(q))
        continue;
      parts.push_back(
          q == rank ? accumulated[k]
                    : dist::RecvOp::create(b, loc, t, meshRef, ppAxes,
                                           b.getI64IntegerAttr(q),
                                           b.getI64IntegerAttr(kOptimizerTag))
                          .getResult());
    }
    if (parts.empty())
      return step.emitError("gradient result ") << k << " has no producer";
  }
  // The whole of gradient k, added here where the step returns it.
  auto wholeGrad = [&](int64_t k) {
    Value &sum = wholeGrads[k];
    if (!sum)
      for (Value part : gradParts[k])
        sum = sum ? graph::AddOp::create(b, loc, sum, part).getResult() : part;
    return sum;
  };
  // The gradients are sums over the microbatches: the optimizer divides
  // those it reads, the step those it returns.
  std::map<int64_t, Value> updates, stepOutputs;
  if (auto it = optimizerFns.find(rank); it != optimizerFns.end()) {
    func::FuncOp opt = it->second;
    averageInOptimizer(opt);
    for (unsigned i = 0; i < opt.getNumArguments(); ++i)
      if (auto g = roleOf(opt.getArgAttrDict(i), kGradRole);
          g && !gradParts.count(*g))
        return opt.emitError("rank ")
               << rank << " lacks gradient result " << *g;
    if (failed(addPartsInOptimizer(opt, gradParts)))
      return failure();
    const SmallVector<GradPart> &extra = optimizerParts[opt];
    SmallVector<Value> operands;
    for (unsigned i = 0; i < opt.getNumArguments(); ++i) {
      DictionaryAttr attrs = opt.getArgAttrDict(i);
      if (auto g = roleOf(attrs, kGradRole)) {
        operands.push_back(gradParts[*g].front());
        continue;
      }
      if (auto part = llvm::find_if(
              extra, [&](const GradPart &p) { return p.argument == i; });
          part != extra.end()) {
        operands.push_back(gradParts[part->grad][part->part]);
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
      v = averageOverMicrobatches(b, loc, wholeGrad(k), microbatches);
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
        v = averageOverMicrobatches(b, loc, v, microbatches);
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
  return finish();
}

/// The optimizer `opt` reads its gradients as the microbatches' sums and
/// divides them itself, first: code generation folds the division into the
/// update's loop, where the step would pass over every gradient once more.
void Lowering::averageInOptimizer(func::FuncOp opt) {
  if (microbatches == 1 || !averagingOptimizers.insert(opt).second)
    return;
  Block &body = opt.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  for (BlockArgument arg : body.getArguments()) {
    if (!opt.getArgAttr(arg.getArgNumber(), kGradRole))
      continue;
    Value mean = averageOverMicrobatches(b, opt.getLoc(), arg, microbatches);
    arg.replaceAllUsesExcept(mean, mean.getDefiningOp());
  }
}

/// A gradient that several pipeline ranks compute parts of (a tied
/// embedding and LM head) reaches the optimizer as its parts, each an
/// argument (the first the gradient's own), and the optimizer adds them
/// first, in rank order: code generation fuses the sum into the update's
/// loop, where the step would pass over the whole gradient once more
/// before the call (GPT-2's tied embedding: 154 MB read twice and written,
/// 33 ms a step on a pipeline rank of the 2-core VM, with the other rank
/// waiting). Made once per optimizer, after averageInOptimizer (so that
/// the average is of the sum). The added arguments go to optimizerParts.
LogicalResult Lowering::addPartsInOptimizer(
    func::FuncOp opt, const std::map<int64_t, SmallVector<Value>> &gradParts) {
  if (optimizerParts.count(opt))
    return success();
  SmallVector<GradPart> added;
  Block &body = opt.getBody().front();
  unsigned count = opt.getNumArguments();
  for (unsigned i = 0; i < count; ++i) {
    auto g = roleOf(opt.getArgAttrDict(i), kGradRole);
    if (!g)
      continue;
    const SmallVector<Value> &parts = gradParts.at(*g);
    if (parts.size() < 2)
      continue;
    BlockArgument own = body.getArgument(i);
    Value sum = own;
    Operation *first = nullptr;
    OpBuilder b = OpBuilder::atBlockBegin(&body);
    for (int64_t p = 1; p < int64_t(parts.size()); ++p) {
      unsigned at = opt.getNumArguments();
      if (failed(opt.insertArgument(at, own.getType(), {}, own.getLoc())))
        return opt.emitError("cannot add an argument for part ")
               << p << " of gradient result " << *g;
      added.push_back({at, *g, p});
      auto add =
          graph::AddOp::create(b, opt.getLoc(), sum, body.getArgument(at));
      first = first ? first : add.getOperation();
      sum = add;
    }
    own.replaceAllUsesExcept(sum, first);
  }
  optimizerParts[opt] = std::move(added);
  return success();
}

LogicalResult Lowering::run() {
  if (failed(collect()))
    return failure();
  using pipeline::Window;
  SmallVector<dist::RankOp> rankOps = schedule.getRankOps();
  SmallVector<int64_t> leads = llvm::map_to_vector(
      rankOps, [](dist::RankOp r) { return r.getNumLead(); });
  int64_t m = microbatches;
  // The rank's actions of the given windows, in turn, each renumbered by
  // its shift (all of them for a schedule of one step).
  auto actionsOf = [&](dist::RankOp rankOp,
                       ArrayRef<std::pair<Window, int64_t>> windows) {
    SmallVector<std::pair<Operation *, pipeline::Action>> actions;
    for (auto [window, shift] : windows)
      for (Operation &op : rankOp.getBody().front()) {
        pipeline::Action a = pipeline::getScheduleAction(&op);
        if (schedule.getNumSteps() > 1 &&
            pipeline::getWindow(a, m, leads) != window)
          continue;
        a.microbatch += shift;
        actions.push_back({&op, a});
      }
    return actions;
  };
  for (dist::RankOp rankOp : rankOps) {
    int64_t rank = rankOp.getIndex();
    if (schedule.getNumSteps() == 1) {
      Call step;
      step.actions = actionsOf(rankOp, {{Window::Steady, 0}});
      if (failed(lowerRank(rank, step)))
        return failure();
      continue;
    }
    // A step with a flush: the fill, then the drain.
    Call step;
    step.actions = actionsOf(rankOp, {{Window::Fill, 0}, {Window::Drain, -m}});
    Call start;
    start.suffix = "_start";
    start.actions = actionsOf(rankOp, {{Window::Fill, 0}});
    start.endsStep = false;
    start.starts = true;
    Call overlap;
    overlap.suffix = "_overlap";
    overlap.actions = actionsOf(rankOp, {{Window::Steady, 0}});
    overlap.continues = overlap.starts = true;
    overlap.batchAt = m;
    Call finish;
    finish.suffix = "_finish";
    finish.actions = actionsOf(rankOp, {{Window::Drain, -m}});
    finish.continues = true;
    finish.batchAt = std::nullopt;
    // What the continuing calls read of what an earlier call left.
    for (const Call *next : {&overlap, &finish})
      getCarried(*next, carriedValues[rank], carriedInputs[rank]);
    for (const Call *c : {&step, &start, &overlap, &finish})
      if (failed(lowerRank(rank, *c)))
        return failure();
  }
  return success();
}

/// Each pipeline rank's optimizer writes a state's update into the state's
/// own buffer (dist.accumulates on the update) where every call of it may
/// have it so (mayWriteIntoOperand: the caller returns the result as that
/// state's update and reads the state no more), and the optimizer returns
/// no state as it was: otherwise the caller's state updates are copied from
/// the optimizer's results at the end of each step (a model's weights and
/// moments, every step).
static void updateStateInPlace(ModuleOp module) {
  llvm::DenseMap<func::FuncOp, SmallVector<func::CallOp>> calls;
  module.walk([&](func::CallOp call) {
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
    auto phase =
        callee ? callee->getAttrOfType<StringAttr>(kPhaseAttr) : StringAttr();
    if (phase && phase.getValue() == "optimizer")
      calls[callee].push_back(call);
  });
  for (auto &[opt, sites] : calls) {
    auto ret = cast<func::ReturnOp>(opt.getBody().front().getTerminator());
    for (unsigned i = 0; i < opt.getNumResults(); ++i) {
      if (!opt.getResultAttr(i, kUpdateRole) ||
          isa<BlockArgument>(ret.getOperand(i)))
        continue;
      // The argument holding the state that the result updates.
      std::optional<unsigned> arg;
      for (unsigned j = 0; j < opt.getNumArguments() && !arg; ++j)
        if (opt.getArgAttr(j, kStateRole) &&
            mayWriteIntoOperand(sites.front(), i, sites.front().getOperand(j)))
          arg = j;
      if (!arg ||
          llvm::is_contained(ret.getOperands(), opt.getArgument(*arg)) ||
          !llvm::all_of(sites, [&](func::CallOp call) {
            return mayWriteIntoOperand(call, i, call.getOperand(*arg));
          }))
        continue;
      opt.setResultAttr(
          i, dist::kAccumulatesAttr,
          IntegerAttr::get(IntegerType::get(module.getContext(), 64), *arg));
    }
  }
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
    updateStateInPlace(module);
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
  updateStateInPlace(module);
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
