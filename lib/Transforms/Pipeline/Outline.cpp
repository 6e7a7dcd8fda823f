//===- Outline.cpp - Pipeline stages as functions -------------------------===//
//
// Moves the ops of each pipeline stage into functions that one microbatch's
// action calls: per virtual stage its forward and its backward, and per
// pipeline rank its optimizer. Free values (computed from parameters and
// constants) are recomputed inside each function that needs them, except
// those that narrow a parameter (isMadeOncePerStep), which the step
// makes once. What a
// function reads and makes is named by attributes on its arguments and
// results, which the schedule's lowering wires up:
//
//   dist.input = k    a graph input (argument k of the step), this
//                     microbatch's slice
//   dist.state = k    state argument k of the step (a parameter, a moment)
//   dist.value = n    a value another function made (a boundary tensor, an
//                     activation kept for the backward) or makes for one
//   dist.invariant = n  a free value the step makes once, before the first
//                     call that reads it (a parameter's bf16 copy), rather
//                     than every microbatch; the step's op that makes it
//                     carries dist.invariant_id = n
//   dist.output = k   result k of the step, this microbatch's part
//   dist.grad = k     this stage's contribution to gradient result k,
//                     accumulated over microbatches (an argument of the
//                     optimizer: the whole gradient)
//   dist.update = k   result k of the step, a state update
//   dist.deferred = j (made by pcc-lower-schedule's pipeline::deferProducts)
//                     operand j of a stage's deferred weight-gradient
//                     products, joined over the microbatches
//
// A gradient that the step sums over other mesh axes as soon as it is made
// (data parallelism's all-reduce of a parameter's gradient, or tensor
// parallelism's of a partial one) leaves the backward unreduced, marked
// `dist.reduce_axes`: the sum is linear, so the lowering takes it once, of
// the gradient accumulated over the microbatches, rather than once per
// microbatch.
//
// The functions are marked `dist.phase` ("forward", "backward",
// "optimizer") and `dist.stage` (virtual stage) or `dist.rank` (optimizer).
// The step function stays, for the lowering to read its signature.
//
//===----------------------------------------------------------------------===//

#include "pcc/Analysis/StepPhases.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipeline/Pipeline.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

namespace pcc {
#define GEN_PASS_DEF_PIPELINEOUTLINE
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::pipeline;

bool pcc::isMadeOncePerStep(Value v) {
  auto cast = v.getDefiningOp<graph::CastOp>();
  if (!cast)
    return false;
  auto from = dyn_cast<RankedTensorType>(cast->getOperand(0).getType());
  auto to = dyn_cast<RankedTensorType>(v.getType());
  return from && to && isa<FloatType>(from.getElementType()) &&
         isa<FloatType>(to.getElementType()) &&
         to.getElementTypeBitWidth() < from.getElementTypeBitWidth();
}

namespace {
/// Which function an op goes to: (phase, stage) for forward and backward,
/// (optimizer, rank) for the optimizer.
using FunctionKey = std::pair<Phase, int64_t>;

/// Builds one outlined function: arguments appear as its ops read values
/// from elsewhere, free values are recomputed.
class FunctionBuilder {
public:
  /// With `invariantIds`, free values that narrow a parameter are the
  /// step's, made once (isMadeOncePerStep), instead of recomputed here.
  FunctionBuilder(func::FuncOp step, const StepPhases &phases,
                  llvm::DenseMap<Value, int64_t> &valueIds,
                  llvm::DenseMap<Value, int64_t> *invariantIds = nullptr)
      : step(step), phases(phases), valueIds(valueIds),
        invariantIds(invariantIds) {}

  func::FuncOp create(OpBuilder &moduleBuilder, StringRef name) {
    func = func::FuncOp::create(moduleBuilder, step.getLoc(), name,
                                FunctionType::get(step.getContext(), {}, {}));
    func.setPrivate();
    block = func.addEntryBlock();
    builder = OpBuilder::atBlockEnd(block);
    return func;
  }

  /// The value `v` of the step as seen inside the function.
  FailureOr<Value> lookup(Value v) {
    if (Value mapped = mapping.lookupOrNull(v))
      return mapped;
    MLIRContext *ctx = step.getContext();
    auto i64 = [&](int64_t x) {
      return IntegerAttr::get(IntegerType::get(ctx, 64), x);
    };
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      bool state = bool(step.getArgAttr(arg.getArgNumber(), graph::kStateAttr));
      return addArgument(v, state ? kRoleState : kRoleInput,
                         i64(arg.getArgNumber()));
    }
    if (invariantIds && phases.isFree(v) && isMadeOncePerStep(v)) {
      auto [it, inserted] = invariantIds->try_emplace(v, invariantIds->size());
      if (inserted)
        v.getDefiningOp()->setAttr(kInvariantIdAttr, i64(it->second));
      return addArgument(v, kInvariantRole, i64(it->second));
    }
    if (phases.isFree(v)) {
      // Recompute: clone the free op (its operands first).
      Operation *def = v.getDefiningOp();
      for (Value o : def->getOperands())
        if (failed(lookup(o)))
          return failure();
      Operation *clone = builder.clone(*def, mapping);
      clone->removeAttr(kStageAttr);
      clone->removeAttr(kStagesAttr);
      return mapping.lookup(v);
    }
    auto [it, inserted] = valueIds.try_emplace(v, valueIds.size());
    return addArgument(v, kRoleValue, i64(it->second));
  }

  LogicalResult cloneOp(Operation *op) {
    for (Value o : op->getOperands())
      if (failed(lookup(o)))
        return failure();
    Operation *clone = builder.clone(*op, mapping);
    clone->removeAttr(kStageAttr);
    clone->removeAttr(kStagesAttr);
    return success();
  }

  void addResult(Value v, StringRef role, int64_t index,
                 ArrayAttr reduceAxes = {}) {
    results.push_back(mapping.lookup(v));
    MLIRContext *ctx = step.getContext();
    SmallVector<NamedAttribute> attrs{
        NamedAttribute(StringAttr::get(ctx, role),
                       IntegerAttr::get(IntegerType::get(ctx, 64), index))};
    if (reduceAxes)
      attrs.push_back(
          NamedAttribute(StringAttr::get(ctx, kReduceAxesAttr), reduceAxes));
    resultAttrs.push_back(DictionaryAttr::get(ctx, attrs));
  }

  void finish() {
    func::ReturnOp::create(builder, step.getLoc(), results);
    func.setType(FunctionType::get(step.getContext(),
                                   block->getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    func.setAllArgAttrs(argAttrs);
    func.setAllResultAttrs(resultAttrs);
  }

  bool defines(Value v) const { return mapping.contains(v); }
  /// Makes `to` the function's `v`.
  void map(Value v, Value to) { mapping.map(v, to); }
  OpBuilder &getBuilder() { return builder; }

  static constexpr StringLiteral kRoleInput = kInputRole;
  static constexpr StringLiteral kRoleState = kStateRole;
  static constexpr StringLiteral kRoleValue = kValueRole;

  Value addArgument(Value v, StringRef role, int64_t index) {
    return addArgument(
        v, role,
        IntegerAttr::get(IntegerType::get(step.getContext(), 64), index));
  }

private:
  IRMapping mapping;

  Value addArgument(Value v, StringRef role, Attribute index) {
    BlockArgument arg = block->addArgument(v.getType(), v.getLoc());
    MLIRContext *ctx = step.getContext();
    argAttrs.push_back(DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, role), index)}));
    mapping.map(v, arg);
    return arg;
  }

  func::FuncOp step;
  const StepPhases &phases;
  llvm::DenseMap<Value, int64_t> &valueIds;
  llvm::DenseMap<Value, int64_t> *invariantIds;
  func::FuncOp func;
  Block *block = nullptr;
  OpBuilder builder{step.getContext()};
  SmallVector<Attribute> argAttrs;
  SmallVector<Value> results;
  SmallVector<Attribute> resultAttrs;
};
} // namespace

static StringRef phaseName(Phase p) {
  switch (p) {
  case Phase::Forward:
    return "forward";
  case Phase::Backward:
    return "backward";
  case Phase::Weight:
    return "weight";
  case Phase::Optimizer:
    return "optimizer";
  default:
    return "dead";
  }
}

/// Gradient `v` and, where it is a sum of several stages' parts
/// (`dist.grad_sum` adds), those parts, transitively.
static SmallVector<Value> gradientParts(Value v) {
  SmallVector<Value> parts{v};
  for (size_t i = 0; i < parts.size(); ++i)
    if (Operation *def = parts[i].getDefiningOp();
        def && def->hasAttr(kGradSumAttr)) {
      parts.push_back(def->getOperand(0));
      parts.push_back(def->getOperand(1));
    }
  return parts;
}

LogicalResult pcc::outlineStages(func::FuncOp step, bool splitBackward) {
  auto numStages = step->getAttrOfType<IntegerAttr>(kNumStagesAttr);
  if (!numStages)
    return step.emitError("pcc-pipeline-outline: run pcc-pipeline-stages "
                          "first (no dist.num_stages)");
  auto module = step->getParentOfType<ModuleOp>();
  auto mesh = module.lookupSymbol<dist::MeshOp>(dist::kMeshName);
  int64_t pp = mesh ? mesh.getAxisSize(dist::kPipelineAxis).value_or(1) : 1;
  int64_t stages = numStages.getInt();
  auto microbatchesAttr = step->getAttrOfType<IntegerAttr>(kMicrobatchesAttr);
  int64_t microbatches = microbatchesAttr ? microbatchesAttr.getInt() : 1;
  MLIRContext *ctx = step.getContext();
  Block &body = step.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  StepPhases phases = classifyPhases(step);

  // Gradient sums over other mesh axes that wait for the accumulation: an
  // all-reduce (sum) of a gradient part over axes other than the
  // pipeline's, whose operand nothing else reads.
  llvm::SetVector<Value> gradParts;
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (step.getResultAttr(k, graph::kGradAttr))
      gradParts.insert_range(gradientParts(v));
  llvm::DenseMap<Value, dist::AllReduceOp> deferred; // part -> its sum
  for (Value part : gradParts) {
    auto sum = part.getDefiningOp<dist::AllReduceOp>();
    if (sum && sum.getKind() == dist::ReductionKind::Sum &&
        !llvm::is_contained(sum.getAxes().getAsValueRange<StringAttr>(),
                            dist::kPipelineAxis) &&
        sum.getInput().hasOneUse() && !isa<BlockArgument>(sum.getInput()) &&
        llvm::all_of(sum->getUsers(), [&](Operation *user) {
          return isa<func::ReturnOp>(user) || user->hasAttr(kGradSumAttr) ||
                 phases.of(user) == Phase::Optimizer;
        }))
      deferred[part] = sum;
  }
  llvm::DenseSet<Operation *> deferredOps;
  for (auto &kv : deferred)
    deferredOps.insert(kv.second);

  // Gradient clipping's squared norm (graph.gradient_norm): every rank sums
  // the parts it makes (a gradient's square, on the first stage holding its
  // parameter, so a parameter held on several stages counts once) and
  // all-reduces the sums over the pipeline; its adds are not outlined.
  Operation *normRoot = nullptr;
  SmallVector<Operation *> normAdds;
  SmallVector<Value> normParts;
  if (pp > 1)
    for (Operation &op : body.without_terminator())
      if (op.hasAttr(graph::kGradientNormAttr)) {
        normRoot = &op;
        getGradientNormSum(&op, normAdds, normParts);
      }
  auto ownerOf = [&](Value part) -> std::optional<int64_t> {
    Operation *def = part.getDefiningOp();
    auto at = def ? def->getAttrOfType<DenseI64ArrayAttr>(kStagesAttr)
                  : DenseI64ArrayAttr();
    if (!at || at.empty())
      return std::nullopt;
    return pipeline::getStageRanks(step, *llvm::min_element(at.asArrayRef()),
                                   pp)
        .front();
  };
  deferredOps.insert_range(normAdds);

  // Which functions each op goes to.
  std::map<FunctionKey, SmallVector<Operation *>> members;
  llvm::DenseMap<Operation *, SmallVector<FunctionKey, 1>> placement;
  for (Operation &op : body.without_terminator()) {
    Phase phase = phases.of(&op);
    if (phase == Phase::Dead || phases.isFree(&op) ||
        op.hasAttr(kGradSumAttr) || deferredOps.contains(&op))
      continue;
    if (phase == Phase::Optimizer) {
      auto at = op.getAttrOfType<DenseI64ArrayAttr>(kStagesAttr);
      if (!at)
        return op.emitError("pcc-pipeline-outline: optimizer op without "
                            "dist.stages");
      llvm::SmallDenseSet<int64_t, 2> ranks;
      for (int64_t s : at.asArrayRef())
        ranks.insert_range(pipeline::getStageRanks(step, s, pp));
      for (int64_t r = 0; r < pp; ++r)
        if (ranks.contains(r))
          placement[&op].push_back({phase, r});
    } else {
      auto at = op.getAttrOfType<IntegerAttr>(kStageAttr);
      if (!at)
        return op.emitError("pcc-pipeline-outline: op without dist.stage");
      if (splitBackward && op.hasAttr(kWeightGradAttr))
        phase = Phase::Weight;
      placement[&op].push_back({phase, at.getInt()});
    }
    for (FunctionKey key : placement[&op])
      members[key].push_back(&op);
  }
  // Forward and backward of every stage exist, even when empty: the
  // schedule calls each once per microbatch.
  bool training = llvm::any_of(ret.getOperands(), [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && phases.of(def) == Phase::Backward;
  });
  // Every rank that holds a state with an update runs an optimizer, even
  // one whose updates are all free (a step counter on a rank whose stages
  // read no parameter).
  // State updated in place (a KV cache) is written through its argument
  // by the stages that write it: no optimizer makes it, and one microbatch
  // at a time could not.
  for (unsigned k = 0; k < step.getNumResults(); ++k)
    if (pipeline::isUpdatedInPlace(step, k) && microbatches > 1)
      return step.emitError("pipeline parallelism: ")
             << pipeline::describeState(
                    step, *graph::getStateIndex(step, k, graph::kUpdateAttr))
             << " is updated in place, which several microbatches cannot "
                "do";
  for (unsigned k = 0; k < step.getNumResults(); ++k)
    if (std::optional<unsigned> state =
            graph::getStateIndex(step, k, graph::kUpdateAttr);
        state && !pipeline::isUpdatedInPlace(step, k))
      for (int64_t r = 0; r < pp; ++r)
        if (holdsState(step, *state, r, pp))
          members[{Phase::Optimizer, r}];
  // Every rank takes part in the norm's all-reduce.
  if (normRoot)
    for (int64_t r = 0; r < pp; ++r)
      members[{Phase::Optimizer, r}];
  for (int64_t s = 0; s < stages; ++s) {
    members[{Phase::Forward, s}];
    if (training)
      members[{Phase::Backward, s}];
    if (training && splitBackward)
      members[{Phase::Weight, s}];
  }

  // What the step returns, by value: outputs are made in the forward,
  // gradients in the backward, updates in the optimizer.
  llvm::DenseMap<Value, SmallVector<std::pair<StringRef, int64_t>>> returned;
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    StringRef role = kOutputRole;
    if (step.getResultAttr(k, graph::kGradAttr))
      role = kGradRole;
    else if (step.getResultAttr(k, graph::kUpdateAttr))
      role = kUpdateRole;
    returned[v].push_back({role, int64_t(k)});
  }
  // Outputs that depend on no microbatch (a training step's scheduled
  // learning rate, computed from the step count) are made once per step,
  // by the optimizer of pipeline rank 0; an inference build has none.
  SmallVector<int64_t> freeOutputs;
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (!step.getResultAttr(k, graph::kGradAttr) &&
        !step.getResultAttr(k, graph::kUpdateAttr) &&
        (phases.isFree(v) || isa<BlockArgument>(v))) {
      if (!training || !members.count({Phase::Optimizer, 0}))
        return step.emitError("pipeline parallelism: output ")
               << k << " does not depend on the inputs";
      freeOutputs.push_back(k);
    }

  llvm::DenseMap<Value, int64_t> valueIds, invariantIds;
  OpBuilder moduleBuilder(step);
  StringRef base = step.getSymName();
  for (auto &[key, ops] : members) {
    auto [phase, index] = key;
    FunctionBuilder fb(step, phases, valueIds,
                       phase == Phase::Optimizer ? nullptr : &invariantIds);
    std::string name =
        phase == Phase::Optimizer
            ? llvm::formatv("{0}_rank{1}_optimizer", base, index).str()
            : llvm::formatv("{0}_stage{1}_{2}", base, index, phaseName(phase))
                  .str();
    func::FuncOp fn = fb.create(moduleBuilder, name);
    fn->setAttr(kPhaseAttr, StringAttr::get(ctx, phaseName(phase)));
    fn->setAttr(phase == Phase::Optimizer ? dist::kRankAttr : kStageAttr,
                IntegerAttr::get(IntegerType::get(ctx, 64), index));
    // This rank's part of the gradients' squared norm, all-reduced over
    // the pipeline, once its parts are made (before the first op reading
    // the norm, or at the end).
    auto sumNorm = [&]() -> LogicalResult {
      Value root = normRoot->getResult(0);
      OpBuilder &b = fb.getBuilder();
      Location loc = normRoot->getLoc();
      Value partial;
      for (Value part : normParts) {
        if (ownerOf(part) != index)
          continue;
        if (!fb.defines(part))
          return normRoot->emitError("pipeline parallelism: rank ")
                 << index << " owns a part of the gradients' norm that it "
                 << "does not make";
        FailureOr<Value> mine = fb.lookup(part);
        partial =
            partial ? graph::AddOp::create(b, loc, partial, *mine) : *mine;
      }
      if (!partial)
        partial = graph::ConstantOp::create(
            b, loc, cast<DenseElementsAttr>(b.getZeroAttr(root.getType())));
      Value sum = dist::AllReduceOp::create(
          b, loc, root.getType(), partial,
          FlatSymbolRefAttr::get(ctx, dist::kMeshName),
          b.getStrArrayAttr({dist::kPipelineAxis}),
          dist::ReductionKindAttr::get(ctx, dist::ReductionKind::Sum));
      fb.map(root, sum);
      return success();
    };
    // Whether the norm is still to be summed here.
    bool sumsNorm = normRoot && phase == Phase::Optimizer;
    for (Operation *op : ops) {
      if (sumsNorm &&
          llvm::is_contained(op->getOperands(), normRoot->getResult(0))) {
        sumsNorm = false;
        if (failed(sumNorm()))
          return failure();
      }
      // The optimizer reads whole gradients, accumulated over the
      // microbatches and summed over the stages that contribute.
      if (phase == Phase::Optimizer)
        for (Value v : op->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (!def || phases.isFree(v) || fb.defines(v) ||
              llvm::is_contained(ops, def))
            continue;
          auto it = returned.find(v);
          const std::pair<StringRef, int64_t> *grad = nullptr;
          if (it != returned.end())
            for (const auto &r : it->second)
              if (r.first == kGradRole)
                grad = &r;
          if (!grad) {
            InFlightDiagnostic diag =
                op->emitError("pipeline parallelism: the optimizer reads a "
                              "value of the forward or backward that is not "
                              "a gradient: the result of '")
                << def->getName() << "'";
            diag.attachNote(def->getLoc()) << "computed here";
            return diag;
          }
          fb.addArgument(v, kGradRole, grad->second);
        }
      if (failed(fb.cloneOp(op)))
        return failure();
    }
    if (sumsNorm && failed(sumNorm()))
      return failure();
    // Results: what other functions read, and what the step returns.
    llvm::SetVector<Value> exported;
    for (Operation *op : ops)
      for (Value r : op->getResults())
        for (Operation *user : r.getUsers()) {
          if (isa<func::ReturnOp>(user) || phases.isFree(user))
            continue;
          auto it = placement.find(user);
          if (it == placement.end())
            continue;
          bool elsewhere = llvm::any_of(it->second, [&](FunctionKey k) {
            return k != key && k.first != Phase::Optimizer;
          });
          if (elsewhere)
            exported.insert(r);
        }
    for (Value v : exported) {
      auto [it, inserted] = valueIds.try_emplace(v, valueIds.size());
      fb.addResult(v, FunctionBuilder::kRoleValue, it->second);
    }
    for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
      bool isGrad = step.getResultAttr(k, graph::kGradAttr) != nullptr;
      std::optional<unsigned> updated =
          graph::getStateIndex(step, k, graph::kUpdateAttr);
      if (phase == Phase::Optimizer) {
        if (index == 0 && llvm::is_contained(freeOutputs, int64_t(k))) {
          FailureOr<Value> made = fb.lookup(v);
          if (failed(made))
            return failure();
          fb.addResult(v, kOutputRole, k);
          continue;
        }
        if (!updated || !holdsState(step, *updated, index, pp) ||
            pipeline::isUpdatedInPlace(step, k))
          continue;
        if (failed(fb.lookup(v)))
          return failure();
        fb.addResult(v, kUpdateRole, k);
        continue;
      }
      if (updated || isa<BlockArgument>(v) || phases.isFree(v))
        continue;
      if (!isGrad) {
        if (fb.defines(v))
          fb.addResult(v, kOutputRole, k);
        continue;
      }
      // A gradient summed from several stages' parts: this function's.
      for (Value part : gradientParts(v)) {
        if (part.getDefiningOp() && part.getDefiningOp()->hasAttr(kGradSumAttr))
          continue;
        if (auto it = deferred.find(part); it != deferred.end()) {
          if (fb.defines(it->second.getInput()))
            fb.addResult(it->second.getInput(), kGradRole, k,
                         it->second.getAxes());
          continue;
        }
        if (fb.defines(part))
          fb.addResult(part, kGradRole, k);
      }
    }
    fb.finish();
  }
  return success();
}

namespace {
struct PipelineOutlinePass
    : pcc::impl::PipelineOutlineBase<PipelineOutlinePass> {
  using PipelineOutlineBase::PipelineOutlineBase;
  void runOnOperation() override {
    SmallVector<func::FuncOp> steps;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func->hasAttr(kNumStagesAttr))
        steps.push_back(func);
    for (func::FuncOp step : steps)
      if (failed(outlineStages(step, splitBackward)))
        return signalPassFailure();
  }
};
} // namespace
