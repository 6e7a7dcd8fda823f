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
    for (auto func : module.getOps<func::FuncOp>())
      fillSpecFromStep(func, spec);
    // Built detached, then inserted through the symbol table, which renames
    // it if the module already has a @schedule.
    SymbolTable symbols(module);
    OpBuilder builder(module.getContext());
    FailureOr<dist::ScheduleOp> schedule =
        buildSchedule(builder, module.getLoc(), "schedule", spec,
                      [&] { return module.emitError(); });
    if (failed(schedule))
      return signalPassFailure();
    symbols.insert(*schedule);
  }
};
} // namespace
