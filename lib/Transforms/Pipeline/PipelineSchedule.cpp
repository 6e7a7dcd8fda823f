//===- PipelineSchedule.cpp - Builds a static pipeline schedule -----------===//
//
// The pass form of buildSchedule: reads the options, takes the pipeline
// ranks from the module's mesh when not given, and adds the schedule to the
// module.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipeline/Pipeline.h"
#include "pcc/Transforms/Pipeline/Schedule.h"

#include "mlir/IR/BuiltinOps.h"

namespace pcc {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::pipeline;

namespace {
struct PipelineSchedulePass
    : pcc::impl::PipelineScheduleBase<PipelineSchedulePass> {
  using PipelineScheduleBase::PipelineScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ScheduleSpec spec;
    spec.kind = kind;
    spec.microbatches = microbatches;
    spec.virtualStages = virtualStages;
    spec.ranks = ranks;
    spec.costs.assign(costs.begin(), costs.end());
    spec.stashBytes.assign(stashBytes.begin(), stashBytes.end());
    spec.baseBytes.assign(baseBytes.begin(), baseBytes.end());
    if (ranks == 0) {
      auto mesh = module.lookupSymbol<dist::MeshOp>(dist::kMeshName);
      std::optional<int64_t> pp = mesh ? mesh.getAxisSize(dist::kPipelineAxis)
                                       : std::optional<int64_t>();
      if (!pp) {
        module.emitError("ranks=0 takes the pipeline ranks from axis 'pp' of "
                         "dist.mesh @mesh, which the module does not have");
        return signalPassFailure();
      }
      spec.ranks = *pp;
    }
    // What the options do not give, a step the stage partition measured
    // gives: its costs and bytes, when it has as many as the schedule's
    // ranks and stages need (generateSchedule checks the others' counts).
    // A program of several steps (a generation build's prefill and decode)
    // has a schedule per step, which the step names.
    SmallVector<func::FuncOp> steps;
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(dist::kNumStagesAttr))
        steps.push_back(func);
    SymbolTable symbols(module);
    OpBuilder builder(module.getContext());
    // Built detached, then inserted through the symbol table, which renames
    // it if the module already has one of its name.
    auto build = [&](const ScheduleSpec &spec,
                     StringRef name) -> FailureOr<dist::ScheduleOp> {
      FailureOr<dist::ScheduleOp> schedule = buildSchedule(
          builder, module.getLoc(), name, spec,
          [&] { return module.emitError(); });
      if (succeeded(schedule))
        symbols.insert(*schedule);
      return schedule;
    };
    if (steps.size() <= 1) {
      for (auto func : module.getOps<func::FuncOp>())
        fillSpecFromStep(func, spec);
      if (failed(build(spec, "schedule")))
        return signalPassFailure();
      return;
    }
    for (func::FuncOp step : steps) {
      ScheduleSpec own = spec;
      fillSpecFromStep(step, own);
      FailureOr<dist::ScheduleOp> schedule =
          build(own, (step.getSymName() + "_schedule").str());
      if (failed(schedule))
        return signalPassFailure();
      step->setAttr(dist::kStepScheduleAttr,
                    FlatSymbolRefAttr::get(schedule->getSymNameAttr()));
    }
  }
};
} // namespace
