//===- ShardingSolver.cpp - Tensor layouts over one mesh axis -------------===//

#include "ShardingSolver.h"

#include "pcc/Dialect/Graph/IR/GraphTraining.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;
using namespace pcc::sharding;

using FactorKind = ShardingRule::FactorKind;
using TensorFactors = ShardingRule::TensorFactors;

int64_t pcc::sharding::byteSize(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return 0;
  int64_t bits = t.getElementType().getIntOrFloatBitWidth();
  return t.getNumElements() * std::max<int64_t>(bits / 8, 1);
}

namespace {
struct FactorShard {
  int64_t factor, groups;
  bool operator==(const FactorShard &o) const {
    return factor == o.factor && groups == o.groups;
  }
};
} // namespace

static bool splittable(const ShardingRule &rule, int64_t f) {
  FactorKind k = rule.factors[f].kind;
  return k == FactorKind::Parallel || k == FactorKind::Reduction;
}

/// The factor that a split of `layout.dim` splits: the dimension's factors
/// run major to minor, so groups G fall on the factor whose preceding
/// factors' product P divides G, with G / P groups inside it.
static std::optional<FactorShard> factorOf(const ShardingRule &rule,
                                           const TensorFactors &tensor,
                                           Layout layout, int64_t shards) {
  if (!layout.isSplit() || size_t(layout.dim) >= tensor.size())
    return std::nullopt;
  int64_t before = 1;
  for (int64_t f : tensor[layout.dim]) {
    int64_t size = rule.factors[f].size;
    if (layout.groups % before == 0) {
      int64_t g = layout.groups / before;
      if (size % g == 0 && (size / g) % shards == 0)
        return FactorShard{f, g};
    }
    before *= size;
  }
  return std::nullopt;
}

/// The layout of a tensor when factor `fs` is split: split along the
/// dimension holding the factor, whole when none does.
static Layout project(const ShardingRule &rule, const TensorFactors &tensor,
                      FactorShard fs) {
  for (size_t d = 0; d < tensor.size(); ++d) {
    int64_t before = 1;
    for (int64_t f : tensor[d]) {
      if (f == fs.factor)
        return Layout::split(d, before * fs.groups);
      before *= rule.factors[f].size;
    }
  }
  return Layout();
}

static bool contains(const TensorFactors &tensor, int64_t factor) {
  for (const auto &dim : tensor)
    if (llvm::is_contained(dim, factor))
      return true;
  return false;
}

/// The plan of `op` when `fs` is split, or nullopt when the rule does not
/// allow it.
static std::optional<OpPlan> planFor(const ShardingRule &rule,
                                     std::optional<FactorShard> fs,
                                     Operation *op = nullptr) {
  OpPlan plan;
  plan.operands.resize(rule.operandFactors.size());
  plan.results.resize(rule.resultFactors.size());
  if (!fs)
    return plan;
  plan.factor = fs->factor;
  const auto &factor = rule.factors[fs->factor];
  // A mean of integers truncates: the mean of the ranks' means is not the
  // mean.
  if (op && factor.kind == FactorKind::Reduction &&
      factor.reduction == ReductionKind::Mean &&
      llvm::any_of(op->getResultTypes(), [](Type t) {
        return !isa<FloatType>(getElementTypeOrSelf(t));
      }))
    return std::nullopt;
  for (auto [i, t] : llvm::enumerate(rule.operandFactors))
    plan.operands[i] = project(rule, t, *fs);
  for (auto [i, t] : llvm::enumerate(rule.resultFactors)) {
    if (factor.kind == FactorKind::Reduction) {
      plan.results[i] = Layout::partialOf(factor.reduction);
      continue;
    }
    // A parallel factor missing from a result would leave each rank with
    // a different, incomplete value.
    if (!contains(t, fs->factor))
      return std::nullopt;
    plan.results[i] = project(rule, t, *fs);
  }
  return plan;
}

std::pair<int64_t, int64_t>
pcc::sharding::findSplitFactor(const ShardingRule &rule, const OpPlan &plan,
                               int64_t shards) {
  auto tryList = [&](ArrayRef<TensorFactors> tensors,
                     ArrayRef<Layout> ls) -> std::optional<FactorShard> {
    for (auto [t, l] : llvm::zip(tensors, ls))
      if (auto fs = factorOf(rule, t, l, shards))
        return fs;
    return std::nullopt;
  };
  std::optional<FactorShard> fs = tryList(rule.operandFactors, plan.operands);
  if (!fs)
    fs = tryList(rule.resultFactors, plan.results);
  if (!fs)
    return {-1, 1};
  return {fs->factor, fs->groups};
}

static dist::ReductionKind toDist(ReductionKind kind) {
  switch (kind) {
  case ReductionKind::Sum:
    return dist::ReductionKind::Sum;
  case ReductionKind::Max:
    return dist::ReductionKind::Max;
  case ReductionKind::Min:
    return dist::ReductionKind::Min;
  case ReductionKind::Mean:
    return dist::ReductionKind::Mean;
  }
  llvm_unreachable("unknown reduction kind");
}

static ReductionKind fromDist(dist::ReductionKind kind) {
  switch (kind) {
  case dist::ReductionKind::Sum:
    return ReductionKind::Sum;
  case dist::ReductionKind::Max:
    return ReductionKind::Max;
  case dist::ReductionKind::Min:
    return ReductionKind::Min;
  case dist::ReductionKind::Mean:
    return ReductionKind::Mean;
  }
  llvm_unreachable("unknown reduction kind");
}

dist::ShardingAttr pcc::sharding::toAttr(MLIRContext *context, StringRef axis,
                                         Layout layout, int64_t rank,
                                         dist::ShardingAttr base) {
  Builder b(context);
  SmallVector<Attribute> dims;
  SmallVector<int64_t> groups(rank, 1);
  SmallVector<Attribute> partial;
  auto kind = dist::ReductionKind::Sum;
  if (base) {
    for (int64_t d = 0; d < rank; ++d)
      groups[d] = base.getDimGroups(d);
    if (ArrayAttr axes = base.getPartialAxes())
      for (Attribute a : axes)
        if (cast<StringAttr>(a).getValue() != axis)
          partial.push_back(a);
    kind = base.getPartialKind();
  }
  for (int64_t d = 0; d < rank; ++d) {
    SmallVector<Attribute> axes;
    if (base && d < int64_t(base.getDims().size()))
      for (Attribute a : cast<ArrayAttr>(base.getDims()[d]))
        if (cast<StringAttr>(a).getValue() != axis)
          axes.push_back(a);
    if (d == layout.dim) {
      axes.push_back(b.getStringAttr(axis));
      if (layout.groups != 1)
        groups[d] = layout.groups;
    }
    dims.push_back(b.getArrayAttr(axes));
  }
  if (layout.partial) {
    partial.push_back(b.getStringAttr(axis));
    kind = toDist(layout.kind);
  }
  bool grouped = llvm::any_of(groups, [](int64_t g) { return g != 1; });
  return dist::ShardingAttr::get(
      context, FlatSymbolRefAttr::get(context, kMeshName), b.getArrayAttr(dims),
      grouped ? b.getDenseI64ArrayAttr(groups) : DenseI64ArrayAttr(),
      partial.empty() ? ArrayAttr() : b.getArrayAttr(partial), kind);
}

FailureOr<Layout> pcc::sharding::fromAttr(dist::ShardingAttr attr,
                                          StringRef axis) {
  Layout l;
  for (unsigned d = 0; d < attr.getDims().size(); ++d) {
    if (!llvm::is_contained(attr.getDimAxes(d), axis))
      continue;
    if (l.isSplit())
      return failure();
    l.dim = d;
    l.groups = attr.getDimGroups(d);
  }
  if (ArrayAttr partial = attr.getPartialAxes()) {
    if (llvm::any_of(partial, [&](Attribute a) {
          return cast<StringAttr>(a).getValue() == axis;
        })) {
      if (l.isSplit())
        return failure();
      l.partial = true;
      l.kind = fromDist(attr.getPartialKind());
    }
  }
  return l;
}

bool pcc::sharding::namesAnyAxis(dist::ShardingAttr attr) {
  return attr.getPartialAxes() || llvm::any_of(attr.getDims(), [](Attribute d) {
           return !cast<ArrayAttr>(d).empty();
         });
}

bool pcc::sharding::namesAxis(dist::ShardingAttr attr, StringRef axis) {
  for (unsigned d = 0; d < attr.getDims().size(); ++d)
    if (llvm::is_contained(attr.getDimAxes(d), axis))
      return true;
  if (ArrayAttr partial = attr.getPartialAxes())
    return llvm::any_of(partial, [&](Attribute a) {
      return cast<StringAttr>(a).getValue() == axis;
    });
  return false;
}

//===----------------------------------------------------------------------===//
// Solver
//===----------------------------------------------------------------------===//

/// Whether `op` only moves its operand `index` (a reshape or transpose of
/// it): a root's such uses stay pending until a real one decides it.
static bool movesOperand(Operation *op, unsigned index) {
  auto diff = dyn_cast<DifferentiableOpInterface>(op);
  return op->getNumResults() == 1 && diff && isa<ShardingRuleOpInterface>(op) &&
         diff.getOperandRole(index) == OperandRole::Movement;
}

static bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType()) && t.getRank() > 0;
}

Solver::Solver(func::FuncOp func, StringRef axis, int64_t shards)
    : func(func), axis(axis.str()), shards(shards) {
  Block &body = func.getBody().front();
  llvm::DenseSet<unsigned> params, updated;
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    if (auto p = getStateIndex(func, i, kGradAttr)) {
      params.insert(*p);
      if (isFloatTensor(ret.getOperand(i)))
        gradientOf[ret.getOperand(i)] = body.getArgument(*p);
    }
    if (auto p = getStateIndex(func, i, kUpdateAttr))
      updated.insert(*p);
  }
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    // A KV cache is laid out like a parameter: split with the heads whose
    // keys and values it holds. So is state that the step only reads (the
    // parameters of an evaluation step, which another step trains).
    bool readOnly = func.getArgAttr(i, kStateAttr) &&
                    !func.getArgAttr(i, kStateOfAttr) && !updated.contains(i);
    if ((params.contains(i) || func.getArgAttr(i, kCacheAttr) || readOnly) &&
        isFloatTensor(arg)) {
      roots.push_back(arg);
      rootNames[arg] = getStateName(func, i);
    } else if (auto of = func.getArgAttrOfType<IntegerAttr>(i, kStateOfAttr)) {
      followRoot[arg] = body.getArgument(of.getInt());
      if (func.getArgAttr(i, kPreviousVersionAttr))
        versions.insert(arg);
    }
  }
  // Backward ops and everything computed from them (the optimizer) come
  // after the forward. The strategy's trials walk the forward proper: the
  // ops that the step's outputs other than state (the loss, the logits)
  // are computed from, which leaves out the optimizer's terms that read
  // state alone (a weight decay's p * lr * wd, a step counter's + 1).
  llvm::DenseSet<Operation *> afterForward;
  for (Operation &op : body) {
    stepOps.push_back(&op);
    bool after = op.hasAttr(kBackwardAttr) ||
                 llvm::any_of(op.getOperands(), [&](Value v) {
                   Operation *def = v.getDefiningOp();
                   return def && afterForward.contains(def);
                 });
    if (after)
      afterForward.insert(&op);
  }
  llvm::DenseSet<Operation *> forward;
  SmallVector<Operation *> work;
  auto reach = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (def && !afterForward.contains(def) && forward.insert(def).second)
      work.push_back(def);
  };
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (!getStateIndex(func, k, kUpdateAttr) &&
        !getStateIndex(func, k, kGradAttr))
      reach(v);
  while (!work.empty())
    for (Value v : work.pop_back_val()->getOperands())
      reach(v);
  for (Operation *op : stepOps)
    if (forward.contains(op) || op == ret)
      forwardOps.push_back(op);
  for (auto w : body.getOps<WeightOp>())
    if (isFloatTensor(w.getOutput())) {
      roots.push_back(w.getOutput());
      rootNames[w.getOutput()] = w.getName();
    }
  for (auto [i, op] : llvm::enumerate(forwardOps))
    forwardIndex[op] = i;
  // The movement ops that may carry a root before its first real use.
  for (Value root : roots) {
    SmallVector<Value> &chain = chains[root];
    SmallVector<Value> work{root};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (!forwardIndex.count(user) ||
            !movesOperand(user, use.getOperandNumber()) ||
            llvm::is_contained(chain, user->getResult(0)))
          continue;
        chain.push_back(user->getResult(0));
        work.push_back(user->getResult(0));
      }
    }
    llvm::sort(chain, [&](Value a, Value b) {
      return forwardIndex.lookup(a.getDefiningOp()) <
             forwardIndex.lookup(b.getDefiningOp());
    });
  }
  // The token ids: the first integer [batch, seq] argument.
  for (BlockArgument arg : body.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (t && t.getRank() == 2 && isa<IntegerType>(t.getElementType()) &&
        t.hasStaticShape()) {
      tokenExtents = {t.getDimSize(1), t.getDimSize(0) * t.getDimSize(1)};
      break;
    }
  }
  parameterLike.insert(roots.begin(), roots.end());
  for (auto &kv : followRoot)
    parameterLike.insert(kv.first);
  for (Operation &op : body) {
    auto diff = dyn_cast<DifferentiableOpInterface>(op);
    if (diff && op.getNumOperands() == 1 && op.getNumResults() == 1 &&
        diff.getOperandRole(0) == OperandRole::Movement &&
        parameterLike.contains(op.getOperand(0)))
      parameterLike.insert(op.getResult(0));
  }
}

Attribute Solver::getRootAttr(Value root, StringRef name) const {
  if (auto arg = dyn_cast<BlockArgument>(root))
    return mlir::func::FuncOp(func).getArgAttr(arg.getArgNumber(), name);
  return root.getDefiningOp()->getAttr(name);
}

LogicalResult Solver::seedStatedLayouts() {
  for (Value root : roots) {
    Attribute attr = getRootAttr(root, kShardingAttr);
    if (!attr)
      continue;
    auto sharding = dyn_cast<dist::ShardingAttr>(attr);
    // A layout over other axes only says nothing of this one; one naming
    // no axis at all says that the root is whole.
    if (sharding && !namesAxis(sharding, axis) && namesAnyAxis(sharding))
      continue;
    FailureOr<Layout> l =
        sharding ? fromAttr(sharding, axis) : FailureOr<Layout>(failure());
    if (failed(l) || l->partial)
      return emitError(root.getLoc(), "'")
             << getRootName(root) << "': " << kShardingAttr
             << " must split one dimension over '" << axis << "'";
    auto type = cast<RankedTensorType>(root.getType());
    if (l->isSplit() && (l->dim >= type.getRank() ||
                         type.getDimSize(l->dim) % (l->groups * shards) != 0))
      return emitError(root.getLoc(), "'")
             << getRootName(root) << "': dimension " << l->dim
             << " does not split into " << l->groups << " group(s) of "
             << shards << " blocks";
    setSeed(root, *l);
  }
  // Other arguments (graph inputs) whose layout names the axis.
  for (BlockArgument arg : func.getBody().front().getArguments()) {
    auto sharding = func.getArgAttrOfType<dist::ShardingAttr>(
        arg.getArgNumber(), kShardingAttr);
    if (!sharding || llvm::is_contained(roots, Value(arg)) ||
        followRoot.count(arg) || !namesAxis(sharding, axis))
      continue;
    FailureOr<Layout> l = fromAttr(sharding, axis);
    auto type = cast<RankedTensorType>(arg.getType());
    if (failed(l) || l->partial || !l->isSplit() ||
        type.getDimSize(l->dim) % (l->groups * shards) != 0)
      return emitError(arg.getLoc(), "argument ")
             << arg.getArgNumber() << ": " << kShardingAttr
             << " must split one dimension over '" << axis
             << "' into whole blocks";
    setArgumentLayout(arg, *l);
  }
  return success();
}

StringRef Solver::getRootName(Value root) const {
  return rootNames.lookup(root);
}

std::optional<Layout> Solver::getSeed(Value root) const {
  auto it = seeds.find(root);
  if (it == seeds.end())
    return std::nullopt;
  return it->second;
}

const ShardingRule &Solver::ruleOf(Operation *op) {
  auto it = rules.find(op);
  if (it != rules.end())
    return it->second;
  return rules[op] = cast<ShardingRuleOpInterface>(op).getShardingRule();
}

const OpPlan *Solver::getPlan(Operation *op) const {
  auto it = plans.find(op);
  return it == plans.end() ? nullptr : &it->second;
}

Value Solver::pendingRoot(Value v) const {
  if (Value r = pending.lookup(v))
    return r;
  return {};
}

Layout Solver::getLayout(Value v) {
  auto it = layouts.find(v);
  if (it != layouts.end())
    return it->second;
  if (pending.count(v))
    return resolve(v);
  return Layout();
}

std::optional<Layout> Solver::pushBack(Value v, Layout wanted) {
  Value root = pending.lookup(v);
  if (v == root || followRoot.lookup(v) == root)
    return wanted;
  if (wanted.isReplicated())
    return Layout();
  Operation *op = v.getDefiningOp();
  const ShardingRule &rule = ruleOf(op);
  std::optional<FactorShard> fs =
      factorOf(rule, rule.resultFactors[0], wanted, shards);
  if (!fs || !splittable(rule, fs->factor))
    return std::nullopt;
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    if (pending.lookup(operand) == root)
      return pushBack(operand, project(rule, rule.operandFactors[i], *fs));
  return std::nullopt;
}

Layout Solver::resolve(Value v) {
  Value root = pending.lookup(v);
  if (v == root || followRoot.lookup(v) == root) {
    Layout l = adopted.count(root) ? adopted.lookup(root) : seeds.lookup(root);
    setLayout(v, l);
    return l;
  }
  if (!adopted.count(root) && !seeds.count(root))
    return Layout();
  Operation *op = v.getDefiningOp();
  Outcome ignored;
  visit(op, Unseeded::Replicate, ignored);
  return layouts.lookup(v);
}

int64_t Solver::tokenDim(Value v) const {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || t.getRank() < 2 || !isa<FloatType>(t.getElementType()))
    return -1;
  int64_t d = t.getRank() - 2;
  // Tokens are a sequence or a batch of sequences: with token ids as an
  // input, a second-to-last dimension of another extent is not one (a
  // weight gradient's rows, a transposed activation's features).
  if (!tokenExtents.empty() &&
      !llvm::is_contained(tokenExtents, t.getDimSize(d)))
    return -1;
  return t.getDimSize(d) % shards == 0 ? d : -1;
}

void Solver::account(Value v, Layout from, Layout to, Outcome &out,
                     bool atReturn) {
  if (from == to)
    return;
  int64_t bytes = byteSize(v.getType());
  if (from.partial) {
    // A reduce-scatter moves half of an all-reduce's bytes.
    if (to.isSplit() && to.groups == 1 && from.kind == ReductionKind::Sum) {
      out.commBytes += bytes / 2;
      return;
    }
    out.commBytes += bytes;
    from = Layout();
  }
  if (from.isSplit() && from != to) {
    out.commBytes += bytes;
    // Sequence parallelism gathers its token splits by design; a parameter
    // gathered is a plan gone wrong.
    // (Tokens of [batch * seq, hidden] split by sequence are in batch
    // groups.)
    bool expected = sequenceParallel && !parameterLike.contains(v) &&
                    from.dim == tokenDim(v) && to.isReplicated();
    if (!atReturn && !expected)
      out.conflicts += parameterLike.contains(v) ? 1000 : 1;
  }
}

std::optional<ShardingRule::FactorKind> Solver::kindAtFirstUse(Value root,
                                                               Layout layout) {
  Value v = root;
  Layout l = layout;
  while (true) {
    Operation *user = nullptr;
    unsigned index = 0;
    for (OpOperand &use : v.getUses()) {
      if (!user || use.getOwner()->isBeforeInBlock(user)) {
        user = use.getOwner();
        index = use.getOperandNumber();
      }
    }
    if (!user || !isa<ShardingRuleOpInterface>(user))
      return std::nullopt;
    const ShardingRule &rule = ruleOf(user);
    std::optional<FactorShard> fs =
        factorOf(rule, rule.operandFactors[index], l, shards);
    if (!fs)
      return std::nullopt;
    auto diff = dyn_cast<DifferentiableOpInterface>(user);
    if (user->getNumResults() == 1 && diff &&
        diff.getOperandRole(index) == OperandRole::Movement) {
      l = project(rule, rule.resultFactors[0], *fs);
      v = user->getResult(0);
      continue;
    }
    return rule.factors[fs->factor].kind;
  }
}

void Solver::reset(Unseeded mode) {
  layouts.clear();
  plans.clear();
  pending.clear();
  adopted.clear();
  // Roots and optimizer state: their own layout, or pending.
  for (Value root : roots) {
    // ZeRO 3: the parameter itself is held split, as its state is; each
    // use gathers it.
    if (zeroStage >= 3)
      if (std::optional<Layout> split = stateLayout(root)) {
        layouts[root] = *split;
        continue;
      }
    if (seeds.count(root) || mode == Unseeded::Replicate) {
      layouts[root] = seeds.lookup(root);
      continue;
    }
    pending[root] = root;
  }
  for (auto [state, param] : followRoot) {
    if (pending.count(param))
      pending[state] = param;
    else if (versions.contains(state))
      // A version of the parameter (2bw's weights one update old), which
      // the forward reads: laid out as the parameter is.
      layouts[state] =
          layouts.count(param) ? layouts.lookup(param) : seeds.lookup(param);
    else
      layouts[state] = stateLayout(param).value_or(seeds.lookup(param));
  }
  for (auto [arg, l] : argumentLayouts)
    layouts[arg] = l;
}

Layout Solver::gradientLayout(Value param) {
  if (zeroStage >= 2)
    if (std::optional<Layout> split = stateLayout(param))
      return *split; // ZeRO 2: the gradient is never whole
  return getLayout(param);
}

std::optional<Layout> Solver::stateLayout(Value param) const {
  if (zeroStage < 1 || seeds.lookup(param) != Layout())
    return std::nullopt;
  auto t = cast<RankedTensorType>(param.getType());
  // A parameter another axis split (tensor parallelism, laid out before)
  // is this rank's block: its state splits that block further, along the
  // same dimension and in the same groups (a tensor splits one dimension),
  // or not at all.
  if (auto other = dyn_cast_or_null<dist::ShardingAttr>(
          getRootAttr(param, kShardingAttr)))
    for (unsigned d = 0; d < other.getDims().size(); ++d)
      if (!other.getDimAxes(d).empty()) {
        int64_t groups = other.getDimGroups(d);
        if (t.getDimSize(d) % (groups * shards) != 0)
          return std::nullopt;
        return Layout::split(d, groups);
      }
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.getDimSize(d) % shards == 0)
      return Layout::split(d);
  return std::nullopt;
}

Solver::Outcome Solver::run() {
  reset(Unseeded::Replicate);
  Outcome out;
  for (Operation *op : stepOps)
    if (step(*op, Unseeded::Replicate, /*forwardOnly=*/false, out) !=
        Step::Next)
      break;
  return out;
}

Solver::Step Solver::step(Operation &op, Unseeded mode, bool forwardOnly,
                          Outcome &out) {
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    visitReturn(ret, out, forwardOnly);
    return Step::End;
  }
  // Weight ops are roots (their layout is set above) or whole.
  if (isa<WeightOp>(op) && pending.count(op.getResult(0)))
    return Step::Next;
  if (isa<WeightOp, ConstantOp>(op)) {
    if (!layouts.count(op.getResult(0)))
      setLayout(op.getResult(0), Layout());
    return Step::Next;
  }
  if (mode != Unseeded::Replicate) {
    // Movement ops of a pending root stay pending; any other use of one
    // is where it gets decided.
    Value root;
    unsigned index = 0;
    for (auto [i, operand] : llvm::enumerate(op.getOperands()))
      if (Value r = pendingRoot(operand);
          r && !adopted.count(r) && !seeds.count(r)) {
        root = r;
        index = i;
        break;
      }
    if (root) {
      if (movesOperand(&op, index)) {
        setPending(op.getResult(0), root);
        return Step::Next;
      }
      if (mode == Unseeded::Stop) {
        out.stoppedAt = root;
        out.stopOp = &op;
        out.stopOperand = index;
        return Step::Stop;
      }
    }
  }
  visit(&op, mode, out);
  return Step::Next;
}

//===----------------------------------------------------------------------===//
// The strategy's incremental walk and its trials
//===----------------------------------------------------------------------===//

void Solver::setLayout(Value v, Layout l) {
  if (journaling) {
    Undo u{Undo::Kind::Layout, v};
    if (auto it = layouts.find(v); it != layouts.end()) {
      u.had = true;
      u.layout = it->second;
    }
    journal.push_back(std::move(u));
  }
  layouts[v] = l;
}

void Solver::setPlan(Operation *op, OpPlan plan) {
  if (journaling) {
    Undo u{Undo::Kind::Plan, Value(), op};
    if (auto it = plans.find(op); it != plans.end()) {
      u.had = true;
      u.plan = it->second;
    }
    journal.push_back(std::move(u));
  }
  plans[op] = std::move(plan);
}

void Solver::setPending(Value v, Value root) {
  if (journaling) {
    Undo u{Undo::Kind::Pending, v};
    if (auto it = pending.find(v); it != pending.end()) {
      u.had = true;
      u.root = it->second;
    }
    journal.push_back(std::move(u));
  }
  pending[v] = root;
}

void Solver::setAdopted(Value root, Layout l) {
  if (journaling) {
    Undo u{Undo::Kind::Adopted, root};
    if (auto it = adopted.find(root); it != adopted.end()) {
      u.had = true;
      u.layout = it->second;
    }
    journal.push_back(std::move(u));
  }
  adopted[root] = l;
}

void Solver::rollback(size_t mark) {
  while (journal.size() > mark) {
    Undo u = journal.pop_back_val();
    switch (u.kind) {
    case Undo::Kind::Layout:
      if (u.had)
        layouts[u.value] = u.layout;
      else
        layouts.erase(u.value);
      break;
    case Undo::Kind::Plan:
      if (u.had)
        plans[u.op] = std::move(u.plan);
      else
        plans.erase(u.op);
      break;
    case Undo::Kind::Pending:
      if (u.had)
        pending[u.value] = u.root;
      else
        pending.erase(u.value);
      break;
    case Undo::Kind::Adopted:
      if (u.had)
        adopted[u.value] = u.layout;
      else
        adopted.erase(u.value);
      break;
    }
  }
}

size_t Solver::lastUse(Value v) {
  if (auto it = lastUses.find(v); it != lastUses.end())
    return it->second;
  size_t last = 0;
  if (Operation *def = v.getDefiningOp())
    last = forwardIndex.lookup(def);
  for (Operation *user : v.getUsers())
    if (auto it = forwardIndex.find(user); it != forwardIndex.end())
      last = std::max(last, it->second);
  if (auto chain = chains.find(v); chain != chains.end())
    for (Value c : chain->second)
      last = std::max(last, lastUse(c));
  return lastUses[v] = last;
}

void Solver::startWalk() {
  reset(Unseeded::Stop);
  cursor = 0;
  walkOut = Outcome();
}

Solver::Outcome Solver::walkToUndecided() {
  for (; cursor < forwardOps.size(); ++cursor) {
    Step s = step(*forwardOps[cursor], Unseeded::Stop, /*forwardOnly=*/true,
                  walkOut);
    if (s == Step::Stop) {
      Outcome stopped = walkOut;
      walkOut.stoppedAt = Value();
      walkOut.stopOp = nullptr;
      return stopped;
    }
    if (s == Step::End)
      break;
  }
  cursor = forwardOps.size();
  return walkOut;
}

void Solver::visitChain(Value root, Outcome &out) {
  setLayout(root, seeds.lookup(root));
  size_t at = cursor;
  for (Value v : chains.lookup(root)) {
    Operation *def = v.getDefiningOp();
    if (forwardIndex.lookup(def) >= at)
      break;
    if (pending.lookup(v) == root && !plans.count(def))
      visit(def, Unseeded::Replicate, out);
  }
}

void Solver::decide(Value root, Layout layout) {
  setSeed(root, layout);
  visitChain(root, walkOut);
}

Layout Solver::wantedAtStop(Value root) {
  assert(cursor < forwardOps.size() && "the walk did not stop");
  journaling = true;
  Outcome ignored;
  visit(forwardOps[cursor], Unseeded::Adopt, ignored);
  Layout wanted = getLayout(root);
  rollback(0);
  journaling = false;
  return wanted;
}

namespace {
/// What one step of a trial wrote that later steps can read: layouts of
/// values and of the roots it decided.
struct StepWrites {
  SmallVector<std::pair<Value, Layout>> writes;
  int64_t conflicts = 0;
  double bytes = 0;
  size_t obstacles = 0;
};
} // namespace

SmallVector<Solver::Outcome>
Solver::compareAtStop(Value root, ArrayRef<Layout> candidates) {
  assert(cursor < forwardOps.size() && "the walk did not stop");
  size_t start = cursor;
  // Trials walk to a horizon; where some have not rejoined the first by
  // then, they walk again to one four times as far.
  for (size_t horizon = 64;; horizon *= 4) {
    size_t end = std::min(start + horizon, forwardOps.size());
    SmallVector<SmallVector<StepWrites>> records;
    SmallVector<Outcome> outcomes;
    for (Layout l : candidates) {
      journaling = true;
      setSeed(root, l);
      Outcome out;
      SmallVector<StepWrites> &record = records.emplace_back();
      auto note = [&](size_t from) {
        StepWrites &w = record.emplace_back();
        for (size_t k = from; k < journal.size(); ++k) {
          const Undo &u = journal[k];
          if (u.kind == Undo::Kind::Layout)
            w.writes.push_back({u.value, layouts.lookup(u.value)});
          else if (u.kind == Undo::Kind::Adopted)
            w.writes.push_back({u.value, adopted.lookup(u.value)});
        }
        w.conflicts = out.conflicts;
        w.bytes = out.commBytes;
        w.obstacles = out.obstacles.size();
      };
      visitChain(root, out);
      note(0);
      for (size_t i = start; i < end; ++i) {
        size_t from = journal.size();
        Step s =
            step(*forwardOps[i], Unseeded::Adopt, /*forwardOnly=*/true, out);
        note(from);
        if (s == Step::End)
          break;
      }
      rollback(0);
      journaling = false;
      clearSeed(root);
      outcomes.push_back(std::move(out));
    }
    // Where each trial's state rejoins the first's: no value still to be
    // read (and no root decided, while its movement ops are still to be
    // read) laid out differently. Record k is the trial's setup (k = 0) or
    // the step at forward index start + k - 1.
    bool allRejoined = true;
    size_t latest = 0;
    for (size_t t = 1; t < records.size() && allRejoined; ++t) {
      llvm::DenseMap<Value, size_t> differing; // -> its last reader
      std::optional<size_t> at;
      for (size_t k = 0; k < records[t].size() && k < records[0].size(); ++k) {
        size_t next = start + k; // the next op to visit
        auto compare = [&](const StepWrites &x, const StepWrites &y) {
          for (auto [v, l] : x.writes) {
            auto it = llvm::find_if(
                y.writes, [&](const auto &w) { return w.first == v; });
            if ((it == y.writes.end() || it->second != l) && lastUse(v) >= next)
              differing[v] = lastUse(v);
          }
        };
        compare(records[0][k], records[t][k]);
        compare(records[t][k], records[0][k]);
        for (auto it = differing.begin(); it != differing.end();) {
          auto here = it++;
          if (here->second < next)
            differing.erase(here);
        }
        if (differing.empty() && k > 0) {
          at = k;
          break;
        }
      }
      // At the end of the forward nothing is left to differ in.
      if (!at && end == forwardOps.size())
        at = records[t].size() - 1;
      if (!at)
        allRejoined = false;
      else
        latest = std::max(latest, *at);
    }
    if (!allRejoined)
      continue;
    // Each trial's outcome up to the latest rejoining: beyond it they all
    // add the same.
    for (auto [out, record] : llvm::zip(outcomes, records)) {
      const StepWrites &w = record[std::min(latest, record.size() - 1)];
      out.conflicts = w.conflicts;
      out.commBytes = w.bytes;
      out.obstacles.resize(w.obstacles);
    }
    return outcomes;
  }
}

void Solver::visit(Operation *op, Unseeded mode, Outcome &out) {
  if (plans.count(op))
    return;
  auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op);
  SmallVector<Layout> current;
  SmallVector<int64_t> pendingOperands;
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    Value r = pendingRoot(operand);
    if (r && !adopted.count(r) && !seeds.count(r)) {
      pendingOperands.push_back(i);
      current.push_back(Layout());
      continue;
    }
    // A gradient is resharded to its parameter's layout once, where it is
    // made (the return needs it so): its readers, the optimizer, read that.
    // Under pipelining they must read the very value that is accumulated
    // over the microbatches.
    if (Value param = gradientOf.lookup(operand)) {
      current.push_back(gradientLayout(param));
      continue;
    }
    // A parameter ZeRO 3 holds split is gathered where the forward or the
    // backward reads it: their ops plan as if it were whole (the update
    // reads it split, as its state).
    if (zeroStage >= 3 &&
        (forwardIndex.count(op) || op->hasAttr(kBackwardAttr)) &&
        rootNames.count(operand)) {
      current.push_back(Layout());
      continue;
    }
    current.push_back(getLayout(operand));
  }
  OpPlan plan;
  // Partial sums pass through what is linear in them: a sum of partial
  // sums is the partial sum of the sums, a reshape or transpose of one is
  // one. The reduction then happens once, later (the input gradients of
  // separate Q, K and V projections are reduced together).
  bool allPartialSums = op->getNumOperands() > 0 && op->getNumResults() == 1 &&
                        llvm::all_of(current, [](const Layout &l) {
                          return l.partial && l.kind == ReductionKind::Sum;
                        });
  bool linear =
      isa<AddOp, SubOp>(op)
          ? llvm::all_of(op->getOperands(),
                         [&](Value v) {
                           return v.getType() == op->getResult(0).getType();
                         })
          : isa<ReshapeOp, TransposeOp, SliceOp, ConcatOp>(op);
  if (allPartialSums && linear && isFloatTensor(op->getResult(0))) {
    plan.operands.assign(current.begin(), current.end());
    plan.results.push_back(Layout::partialOf(ReductionKind::Sum));
  } else if (!ruleOp) {
    plan.operands.resize(op->getNumOperands());
    plan.results.resize(op->getNumResults());
  } else {
    const ShardingRule &rule = ruleOf(op);
    // Candidates: the factors the operands are split along.
    SmallVector<FactorShard> candidates;
    for (auto [i, l] : llvm::enumerate(current)) {
      // A parameter not decided yet is what the op's split should serve:
      // tokens split by sequence parallelism are gathered for it.
      bool tokens =
          sequenceParallel &&
          (l.partial || (l.isSplit() && l.dim == tokenDim(op->getOperand(i))));
      if (tokens && !pendingOperands.empty())
        continue;
      // With sequence parallelism, partial sums may be reduce-scattered
      // onto their token dimension.
      if (sequenceParallel && l.partial && l.kind == ReductionKind::Sum) {
        int64_t d = tokenDim(op->getOperand(i));
        if (d >= 0)
          if (auto fs = factorOf(rule, rule.operandFactors[i], Layout::split(d),
                                 shards);
              fs && splittable(rule, fs->factor) &&
              rule.factors[fs->factor].kind == FactorKind::Parallel &&
              !llvm::is_contained(candidates, *fs))
            candidates.push_back(*fs);
        continue;
      }
      if (!l.isSplit())
        continue;
      std::optional<FactorShard> fs =
          factorOf(rule, rule.operandFactors[i], l, shards);
      if (fs && splittable(rule, fs->factor)) {
        if (!llvm::is_contained(candidates, *fs))
          candidates.push_back(*fs);
        continue;
      }
      // Record why the split cannot pass: the strategy learns groups from
      // it and reports dimensions that do not divide.
      Obstacle obstacle;
      obstacle.op = op;
      const auto &dim = rule.operandFactors[i][l.dim];
      int64_t before = 1;
      for (auto [k, f] : llvm::enumerate(dim)) {
        int64_t size = rule.factors[f].size;
        if (k == 0)
          obstacle.extent = size;
        if (k > 0 && l.groups == 1 && splittable(rule, f) &&
            size % shards == 0 && !obstacle.suggestedGroups)
          obstacle.suggestedGroups = before;
        before *= size;
      }
      obstacle.atReshape = isa<ReshapeOp>(op) && dim.size() > 1 &&
                           splittable(rule, dim.front()) &&
                           obstacle.extent % shards != 0;
      out.obstacles.push_back(obstacle);
    }
    std::optional<OpPlan> best = planFor(rule, std::nullopt);
    int64_t bestConflicts = 0;
    double bestBytes = 0;
    {
      Outcome trial;
      for (auto [i, operand] : llvm::enumerate(op->getOperands()))
        account(operand, current[i], best->operands[i], trial);
      bestConflicts = trial.conflicts;
      bestBytes = trial.commBytes;
    }
    bool haveSplit = false;
    for (FactorShard fs : candidates) {
      std::optional<OpPlan> p = planFor(rule, fs, op);
      if (!p)
        continue;
      Outcome trial;
      for (auto [i, operand] : llvm::enumerate(op->getOperands()))
        account(operand, current[i], p->operands[i], trial);
      // Splitting wins ties: it is the point of the exercise.
      if (!haveSplit ? trial.conflicts <= bestConflicts
                     : std::make_pair(trial.conflicts, trial.commBytes) <
                           std::make_pair(bestConflicts, bestBytes)) {
        best = p;
        bestConflicts = trial.conflicts;
        bestBytes = trial.commBytes;
        haveSplit = true;
      }
    }
    plan = *best;
    if (auto it = pinned.find(op); it != pinned.end() && op->getNumResults())
      if (auto fs = factorOf(rule, rule.resultFactors[0], it->second, shards))
        if (splittable(rule, fs->factor))
          if (std::optional<OpPlan> p = planFor(rule, *fs, op))
            plan = *p;
  }
  // Pending roots used here take what the op wants (Adopt), else stay
  // whole.
  for (int64_t i : pendingOperands) {
    Value operand = op->getOperand(i);
    Value root = pendingRoot(operand);
    std::optional<Layout> l;
    if (mode == Unseeded::Adopt)
      l = pushBack(operand, plan.operands[i]);
    setAdopted(root, l ? *l : Layout());
    current[i] = getLayout(operand);
  }
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    account(operand, current[i], plan.operands[i], out);
  for (auto [v, l] : llvm::zip(op->getResults(), plan.results))
    setLayout(v, l);
  setPlan(op, std::move(plan));
}

void Solver::visitReturn(func::ReturnOp ret, Outcome &out, bool forwardOnly) {
  bool training = getLossIndex(func).has_value();
  Block &body = func.getBody().front();
  OpPlan plan;
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    Layout cur = getLayout(v), want;
    std::optional<unsigned> state = getStateIndex(func, k, kUpdateAttr);
    if (!state)
      state = getStateIndex(func, k, kGradAttr);
    if (state && forwardOnly) {
      plan.operands.push_back(cur);
      continue;
    }
    auto stated =
        func.getResultAttrOfType<dist::ShardingAttr>(k, kShardingAttr);
    bool otherDim = cur.isSplit() && stated &&
                    llvm::any_of(llvm::seq<unsigned>(stated.getDims().size()),
                                 [&](unsigned d) {
                                   return d != unsigned(cur.dim) &&
                                          !stated.getDimAxes(d).empty();
                                 });
    if (state && getStateIndex(func, k, kGradAttr))
      want = gradientLayout(body.getArgument(*state));
    else if (state)
      want = getLayout(body.getArgument(*state));
    else if ((training || keepOutputsSplit) &&
             !func.getResultAttr(k, kLossAttr) && !cur.partial && !otherDim)
      want = cur; // outputs stay split (the runtime joins them)
    account(v, cur, want, out, /*atReturn=*/!state);
    plan.operands.push_back(want);
  }
  setPlan(ret, std::move(plan));
}
