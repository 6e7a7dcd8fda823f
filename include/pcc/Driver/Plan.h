//===- Plan.h - What a pipeline compile decided, for people ------*- C++ -*-===//
//
// The pipeline half of OUT/plan.json (stages, the schedule of every rank,
// bubble and memory) and OUT/schedule.svg (each rank's timeline), read from
// a module after pcc-lower-schedule: its dist.schedule and the outlined
// stage functions. Shared by `pcc compile` and `pcc plan`.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_DRIVER_PLAN_H
#define PCC_DRIVER_PLAN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>

namespace pcc {

struct PipelinePlan {
  /// {"stages": [...], "schedule": {...}} for plan.json.
  llvm::json::Object json;
  /// The timeline as an SVG picture.
  std::string svg;
  /// A few lines for the compile summary.
  std::string summary;
};

/// The plan of the module's pipeline, or nullopt when it has none. Fails
/// (with a diagnostic) only if the schedule does not verify.
llvm::FailureOr<std::optional<PipelinePlan>>
describePipeline(mlir::ModuleOp module);

} // namespace pcc

#endif // PCC_DRIVER_PLAN_H
