//===- VerifySchedule.cpp - Checks and times static pipeline schedules ----===//
//
// A schedule is only as good as the step functions lowered from it: an
// action missing or run twice computes wrong gradients, one out of order
// reads a value that does not exist yet, and a receive no send matches, or a
// cycle of receives, hangs every rank. The op verifiers check each action on
// its own; this checks the table as a whole, in the order that gives the
// most precise diagnosis: each action once, then the pairing of sends and
// receives on every channel, then each rank's order, then a simulation in
// which sends never block and receives do (a deadlock). The same simulation,
// timed with the schedule's costs, gives the bubble and the memory peaks.
//
//===----------------------------------------------------------------------===//

#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipeline/Schedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"

#include <map>

namespace pcc {
#define GEN_PASS_DEF_VERIFYSCHEDULE
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::pipeline;
using dist::Payload;
using dist::Phase;

namespace {
/// An action of a schedule and the op that states it.
struct Entry {
  Operation *op;
  Action action;
};

/// Identifies an action regardless of its place: its kind, phase or payload,
/// stage and microbatch (the peer follows from the stage).
using ActionKey = std::tuple<unsigned, unsigned, int64_t, int64_t>;

/// Transfers between an ordered pair of ranks, in each side's order.
struct Channel {
  SmallVector<const Entry *> sends, recvs;
};
} // namespace

static ActionKey keyOf(const Action &a) {
  unsigned what =
      a.kind == Action::Kind::Compute ? unsigned(a.phase) : unsigned(a.payload);
  return {unsigned(a.kind), what, a.stage, a.microbatch};
}

/// The action as the assembly spells it, e.g. `recv act stage 0 microbatch
/// 1 from rank 0`.
static std::string describe(const Action &a) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (a.kind == Action::Kind::Compute)
    os << dist::stringifyPhase(a.phase);
  else
    os << (a.kind == Action::Kind::Send   ? "send "
           : a.kind == Action::Kind::Recv ? "recv "
                                          : "wait ")
       << dist::stringifyPayload(a.payload);
  os << " stage " << a.stage << " microbatch " << a.microbatch;
  if (a.kind == Action::Kind::Send || a.kind == Action::Kind::Wait)
    os << " to rank " << a.peer;
  else if (a.kind == Action::Kind::Recv)
    os << " from rank " << a.peer;
  return s;
}

Action pcc::pipeline::getScheduleAction(Operation *op) {
  if (auto compute = dyn_cast<dist::ComputeOp>(op))
    return Action::compute(compute.getPhase(), compute.getStageIndex(),
                           compute.getMicrobatchIndex());
  auto transfer = cast<dist::TransferOp>(op);
  Action::Kind kind = Action::Kind::Recv;
  if (transfer.getDirection() == dist::Direction::Send)
    kind = Action::Kind::Send;
  else if (transfer.getDirection() == dist::Direction::Wait)
    kind = Action::Kind::Wait;
  return Action::transfer(kind, transfer.getPayload(), transfer.getStageIndex(),
                          transfer.getMicrobatchIndex(),
                          transfer.getPeerRank());
}

/// What `a`, on rank `rank`, needs earlier on the same rank: the
/// computation it consumes, or the receive that brings it.
static SmallVector<Action> prerequisites(const Action &a, int64_t rank,
                                         dist::ScheduleOp schedule) {
  int64_t last = schedule.getNumStages() - 1, k = a.microbatch;
  // The output of `stage`'s `phase` as seen from `rank`: computed here or
  // received from the rank that holds the stage.
  auto input = [&](Phase phase, Payload payload, int64_t stage) {
    int64_t holder = schedule.getRankOf(stage, k);
    if (holder == rank)
      return Action::compute(phase, stage, k);
    return Action::transfer(Action::Kind::Recv, payload, stage, k, holder);
  };
  if (a.kind == Action::Kind::Recv)
    return {};
  if (a.kind == Action::Kind::Wait)
    return {
        Action::transfer(Action::Kind::Send, a.payload, a.stage, k, a.peer)};
  if (a.kind == Action::Kind::Send)
    return {Action::compute(a.payload == Payload::Act ? Phase::F : Phase::B,
                            a.stage, k)};
  switch (a.phase) {
  case Phase::F:
    if (a.stage == 0)
      return {};
    return {input(Phase::F, Payload::Act, a.stage - 1)};
  case Phase::B: {
    SmallVector<Action> needs{Action::compute(Phase::F, a.stage, k)};
    if (a.stage < last)
      needs.push_back(input(Phase::B, Payload::Grad, a.stage + 1));
    return needs;
  }
  case Phase::W:
    return {Action::compute(Phase::B, a.stage, k)};
  }
  llvm_unreachable("unknown phase");
}

static ScheduleTiming getTiming(dist::ScheduleOp schedule, bool split);

/// Checks `table`, the actions of `schedule` or a sequence of its calls, as
/// a schedule of `m` microbatches, and times it with the schedule's costs.
/// `context` starts each diagnostic: which calls were checked.
static FailureOr<ScheduleStats> checkTable(dist::ScheduleOp schedule,
                                           ArrayRef<SmallVector<Entry>> table,
                                           int64_t m, StringRef context) {
  int64_t p = schedule.getNumRanks(), stages = schedule.getNumStages();
  SmallVector<dist::RankOp> rankOps = schedule.getRankOps();

  // Each action at most once; computations exactly once. When any W
  // appears the schedule splits backwards, and every B needs its W.
  DenseMap<ActionKey, Operation *> seen;
  bool split = false;
  for (auto &entries : table)
    for (const Entry &e : entries) {
      if (!seen.try_emplace(keyOf(e.action), e.op).second)
        return e.op->emitError()
                   << context << describe(e.action) << " appears twice",
               failure();
      split |=
          e.action.kind == Action::Kind::Compute && e.action.phase == Phase::W;
    }
  SmallVector<Phase> phases{Phase::F, Phase::B};
  if (split)
    phases.push_back(Phase::W);
  for (int64_t stage = 0; stage < stages; ++stage)
    for (int64_t k = 0; k < m; ++k)
      for (Phase phase : phases) {
        Action a = Action::compute(phase, stage, k);
        if (seen.count(keyOf(a)))
          continue;
        int64_t r = schedule.getRankOf(stage, k);
        auto diag = rankOps[r].emitError()
                    << context << "rank " << r << " never runs " << describe(a);
        if (phase == Phase::W)
          diag << " (the schedule splits backwards: every B needs its W)";
        return failure();
      }

  // Receives take each channel's transfers in the order they were sent.
  std::map<std::pair<int64_t, int64_t>, Channel> channels;
  for (auto [r, entries] : llvm::enumerate(table))
    for (const Entry &e : entries) {
      if (e.action.kind == Action::Kind::Send)
        channels[{int64_t(r), e.action.peer}].sends.push_back(&e);
      else if (e.action.kind == Action::Kind::Recv)
        channels[{e.action.peer, int64_t(r)}].recvs.push_back(&e);
    }
  for (auto &[ends, channel] : channels) {
    auto [from, to] = ends;
    size_t n = std::max(channel.sends.size(), channel.recvs.size());
    for (size_t i = 0; i < n; ++i) {
      if (i >= channel.recvs.size()) {
        const Entry *send = channel.sends[i];
        return send->op->emitError() << context << describe(send->action)
                                     << " has no matching recv on rank " << to,
               failure();
      }
      const Entry *recv = channel.recvs[i];
      if (i >= channel.sends.size())
        return recv->op->emitError()
                   << context << describe(recv->action)
                   << " has no matching send on rank " << from,
               failure();
      const Action &s = channel.sends[i]->action, &r = recv->action;
      if (s.payload != r.payload || s.stage != r.stage ||
          s.microbatch != r.microbatch)
        return recv->op->emitError()
                   << context << describe(r) << " is receive #" << i + 1
                   << " from rank " << from << ", whose send #" << i + 1
                   << " to rank " << to << " is " << describe(s)
                   << ": receives must follow the order of the sends",
               failure();
    }
  }

  // Each rank's order respects what every action consumes.
  for (auto [r, entries] : llvm::enumerate(table)) {
    DenseSet<ActionKey> done;
    for (const Entry &e : entries) {
      for (const Action &need : prerequisites(e.action, r, schedule))
        if (!done.contains(keyOf(need)))
          return e.op->emitError()
                     << context << describe(e.action) << " needs "
                     << describe(need) << " earlier on rank " << r,
                 failure();
      done.insert(keyOf(e.action));
    }
  }

  // Run it: sends never block, a receive waits for its send. Computations
  // take their cost, transfers theirs in flight.
  ScheduleTable actions(p);
  for (auto [r, entries] : llvm::enumerate(table))
    for (const Entry &e : entries)
      actions[r].push_back(e.action);
  SmallVector<size_t> blockedAt;
  ScheduleStats stats =
      timeSchedule(actions, getTiming(schedule, split), &blockedAt);
  if (!blockedAt.empty()) {
    std::string blocked;
    Operation *firstBlocked = nullptr;
    for (int64_t r = 0; r < p; ++r) {
      if (blockedAt[r] == table[r].size())
        continue;
      const Entry &e = table[r][blockedAt[r]];
      if (!firstBlocked)
        firstBlocked = e.op;
      blocked += (blocked.empty() ? "" : "; ") + ("rank " + std::to_string(r)) +
                 " waits at " + describe(e.action);
    }
    return firstBlocked->emitError()
               << context << "the schedule deadlocks: " << blocked,
           failure();
  }
  return stats;
}

/// The timing inputs of `schedule`'s attributes.
static ScheduleTiming getTiming(dist::ScheduleOp schedule, bool split) {
  ScheduleTiming timing;
  timing.costs = schedule.getCosts().value_or(ArrayRef<double>());
  timing.stashBytes = schedule.getStashBytes().value_or(ArrayRef<int64_t>());
  timing.baseBytes = schedule.getBaseBytes().value_or(ArrayRef<int64_t>());
  timing.transferCosts =
      schedule.getTransferCosts().value_or(ArrayRef<double>());
  timing.transferBytes =
      schedule.getTransferBytes().value_or(ArrayRef<int64_t>());
  timing.deferredCosts =
      schedule.getDeferredCosts().value_or(ArrayRef<double>());
  timing.split = split;
  return timing;
}

FailureOr<ScheduleStats>
pcc::pipeline::verifySchedule(dist::ScheduleOp schedule) {
  int64_t p = schedule.getNumRanks(), m = schedule.getNumMicrobatches();
  SmallVector<dist::RankOp> rankOps = schedule.getRankOps();
  SmallVector<SmallVector<Entry>> table(p);
  for (auto [r, rankOp] : llvm::enumerate(rankOps))
    for (Operation &op : rankOp.getBody().front())
      table[r].push_back({&op, getScheduleAction(&op)});
  if (schedule.getNumSteps() == 1)
    return checkTable(schedule, table, m, "");

  // Two steps without a flush: a run calls the fill, the steady call once
  // per step but the last, and the drain. Each sequence of calls a run can
  // make is checked as a schedule, with the microbatches of later steps
  // numbered on: the fill and the drain (one step), the fill, the steady
  // call and the drain (two), and the steady call twice (three).
  SmallVector<int64_t> leads = llvm::map_to_vector(
      rankOps, [](dist::RankOp r) { return r.getNumLead(); });
  auto calls = [&](ArrayRef<std::pair<Window, int64_t>> sequence) {
    SmallVector<SmallVector<Entry>> joined(p);
    for (auto [window, shift] : sequence)
      for (auto [r, entries] : llvm::enumerate(table))
        for (const Entry &e : entries)
          if (getWindow(e.action, m, leads) == window) {
            Entry moved = e;
            moved.action.microbatch += shift;
            joined[r].push_back(moved);
          }
    return joined;
  };
  if (failed(checkTable(schedule,
                        calls({{Window::Fill, 0}, {Window::Drain, -m}}), m,
                        "a step from the fill and the drain: ")) ||
      failed(checkTable(
          schedule,
          calls({{Window::Fill, 0}, {Window::Steady, 0}, {Window::Drain, 0}}),
          2 * m,
          "two steps from the fill, a steady call and "
          "the drain: ")))
    return failure();
  FailureOr<ScheduleStats> three =
      checkTable(schedule,
                 calls({{Window::Fill, 0},
                        {Window::Steady, 0},
                        {Window::Steady, m},
                        {Window::Drain, m}}),
                 3 * m,
                 "three steps from the fill, two steady calls and the "
                 "drain: ");
  if (failed(three))
    return failure();
  // Once the pipeline is full, a step is a steady call; it is timed alone,
  // every rank starting it at once (the update at the end of each step
  // lines the ranks up where it reduces across them). The memory peaks
  // are those of the run of three steps.
  SmallVector<SmallVector<Entry>> steady = calls({{Window::Steady, 0}});
  ScheduleTable actions(p);
  bool split = false;
  for (auto [r, entries] : llvm::enumerate(steady))
    for (const Entry &e : entries) {
      actions[r].push_back(e.action);
      split |=
          e.action.kind == Action::Kind::Compute && e.action.phase == Phase::W;
    }
  ScheduleStats stats = timeSchedule(actions, getTiming(schedule, split));
  for (auto [rs, run] : llvm::zip(stats.ranks, three->ranks)) {
    rs.peakStashed = run.peakStashed;
    rs.peakBytes = run.peakBytes;
    rs.peakSendBytes = run.peakSendBytes;
  }
  return stats;
}

ScheduleStats pcc::pipeline::timeSchedule(const ScheduleTable &table,
                                          const ScheduleTiming &timing,
                                          SmallVectorImpl<size_t> *blockedAt) {
  int64_t p = table.size();
  auto cost = [&](const Action &a) {
    auto of = [&](Phase phase) {
      return timing.costs.empty() ? 1.0
                                  : timing.costs[3 * a.stage + unsigned(phase)];
    };
    // Unless split off, the weight gradient is part of B.
    if (a.phase == Phase::B && !timing.split)
      return of(Phase::B) + of(Phase::W);
    return of(a.phase);
  };
  Phase releases = timing.split ? Phase::W : Phase::B;

  ScheduleStats stats;
  stats.ranks.resize(p);
  stats.hasBytes = !timing.stashBytes.empty() || !timing.baseBytes.empty() ||
                   !timing.transferBytes.empty();
  SmallVector<size_t> next(p, 0);
  SmallVector<double> clock(p, 0.0);
  SmallVector<int64_t> stashed(p, 0), bytes(p, 0), peakBytes(p, 0);
  // Bytes of sends started and not completed, per rank.
  SmallVector<int64_t> sending(p, 0);
  std::map<std::pair<int64_t, int64_t>, SmallVector<double>> sendTimes;
  std::map<std::pair<int64_t, int64_t>, size_t> received;
  // Per channel, each send's index in its rank's transfers; per rank, its
  // open sends by what they carry: channel and position on it.
  std::map<std::pair<int64_t, int64_t>, SmallVector<size_t>> sendSpans;
  SmallVector<std::map<std::tuple<unsigned, int64_t, int64_t>,
                       std::pair<int64_t, size_t>>>
      open(p);
  // A transfer's entry in transfer_costs and transfer_bytes.
  auto transferIndex = [](const Action &a) {
    return 2 * a.stage + (a.payload == Payload::Act ? 0 : 1);
  };
  auto sendBytes = [&](const Action &a) -> int64_t {
    return timing.transferBytes.empty()
               ? 0
               : timing.transferBytes[transferIndex(a)];
  };
  auto note = [&](int64_t r) {
    peakBytes[r] = std::max(peakBytes[r], bytes[r] + sending[r]);
    stats.ranks[r].peakSendBytes =
        std::max(stats.ranks[r].peakSendBytes, sending[r]);
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t r = 0; r < p; ++r) {
      RankStats &rs = stats.ranks[r];
      for (; next[r] < table[r].size(); ++next[r], progress = true) {
        const Action &a = table[r][next[r]];
        if (a.kind == Action::Kind::Recv) {
          SmallVector<double> &arrivals = sendTimes[{a.peer, r}];
          size_t &index = received[{a.peer, r}];
          if (index >= arrivals.size())
            break;
          clock[r] = std::max(clock[r], arrivals[index]);
          size_t span = sendSpans[{a.peer, r}][index++];
          stats.ranks[a.peer].taken[span] = clock[r];
          continue;
        }
        if (a.kind == Action::Kind::Wait) {
          // Until the send's receive has run.
          auto it = open[r].find({unsigned(a.payload), a.stage, a.microbatch});
          if (it == open[r].end())
            continue; // no such send: the verifier reported it
          auto [peer, position] = it->second;
          if (received[{r, peer}] <= position)
            break;
          size_t span = sendSpans[{r, peer}][position];
          clock[r] = std::max(clock[r], rs.taken[span]);
          sending[r] -= sendBytes(a);
          open[r].erase(it);
          continue;
        }
        if (a.kind == Action::Kind::Send) {
          // Sends do not hold the rank up; what they carry arrives later.
          double flight = timing.transferCosts.empty()
                              ? 0.0
                              : timing.transferCosts[transferIndex(a)];
          SmallVector<double> &sent = sendTimes[{r, a.peer}];
          open[r][{unsigned(a.payload), a.stage, a.microbatch}] = {a.peer,
                                                                   sent.size()};
          sendSpans[{r, a.peer}].push_back(rs.transfers.size());
          sent.push_back(clock[r] + flight);
          rs.transfers.push_back({a, clock[r], clock[r] + flight});
          rs.taken.push_back(0);
          sending[r] += sendBytes(a);
          note(r);
          continue;
        }
        double t = cost(a);
        rs.timeline.push_back({a, clock[r], clock[r] + t});
        clock[r] += t;
        rs.busy += t;
        int64_t chunk =
            timing.stashBytes.empty() ? 0 : timing.stashBytes[a.stage];
        if (a.phase == Phase::F) {
          rs.peakStashed = std::max(rs.peakStashed, ++stashed[r]);
          bytes[r] += chunk;
          note(r);
        } else if (a.phase == releases) {
          --stashed[r];
          bytes[r] -= chunk;
        }
      }
    }
  }
  bool deadlocked = false;
  for (int64_t r = 0; r < p; ++r)
    deadlocked |= next[r] != table[r].size();
  if (deadlocked && blockedAt)
    blockedAt->assign(next.begin(), next.end());

  // Each rank's deferred products, once a step for each stage it ran.
  if (!timing.deferredCosts.empty())
    for (int64_t r = 0; r < p; ++r) {
      llvm::SmallSetVector<int64_t, 4> stages;
      for (const Action &a : table[r])
        if (a.kind == Action::Kind::Compute)
          stages.insert(a.stage);
      RankStats &rs = stats.ranks[r];
      rs.deferredStart = clock[r];
      for (int64_t s : stages)
        clock[r] += timing.deferredCosts[s];
      rs.deferredEnd = clock[r];
      rs.busy += rs.deferredEnd - rs.deferredStart;
    }

  double busy = 0;
  for (int64_t r = 0; r < p; ++r) {
    stats.makespan = std::max(stats.makespan, clock[r]);
    busy += stats.ranks[r].busy;
    stats.ranks[r].peakBytes =
        (timing.baseBytes.empty() ? 0 : timing.baseBytes[r]) + peakBytes[r];
  }
  if (stats.makespan > 0)
    stats.bubbleFraction = 1.0 - busy / (double(p) * stats.makespan);
  return stats;
}

void pcc::pipeline::annotateSchedule(dist::ScheduleOp schedule,
                                     const ScheduleStats &stats) {
  Builder b(schedule.getContext());
  schedule.setBubbleFractionAttr(b.getF64FloatAttr(stats.bubbleFraction));
  schedule.setMakespanAttr(b.getF64FloatAttr(stats.makespan));
  for (auto [rank, rs] : llvm::zip(schedule.getRankOps(), stats.ranks)) {
    rank.setBusyAttr(b.getF64FloatAttr(rs.busy));
    rank.setPeakStashedAttr(b.getI64IntegerAttr(rs.peakStashed));
    if (stats.hasBytes)
      rank.setPeakBytesAttr(b.getI64IntegerAttr(rs.peakBytes));
  }
}

namespace {
struct VerifySchedulePass : pcc::impl::VerifyScheduleBase<VerifySchedulePass> {
  using VerifyScheduleBase::VerifyScheduleBase;

  void runOnOperation() override {
    bool ok = true;
    for (auto schedule : getOperation().getOps<dist::ScheduleOp>()) {
      FailureOr<ScheduleStats> stats = verifySchedule(schedule);
      if (failed(stats)) {
        ok = false;
        continue;
      }
      annotateSchedule(schedule, *stats);
      if (remarks)
        remark(schedule, *stats);
    }
    if (!ok)
      signalPassFailure();
  }

  static void remark(dist::ScheduleOp schedule, const ScheduleStats &stats) {
    // Diagnostics take no format objects: compose the text first.
    std::string text;
    llvm::raw_string_ostream os(text);
    auto count = [&](int64_t n, StringRef one, StringRef many) {
      os << n << " " << (n == 1 ? one : many);
    };
    os << "schedule @" << schedule.getSymName() << " (" << schedule.getKind()
       << ", ";
    count(schedule.getNumRanks(), "rank", "ranks");
    os << ", ";
    count(schedule.getNumMicrobatches(), "microbatch", "microbatches");
    if (schedule.getNumStages() != schedule.getNumRanks()) {
      os << ", ";
      count(schedule.getNumStages(), "virtual stage", "virtual stages");
    }
    if (schedule.getNumSteps() > 1)
      os << " a step, no flush between steps): once full, a step's";
    else
      os << "):";
    os << " bubble " << llvm::format("%.1f%%", 100 * stats.bubbleFraction)
       << ", makespan " << llvm::format("%g", stats.makespan);
    for (auto [r, rs] : llvm::enumerate(stats.ranks)) {
      os << "; rank " << r << " busy " << llvm::format("%g", rs.busy)
         << ", peak " << rs.peakStashed << " stashed";
      if (stats.hasBytes)
        os << ", " << rs.peakBytes << " bytes";
    }
    schedule.emitRemark(text);
  }
};
} // namespace
