//===- Schedule.h - Static pipeline schedules: generation, checks -*- C++
//-*-===//
//
// A pipeline schedule says, per pipeline rank, the ordered computations
// (forward F, backward B, and weight gradient W when split off) of the
// virtual stages that rank holds, and the point-to-point transfers between
// ranks. These functions make one (`dist.schedule`), and check and time one,
// without a pass: `pcc plan` calls them as well as the passes
// pcc-pipeline-schedule and pcc-verify-schedule.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TRANSFORMS_PIPELINE_SCHEDULE_H
#define PCC_TRANSFORMS_PIPELINE_SCHEDULE_H

#include "pcc/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace pcc::pipeline {

/// What to generate. Virtual stage `s` lives on rank `s % ranks`; the model
/// has `ranks * virtualStages` of them.
struct ScheduleSpec {
  /// gpipe, 1f1b, interleaved or zb-h1.
  std::string kind = "1f1b";
  int64_t ranks = 1;
  int64_t microbatches = 1;
  /// Model chunks per rank (v); more than one only for `interleaved`.
  int64_t virtualStages = 1;
  /// Empty, or per virtual stage the times of F, B and W (3 values each).
  /// zb-h1 orders its actions by them (unit times when empty); all kinds
  /// record them on the schedule for the timed simulation.
  llvm::SmallVector<double> costs;
  /// Empty, or per virtual stage the bytes one microbatch's forward keeps
  /// until its last backward action.
  llvm::SmallVector<int64_t> stashBytes;
  /// Empty, or per rank the bytes held throughout (parameters, optimizer
  /// state, workspace).
  llvm::SmallVector<int64_t> baseBytes;
  /// Empty, or per virtual stage the seconds its activations take to reach
  /// the next stage and its input gradient the previous one (2 values).
  llvm::SmallVector<double> transferCosts;
  /// Empty, or per virtual stage the bytes of those two sends (2 values).
  llvm::SmallVector<int64_t> transferBytes;
  /// Empty, or per virtual stage the time of the products it defers to
  /// once a step, after its rank's last action (1 value; `costs` leave
  /// them out).
  llvm::SmallVector<double> deferredCosts;
};

/// Fills what `spec` leaves empty of its costs and bytes from `func`'s
/// attributes, as the stage partition measured them, where they have as
/// many values as the spec's ranks and stages need (costs and stash bytes:
/// any number; generateSchedule checks them).
void fillSpecFromStep(mlir::func::FuncOp func, ScheduleSpec &spec);

/// One entry of a rank's ordered list: a computation, a transfer, or the
/// completion of an earlier send (Wait, of the same payload, stage and
/// microbatch).
struct Action {
  enum class Kind { Compute, Send, Recv, Wait };
  Kind kind = Kind::Compute;
  /// The computation (Kind::Compute).
  dist::Phase phase = dist::Phase::F;
  /// What a transfer carries (Kind::Send, Kind::Recv).
  dist::Payload payload = dist::Payload::Act;
  int64_t stage = 0;
  int64_t microbatch = 0;
  /// The other rank of a transfer.
  int64_t peer = -1;

  static Action compute(dist::Phase phase, int64_t stage, int64_t microbatch) {
    return {Kind::Compute, phase, dist::Payload::Act, stage, microbatch, -1};
  }
  static Action transfer(Kind kind, dist::Payload payload, int64_t stage,
                         int64_t microbatch, int64_t peer) {
    return {kind, dist::Phase::F, payload, stage, microbatch, peer};
  }
  bool operator==(const Action &o) const {
    return kind == o.kind && phase == o.phase && payload == o.payload &&
           stage == o.stage && microbatch == o.microbatch && peer == o.peer;
  }
};

/// The action a `dist.compute` or `dist.transfer` op states.
Action getScheduleAction(mlir::Operation *op);

/// Every rank's ordered actions, indexed by rank.
using ScheduleTable = llvm::SmallVector<llvm::SmallVector<Action>>;

/// The calls a run makes of each rank under a schedule of two steps without
/// a flush (`dist.schedule` with `steps = 2`): the fill starts the first
/// step, the steady call ends a step and starts the next, the drain ends
/// the last.
enum class Window { Fill, Steady, Drain };

/// The call `a`, an action of a table of two steps of `microbatches` each,
/// belongs to, where `leads[r]` is how many forwards of the next step rank
/// r runs before a step ends (one stage per rank): a forward of microbatch
/// k on the rank of its stage in the fill when k < lead, in the steady
/// call when k < microbatches + lead, else in the drain; a backward (or W)
/// in the steady call when k < microbatches, else in the drain; a transfer
/// in the call of the computation that sends it.
Window getWindow(const Action &a, int64_t microbatches,
                 llvm::ArrayRef<int64_t> leads);

/// Each rank's actions of `window`, in the table's order, with microbatches
/// as the table numbers them (a drain's are those of the second step).
ScheduleTable getWindowTable(const ScheduleTable &table, Window window,
                             int64_t microbatches,
                             llvm::ArrayRef<int64_t> leads);

/// The pipelines a spec's schedule runs over the same ranks: 2 for
/// chimera (the odd microbatches flow up, stage s on rank p - 1 - s), else 1.
int64_t getPipelines(const ScheduleSpec &spec);

/// How many forwards of the next step each rank runs before a step ends,
/// for a spec whose schedule covers two steps (2bw); empty for the others.
llvm::SmallVector<int64_t> getLeads(const ScheduleSpec &spec);

/// The kinds generateSchedule knows, in the order error messages list them.
llvm::ArrayRef<llvm::StringRef> getScheduleKinds();

/// Whether a schedule of `kind` runs each stage's weight gradient (W apart
/// from the input gradient B, as zero-bubble schedules do), so that the
/// stages' backwards are outlined in two parts.
bool splitsBackward(llvm::StringRef kind);

/// Why no schedule of `spec`'s kind fits its ranks, microbatches and
/// virtual stages (an unknown kind, interleaved's microbatches not a
/// multiple of the ranks, ...), as one line; none when one does. The rules
/// generateSchedule applies, for callers that only ask.
std::optional<std::string> getScheduleShapeError(const ScheduleSpec &spec);

/// Generates the table `spec` asks for: the computations in the order of
/// the kind, a receive right before the computation that reads it, a send
/// right after the one that produces it, and each send's wait before the
/// rank's first computation that starts, in the simulation with spec's
/// costs, after the send's receive has run (sends after the last such
/// computation complete at the end of the step). Emits a one-line error
/// through `emitError` and fails on a spec no schedule fits.
llvm::FailureOr<ScheduleTable>
generateSchedule(const ScheduleSpec &spec,
                 llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// Generates the table of `spec` and builds it as `dist.schedule @name` at
/// the builder's insertion point, with spec's costs and bytes as attributes.
llvm::FailureOr<dist::ScheduleOp>
buildSchedule(mlir::OpBuilder &builder, mlir::Location loc,
              llvm::StringRef name, const ScheduleSpec &spec,
              llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// What the timed simulation of a schedule found for one rank.
struct RankStats {
  /// Time spent computing.
  double busy = 0;
  /// Most microbatch-chunks whose F ran and whose last backward action (W
  /// when the schedule splits backwards, else B) had not.
  int64_t peakStashed = 0;
  /// base_bytes plus the most stashed and sent bytes at any time.
  int64_t peakBytes = 0;
  /// The most bytes of sends started and not completed (by their wait, or
  /// the end of the step) at any time.
  int64_t peakSendBytes = 0;
  /// The compute actions in the rank's order, with their simulated start
  /// and end: the timeline that plans draw.
  struct Span {
    Action action;
    double start = 0, end = 0;
  };
  llvm::SmallVector<Span> timeline;
  /// When the rank ran its stages' deferred products, after its last
  /// action (an empty span where it defers none).
  double deferredStart = 0, deferredEnd = 0;
  /// The rank's sends, from their start to their arrival.
  llvm::SmallVector<Span> transfers;
  /// When each send's receive ran (what its wait waits for), in the order
  /// of `transfers`.
  llvm::SmallVector<double> taken;
};

struct ScheduleStats {
  double makespan = 0;
  /// 1 - sum(busy) / (ranks * makespan).
  double bubbleFraction = 0;
  /// Whether the schedule gives stash or base bytes (peakBytes is 0 if not).
  bool hasBytes = false;
  llvm::SmallVector<RankStats> ranks;
};

/// Checks that `schedule` runs every F and B (and every W, when any W
/// appears) of every virtual stage and microbatch exactly once, that each
/// action comes after what it depends on in its rank's order, that sends
/// and receives pair up in order on every channel between two ranks, that
/// a wait comes after its send, and that nothing deadlocks when sends never
/// block, receives wait for their sends and waits for their receives. Emits an
/// error at the offending action and fails otherwise. Then times it with the
/// schedule's `costs` (unit F, B and W when absent) and `transfer_costs`
/// (transfers free when absent).
llvm::FailureOr<ScheduleStats> verifySchedule(dist::ScheduleOp schedule);

/// What timeSchedule needs besides the table: per virtual stage the F, B
/// and W times (3 each; unit times when empty), the transfer times and the
/// bytes a microbatch's forward stashes, per rank the bytes held
/// throughout, and whether backwards are split into B and W.
struct ScheduleTiming {
  llvm::ArrayRef<double> costs;
  /// Per virtual stage, the activations' and the input gradient's transfer
  /// times (2 each; free when empty).
  llvm::ArrayRef<double> transferCosts;
  llvm::ArrayRef<int64_t> stashBytes, baseBytes;
  /// Per virtual stage, the bytes of the two sends (none when empty).
  llvm::ArrayRef<int64_t> transferBytes;
  /// Per virtual stage, the time of its deferred products, which its rank
  /// runs after its last action (none when empty).
  llvm::ArrayRef<double> deferredCosts;
  bool split = false;
};

/// The timing of `table`, generated from `spec`: the spec's costs and
/// bytes, and split backwards where the table runs W actions.
ScheduleTiming getScheduleTiming(const ScheduleSpec &spec,
                                 const ScheduleTable &table);

/// Runs `table` in simulated time: sends never block, a receive waits for
/// its send, a wait for its send's receive, a computation takes its cost;
/// after its last action a rank runs the deferred products of the stages
/// it ran.
/// A send's bytes count from the send to its wait (or the end). When some rank
/// never finishes (a deadlock), `blockedAt` (if given) receives each rank's
/// index of the action it waits at; the stats then cover what ran. The schedule
/// verifier times a verified schedule with it, and the stage partition
/// compares cuts by the makespan it gives.
ScheduleStats timeSchedule(const ScheduleTable &table,
                           const ScheduleTiming &timing,
                           llvm::SmallVectorImpl<size_t> *blockedAt = nullptr);

/// Records `stats` on `schedule` (makespan, bubble_fraction) and its ranks
/// (busy, peak_stashed, and peak_bytes when the schedule gives bytes).
void annotateSchedule(dist::ScheduleOp schedule, const ScheduleStats &stats);

} // namespace pcc::pipeline

#endif // PCC_TRANSFORMS_PIPELINE_SCHEDULE_H
