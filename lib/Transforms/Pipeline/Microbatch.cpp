//===- Microbatch.cpp - The model on one microbatch -----------------------===//
//
// Microbatching is sharding the batch dimension in time: the forward is
// rewritten to compute one microbatch (the batch divided by M), with the
// same per-op partition hooks that tensor parallelism uses to make extents
// local (reshape targets live in result types, slice and split extents in
// attributes). The batch is found from the graph inputs, its dimension
// followed through each op's sharding rule; an op that would mix
// microbatches (a reduction over the batch) is an error naming the node.
// The pipeline passes later slice the inputs per microbatch and join the
// outputs.
//
//===----------------------------------------------------------------------===//

#include "pcc/Transforms/Pipeline/Pipeline.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace pcc {
#define GEN_PASS_DEF_MICROBATCH
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

namespace {
/// Partition hooks see the batch as a split factor; nothing may need
/// another microbatch's data.
class BatchContext : public PartitionContext {
public:
  BatchContext(int64_t m) : m(m) {}
  int64_t numShards() const override { return m; }
  int64_t numGroups() const override { return 1; }
  Value shardIndex(OpBuilder &, Location) override { return {}; }
  Value allReduce(OpBuilder &, Location, Value,
                  ShardingRule::ReductionKind) override {
    return {};
  }

private:
  int64_t m;
};
} // namespace

static RankedTensorType withDim(Type t, int64_t dim, int64_t extent) {
  auto rt = cast<RankedTensorType>(t);
  SmallVector<int64_t> shape(rt.getShape());
  shape[dim] = extent;
  return RankedTensorType::get(shape, rt.getElementType());
}

/// The first block along `dim` of a constant that holds the same values
/// for every block, or null.
static DenseElementsAttr firstBlockIfInvariant(DenseElementsAttr value,
                                               int64_t dim, int64_t m) {
  if (!value)
    return {};
  auto type = cast<RankedTensorType>(value.getType());
  auto local = withDim(type, dim, type.getDimSize(dim) / m);
  if (value.isSplat())
    return value.resizeSplat(local);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= type.getDimSize(d);
  for (int64_t d = dim + 1; d < type.getRank(); ++d)
    inner *= type.getDimSize(d);
  int64_t block = local.getDimSize(dim) * inner;
  SmallVector<Attribute> values(value.getValues<Attribute>());
  SmallVector<Attribute> first;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t base = o * block * m;
    for (int64_t k = 1; k < m; ++k)
      for (int64_t i = 0; i < block; ++i)
        if (values[base + i] != values[base + k * block + i])
          return {};
    first.append(values.begin() + base, values.begin() + base + block);
  }
  return DenseElementsAttr::get(local, first);
}

/// Whether `v` (computed without the graph inputs) holds equal blocks along
/// `dim` for the M microbatches: a constant or weight whose blocks are
/// equal, a broadcast of an extent 1, or an op whose operands are
/// invariant along the dimension's factor.
static bool isInvariant(Value v, int64_t dim, int64_t m,
                        const llvm::DenseMap<Operation *, ShardingRule> &rules,
                        int depth = 0) {
  Operation *def = v.getDefiningOp();
  if (!def || depth > 64)
    return false;
  if (auto c = dyn_cast<ConstantOp>(def))
    if (auto value = dyn_cast<DenseElementsAttr>(c.getValue()))
      return bool(firstBlockIfInvariant(value, dim, m));
  if (auto w = dyn_cast<WeightOp>(def))
    return !w.getTrainable() &&
           bool(firstBlockIfInvariant(getDenseValue(w.getValue()), dim, m));
  auto it = rules.find(def);
  if (it == rules.end())
    return false;
  const ShardingRule &rule = it->second;
  unsigned result = cast<OpResult>(v).getResultNumber();
  const auto &dims = rule.resultFactors[result][dim];
  if (dims.size() != 1)
    return dims.empty();
  int64_t factor = dims.front();
  for (auto [i, operand] : llvm::enumerate(def->getOperands()))
    for (auto [d, fs] : llvm::enumerate(rule.operandFactors[i]))
      if (llvm::is_contained(fs, factor) &&
          (fs.size() != 1 ||
           !isInvariant(operand, d, m, rules, depth + 1)))
        return false;
  return true;
}

/// A gather along axis 0 of a tensor that merges the batch with the
/// dimension after it (data = reshape(x: [B, L, ...]) to [B*L, ...]), at
/// constant indices that stay, in each example's row b, within its block
/// [b*L, (b+1)*L): how Hugging Face's mask functions, as Optimum exports
/// them, look up each example's padding mask. Rewrites it as a
/// gather_elements along x's dimension 1 with the indices made relative to
/// the block, which keeps the batch a dimension of its own, to be split.
static void keepBatchOfFlatGather(GatherOp op) {
  auto reshape = op.getData().getDefiningOp<ReshapeOp>();
  auto idx = op.getIndices().getDefiningOp<ConstantOp>();
  if (op.getAxis() != 0 || !reshape || !idx)
    return;
  auto indices = dyn_cast<DenseElementsAttr>(idx.getValue());
  auto xt = cast<RankedTensorType>(reshape.getInput().getType());
  auto it = cast<RankedTensorType>(op.getIndices().getType());
  ArrayRef<int64_t> data =
      cast<RankedTensorType>(op.getData().getType()).getShape();
  if (!indices || xt.getRank() < 2 || it.getRank() < 1)
    return;
  int64_t b = xt.getDimSize(0), l = xt.getDimSize(1), rest = 1, tail = 1;
  for (int64_t d : xt.getShape().drop_front(2))
    rest *= d;
  for (int64_t d : data.drop_front())
    tail *= d;
  if (data.front() != b * l || rest != tail || it.getDimSize(0) != b)
    return;
  int64_t n = it.getNumElements() / b;
  SmallVector<APInt> relative;
  relative.reserve(b * n * rest);
  int64_t k = 0;
  for (const APInt &v : indices.getValues<APInt>()) {
    int64_t j = v.getSExtValue() - (k++ / n) * l;
    if (j < 0 || j >= l)
      return;
    relative.append(rest, APInt(v.getBitWidth(), j, /*isSigned=*/true));
  }
  OpBuilder builder(op);
  Location loc = op.getLoc();
  Type elem = xt.getElementType();
  Value x =
      ReshapeOp::create(builder, loc, RankedTensorType::get({b, l, rest}, elem),
                        reshape.getInput());
  Value at = ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(
          RankedTensorType::get({b, n, rest}, it.getElementType()), relative));
  Value picked = GatherElementsOp::create(builder, loc, x, at, 1);
  Value out = picked.getType() == op.getType()
                  ? picked
                  : ReshapeOp::create(builder, loc, op.getType(), picked);
  op.replaceAllUsesWith(out);
  op.erase();
}

LogicalResult pcc::microbatch(func::FuncOp func, int64_t m, bool defaulted) {
  if (m == 1)
    return success();
  if (m < 1)
    return func.emitError("--microbatches must be at least 1, got ") << m;
  Block &body = func.getBody().front();
  // The batch: the leading extent of the first graph input.
  int64_t batch = -1;
  StringRef batchInput;
  for (BlockArgument arg : body.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t || t.getRank() == 0 ||
        func.getArgAttr(arg.getArgNumber(), kStateAttr))
      continue;
    batch = t.getDimSize(0);
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      kOnnxNameAttr))
      batchInput = name.getValue();
    break;
  }
  if (batch < 0)
    return func.emitError("--microbatches ")
           << m << ": the model has no input with a batch dimension";
  for (GatherOp gather : llvm::to_vector(body.getOps<GatherOp>()))
    keepBatchOfFlatGather(gather);
  if (batch % m && defaulted)
    return func.emitError("the default of --microbatches, one per pipeline "
                          "rank (")
           << m << "), does not divide the batch (" << batch << ") of input '"
           << batchInput << "'; give --microbatches, a divisor of " << batch;
  if (batch % m)
    return func.emitError("--microbatches ")
           << m << " does not divide the batch (" << batch << ") of input '"
           << batchInput << "'";

  // Rules are read on the whole shapes, before any op is rewritten.
  llvm::DenseMap<Operation *, ShardingRule> rules;
  for (Operation &op : body.without_terminator())
    if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op))
      rules[&op] = ruleOp.getShardingRule();

  // The batch dimension of each value, and where each value of the step
  // lives on one microbatch. Ops keep reading the whole values until the
  // end (partition hooks compare whole and local shapes); a sliced
  // argument is read through a placeholder slice meanwhile.
  llvm::DenseMap<Value, int64_t> batchDim;
  IRMapping local;
  SmallVector<std::pair<BlockArgument, Operation *>> placeholders;
  OpBuilder start = OpBuilder::atBlockBegin(&body);
  for (BlockArgument arg : body.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t || t.getRank() == 0 || t.getDimSize(0) != batch ||
        func.getArgAttr(arg.getArgNumber(), kStateAttr))
      continue;
    SmallVector<int64_t> starts(t.getRank(), 0), steps(t.getRank(), 1);
    SmallVector<int64_t> sizes(t.getShape());
    sizes[0] /= m;
    auto slice =
        SliceOp::create(start, arg.getLoc(), arg, starts, sizes, steps);
    local.map(arg, slice.getResult());
    batchDim[arg] = 0;
    placeholders.push_back({arg, slice});
    func.setArgAttr(arg.getArgNumber(), kBatchDimAttr,
                    IntegerAttr::get(IntegerType::get(func.getContext(), 64),
                                     0));
  }

  BatchContext context(m);
  llvm::DenseSet<Operation *> skip;
  for (auto &p : placeholders)
    skip.insert(p.second);
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    if (!skip.contains(&op))
      ops.push_back(&op);
  for (Operation *op : ops) {
    if (llvm::none_of(op->getOperands(),
                      [&](Value v) { return batchDim.count(v); }))
      continue;
    auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op);
    if (!ruleOp)
      return op->emitError("microbatching: '")
             << op->getName() << "' has no sharding rule to follow the batch";
    const ShardingRule &rule = rules[op];
    // The factor carrying the batch: the major factor of each operand's
    // batch dimension, the same for all of them.
    int64_t factor = -1;
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      auto it = batchDim.find(v);
      if (it == batchDim.end())
        continue;
      const auto &dims = rule.operandFactors[i][it->second];
      int64_t f = dims.empty() ? -1 : dims.front();
      if (f < 0 || (factor >= 0 && f != factor))
        return op->emitError("microbatching: the batch dimension of operand ")
               << i << " does not map to one dimension of the op";
      factor = f;
    }
    const ShardingRule::Factor &f = rule.factors[factor];
    if (f.kind != ShardingRule::FactorKind::Parallel)
      return op->emitError("microbatching: the op combines the examples of "
                           "the batch, so --microbatches cannot split it");
    if (f.size % m)
      return op->emitError("microbatching: --microbatches ")
             << m << " does not divide the batch extent " << f.size;
    OpBuilder b(op);
    SmallVector<Value> operands;
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      operands.push_back(local.lookupOrDefault(v));
      if (batchDim.count(v))
        continue;
      // An operand that is not per example but spans the batch (a mask
      // the exporter expanded to the batch): every microbatch reads its
      // first block when all blocks are equal.
      for (auto [d, dims] : llvm::enumerate(rule.operandFactors[i])) {
        if (dims.empty() || dims.front() != factor ||
            cast<RankedTensorType>(v.getType()).getDimSize(d) == 1)
          continue;
        if (auto constant = v.getDefiningOp<ConstantOp>())
          if (auto value = dyn_cast<DenseElementsAttr>(constant.getValue()))
            if (auto block = firstBlockIfInvariant(value, d, m)) {
              operands.back() = ConstantOp::create(b, constant.getLoc(), block);
              continue;
            }
        if (!isInvariant(v, d, m, rules))
          return op->emitError("microbatching: operand ")
                 << i << " spans the batch but is not the same for every "
                 << "example, so --microbatches cannot split it";
        auto t = cast<RankedTensorType>(operands.back().getType());
        SmallVector<int64_t> starts(t.getRank(), 0), steps(t.getRank(), 1);
        SmallVector<int64_t> sizes(t.getShape());
        sizes[d] /= m;
        operands.back() = SliceOp::create(b, op->getLoc(), operands.back(),
                                          starts, sizes, steps);
      }
    }
    SmallVector<Type> types;
    SmallVector<int64_t> resultDims;
    for (auto [i, r] : llvm::enumerate(op->getResults())) {
      int64_t dim = -1;
      for (auto [d, dims] : llvm::enumerate(rule.resultFactors[i])) {
        if (llvm::is_contained(dims, factor)) {
          if (dims.front() != factor)
            return op->emitError("microbatching: result ")
                   << i << " merges the batch inside another dimension";
          dim = d;
        }
      }
      resultDims.push_back(dim);
      auto t = cast<RankedTensorType>(r.getType());
      types.push_back(dim < 0 ? t : withDim(t, dim, t.getDimSize(dim) / m));
    }
    SmallVector<Value> results;
    if (failed(ruleOp.partition(b, operands, types, factor, context, results)))
      return op->emitError("microbatching: cannot rewrite the op for one "
                           "microbatch");
    for (auto [r, nr, dim] : llvm::zip(op->getResults(), results, resultDims)) {
      local.map(r, nr);
      if (dim >= 0)
        batchDim[r] = dim;
    }
  }

  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    ret.setOperand(k, local.lookupOrDefault(v));
    if (auto it = batchDim.find(v); it != batchDim.end())
      func.setResultAttr(
          k, kBatchDimAttr,
          IntegerAttr::get(IntegerType::get(func.getContext(), 64),
                           it->second));
  }
  // The originals of rewritten ops are dead now.
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty() && local.contains(op->getResult(0)))
      op->erase();
  for (auto [arg, slice] : placeholders) {
    arg.setType(slice->getResult(0).getType());
    slice->getResult(0).replaceAllUsesWith(arg);
    slice->erase();
  }
  SmallVector<Type> argTypes(body.getArgumentTypes());
  func->setAttr(kMicrobatchesAttr,
                IntegerAttr::get(IntegerType::get(func.getContext(), 64), m));
  func.setType(FunctionType::get(func.getContext(), argTypes,
                                 ret.getOperandTypes()));
  return success();
}

namespace {
struct MicrobatchPass : pcc::impl::MicrobatchBase<MicrobatchPass> {
  using MicrobatchBase::MicrobatchBase;
  void runOnOperation() override {
    if (failed(pcc::microbatch(getOperation(), microbatches, defaulted)))
      signalPassFailure();
  }
};
} // namespace
