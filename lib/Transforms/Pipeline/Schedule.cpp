//===- Schedule.cpp - Generates static pipeline schedules -----------------===//
//
// Each kind first decides the order of the computations on every rank; the
// transfers follow from that order alone: a receive goes right before the
// computation that reads it (receives block, so as late as possible) and a
// send right after the computation that produces it (sends do not block, so
// as early as possible).
//
// - gpipe: every forward, then every backward.
// - 1f1b (PipeDream-Flush): rank r runs min(p - r - 1, m) warm-up forwards,
//   then one forward and one backward while forwards remain, then the
//   remaining backwards. At most p - r microbatches are in flight on rank r.
// - interleaved (Megatron-LM's interleaved 1F1B): the same three phases
//   over the m * v (chunk, microbatch) steps of a rank, taken in groups of p
//   microbatches per chunk; warm-up is (p - r - 1) * 2 + (v - 1) * p steps.
//   (Megatron runs every forward first when m == p, for the sake of how it
//   batches its transfers; the formula's order is sound there too and keeps
//   fewer microbatches in flight, so it is used throughout.)
// - zb-h1 (zero bubble H1, Qi et al. 2023): B and W split; a list scheduler
//   over simulated time runs, on each idle rank, the next B whose gradient
//   has arrived, else the next F if its input has arrived and fewer than
//   p - r microbatches are in flight (1F1B's peak), else the oldest pending
//   W. The W's fill the bubbles 1F1B leaves.
// - 2bw (PipeDream-2BW): 1F1B over two steps' microbatches without a flush
//   between them, rank r leading by its p - r - 1 warm-up forwards: while
//   one step's backwards drain, the next step's forwards fill the pipeline.
//   The table covers the two steps (`steps = 2`); the lowering cuts it into
//   the fill, the steady call and the drain (getWindow). It needs at least
//   p - 1 microbatches, so that a rank's lead stays within the next step.
// - chimera (Li and Hoefler, 2021): two pipelines over the same ranks, the
//   even microbatches down (stage s on rank s) and the odd ones up (stage s
//   on rank p - 1 - s), so that every rank holds two stages and one
//   pipeline's work fills the other's bubbles. Two list schedulers over
//   simulated time, as zb-h1's, make candidate orders, and the one the
//   timed simulation (with the spec's costs and transfers) finishes first
//   is kept, the one with fewer microbatches in flight at a tie:
//   * forwards first, as Chimera's basic units run them: an idle rank runs
//     the oldest forward whose input has arrived while its stage has fewer
//     than 1F1B's p - s chunks in flight there, else the oldest backward
//     whose gradient has arrived. A rank's two stages, one of each
//     pipeline, so keep p + 1 chunks at most. Once the pipelines are full,
//     the next microbatches' forwards fill the gaps between the backwards,
//     as Chimera's concatenated units do; this one wins from p = 8 on (8
//     ranks, 16 microbatches, unit costs: 20.0% against 1F1B's 30.4%). A
//     cap per stage cannot deadlock: within one pipeline, the ranks after
//     a full one hold only microbatches it holds too, and the oldest of
//     them can always move on; a cap shared by a rank's two stages can
//     (each rank full of the microbatches of the pipeline the other must
//     move on first).
//   * backwards first, with no cap: the oldest backward whose gradient has
//     arrived, else the oldest forward whose input has. It wins at a few
//     microbatches per rank (6 ranks, 8 microbatches: 20% against 22.6%).
//   It needs an even number of ranks and of microbatches.
//
//===----------------------------------------------------------------------===//

#include "pcc/Transforms/Pipeline/Schedule.h"

#include "pcc/Dialect/Dist/IR/DistNames.h"

#include <deque>
#include <limits>
#include <map>

using namespace mlir;
using namespace pcc;
using namespace pcc::pipeline;
using dist::Payload;
using dist::Phase;

ArrayRef<StringRef> pcc::pipeline::getScheduleKinds() {
  static const StringRef kinds[] = {"gpipe", "1f1b", "interleaved",
                                    "zb-h1", "2bw",  "chimera"};
  return kinds;
}

bool pcc::pipeline::splitsBackward(StringRef kind) { return kind == "zb-h1"; }

namespace {
/// One computation: a phase of a virtual stage on a microbatch.
struct Step {
  Phase phase;
  int64_t stage;
  int64_t microbatch;
};

using StepOrder = SmallVector<SmallVector<Step>>;
} // namespace

/// A rank's order with `warmup` forwards first, then forwards and backwards
/// alternating (forward first) while forwards remain, then the remaining
/// backwards. `forwards` and `backwards` are the rank's steps in order.
static SmallVector<Step> oneForwardOneBackward(ArrayRef<Step> forwards,
                                               ArrayRef<Step> backwards,
                                               int64_t warmup) {
  SmallVector<Step> order(forwards.take_front(warmup));
  int64_t steady = forwards.size() - warmup;
  for (int64_t i = 0; i < steady; ++i) {
    order.push_back(forwards[warmup + i]);
    order.push_back(backwards[i]);
  }
  llvm::append_range(order, backwards.drop_front(steady));
  return order;
}

/// gpipe and 1f1b: one stage per rank, microbatches in order.
static StepOrder flushOrder(const ScheduleSpec &spec, bool gpipe) {
  int64_t p = spec.ranks, m = spec.microbatches;
  StepOrder order(p);
  for (int64_t r = 0; r < p; ++r) {
    SmallVector<Step> forwards, backwards;
    for (int64_t k = 0; k < m; ++k) {
      forwards.push_back({Phase::F, r, k});
      backwards.push_back({Phase::B, r, k});
    }
    int64_t warmup = gpipe ? m : std::min(p - r - 1, m);
    order[r] = oneForwardOneBackward(forwards, backwards, warmup);
  }
  return order;
}

/// Megatron's interleaved order. Step k of a rank belongs to chunk
/// (k mod p*v) / p (counted from the last chunk for backwards) and to
/// microbatch (k / (p*v)) * p + k mod p: p microbatches through one chunk,
/// then the same p through the next, and so on.
static StepOrder interleavedOrder(const ScheduleSpec &spec) {
  int64_t p = spec.ranks, m = spec.microbatches, v = spec.virtualStages;
  int64_t steps = m * v, group = p * v;
  StepOrder order(p);
  for (int64_t r = 0; r < p; ++r) {
    SmallVector<Step> forwards, backwards;
    for (int64_t k = 0; k < steps; ++k) {
      int64_t chunk = (k % group) / p;
      int64_t microbatch = (k / group) * p + k % p;
      forwards.push_back({Phase::F, chunk * p + r, microbatch});
      backwards.push_back({Phase::B, (v - 1 - chunk) * p + r, microbatch});
    }
    int64_t warmup = std::min((p - r - 1) * 2 + (v - 1) * p, steps);
    order[r] = oneForwardOneBackward(forwards, backwards, warmup);
  }
  return order;
}

/// Runs a list scheduler over simulated time for `ranks` ranks: while some
/// rank is not `finished`, every rank idle at the earliest time one is free
/// (`freeAt`, which `act` moves on when it runs an action) is offered that
/// time, in rank order, until none acts (zero-cost actions can enable
/// others at the same time); the ranks still idle then wait for the next
/// action to end anywhere, since only an end delivers an input or a
/// gradient. Fails when some rank waits and no action is running.
static LogicalResult
runListScheduler(int64_t ranks, llvm::function_ref<bool(int64_t)> finished,
                 llvm::function_ref<double &(int64_t)> freeAt,
                 llvm::function_ref<bool(int64_t, double)> act) {
  constexpr double kNotYet = std::numeric_limits<double>::infinity();
  auto all = llvm::seq<int64_t>(0, ranks);
  while (llvm::any_of(all, [&](int64_t r) { return !finished(r); })) {
    double now = kNotYet;
    for (int64_t r : all)
      if (!finished(r))
        now = std::min(now, freeAt(r));
    for (bool acted = true; acted;) {
      acted = false;
      for (int64_t r : all)
        if (!finished(r) && freeAt(r) <= now && act(r, now))
          acted = true;
    }
    double next = kNotYet;
    for (int64_t r : all)
      if (freeAt(r) > now)
        next = std::min(next, freeAt(r));
    for (int64_t r : all) {
      if (finished(r) || freeAt(r) > now)
        continue;
      if (next == kNotYet)
        return failure();
      freeAt(r) = next;
    }
  }
  return success();
}

/// Zero bubble H1 by list scheduling over simulated time (one stage per
/// rank). Deterministic: ranks act in rank order at equal times and each
/// phase takes its microbatches in order.
static StepOrder zeroBubbleH1Order(const ScheduleSpec &spec) {
  int64_t p = spec.ranks, m = spec.microbatches;
  auto cost = [&](Phase phase, int64_t stage) {
    return spec.costs.empty() ? 1.0 : spec.costs[3 * stage + unsigned(phase)];
  };
  constexpr double kNotYet = std::numeric_limits<double>::infinity();
  struct RankState {
    double free = 0; ///< when the rank's last action ends
    int64_t nextF = 0, nextB = 0, doneW = 0;
    std::deque<int64_t> pendingW; ///< microbatches whose B ran, W not
    bool finished(int64_t microbatches) const { return doneW == microbatches; }
  };
  SmallVector<RankState> ranks(p);
  // End times of each stage's F and B per microbatch.
  SmallVector<SmallVector<double>> fEnd(p, SmallVector<double>(m, kNotYet));
  SmallVector<SmallVector<double>> bEnd(p, SmallVector<double>(m, kNotYet));
  StepOrder order(p);

  // Runs the action the priorities pick for rank r at time t, if any.
  auto act = [&](int64_t r, double t) -> bool {
    RankState &s = ranks[r];
    auto run = [&](Phase phase, int64_t k) {
      s.free = t + cost(phase, r);
      order[r].push_back({phase, r, k});
    };
    // B first: it frees the ranks before this one.
    if (s.nextB < s.nextF) {
      int64_t k = s.nextB;
      double gradient = r == p - 1 ? fEnd[r][k] : bEnd[r + 1][k];
      if (gradient <= t) {
        run(Phase::B, k);
        bEnd[r][k] = s.free;
        s.pendingW.push_back(k);
        ++s.nextB;
        return true;
      }
    }
    // Then F, within 1F1B's memory: at most p - r microbatches in flight.
    if (s.nextF < m && s.nextF - s.doneW < p - r) {
      int64_t k = s.nextF;
      double input = r == 0 ? 0.0 : fEnd[r - 1][k];
      if (input <= t) {
        run(Phase::F, k);
        fEnd[r][k] = s.free;
        ++s.nextF;
        return true;
      }
    }
    // W fills what would be a bubble.
    if (!s.pendingW.empty()) {
      run(Phase::W, s.pendingW.front());
      s.pendingW.pop_front();
      ++s.doneW;
      return true;
    }
    return false;
  };

  // B of the last stage and W need nothing from elsewhere, and F of the
  // first stage has its input, so a waiting rank always has another rank
  // ahead of it.
  [[maybe_unused]] LogicalResult ran = runListScheduler(
      p, [&](int64_t r) { return ranks[r].finished(m); },
      [&](int64_t r) -> double & { return ranks[r].free; }, act);
  assert(succeeded(ran) && "zb-h1 list scheduler stalled");
  return order;
}

/// Chimera's two pipelines by list scheduling over simulated time (one
/// stage per rank each way), forwards first with each stage s within p - s
/// chunks in flight on its rank, or backwards first with no cap.
/// Deterministic: ranks act in rank order at equal times, and each takes
/// the oldest microbatch first. None when the ranks stall (not seen: see
/// the file's comment; the caller keeps the other order then).
static std::optional<StepOrder> chimeraOrder(const ScheduleSpec &spec,
                                             bool forwardsFirst) {
  int64_t p = spec.ranks, m = spec.microbatches;
  auto rankOf = [&](int64_t stage, int64_t k) {
    return dist::getPipelineRank(stage, k, p, 2);
  };
  auto cost = [&](Phase phase, int64_t stage) {
    if (spec.costs.empty())
      return phase == Phase::F ? 1.0 : 2.0;
    double c = spec.costs[3 * stage + unsigned(phase)];
    // Backwards are not split: B takes the weight gradient's time too.
    return phase == Phase::B ? c + spec.costs[3 * stage + 2] : c;
  };
  constexpr double kNotYet = std::numeric_limits<double>::infinity();
  SmallVector<SmallVector<double>> fEnd(p, SmallVector<double>(m, kNotYet));
  SmallVector<SmallVector<double>> bEnd(p, SmallVector<double>(m, kNotYet));
  // Per rank: when its last action ends, its (stage, microbatch) chunks in
  // microbatch order, which of them ran F and B, how many ran both, and
  // per stage how many ran F and not B.
  struct RankState {
    double free = 0;
    SmallVector<std::pair<int64_t, int64_t>> chunks;
    SmallVector<bool> forwarded, backwarded;
    int64_t done = 0;
    SmallVector<int64_t> inFlight;
  };
  SmallVector<RankState, 0> ranks(p);
  for (int64_t k = 0; k < m; ++k)
    for (int64_t s = 0; s < p; ++s)
      ranks[rankOf(s, k)].chunks.push_back({s, k});
  for (RankState &r : ranks) {
    r.forwarded.assign(r.chunks.size(), false);
    r.backwarded.assign(r.chunks.size(), false);
    r.inFlight.assign(p, 0);
  }
  StepOrder order(p);
  auto act = [&](int64_t r, double t) -> bool {
    RankState &rs = ranks[r];
    auto run = [&](Phase phase, size_t i) {
      auto [s, k] = rs.chunks[i];
      rs.free = t + cost(phase, s);
      order[r].push_back({phase, s, k});
      (phase == Phase::F ? fEnd : bEnd)[s][k] = rs.free;
      if (phase == Phase::F) {
        rs.forwarded[i] = true;
        ++rs.inFlight[s];
      } else {
        rs.backwarded[i] = true;
        --rs.inFlight[s];
        ++rs.done;
      }
    };
    // The oldest backward whose gradient has arrived: it frees memory and
    // the ranks before it.
    auto backward = [&] {
      for (size_t i = 0; i < rs.chunks.size(); ++i) {
        auto [s, k] = rs.chunks[i];
        if (!rs.forwarded[i] || rs.backwarded[i] || fEnd[s][k] > t)
          continue;
        double gradient = s == p - 1 ? fEnd[s][k] : bEnd[s + 1][k];
        if (gradient <= t) {
          run(Phase::B, i);
          return true;
        }
      }
      return false;
    };
    // The oldest forward whose input has arrived, within its stage's cap.
    auto forward = [&] {
      for (size_t i = 0; i < rs.chunks.size(); ++i) {
        auto [s, k] = rs.chunks[i];
        if (rs.forwarded[i] || (forwardsFirst && rs.inFlight[s] >= p - s))
          continue;
        if (s == 0 || fEnd[s - 1][k] <= t) {
          run(Phase::F, i);
          return true;
        }
      }
      return false;
    };
    return forwardsFirst ? forward() || backward() : backward() || forward();
  };
  auto finished = [&](const RankState &rs) {
    return rs.done == int64_t(rs.chunks.size());
  };
  if (failed(runListScheduler(
          p, [&](int64_t r) { return finished(ranks[r]); },
          [&](int64_t r) -> double & { return ranks[r].free; }, act)))
    return std::nullopt;
  return order;
}

/// Transfers between two ranks match in order (NCCL's sends have no tags),
/// so each rank sends to a peer in the order the peer receives: a send
/// whose data is ready before an earlier one the peer takes first waits
/// right after that one. Where the pipelines cross (chimera), one rank's
/// activations and gradients to the same peer can be made in another
/// order than they are taken; the others' orders agree already.
static void orderSendsAsReceived(ScheduleTable &table) {
  using Key = std::tuple<unsigned, int64_t, int64_t>; // payload, stage, mb
  // Per (sender, receiver): the receiver's order.
  std::map<std::pair<int64_t, int64_t>, std::deque<Key>> expected;
  for (auto [r, actions] : llvm::enumerate(table))
    for (const Action &a : actions)
      if (a.kind == Action::Kind::Recv)
        expected[{a.peer, int64_t(r)}].push_back(
            {unsigned(a.payload), a.stage, a.microbatch});
  for (auto [r, actions] : llvm::enumerate(table)) {
    SmallVector<Action> placed;
    std::map<int64_t, SmallVector<Action>> ready; // by peer
    for (const Action &a : actions) {
      if (a.kind != Action::Kind::Send) {
        placed.push_back(a);
        continue;
      }
      ready[a.peer].push_back(a);
      std::deque<Key> &next = expected[{int64_t(r), a.peer}];
      // Every send the peer takes next that is ready goes now.
      for (bool sent = true; sent && !next.empty();) {
        sent = false;
        SmallVector<Action> &held = ready[a.peer];
        for (auto it = held.begin(); it != held.end(); ++it)
          if (Key{unsigned(it->payload), it->stage, it->microbatch} ==
              next.front()) {
            placed.push_back(*it);
            held.erase(it);
            next.pop_front();
            sent = true;
            break;
          }
      }
    }
    // A send no receive takes stays (the verifier reports it).
    for (auto &[peer, held] : ready)
      llvm::append_range(placed, held);
    actions = std::move(placed);
  }
}

/// Adds the transfers around the computations of `order`, where `rankOf`
/// gives the rank of a stage's computation on a microbatch.
static ScheduleTable
withTransfers(const StepOrder &order, int64_t stages,
              llvm::function_ref<int64_t(int64_t, int64_t)> rankOf) {
  ScheduleTable table(order.size());
  for (auto [r, steps] : llvm::enumerate(order)) {
    SmallVector<Action> &actions = table[r];
    int64_t rank = r;
    for (const Step &s : steps) {
      // The neighbour this computation reads from and writes to: forwards
      // read stage - 1 and feed stage + 1, backwards the other way round.
      bool forward = s.phase == Phase::F, backward = s.phase == Phase::B;
      int64_t from = forward ? s.stage - 1 : s.stage + 1;
      int64_t to = forward ? s.stage + 1 : s.stage - 1;
      Payload in = forward ? Payload::Act : Payload::Grad;
      bool moves = forward || backward;
      int64_t k = s.microbatch;
      if (moves && from >= 0 && from < stages && rankOf(from, k) != rank)
        actions.push_back(
            Action::transfer(Action::Kind::Recv, in, from, k, rankOf(from, k)));
      actions.push_back(Action::compute(s.phase, s.stage, k));
      if (moves && to >= 0 && to < stages && rankOf(to, k) != rank)
        actions.push_back(Action::transfer(Action::Kind::Send, in, s.stage, k,
                                           rankOf(to, k)));
    }
  }
  orderSendsAsReceived(table);
  return table;
}

/// Adds each send's wait before the rank's first computation that starts,
/// in the simulation, once the send's receive has run: the wait then costs
/// nothing, and the sent buffer is free from there.
static void placeSendWaits(ScheduleTable &table, const ScheduleSpec &spec) {
  ScheduleTiming timing = getScheduleTiming(spec, table);
  SmallVector<size_t> blockedAt;
  ScheduleStats stats = timeSchedule(table, timing, &blockedAt);
  if (!blockedAt.empty())
    return; // the verifier reports it
  for (auto [r, actions] : llvm::enumerate(table)) {
    const RankStats &rs = stats.ranks[r];
    SmallVector<Action> placed;
    SmallVector<std::pair<Action, double>> open; // send, its receive's time
    size_t computed = 0, sent = 0;
    for (const Action &a : actions) {
      if (a.kind == Action::Kind::Compute) {
        double start = rs.timeline[computed++].start;
        auto done = [&](const std::pair<Action, double> &s) {
          return s.second <= start;
        };
        for (const auto &[send, taken] : open)
          if (taken <= start)
            placed.push_back(Action::transfer(Action::Kind::Wait, send.payload,
                                              send.stage, send.microbatch,
                                              send.peer));
        llvm::erase_if(open, done);
      }
      placed.push_back(a);
      if (a.kind == Action::Kind::Send) {
        open.push_back({a, rs.taken[sent]});
        ++sent;
      }
    }
    actions = std::move(placed);
  }
}

std::optional<std::string>
pcc::pipeline::getScheduleShapeError(const ScheduleSpec &spec) {
  int64_t p = spec.ranks, m = spec.microbatches, v = spec.virtualStages;
  std::string message;
  llvm::raw_string_ostream os(message);
  if (!llvm::is_contained(getScheduleKinds(), spec.kind)) {
    os << "unknown pipeline schedule '" << spec.kind << "'; expected ";
    ArrayRef<StringRef> kinds = getScheduleKinds();
    llvm::interleave(
        kinds.drop_back(), [&](StringRef k) { os << k; }, [&] { os << ", "; });
    os << " or " << kinds.back();
    return message;
  }
  bool interleaved = spec.kind == "interleaved";
  if (p < 1)
    os << "a pipeline schedule needs at least 1 rank; got " << p;
  else if (m < 1)
    os << "a pipeline schedule needs at least 1 microbatch; got " << m;
  else if (v < 1)
    os << "a pipeline schedule needs at least 1 virtual stage per rank; got "
       << v;
  else if (!interleaved && v > 1)
    os << "the " << spec.kind << " schedule has 1 virtual stage per rank; got "
       << v << " (interleaved takes more)";
  else if (interleaved && v < 2)
    os << "the interleaved schedule needs at least 2 virtual stages per "
          "rank; got "
       << v << " (1f1b takes 1)";
  else if (interleaved && m % p != 0)
    os << "the interleaved schedule needs the microbatches to be a multiple "
          "of the pipeline ranks ("
       << p << "); got " << m;
  else if (spec.kind == "chimera" && (p % 2 || m % 2))
    os << "the chimera schedule needs an even number of pipeline ranks and "
          "of microbatches (one pipeline each way); got "
       << p << " ranks and " << m << " microbatches";
  else if (spec.kind == "2bw" && m < p - 1)
    os << "the 2bw schedule needs at least " << p - 1 << " microbatches for "
       << p
       << " pipeline ranks (the first rank's forwards run that far into the "
          "next step); got "
       << m;
  if (message.empty())
    return std::nullopt;
  return message;
}

FailureOr<ScheduleTable>
pcc::pipeline::generateSchedule(const ScheduleSpec &spec,
                                function_ref<InFlightDiagnostic()> emitError) {
  int64_t p = spec.ranks, m = spec.microbatches, v = spec.virtualStages;
  if (std::optional<std::string> error = getScheduleShapeError(spec))
    return emitError() << *error;
  bool interleaved = spec.kind == "interleaved";
  int64_t stages = p * v;
  // Times: `perStage` of them for each virtual stage, none negative.
  auto checkTimes = [&](ArrayRef<double> times, StringRef name,
                        int64_t perStage, StringRef what) -> LogicalResult {
    if (times.empty())
      return success();
    if (int64_t(times.size()) != perStage * stages)
      return emitError() << name << " has " << times.size() << " values; "
                         << "expected " << what << " for each of the "
                         << stages << " virtual stages (" << perStage * stages
                         << ")";
    for (double c : times)
      if (!(c >= 0) || !std::isfinite(c))
        return emitError() << name
                           << " must be finite and non-negative; got " << c;
    return success();
  };
  if (failed(checkTimes(spec.costs, "costs", 3, "F, B and W times")) ||
      failed(checkTimes(spec.transferCosts, "transfer costs", 2, "two")) ||
      failed(checkTimes(spec.deferredCosts, "deferred costs", 1, "one")))
    return failure();
  if (!spec.transferBytes.empty() &&
      int64_t(spec.transferBytes.size()) != 2 * stages)
    return emitError() << "transfer bytes has " << spec.transferBytes.size()
                       << " values; expected two for each of the " << stages
                       << " virtual stages (" << 2 * stages << ")";
  if (!spec.stashBytes.empty() && int64_t(spec.stashBytes.size()) != stages)
    return emitError() << "stash bytes has " << spec.stashBytes.size()
                       << " values; expected one per virtual stage (" << stages
                       << ")";
  if (!spec.baseBytes.empty() && int64_t(spec.baseBytes.size()) != p)
    return emitError() << "base bytes has " << spec.baseBytes.size()
                       << " values; expected one per rank (" << p << ")";
  auto negative = [](int64_t b) { return b < 0; };
  if (llvm::any_of(spec.stashBytes, negative) ||
      llvm::any_of(spec.baseBytes, negative) ||
      llvm::any_of(spec.transferBytes, negative))
    return emitError() << "bytes must be non-negative";

  StepOrder order;
  if (spec.kind == "gpipe" || spec.kind == "1f1b")
    order = flushOrder(spec, /*gpipe=*/spec.kind == "gpipe");
  else if (spec.kind == "2bw") {
    // Two steps' microbatches, one after the other: 1F1B without a flush.
    ScheduleSpec twoSteps = spec;
    twoSteps.microbatches = 2 * m;
    order = flushOrder(twoSteps, /*gpipe=*/false);
  } else if (interleaved)
    order = interleavedOrder(spec);
  else if (spec.kind != "chimera")
    order = zeroBubbleH1Order(spec);
  int64_t pipelines = getPipelines(spec);
  auto tableOf = [&](const StepOrder &order) {
    return withTransfers(order, stages, [&](int64_t stage, int64_t k) {
      return dist::getPipelineRank(stage, k, p, pipelines);
    });
  };
  ScheduleTable table;
  if (spec.kind == "chimera") {
    // The candidate the timed simulation finishes first; at a tie, the one
    // with the fewest chunks in flight on its fullest rank.
    std::optional<std::pair<double, int64_t>> best;
    for (bool forwardsFirst : {true, false}) {
      std::optional<StepOrder> candidate = chimeraOrder(spec, forwardsFirst);
      if (!candidate) {
        assert(forwardsFirst && "chimera's uncapped scheduler stalled");
        continue;
      }
      ScheduleTable t = tableOf(*candidate);
      ScheduleStats stats = timeSchedule(t, getScheduleTiming(spec, t));
      int64_t peak = 0;
      for (const RankStats &rs : stats.ranks)
        peak = std::max(peak, rs.peakStashed);
      std::pair<double, int64_t> score{stats.makespan, peak};
      if (!best || score < *best) {
        best = score;
        table = std::move(t);
      }
    }
  } else {
    table = tableOf(order);
  }
  placeSendWaits(table, spec);
  return table;
}

FailureOr<dist::ScheduleOp>
pcc::pipeline::buildSchedule(OpBuilder &builder, Location loc, StringRef name,
                             const ScheduleSpec &spec,
                             function_ref<InFlightDiagnostic()> emitError) {
  FailureOr<ScheduleTable> table = generateSchedule(spec, emitError);
  if (failed(table))
    return failure();
  SmallVector<int64_t> leads = getLeads(spec);
  // Absent when the spec has none.
  auto f64s = [&](ArrayRef<double> v) {
    return v.empty() ? DenseF64ArrayAttr() : builder.getDenseF64ArrayAttr(v);
  };
  auto i64s = [&](ArrayRef<int64_t> v) {
    return v.empty() ? DenseI64ArrayAttr() : builder.getDenseI64ArrayAttr(v);
  };
  auto schedule = dist::ScheduleOp::create(
      builder, loc, name, spec.kind, spec.microbatches, spec.virtualStages,
      spec.ranks, f64s(spec.costs), i64s(spec.stashBytes), i64s(spec.baseBytes),
      f64s(spec.transferCosts), i64s(spec.transferBytes),
      f64s(spec.deferredCosts),
      /*bubble_fraction=*/nullptr,
      /*makespan=*/nullptr,
      /*steps=*/leads.empty() ? IntegerAttr() : builder.getI64IntegerAttr(2),
      /*pipelines=*/getPipelines(spec) == 1
          ? IntegerAttr()
          : builder.getI64IntegerAttr(getPipelines(spec)));
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(&schedule.getBody().emplaceBlock());
  for (auto [r, actions] : llvm::enumerate(*table)) {
    auto rank = dist::RankOp::create(
        builder, loc, r, nullptr, nullptr, nullptr,
        leads.empty() ? IntegerAttr() : builder.getI64IntegerAttr(leads[r]));
    OpBuilder::InsertionGuard rankGuard(builder);
    builder.setInsertionPointToStart(&rank.getBody().emplaceBlock());
    for (const Action &a : actions) {
      if (a.kind == Action::Kind::Compute) {
        dist::ComputeOp::create(builder, loc, a.phase, a.stage, a.microbatch);
        continue;
      }
      auto direction = a.kind == Action::Kind::Send   ? dist::Direction::Send
                       : a.kind == Action::Kind::Recv ? dist::Direction::Recv
                                                      : dist::Direction::Wait;
      dist::TransferOp::create(builder, loc, direction, a.payload, a.stage,
                               a.microbatch, a.peer);
    }
  }
  return schedule;
}

/// Fills `into`, if still empty, from `func`'s attribute `name` when it
/// has `size` values (any number when `size` is 0).
template <typename AttrT, typename T>
static void fromStep(func::FuncOp func, StringRef name, int64_t size,
                     SmallVectorImpl<T> &into) {
  auto attr = func->getAttrOfType<AttrT>(name);
  if (into.empty() && attr && (size == 0 || int64_t(attr.size()) == size))
    into.assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
}

void pipeline::fillSpecFromStep(func::FuncOp func, ScheduleSpec &spec) {
  int64_t stages = spec.ranks * spec.virtualStages;
  fromStep<DenseF64ArrayAttr>(func, dist::kStageCostsAttr, 0, spec.costs);
  fromStep<DenseI64ArrayAttr>(func, dist::kStashBytesAttr, 0, spec.stashBytes);
  fromStep<DenseI64ArrayAttr>(func, dist::kBaseBytesAttr, spec.ranks,
                              spec.baseBytes);
  fromStep<DenseF64ArrayAttr>(func, dist::kTransferCostsAttr, 2 * stages,
                              spec.transferCosts);
  fromStep<DenseI64ArrayAttr>(func, dist::kTransferBytesAttr, 2 * stages,
                              spec.transferBytes);
  fromStep<DenseF64ArrayAttr>(func, dist::kDeferredCostsAttr, stages,
                              spec.deferredCosts);
}

ScheduleTiming pipeline::getScheduleTiming(const ScheduleSpec &spec,
                                           const ScheduleTable &table) {
  ScheduleTiming timing;
  timing.costs = spec.costs;
  timing.transferCosts = spec.transferCosts;
  timing.stashBytes = spec.stashBytes;
  timing.baseBytes = spec.baseBytes;
  timing.transferBytes = spec.transferBytes;
  timing.deferredCosts = spec.deferredCosts;
  for (const SmallVector<Action> &actions : table)
    for (const Action &a : actions)
      timing.split |= a.kind == Action::Kind::Compute && a.phase == Phase::W;
  return timing;
}

SmallVector<int64_t> pipeline::getLeads(const ScheduleSpec &spec) {
  if (spec.kind != "2bw")
    return {};
  return llvm::map_to_vector(llvm::seq<int64_t>(0, spec.ranks), [&](int64_t r) {
    return std::min(spec.ranks - r - 1, spec.microbatches);
  });
}

Window pipeline::getWindow(const Action &a, int64_t microbatches,
                           ArrayRef<int64_t> leads) {
  // A transfer goes with the computation that sends it, on its stage.
  bool forward = a.kind == Action::Kind::Compute ? a.phase == Phase::F
                                                 : a.payload == Payload::Act;
  int64_t k = a.microbatch;
  if (!forward)
    return k < microbatches ? Window::Steady : Window::Drain;
  int64_t lead = leads[a.stage];
  if (k < lead)
    return Window::Fill;
  return k < microbatches + lead ? Window::Steady : Window::Drain;
}

ScheduleTable pipeline::getWindowTable(const ScheduleTable &table,
                                       Window window, int64_t microbatches,
                                       ArrayRef<int64_t> leads) {
  ScheduleTable part(table.size());
  for (auto [r, actions] : llvm::enumerate(table))
    for (const Action &a : actions)
      if (getWindow(a, microbatches, leads) == window)
        part[r].push_back(a);
  return part;
}

int64_t pipeline::getPipelines(const ScheduleSpec &spec) {
  return spec.kind == "chimera" ? 2 : 1;
}
