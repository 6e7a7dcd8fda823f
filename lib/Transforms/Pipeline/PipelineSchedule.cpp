//===- PipelineSchedule.cpp - Builds a static pipeline schedule -----------===//
//
// The pass form of buildSchedule: reads the options, takes the pipeline
// ranks from the module's mesh when not given, and adds the schedule to the
// module.
//
//===----------------------------------------------------------------------===//

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
    // Without costs given, a step the stage partition measured gives them.
    for (auto func : module.getOps<func::FuncOp>()) {
      auto stageCosts = func->getAttrOfType<DenseF64ArrayAttr>(
          kStageCostsAttr);
      auto stash = func->getAttrOfType<DenseI64ArrayAttr>(kStashBytesAttr);
      if (spec.costs.empty() && stageCosts)
        spec.costs.assign(stageCosts.asArrayRef().begin(),
                          stageCosts.asArrayRef().end());
      auto base = func->getAttrOfType<DenseI64ArrayAttr>(kBaseBytesAttr);
      if (spec.baseBytes.empty() && base &&
          int64_t(base.size()) == spec.ranks)
        spec.baseBytes.assign(base.asArrayRef().begin(),
                              base.asArrayRef().end());
      auto transfers =
          func->getAttrOfType<DenseF64ArrayAttr>(kTransferCostsAttr);
      if (spec.transferCosts.empty() && transfers &&
          int64_t(transfers.size()) == 2 * spec.ranks * spec.virtualStages)
        spec.transferCosts.assign(transfers.asArrayRef().begin(),
                                  transfers.asArrayRef().end());
      auto sent = func->getAttrOfType<DenseI64ArrayAttr>(kTransferBytesAttr);
      if (spec.transferBytes.empty() && sent &&
          int64_t(sent.size()) == 2 * spec.ranks * spec.virtualStages)
        spec.transferBytes.assign(sent.asArrayRef().begin(),
                                  sent.asArrayRef().end());
      if (spec.stashBytes.empty() && stash)
        spec.stashBytes.assign(stash.asArrayRef().begin(),
                               stash.asArrayRef().end());
    }
    if (ranks == 0) {
      auto mesh = module.lookupSymbol<dist::MeshOp>("mesh");
      std::optional<int64_t> pp =
          mesh ? mesh.getAxisSize("pp") : std::optional<int64_t>();
      if (!pp) {
        module.emitError("ranks=0 takes the pipeline ranks from axis 'pp' of "
                         "dist.mesh @mesh, which the module does not have");
        return signalPassFailure();
      }
      spec.ranks = *pp;
    }
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
