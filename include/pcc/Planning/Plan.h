//===- Plan.h - What a pipeline compile decided, for people ------*- C++ -*-===//
//
// The pipeline half of OUT/plan.json (stages, the schedule of every rank,
// bubble and memory) and OUT/schedule.svg (each rank's timeline), read from
// a module after pcc-lower-schedule: its dist.schedule and the outlined
// stage functions. Shared by `pcc compile` and `pcc plan`.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_PLANNING_PLAN_H
#define PCC_PLANNING_PLAN_H

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

struct CompileOptions;

/// `pcc plan`: the planning of `pcc compile` (strategy, stages, schedule,
/// memory) without code generation, of `options.model` or of a model
/// described by its sizes (`modelSpec`, e.g. "gpt:layers=96,hidden=12288,
/// heads=96,vocab=51200,seq=2048,batch=1536"); writes OUT/plan.json and
/// OUT/schedule.svg and prints a summary.
llvm::LogicalResult plan(const CompileOptions &options,
                         llvm::StringRef modelSpec, llvm::raw_ostream &summary);

/// The Graph dialect source of a model described by its sizes; fails with
/// the reason in `error`. With `generateSeq`, the forward a generation
/// build derives its steps from: one sequence of that length ([1, S]), its
/// attention causal.
llvm::FailureOr<std::string> describedModelSource(llvm::StringRef spec,
                                                  std::string &error,
                                                  int64_t generateSeq = 0);

} // namespace pcc

#endif // PCC_PLANNING_PLAN_H
