//===- ProgramEmitter.h - Graph dialect to C++ for any target -*- C++ -*-===//
//
// The entry function of the program the emitter receives is either an
// inference graph (arguments and results named by `onnx.name`) or a training
// step, whose signature also carries the model's persistent state
// (GraphTraining.h):
//  - an argument with `graph.state = "<name>"` and `graph.init = <elements>`
//    is a piece of state (parameter, optimizer moment, step counter): a
//    STATE entry of the weights table, initialized from graph.init;
//  - a result with `graph.update = <argument>` is that state's value after
//    the step, written back into the state buffer at the end of the run;
//  - a result with `graph.grad = <argument>` is a GRAD output named by the
//    parameter; every other result is an OUTPUT.
// The functions it calls take and give plain buffers (their attributes do
// not matter), and may read weights: all share the one weights table.
//
// A pipeline-parallel program has one entry per pipeline rank (public
// functions marked `dist.rank = <coordinate along the mesh axis "pp">`),
// each that rank's part of the step's interface: the graph inputs (all, in
// the same order), the state it holds, and the results it makes, each
// marked `dist.result_index` (its index among the whole step's results,
// which orders the outputs table). The library exports one interface, the
// union of the entries' matched by name, and records in each table entry
// the pipeline ranks that hold it.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_PROGRAMEMITTER_H
#define PCC_TARGET_PROGRAMEMITTER_H

#include "pcc/Target/AbiTables.h"
#include "pcc/Target/TargetHooks.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <string>
#include <vector>

namespace pcc {

struct CppEmitOptions {
  /// Prefix of the exported `<prefix>_model_info` / `<prefix>_model_run`;
  /// several models can share one translation unit with distinct prefixes.
  std::string symbolPrefix = "pcc";
  /// Anonymous constants up to this many elements are emitted inline; larger
  /// ones go to the weights file, except splats, which are filled into the
  /// workspace where they are defined.
  int64_t maxInlineElements = 1024;
  /// Threads of a run (loops and GEMMs); 0: what the runtime says (the
  /// machine's cores shared among the ranks on it).
  int64_t threads = 0;
  /// When set, each op that has code runs between two calls of the run
  /// context's tracer (pcc run --trace) named by this label, so that a
  /// trace holds every op's time (pcc compile --profile-ops); ops given an
  /// empty label are not traced.
  std::function<std::string(mlir::Operation *)> profileLabel;
};

/// One entry of the program, as planned.
struct CppEmitEntry {
  /// The entry's symbol.
  std::string name;
  /// Its pipeline rank (coordinate along the pipeline axis); -1 when the
  /// program is not pipelined.
  int64_t stage = -1;
  /// Its workspace and the deepest chain of its callees'.
  uint64_t workspaceBytes = 0;
};

/// What the emitter planned, for the compile report.
struct CppEmitResult {
  /// The weights table, in order; each entry's `holders` names the
  /// pipeline ranks that load it (0: every rank).
  std::vector<WeightEntry> weights;
  /// The ranks' mesh (axis names and sizes); empty for one rank.
  std::vector<std::pair<std::string, int64_t>> mesh;
  /// The index of the pipeline's axis in `mesh`, -1 when not pipelined.
  int32_t stageAxis = -1;
  /// The entries: one, or one per pipeline rank in rank order.
  std::vector<CppEmitEntry> entries;
  /// The workspace of the program: the most any entry needs.
  uint64_t workspaceBytes = 0;
  /// A pipeline's workspace per pipeline rank, in rank order (what the
  /// runtime allocates on each); empty when not pipelined.
  std::vector<uint64_t> stageWorkspaceBytes;
  /// The operands prepared from the weights (packed products' operands),
  /// at least: all of them, and per weight (in the weights table's order).
  uint64_t preparedBytes = 0;
  std::vector<uint64_t> weightPreparedBytes;
};

/// Emits the program of `module` (Graph ops on static tensors) as a C++17
/// (or CUDA C++) translation unit, spelled by `hooks`, implementing the
/// pccrt ABI
/// (runtime/include/pccrt/pccrt.h). The entry, the module's one public
/// func.func, becomes `<prefix>_model_run`. A pipeline's entries (public
/// functions marked `dist.rank`, one for each coordinate along the mesh axis
/// "pp") become static functions `static int fn_NAME(const pccrt_context
/// *ctx)`, and `<prefix>_model_run` calls the one of the rank's coordinate
/// (row-major over the mesh axes). Every private func.func becomes a static
/// function
///
///   static int fn_NAME(const pccrt_context *ctx, void *const *args,
///                      void *const *results, char *ws);
///
/// that reads the buffers `args`, never writes them, computes its results
/// into the buffers `results` (in place where its buffer plan allows,
/// otherwise copied there at the end), works in the workspace `ws`, and
/// returns a pccrt error code that its callers return. A func.call passes
/// the workspace after the caller's own, so the program's workspace is the
/// entry's plus the deepest chain of callees'. A `dist.send` starts a
/// non-blocking send (its buffer stays alive until the function waits for
/// its sends, before its results land) and `dist.recv` receives; a call
/// marked `dist.action` is traced (pccrt_context.trace) as that action.
/// Emits a diagnostic at the offending op and fails on anything it cannot
/// lower (a call of a missing, public or external function, recursion), on
/// malformed state attributes, on entries that are not one per pipeline
/// rank, and on entries that disagree on a tensor's type or layout.
llvm::FailureOr<CppEmitResult> emitProgram(mlir::ModuleOp module,
                                           llvm::raw_ostream &os,
                                           const CppEmitOptions &options,
                                           TargetHooks &hooks);
/// The same with `entry` as the one entry (which may be one of several
/// public functions, pipeline entries included): it and every private
/// func.func of its module.
llvm::FailureOr<CppEmitResult> emitProgram(mlir::func::FuncOp entry,
                                           llvm::raw_ostream &os,
                                           const CppEmitOptions &options,
                                           TargetHooks &hooks);

} // namespace pcc

#endif // PCC_TARGET_PROGRAMEMITTER_H
