//===- Partition.cpp - Local shapes and collectives -----------------------===//
//
// Rewrites a step whose values carry layouts (pcc-propagate-sharding) into
// the program every rank runs: each value becomes its local block, each op
// computes on local operands (through its partition hook), and where a
// value's layout differs from what its user reads, collectives move it:
// an all-reduce combines partial results, an all-gather joins a split
// value, and a whole value meeting a split one is cut locally
// (dist.all_slice). Extents held in attributes (slice bounds, split sizes,
// reshape targets, which live in result types) become local ones. A split
// graph.weight stays whole in the IR and is read through its all_slice,
// which the targets turn into loading only the rank's block.
//
//===----------------------------------------------------------------------===//

#include "ShardingSolver.h"

#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/ScopeExit.h"

#include <map>
#include <tuple>

namespace pcc {
#define GEN_PASS_DEF_PARTITION
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;
using namespace pcc::sharding;

namespace {
class Context : public PartitionContext {
public:
  Context(MLIRContext *ctx, StringRef axis, int64_t shards)
      : ctx(ctx), axis(axis), shards(shards) {}
  int64_t numShards() const override { return shards; }
  int64_t numGroups() const override { return groups; }
  ArrayAttr axes() const { return Builder(ctx).getStrArrayAttr({axis}); }
  FlatSymbolRefAttr mesh() const {
    return FlatSymbolRefAttr::get(ctx, kMeshName);
  }
  Value shardIndex(OpBuilder &b, Location loc) override {
    return dist::AxisIndexOp::create(
        b, loc, RankedTensorType::get({}, b.getI64Type()), mesh(), axes());
  }
  Value allReduce(OpBuilder &b, Location loc, Value v,
                  ShardingRule::ReductionKind kind) override {
    dist::ReductionKind k = dist::ReductionKind::Sum;
    if (kind == ShardingRule::ReductionKind::Max)
      k = dist::ReductionKind::Max;
    else if (kind == ShardingRule::ReductionKind::Min)
      k = dist::ReductionKind::Min;
    else if (kind == ShardingRule::ReductionKind::Mean)
      k = dist::ReductionKind::Mean;
    return dist::AllReduceOp::create(b, loc, v.getType(), v, mesh(), axes(),
                                     dist::ReductionKindAttr::get(ctx, k));
  }
  /// The whole tensor from a block split along `l`.
  Value gather(OpBuilder &b, Location loc, Value v, Layout l);
  /// This rank's block (along `l`) of the sum of the ranks' partial `v`.
  Value reduceScatter(OpBuilder &b, Location loc, Value v, Layout l);
  Value slice(OpBuilder &b, Location loc, Value v, Layout l) {
    auto t = cast<RankedTensorType>(v.getType());
    return dist::AllSliceOp::create(b, loc, localType(t, l), v, mesh(), axes(),
                                    b.getI64IntegerAttr(l.dim),
                                    b.getI64IntegerAttr(l.groups));
  }
  /// Brings `v` (local, laid out as `from`) to `to`, once per value and
  /// layout: later uses reuse the first's collectives. With `again`, once
  /// more for such uses: an argument (a parameter held split, ZeRO 3's) is
  /// brought once for the forward and again for the backward, so that what
  /// the forward gathered need not live until the backward.
  Value reshard(OpBuilder &b, Location loc, Value v, Layout from, Layout to,
                bool again) {
    if (from == to)
      return v;
    auto key = std::make_tuple(v.getAsOpaquePointer(), to.dim, to.groups,
                               to.partial, again);
    if (auto it = cache.find(key); it != cache.end())
      return it->second;
    Value r = reshardOnce(b, loc, v, from, to);
    cache[key] = r;
    return r;
  }
  Value reshardOnce(OpBuilder &b, Location loc, Value v, Layout from,
                    Layout to) {
    if (from.partial && to.isSplit() && to.groups == 1 &&
        from.kind == ShardingRule::ReductionKind::Sum)
      return reduceScatter(b, loc, v, to);
    if (from.partial) {
      v = allReduce(b, loc, v, from.kind);
      from = Layout();
    }
    if (from == to)
      return v;
    if (from.isSplit()) {
      v = gather(b, loc, v, from);
      from = Layout();
    }
    if (to.isSplit())
      v = slice(b, loc, v, to);
    return v;
  }
  RankedTensorType localType(RankedTensorType t, Layout l) const {
    if (!l.isSplit())
      return t;
    SmallVector<int64_t> shape(t.getShape());
    shape[l.dim] /= shards;
    return RankedTensorType::get(shape, t.getElementType());
  }

  MLIRContext *ctx;
  StringRef axis;
  int64_t shards;
  /// The groups of the factor the op being partitioned splits.
  int64_t groups = 1;
  std::map<std::tuple<const void *, int64_t, int64_t, bool, bool>, Value> cache;
};
} // namespace

Value sharding::alongOutermost(OpBuilder &b, Location loc, Value v, int64_t dim,
                               function_ref<Value(Value)> collective) {
  if (dim == 0)
    return collective(v);
  int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
  SmallVector<int64_t> perm{dim};
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim)
      perm.push_back(d);
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i)
    inverse[perm[i]] = i;
  Value r = collective(TransposeOp::create(b, loc, v, perm));
  return TransposeOp::create(b, loc, r, inverse);
}

Value Context::gather(OpBuilder &b, Location loc, Value v, Layout l) {
  Type elem = getElementTypeOrSelf(v.getType());
  return alongOutermost(b, loc, v, l.dim, [&](Value x) -> Value {
    auto xt = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> whole(xt.getShape());
    whole[0] *= shards;
    Value g =
        dist::AllGatherOp::create(b, loc, RankedTensorType::get(whole, elem), x,
                                  mesh(), axes(), b.getI64IntegerAttr(0));
    if (l.groups == 1)
      return g;
    // Blocks arrive rank-major, [shards, groups, n]; the tensor is
    // group-major, [groups, shards, n].
    int64_t n = xt.getShape()[0] / l.groups;
    SmallVector<int64_t> split{shards, l.groups, n};
    split.append(whole.begin() + 1, whole.end());
    Value r = ReshapeOp::create(b, loc, RankedTensorType::get(split, elem), g);
    SmallVector<int64_t> swap{1, 0};
    for (int64_t d = 2; d < int64_t(split.size()); ++d)
      swap.push_back(d);
    Value s = TransposeOp::create(b, loc, r, swap);
    return ReshapeOp::create(b, loc, RankedTensorType::get(whole, elem), s);
  });
}

Value Context::reduceScatter(OpBuilder &b, Location loc, Value v, Layout l) {
  Type elem = getElementTypeOrSelf(v.getType());
  return alongOutermost(b, loc, v, l.dim, [&](Value x) -> Value {
    SmallVector<int64_t> block(cast<RankedTensorType>(x.getType()).getShape());
    block[0] /= shards;
    return dist::ReduceScatterOp::create(
        b, loc, RankedTensorType::get(block, elem), x, mesh(), axes(),
        b.getI64IntegerAttr(0),
        dist::ReductionKindAttr::get(ctx, dist::ReductionKind::Sum));
  });
}

static Layout layoutAttr(Attribute a, StringRef axis) {
  auto s = dyn_cast_or_null<dist::ShardingAttr>(a);
  if (!s)
    return Layout();
  FailureOr<Layout> l = fromAttr(s, axis);
  return succeeded(l) ? *l : Layout();
}

static Layout indexed(Operation *op, StringRef name, unsigned i,
                      StringRef axis) {
  auto array = op->getAttrOfType<ArrayAttr>(name);
  if (!array || i >= array.size())
    return Layout();
  return layoutAttr(array[i], axis);
}

LogicalResult pcc::partition(func::FuncOp func, StringRef axis) {
  auto module = func->getParentOfType<ModuleOp>();
  auto mesh = module ? module.lookupSymbol<dist::MeshOp>(kMeshName) : nullptr;
  if (!mesh)
    return success();
  std::optional<int64_t> tp = mesh.getAxisSize(axis);
  if (!tp || *tp == 1)
    return success();
  Context ctx(func.getContext(), axis, *tp);
  Block &body = func.getBody().front();

  // Where each (original) value lives now, and its layout.
  IRMapping local;
  llvm::DenseMap<Value, Layout> layout;
  // A split argument is read through a placeholder slice until every op is
  // rewritten (partition hooks compare their operands' whole shapes with
  // the local ones); then it takes the local type and the slice goes.
  SmallVector<std::pair<BlockArgument, Value>> placeholders;
  OpBuilder start = OpBuilder::atBlockBegin(&body);
  for (BlockArgument arg : body.getArguments()) {
    Layout l =
        layoutAttr(func.getArgAttr(arg.getArgNumber(), kShardingAttr), axis);
    layout[arg] = l;
    local.map(arg, arg);
    if (l.isSplit()) {
      Value s = ctx.slice(start, arg.getLoc(), arg, l);
      placeholders.push_back({arg, s});
      local.map(arg, s);
    }
  }

  llvm::DenseSet<Operation *> skip;
  for (auto &p : placeholders)
    skip.insert(p.second.getDefiningOp());
  SmallVector<Operation *> ops;
  for (Operation &op : body)
    if (!skip.contains(&op))
      ops.push_back(&op);
  SmallVector<Layout> returned;
  for (Operation *op : ops) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    // Whatever is built for a backward op is backward too.
    Operation *before = op->getPrevNode();
    llvm::scope_exit markBackward([&] {
      if (!op->hasAttr(kBackwardAttr))
        return;
      Operation *first = before ? before->getNextNode() : &body.front();
      for (Operation *o = first; o && o != op; o = o->getNextNode())
        o->setAttr(kBackwardAttr, UnitAttr::get(o->getContext()));
    });
    SmallVector<Layout> wanted, made;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      wanted.push_back(indexed(op, kOperandsAttr, i, axis));
    for (unsigned i = 0; i < op->getNumResults(); ++i)
      made.push_back(indexed(op, kResultsAttr, i, axis));
    bool annotated = op->hasAttr(kOperandsAttr) || op->hasAttr(kResultsAttr);
    op->removeAttr(kOperandsAttr);
    op->removeAttr(kResultsAttr);
    SmallVector<Value> operands;
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      operands.push_back(
          ctx.reshard(b, loc, local.lookup(v), layout[v], wanted[i],
                      isa<BlockArgument>(v) && op->hasAttr(kBackwardAttr)));
    if (isa<func::ReturnOp>(op)) {
      op->setOperands(operands);
      returned = wanted;
      break;
    }
    if (auto w = dyn_cast<WeightOp>(op)) {
      // The weight's layout over this axis is done with once it is read
      // through its slice; what it says of other axes stays.
      auto stated = w->getAttrOfType<dist::ShardingAttr>(kShardingAttr);
      Layout l = layoutAttr(stated, axis);
      w->removeAttr(kShardingAttr);
      if (stated)
        if (auto rest = toAttr(w->getContext(), axis, Layout(),
                               w.getType().getRank(), stated);
            namesAnyAxis(rest))
          w->setAttr(kShardingAttr, rest);
      layout[w.getOutput()] = l;
      local.map(w.getOutput(), w.getOutput());
      if (l.isSplit()) {
        b.setInsertionPointAfter(w);
        local.map(w.getOutput(), ctx.slice(b, loc, w.getOutput(), l));
      }
      continue;
    }
    if (!annotated) {
      // Whole on every rank: the op as it is, on its (whole) operands.
      op->setOperands(operands);
      for (Value r : op->getResults()) {
        layout[r] = Layout();
        local.map(r, r);
      }
      continue;
    }
    SmallVector<Type> types;
    for (auto [r, l] : llvm::zip(op->getResults(), made))
      types.push_back(ctx.localType(cast<RankedTensorType>(r.getType()), l));
    SmallVector<Value> results;
    if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op)) {
      OpPlan plan{-1, wanted, made};
      auto [factor, groups] =
          findSplitFactor(ruleOp.getShardingRule(), plan, *tp);
      ctx.groups = groups;
      if (failed(ruleOp.partition(b, operands, types, factor, ctx, results)))
        return op->emitError("cannot partition this op");
    } else if (failed(graph::detail::partitionByCloning(op, b, operands, types,
                                                        results))) {
      return failure();
    }
    for (auto [r, nr, l] : llvm::zip(op->getResults(), results, made)) {
      layout[r] = l;
      local.map(r, nr);
    }
  }
  // The originals of rewritten ops are dead now.
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty() && !isa<func::ReturnOp>(op) &&
        op->getBlock() == &body && !isa<WeightOp>(op))
      op->erase();

  for (auto [arg, s] : placeholders) {
    arg.setType(s.getType());
    s.replaceAllUsesWith(arg);
    s.getDefiningOp()->erase();
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (k < returned.size() && returned[k].isSplit())
      func.setResultAttr(k, kShardingAttr,
                         toAttr(func.getContext(), axis, returned[k],
                                cast<RankedTensorType>(v.getType()).getRank(),
                                func.getResultAttrOfType<dist::ShardingAttr>(
                                    k, kShardingAttr)));
  SmallVector<Type> argTypes(body.getArgumentTypes());
  func.setType(
      FunctionType::get(func.getContext(), argTypes, ret.getOperandTypes()));
  return success();
}

namespace {
struct PartitionPass : pcc::impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(partition(func, axis)))
        return signalPassFailure();
  }
};
} // namespace
