//===- ShardStrategy.cpp - Megatron's tensor-parallel plan, by structure --===//
//
// Decides how each parameter is split over the tensor-parallel axis, from
// the graph's structure alone. Parameters are decided in the order the
// step first uses them; for each, every way to split it (each dimension
// that tp divides, and the groups a fused projection needs) is tried by
// walking the forward with the parameters decided so far and the later
// ones taking what their first use wants, and the split that forces no
// all-gather of an activation and communicates least wins. A parameter
// stays whole only when every split forces an all-gather. The trials start
// at the parameter's first use and end where their layouts rejoin, and
// the walk that finds the next parameter resumes where it stopped, so
// deciding costs about one walk of the forward, not one per parameter.
//
// That search finds Megatron's plan without knowing about layers: the
// first matmul of a pair sees a whole activation and splits its columns;
// the activation then arrives split along the second matmul's contraction,
// which splits its rows and leaves partial sums, reduced once where the
// residual stream needs them whole. Attention heads follow the columns
// through reshapes (compound factors); a fused QKV projection, whose output
// is cut into equal parts, splits with one group per part; a table looked
// up by token ids splits its rows (the vocabulary) and the LM head that
// shares or mirrors it its columns; norms stay whole because their
// normalized dimension must. `--shard REGEX=col|row|rep` overrides it.
//
//===----------------------------------------------------------------------===//

#include "ShardingSolver.h"

#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Regex.h"

namespace pcc {
#define GEN_PASS_DEF_SHARDSTRATEGY
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;
using namespace pcc::sharding;

namespace {
struct Override {
  std::string pattern;
  llvm::Regex regex;
  std::string how; ///< col, row or rep
};

struct Score {
  int64_t conflicts;
  double bytes;
  bool operator<(const Score &o) const {
    return std::make_pair(conflicts, bytes) <
           std::make_pair(o.conflicts, o.bytes);
  }
};
} // namespace

static std::string divisorsOf(int64_t n) {
  std::string s;
  for (int64_t d = 2; d <= n && d <= 64; ++d)
    if (n % d == 0)
      s += (s.empty() ? "" : ", ") + std::to_string(d);
  return s.empty() ? "none" : s;
}

static LogicalResult parseOverrides(Operation *op, StringRef spec,
                                    SmallVectorImpl<Override> &out) {
  SmallVector<StringRef> items;
  spec.split(items, ';', -1, false);
  for (StringRef item : items) {
    auto [pattern, how] = item.rsplit('=');
    if (pattern.empty() || !llvm::is_contained({"col", "row", "rep"}, how))
      return op->emitError("--shard '")
             << item << "': expected REGEX=col, REGEX=row or REGEX=rep";
    Override o{pattern.str(), llvm::Regex(("^(" + pattern + ")$").str()),
               how.str()};
    std::string error;
    if (!o.regex.isValid(error))
      return op->emitError("--shard '") << item << "': " << error;
    out.push_back(std::move(o));
  }
  return success();
}

namespace {
struct ShardStrategyPass : pcc::impl::ShardStrategyBase<ShardStrategyPass> {
  using ShardStrategyBase::ShardStrategyBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp < 1) {
      module.emitError("tp must be at least 1, got ") << int64_t(tp);
      return signalPassFailure();
    }
    SmallVector<Override> overrides;
    if (failed(parseOverrides(module, shard, overrides)))
      return signalPassFailure();
    if (tp == 1)
      return;
    FailureOr<dist::MeshOp> mesh = dist::getOrAddMeshAxis(module, kTpAxis, tp);
    if (failed(mesh))
      return signalPassFailure();
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(plan(func, overrides)))
        return signalPassFailure();
  }

  LogicalResult plan(func::FuncOp func, ArrayRef<Override> overrides);
  /// Decides every root in one walk (roots never used stay whole).
  LogicalResult decideAll(Solver &solver, ArrayRef<Override> overrides);
  LogicalResult decide(Solver &solver, Value root, Operation *firstUse,
                       unsigned operand, ArrayRef<Override> overrides);
  /// Refuses a degree that splits no weight but the padded vocabulary
  /// tables, naming the first contraction weight and the degrees that
  /// would split it.
  LogicalResult checkSomethingSplits(func::FuncOp func, Solver &solver);

  /// Set while trying other degrees for a diagnostic: padded tables, padded
  /// for this degree, stay whole.
  bool trial = false;
  /// The layouts of the parameters that an earlier step of the module
  /// decided, by name: a program's steps share their parameters (a training
  /// step and its evaluation, a prefill and its decode), so the later
  /// steps take them as they are.
  llvm::StringMap<Layout> shared;
};
} // namespace

LogicalResult ShardStrategyPass::plan(func::FuncOp func,
                                      ArrayRef<Override> overrides) {
  Solver solver(func, kTpAxis, tp);
  solver.setSequenceParallel(sequenceParallel);
  // Layouts the IR already states win: they are the user's.
  if (failed(solver.seedStatedLayouts()))
    return failure();
  if (failed(decideAll(solver, overrides)))
    return failure();
  if (overrides.empty() && failed(checkSomethingSplits(func, solver)))
    return failure();
  // Record the decisions where the roots live.
  MLIRContext *ctx = func.getContext();
  for (Value root : solver.getRoots()) {
    Layout l = *solver.getSeed(root);
    auto rank = cast<RankedTensorType>(root.getType()).getRank();
    if (remarks) {
      auto diag = emitRemark(root.getLoc())
                  << "tp: '" << solver.getRootName(root) << "' ";
      if (l.isSplit()) {
        diag << "split along dimension " << l.dim;
        if (l.groups > 1)
          diag << " in " << l.groups << " groups";
      } else {
        diag << "whole";
      }
    }
    shared.try_emplace(solver.getRootName(root), l);
    if (!l.isSplit())
      continue;
    if (auto arg = dyn_cast<BlockArgument>(root))
      func.setArgAttr(arg.getArgNumber(), kShardingAttr,
                      toAttr(ctx, kTpAxis, l, rank,
                             func.getArgAttrOfType<dist::ShardingAttr>(
                                 arg.getArgNumber(), kShardingAttr)));
    else
      root.getDefiningOp()->setAttr(
          kShardingAttr,
          toAttr(ctx, kTpAxis, l, rank,
                 root.getDefiningOp()->getAttrOfType<dist::ShardingAttr>(
                     kShardingAttr)));
  }
  return success();
}

LogicalResult ShardStrategyPass::decideAll(Solver &solver,
                                           ArrayRef<Override> overrides) {
  // One walk over the forward, stopping at each parameter's first use.
  solver.startWalk();
  while (true) {
    Solver::Outcome o = solver.walkToUndecided();
    if (!o.stoppedAt)
      break;
    if (failed(decide(solver, o.stoppedAt, o.stopOp, o.stopOperand, overrides)))
      return failure();
  }
  // Roots never used stay whole.
  for (Value root : solver.getRoots())
    if (!solver.getSeed(root))
      solver.setSeed(root, Layout());
  // An override that names no parameter is a typo, not a layout.
  if (!trial)
    for (const Override &o : overrides)
      if (llvm::none_of(solver.getRoots(), [&](Value root) {
            return o.regex.match(solver.getRootName(root));
          }))
        solver.getFunc().emitWarning()
            << "--shard '" << o.pattern << "=" << o.how
            << "' matches no parameter's name";
  return success();
}

/// The first use of `v` in its block, and the operand it is there.
static std::pair<Operation *, unsigned> firstUseOf(Value v) {
  std::pair<Operation *, unsigned> first{nullptr, 0};
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (!first.first || user->isBeforeInBlock(first.first))
      first = {user, use.getOperandNumber()};
  }
  return first;
}

LogicalResult ShardStrategyPass::checkSomethingSplits(func::FuncOp func,
                                                      Solver &solver) {
  Value weight;
  for (Value root : solver.getRoots()) {
    if (solver.getRootAttr(root, dist::kPaddingAttr))
      continue;
    if (solver.getSeed(root)->isSplit())
      return success();
    auto [user, operand] = firstUseOf(root);
    auto diff = dyn_cast_or_null<DifferentiableOpInterface>(user);
    if (!weight && diff &&
        diff.getOperandRole(operand) == OperandRole::Contraction)
      weight = root;
  }
  if (!weight)
    return success();
  // The degrees that would split it: the strategy tried at each.
  SmallVector<int64_t> splitting;
  {
    ScopedDiagnosticHandler quiet(func.getContext(),
                                  [](Diagnostic &) { return success(); });
    trial = true;
    for (int64_t d = 2; d <= 16; ++d) {
      Solver other(func, kTpAxis, d);
      if (d != tp && succeeded(other.seedStatedLayouts()) &&
          succeeded(decideAll(other, {})) && other.getSeed(weight)->isSplit())
        splitting.push_back(d);
    }
    trial = false;
  }
  auto shape = cast<RankedTensorType>(weight.getType()).getShape();
  InFlightDiagnostic diag =
      firstUseOf(weight).first->emitError("--tp ")
      << int64_t(tp)
      << " splits none of the model's weights (a padded vocabulary at "
         "most), so each rank would do all of the blocks' work: '"
      << solver.getRootName(weight) << "' ("
      << llvm::make_range(shape.begin(), shape.end()) << ") ";
  if (splitting.empty()) {
    diag << "splits at no --tp from 2 to 16";
  } else {
    diag << "splits at --tp ";
    llvm::interleave(
        splitting, [&](int64_t d) { diag << d; }, [&] { diag << ", "; });
  }
  diag << "; or ask for a layout with --shard";
  return diag;
}

LogicalResult ShardStrategyPass::decide(Solver &solver, Value root,
                                        Operation *firstUse, unsigned operand,
                                        ArrayRef<Override> overrides) {
  StringRef name = solver.getRootName(root);
  ArrayRef<int64_t> shape = cast<RankedTensorType>(root.getType()).getShape();
  int64_t shards = solver.getShards();
  const Override *user = nullptr;
  for (const Override &o : overrides)
    if (o.regex.match(name)) {
      user = &o;
      break;
    }
  if (auto it = shared.find(name); it != shared.end() && !trial) {
    solver.decide(root, it->second);
    return success();
  }
  // A padded vocabulary was padded to split along it.
  Attribute padding = solver.getRootAttr(root, dist::kPaddingAttr);
  if (auto pad = dyn_cast_or_null<DenseI64ArrayAttr>(padding); pad && !trial) {
    solver.decide(root, Layout::split(pad[0]));
    return success();
  }
  if (user && user->how == "rep") {
    solver.decide(root, Layout());
    return success();
  }

  // Staying whole, what the first use wants given the other operands (a
  // bias joining its projection's groups), then every dimension tp divides.
  SmallVector<Layout> candidates{Layout()};
  if (Layout wanted = solver.wantedAtStop(root); wanted.isSplit())
    candidates.push_back(wanted);
  // Only the operands of contractions and lookups choose a split of their
  // own; a scale or bias takes the one its op wants (a column-parallel
  // layer's bias joins it, a norm's scale stays whole). Output (column)
  // dimensions come before reduced ones: on equal cost the split that
  // leaves no partial sums wins.
  auto diff = dyn_cast<DifferentiableOpInterface>(firstUse);
  OperandRole role =
      diff ? diff.getOperandRole(operand) : OperandRole::Contraction;
  bool choosesOwn = role == OperandRole::Contraction ||
                    role == OperandRole::Lookup || (user && user->how != "rep");
  for (bool columns : {true, false})
    if (choosesOwn)
      for (auto [d, extent] : llvm::enumerate(shape)) {
        Layout l = Layout::split(d);
        auto kind = solver.kindAtFirstUse(root, l);
        bool isColumn = kind && *kind == ShardingRule::FactorKind::Parallel;
        if (extent % shards == 0 && isColumn == columns &&
            !llvm::is_contained(candidates, l))
          candidates.push_back(l);
      }
  // Grouped splits that the trials' obstacles suggest join the candidates,
  // and the trials run again with them.
  SmallVector<Solver::Outcome> outcomes;
  SmallVector<Obstacle> headObstacles;
  while (outcomes.size() < candidates.size()) {
    outcomes = solver.compareAtStop(root, candidates);
    headObstacles.clear();
    for (size_t i = 1; i < outcomes.size(); ++i) {
      Layout l = candidates[i];
      std::optional<ShardingRule::FactorKind> kind =
          solver.kindAtFirstUse(root, l);
      for (const Obstacle &ob : outcomes[i].obstacles) {
        // A fused projection cut into equal parts needs one group per part.
        if (ob.suggestedGroups > 1 && l.groups == 1 &&
            shape[l.dim] % (ob.suggestedGroups * shards) == 0) {
          Layout g = Layout::split(l.dim, ob.suggestedGroups);
          if (!llvm::is_contained(candidates, g))
            candidates.push_back(g);
        }
        if (ob.atReshape && kind == ShardingRule::FactorKind::Parallel &&
            shards % ob.extent != 0)
          headObstacles.push_back(ob);
      }
    }
  }
  Score wholeScore{outcomes[0].conflicts, outcomes[0].commBytes};
  std::optional<Layout> best;
  Score bestScore{0, 0};
  // For `--shard ... col|row`: the best split of the asked-for kind, even
  // if it forces all-gathers.
  std::optional<Layout> asked;
  Score askedScore{0, 0};
  for (size_t i = 1; i < candidates.size(); ++i) {
    Layout l = candidates[i];
    const Solver::Outcome &o = outcomes[i];
    std::optional<ShardingRule::FactorKind> kind =
        solver.kindAtFirstUse(root, l);
    Score s{o.conflicts, o.commBytes};
    if (user && kind) {
      bool fits =
          *kind == (user->how == "col" ? ShardingRule::FactorKind::Parallel
                                       : ShardingRule::FactorKind::Reduction);
      if (fits && (!asked || s < askedScore)) {
        asked = l;
        askedScore = s;
      }
    }
    if (o.conflicts > wholeScore.conflicts)
      continue;
    if (!best || s < bestScore) {
      best = l;
      bestScore = s;
    }
  }
  if (user) {
    if (!asked)
      return firstUse->emitError("--shard '")
             << user->pattern << "=" << user->how << "': '" << name << "' ("
             << shape.size() << "-d, extents "
             << llvm::make_range(shape.begin(), shape.end())
             << ") has no dimension that tp " << shards
             << " divides and that its first use treats as a "
             << (user->how == "col" ? "column (output)" : "row (reduced)")
             << " dimension";
    solver.decide(root, *asked);
    return success();
  }
  // A split that attention heads cannot carry: tp must divide the heads
  // (or, for grouped-query KV heads, be divisible by them).
  if ((!best || !solver.kindAtFirstUse(root, *best) ||
       *solver.kindAtFirstUse(root, *best) !=
           ShardingRule::FactorKind::Parallel) &&
      !headObstacles.empty()) {
    const Obstacle &ob = headObstacles.front();
    return ob.op->emitError("cannot split dimension of extent ")
           << ob.extent << " (attention heads of '" << name << "') over tp "
           << shards << ": tp must divide it (tp = " << divisorsOf(ob.extent)
           << ") or be a multiple of it";
  }
  solver.decide(root, best ? *best : Layout());
  return success();
}
