//===- DeriveGeneration.cpp - Prefill and decode over a paged KV cache ----===//
//
// A causal language model's forward, imported at one sequence of the
// longest length S ([1, S] token ids -> [1, S, V] logits), becomes the steps
// a server runs: each takes N tokens of any sequences (their ids, their
// positions, the rows of their sequences in a block table) and returns the
// logits of R of them, while every attention writes the tokens' keys and
// values into a paged cache (graph.cache_write) and reads its sequence's
// cached ones (graph.paged_attention).
//
// Nothing is found by name. The token dimension is followed from the ids
// through each op's sharding rule: a result dimension that shares the
// factor of an operand's token dimension is a token dimension, and an
// operand that does not depend on the ids but has that factor (a position
// table, rotary cos/sin) is taken at the tokens' positions. A reshape may
// merge each token's rows of another dimension into the token dimension
// ([T, k, H] -> [T * k, H]: a mixture of experts' token-expert pairs) and
// take them out again; such rows are computed for every token. Every op
// must treat tokens one by one (their factor parallel); attention, found as the
// graph.attention that pcc-fuse-attention forms, is the one op that mixes
// them, and becomes the cache's write and read. Ops that only the returned
// logits need, such as the LM head and the last norm, run on the R rows
// alone: the rows are picked as early as every reader allows.
//
//===----------------------------------------------------------------------===//

#include "pcc/Transforms/Generation/DeriveGeneration.h"
#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Target/CallGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"

#include <cmath>

namespace pcc {
#define GEN_PASS_DEF_DERIVEGENERATION
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

namespace {

using FactorKind = ShardingRule::FactorKind;

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// `type` with dimension `dim` of extent `extent`.
RankedTensorType withExtent(Type type, int64_t dim, int64_t extent) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = extent;
  return RankedTensorType::get(shape, t.getElementType());
}

/// What the analysis found of the forward: the token dimension of every
/// value that depends on the ids, and for each op that reads such values,
/// the operands taken at the tokens' positions.
struct TokenFlow {
  llvm::DenseMap<Value, int64_t> tokenDim;
  /// Where a token dimension holds each token's rows of another dimension
  /// too, [T * s] with the tokens major (a mixture of experts' [T * k]
  /// token-expert pairs): s. Absent for a plain token dimension (s = 1).
  llvm::DenseMap<Value, int64_t> tokenScale;
  /// Per op: (operand index, dimension) of operands that do not depend on
  /// the ids but run along the tokens.
  llvm::DenseMap<Operation *, SmallVector<std::pair<unsigned, int64_t>>>
      positional;
  SmallVector<AttentionOp> attentions;
  /// Per attention with ALiBi's bias: its slopes, one per query head.
  llvm::DenseMap<Operation *, DenseElementsAttr> slopes;
};

/// ALiBi's slopes of `attention`'s bias, one per query head, of the
/// query's element type: the bias must be a constant (read through
/// reshapes, which keep its elements' order) that broadcasts to [1, H, Tq,
/// Tk] as `slope[h] * j` for key j, plus what does not depend on j (which
/// the softmax ignores), at the keys that the attention's causal mask and
/// window keep (the others' bias is never read). Nothing for any other
/// bias.
std::optional<DenseElementsAttr> getAlibiSlopes(AttentionOp attention) {
  Value bias = attention.getBias();
  ArrayRef<int64_t> shape = shapeOf(bias);
  while (auto reshape = bias.getDefiningOp<ReshapeOp>())
    bias = reshape.getInput();
  ElementsAttr attr;
  if (auto c = bias.getDefiningOp<ConstantOp>())
    attr = c.getValue();
  else if (auto w = bias.getDefiningOp<WeightOp>(); w && !w.getTrainable())
    attr = w.getValue();
  DenseElementsAttr dense = attr ? getDenseValue(attr) : DenseElementsAttr();
  if (!dense || !isa<FloatType>(dense.getElementType()) || shape.size() > 4)
    return std::nullopt;
  SmallVector<int64_t> s(4 - shape.size(), 1);
  llvm::append_range(s, shape);
  int64_t heads = shapeOf(attention.getQuery())[1];
  if (s[0] != 1 || (s[1] != 1 && s[1] != heads))
    return std::nullopt;
  SmallVector<double> values;
  if (dense.isSplat())
    values.assign(size_t(dense.getNumElements()),
                  dense.getSplatValue<APFloat>().convertToDouble());
  else
    for (APFloat x : dense.getValues<APFloat>())
      values.push_back(x.convertToDouble());
  int64_t rows = s[2], keys = s[3];
  // The keys [first, last] that query i sees. A bias of one row (BLOOM's,
  // [H, 1, Tk]) serves every query, and so every key.
  int64_t window = attention.getWindow().value_or(0);
  bool causal = attention.getCausal() && rows > 1;
  auto seen = [&](int64_t i) {
    int64_t last = causal ? std::min(i, keys - 1) : keys - 1;
    int64_t first = causal && window ? std::max<int64_t>(0, i - window + 1) : 0;
    return std::make_pair(first, last);
  };
  SmallVector<double> slopes;
  for (int64_t h = 0; h < s[1]; ++h) {
    const double *head = values.data() + h * rows * keys;
    // The slope from the last row's last two keys, which every mask keeps.
    const double *lastRow = head + (rows - 1) * keys;
    double slope = keys > 1 ? lastRow[keys - 1] - lastRow[keys - 2] : 0;
    for (int64_t i = 0; i < rows; ++i) {
      auto [first, last] = seen(i);
      for (int64_t j = first; j <= last; ++j) {
        double x = head[i * keys + j],
               expected = head[i * keys + first] + slope * double(j - first);
        if (!std::isfinite(x) ||
            std::abs(x - expected) > 1e-5 * (1 + std::abs(x)))
          return std::nullopt;
      }
    }
    slopes.push_back(slope);
  }
  Type et =
      cast<RankedTensorType>(attention.getQuery().getType()).getElementType();
  SmallVector<Attribute> elements;
  for (int64_t h = 0; h < heads; ++h)
    elements.push_back(FloatAttr::get(et, slopes[s[1] == 1 ? 0 : size_t(h)]));
  return DenseElementsAttr::get(RankedTensorType::get({heads}, et), elements);
}

int64_t scaleOf(const TokenFlow &flow, Value v) {
  auto it = flow.tokenScale.find(v);
  return it == flow.tokenScale.end() ? 1 : it->second;
}

void setScale(TokenFlow &flow, Value v, int64_t scale) {
  if (scale != 1)
    flow.tokenScale[v] = scale;
}

/// Where the token dimension of `input`, dimension `dim` of `scale` rows a
/// token, lands in a reshape to `output`, and its scale there: the
/// dimension with the same elements before it whose index advances the
/// token where the input's does. [T, k, H] -> [T * k, H] merges each
/// token's k rows into the token dimension (scale k), and the reverse
/// takes them out.
std::optional<std::pair<int64_t, int64_t>>
reshapedTokenDim(ArrayRef<int64_t> input, int64_t dim, int64_t scale,
                 ArrayRef<int64_t> output) {
  auto product = [](ArrayRef<int64_t> s) {
    return ShapedType::getNumElements(s);
  };
  int64_t before = product(input.take_front(dim));
  int64_t tokens = input[dim] / scale;
  // Elements from one token to the next.
  int64_t stride = scale * product(input.drop_front(dim + 1));
  int64_t prefix = 1;
  for (auto [i, extent] : llvm::enumerate(output)) {
    int64_t after = product(output.drop_front(i + 1));
    if (prefix == before && after > 0 && stride % after == 0 &&
        extent == tokens * (stride / after))
      return std::make_pair(int64_t(i), stride / after);
    prefix *= extent;
  }
  return std::nullopt;
}

/// Follows the token dimension from `ids` (dimension 1) through `func`.
FailureOr<TokenFlow> analyzeTokens(func::FuncOp func, Value ids) {
  TokenFlow flow;
  flow.tokenDim[ids] = 1;
  for (Operation &op : func.getBody().front().without_terminator()) {
    SmallVector<unsigned> tokenOperands;
    for (auto [i, v] : llvm::enumerate(op.getOperands()))
      if (flow.tokenDim.count(v))
        tokenOperands.push_back(i);
    if (tokenOperands.empty())
      continue;
    if (auto attention = dyn_cast<AttentionOp>(op)) {
      if (attention.getSequenceFirst())
        return attention.emitError(
            "--generate: the KV cache is derived from attention in the "
            "[B, H, T, D] layout; pcc-attention-layout runs after it");
      if (!attention.getCausal())
        return attention.emitError(
            "--generate: attention that is not causal cannot be served from "
            "a KV cache");
      if (attention.getBias()) {
        std::optional<DenseElementsAttr> slopes = getAlibiSlopes(attention);
        if (!slopes)
          return attention.emitError(
              "--generate: attention that adds a mask or a bias other than "
              "ALiBi's (a constant slope per head times the key's position) "
              "cannot be served from a KV cache");
        flow.slopes[&op] = *slopes;
      }
      for (Value v : {attention.getQuery(), attention.getKey(),
                      attention.getValue()})
        if (flow.tokenDim.lookup(v) != 2 || !flow.tokenDim.count(v) ||
            scaleOf(flow, v) != 1 || shapeOf(v)[0] != 1)
          return attention.emitError(
              "--generate: the query, key and value of this attention are "
              "not [1, heads, tokens, features] of the sequence's tokens");
      if (!attention.getLse().use_empty())
        return attention.emitError(
            "--generate: something reads attention's log-sum-exp");
      if (Value sinks = attention.getSinks();
          sinks && flow.tokenDim.count(sinks))
        return attention.emitError(
            "--generate: this attention's sinks depend on the tokens");
      flow.tokenDim[attention.getOutput()] = 2;
      flow.attentions.push_back(attention);
      continue;
    }
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      Value input = reshape.getInput();
      auto dim =
          reshapedTokenDim(shapeOf(input), flow.tokenDim.lookup(input),
                           scaleOf(flow, input), shapeOf(reshape.getOutput()));
      if (!dim)
        return reshape.emitError(
            "--generate: this reshape mixes the tokens of the sequence with "
            "another dimension");
      flow.tokenDim[reshape.getOutput()] = dim->first;
      setScale(flow, reshape.getOutput(), dim->second);
      continue;
    }
    auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
    if (!ruled)
      return op.emitError("--generate: ")
             << op.getName() << " reads the tokens and has no sharding rule "
             << "to say how";
    ShardingRule rule = ruled.getShardingRule();
    // Every operand's token dimension must be the same parallel factor,
    // of the same rows a token.
    int64_t factor = -1, scale = scaleOf(flow, op.getOperand(tokenOperands[0]));
    for (unsigned i : tokenOperands) {
      const ShardingRule::DimFactors &f =
          rule.operandFactors[i][flow.tokenDim.lookup(op.getOperand(i))];
      if (f.size() != 1 || (factor >= 0 && f.front() != factor) ||
          rule.factors[f.front()].kind != FactorKind::Parallel ||
          scaleOf(flow, op.getOperand(i)) != scale)
        return op.emitError("--generate: ")
               << op.getName()
               << " mixes the tokens of the sequence (attention is the only "
                  "op that may)";
      factor = f.front();
    }
    for (auto [i, operand] : llvm::enumerate(op.getOperands())) {
      if (flow.tokenDim.count(operand))
        continue;
      for (auto [d, f] : llvm::enumerate(rule.operandFactors[i]))
        if (llvm::is_contained(f, factor)) {
          if (f.size() != 1 || scale != 1)
            return op.emitError("--generate: operand ")
                   << i << " runs along the tokens in a compound dimension";
          flow.positional[&op].push_back({unsigned(i), int64_t(d)});
        }
    }
    for (auto [r, result] : llvm::enumerate(op.getResults())) {
      for (auto [d, f] : llvm::enumerate(rule.resultFactors[r]))
        if (llvm::is_contained(f, factor)) {
          if (f.size() != 1)
            return op.emitError("--generate: result ")
                   << r << " holds the tokens in a compound dimension";
          flow.tokenDim[result] = int64_t(d);
          setScale(flow, result, scale);
        }
      if (!flow.tokenDim.count(result))
        return op.emitError("--generate: ")
               << op.getName() << " reduces over the tokens of the sequence";
    }
  }
  return flow;
}

/// Which rows of a value a step computes: every token's, or only those of
/// the returned logits.
enum class Rows { None, Logits, All };

/// The ops that only the logits need, and may run on their rows alone:
/// walked back from the logits, an op joins where each of its results
/// that depends on the tokens is read only by ops computed on the logits'
/// rows, and it treats tokens one by one (not attention).
llvm::DenseMap<Operation *, Rows> planRows(func::FuncOp func,
                                           const TokenFlow &flow,
                                           Value logits) {
  llvm::DenseMap<Value, Rows> need;
  llvm::DenseMap<Operation *, Rows> rows;
  need[logits] = Rows::Logits;
  auto &ops = func.getBody().front().getOperations();
  for (Operation &op : llvm::reverse(ops)) {
    if (op.hasTrait<mlir::OpTrait::IsTerminator>())
      continue;
    bool dependsOnTokens = llvm::any_of(op.getResults(), [&](Value v) {
      return flow.tokenDim.count(v);
    });
    if (!dependsOnTokens)
      continue;
    Rows mode = Rows::None;
    for (Value v : op.getResults()) {
      Rows n = need.lookup(v);
      // Every row where a reader needs every row: an op computed on all
      // of them, or one outside the logits' chain (whose own rows the walk
      // has not planned: it feeds the cache's writes, not the logits).
      for (Operation *user : v.getUsers())
        if (rows.lookup(user) == Rows::All ||
            (rows.lookup(user) == Rows::None && !isa<func::ReturnOp>(user)))
          n = Rows::All;
      mode = std::max(mode, n);
    }
    // Rows of several a token are computed whole: the logits' rows are
    // picked from plain token dimensions.
    auto scaled = [&](Value v) { return scaleOf(flow, v) != 1; };
    if (isa<AttentionOp>(op) || mode == Rows::None ||
        llvm::any_of(op.getOperands(), scaled) ||
        llvm::any_of(op.getResults(), scaled))
      mode = Rows::All;
    rows[&op] = mode;
    for (Value v : op.getOperands())
      if (flow.tokenDim.count(v))
        need[v] = std::max(need.lookup(v), mode);
  }
  return rows;
}

/// Builds one step of `flow`'s forward: N tokens in, the logits of R of
/// them out.
class StepBuilder {
public:
  StepBuilder(func::FuncOp forward, const TokenFlow &flow,
              const llvm::DenseMap<Operation *, Rows> &rows, Value ids,
              Value logits, const GenerationOptions &options,
              int64_t blocksPerSequence, int64_t numBlocks)
      : forward(forward), flow(flow), rows(rows), ids(ids), logits(logits),
        options(options), blocksPerSequence(blocksPerSequence),
        numBlocks(numBlocks) {}

  /// The step `name` of `tokens` tokens, returning the logits of `rows`
  /// of them.
  FailureOr<func::FuncOp> build(ModuleOp module, StringRef name,
                                int64_t tokens, int64_t rows);

private:
  /// The new value of `v` for rows `mode`.
  FailureOr<Value> lookup(Value v, Rows mode);
  /// `v`, not depending on the tokens, taken at the positions of `mode`'s
  /// rows along dimension `dim`.
  Value atPositions(Value v, int64_t dim, Rows mode);
  LogicalResult rewrite(Operation &op);

  func::FuncOp forward;
  const TokenFlow &flow;
  const llvm::DenseMap<Operation *, Rows> &rows;
  Value ids, logits;
  const GenerationOptions &options;
  int64_t blocksPerSequence, numBlocks;

  OpBuilder *builder = nullptr;
  int64_t numTokens = 0;
  /// Values that do not depend on the tokens, and the token values of
  /// each mode.
  IRMapping common;
  llvm::DenseMap<Value, Value> all, picked;
  Value positions, slots, blockTables, logitIndices, logitPositions;
  SmallVector<Value> cacheArgs, cacheUpdates;
};

Value StepBuilder::atPositions(Value v, int64_t dim, Rows mode) {
  if (mode == Rows::Logits && !logitPositions) {
    OpBuilder::InsertionGuard guard(*builder);
    builder->setInsertionPointAfterValue(logitIndices);
    logitPositions = GatherOp::create(
        *builder, v.getLoc(), logitIndices.getType(), positions, logitIndices,
        builder->getI64IntegerAttr(0));
  }
  Value at = mode == Rows::All ? positions : logitPositions;
  int64_t count = shapeOf(at)[0];
  Value source = common.lookup(v);
  if (shapeOf(source)[dim] == 1)
    return source;
  auto type = withExtent(source.getType(), dim, count);
  return GatherOp::create(*builder, v.getLoc(), type, source, at,
                          builder->getI64IntegerAttr(dim));
}

FailureOr<Value> StepBuilder::lookup(Value v, Rows mode) {
  if (!flow.tokenDim.count(v))
    return common.lookup(v);
  if (mode == Rows::All)
    return all.lookup(v);
  if (Value p = picked.lookup(v))
    return p;
  // Computed on every row: pick the logits' rows.
  if (scaleOf(flow, v) != 1)
    return failure();
  Value whole = all.lookup(v);
  int64_t dim = flow.tokenDim.lookup(v);
  auto type = withExtent(whole.getType(), dim, shapeOf(logitIndices)[0]);
  Value p = GatherOp::create(*builder, v.getLoc(), type, whole, logitIndices,
                             builder->getI64IntegerAttr(dim));
  picked[v] = p;
  return p;
}

LogicalResult StepBuilder::rewrite(Operation &op) {
  Rows mode = rows.lookup(&op);
  if (mode == Rows::None) {
    builder->clone(op, common);
    return success();
  }
  int64_t extent =
      mode == Rows::All ? numTokens : int64_t(shapeOf(logitIndices)[0]);
  auto &mapped = mode == Rows::All ? all : picked;
  Location loc = op.getLoc();

  if (auto attention = dyn_cast<AttentionOp>(op)) {
    Value q = all.lookup(attention.getQuery());
    Value k = all.lookup(attention.getKey());
    Value v = all.lookup(attention.getValue());
    ArrayRef<int64_t> ks = shapeOf(k), vs = shapeOf(v);
    int64_t index = cacheArgs.size() / 2;
    auto keyType = RankedTensorType::get(
        {numBlocks, ks[1], options.blockSize, ks[3]},
        cast<RankedTensorType>(k.getType()).getElementType());
    auto valueType = RankedTensorType::get(
        {numBlocks, vs[1], options.blockSize, vs[3]},
        cast<RankedTensorType>(v.getType()).getElementType());
    func::FuncOp step = cast<func::FuncOp>(
        builder->getInsertionBlock()->getParentOp());
    Value cache[2];
    RankedTensorType types[] = {keyType, valueType};
    StringRef kinds[] = {"key", "value"};
    for (auto [j, type, what] : llvm::enumerate(types, kinds)) {
      unsigned n = step.getNumArguments();
      (void)step.insertArgument(n, type, {}, loc);
      step.setArgAttr(n, kStateAttr,
                      builder->getStringAttr("kv_cache." +
                                             std::to_string(index) + "." +
                                             what.str()));
      step.setArgAttr(n, kInitAttr,
                      DenseElementsAttr::get(
                          type, builder->getZeroAttr(type.getElementType())));
      step.setArgAttr(n, kCacheAttr, builder->getUnitAttr());
      cacheArgs.push_back(step.getArgument(n));
      cache[j] = step.getArgument(n);
    }
    Value keys = CacheWriteOp::create(*builder, loc, cache[0], k, slots,
                                      positions, blockTables);
    Value values = CacheWriteOp::create(*builder, loc, cache[1], v, slots,
                                        positions, blockTables);
    cacheUpdates.push_back(keys);
    cacheUpdates.push_back(values);
    Value slopes;
    if (DenseElementsAttr s = flow.slopes.lookup(&op))
      slopes = ConstantOp::create(*builder, loc, s);
    Value sinks;
    if (attention.getSinks())
      sinks = common.lookup(attention.getSinks());
    all[attention.getOutput()] = PagedAttentionOp::create(
        *builder, loc, q, keys, values, slots, positions, blockTables, slopes,
        sinks, attention.getScaleAttr(), attention.getSoftcapAttr(),
        attention.getWindowAttr());
    return success();
  }

  // Any other op, on the step's rows: its token operands are the mode's,
  // those running along the tokens taken at their positions.
  IRMapping operands;
  for (Value v : op.getOperands()) {
    FailureOr<Value> m = lookup(v, mode);
    if (failed(m) || !*m)
      return op.emitError("--generate: an operand of this op is not computed "
                          "for the step's rows");
    operands.map(v, *m);
  }
  auto positional = flow.positional.find(&op);
  Operation *copy;
  {
    // Positional operands: one gather each, before the op.
    SmallVector<std::pair<unsigned, Value>> replaced;
    if (positional != flow.positional.end())
      for (auto [i, dim] : positional->second)
        replaced.push_back({i, atPositions(op.getOperand(i), dim, mode)});
    copy = builder->clone(op, operands);
    for (auto [i, v] : replaced)
      copy->setOperand(i, v);
  }
  // A slice names every dimension's extent: one that takes the whole
  // token dimension takes the step's.
  if (auto slice = dyn_cast<SliceOp>(copy)) {
    int64_t dim = flow.tokenDim.lookup(op.getOperand(0));
    SmallVector<int64_t> sizes(slice.getSizes());
    if (slice.getStarts()[dim] == 0 && slice.getSteps()[dim] == 1 &&
        sizes[dim] == shapeOf(op.getOperand(0))[dim]) {
      sizes[dim] = extent * scaleOf(flow, op.getOperand(0));
      slice.setSizes(sizes);
    }
  }
  for (auto [old, result] : llvm::zip(op.getResults(), copy->getResults())) {
    result.setType(withExtent(old.getType(), flow.tokenDim.lookup(old),
                              extent * scaleOf(flow, old)));
    mapped[old] = result;
  }
  if (failed(mlir::verify(copy)))
    return op.emitError("--generate: this op does not hold for a step of ")
           << extent << " token(s) (its attributes fix the sequence length)";
  return success();
}

FailureOr<func::FuncOp> StepBuilder::build(ModuleOp module, StringRef name,
                                           int64_t tokens, int64_t rowsOut) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  builder = &b;
  numTokens = tokens;
  common = IRMapping();
  all.clear();
  picked.clear();
  cacheArgs.clear();
  cacheUpdates.clear();
  Location loc = forward.getLoc();
  auto i64 = b.getI64Type();
  SmallVector<Type> argTypes{
      RankedTensorType::get({1, tokens}, i64),
      RankedTensorType::get({tokens}, i64),
      RankedTensorType::get({tokens}, i64),
      RankedTensorType::get({options.maxBatch, blocksPerSequence},
                            i64),
      RankedTensorType::get({rowsOut}, i64)};
  b.setInsertionPointToEnd(module.getBody());
  auto step = func::FuncOp::create(b, loc, name,
                                   b.getFunctionType(argTypes, {}));
  step->setAttr(kEntryPointAttr, b.getStringAttr(name));
  Block *body = step.addEntryBlock();
  const char *names[] = {"tokens", "positions", "slots", "block_tables",
                         "logit_indices"};
  for (unsigned i = 0; i < argTypes.size(); ++i)
    step.setArgAttr(i, "onnx.name", b.getStringAttr(names[i]));
  b.setInsertionPointToStart(body);
  all[ids] = body->getArgument(0);
  positions = body->getArgument(1);
  slots = body->getArgument(2);
  blockTables = body->getArgument(3);
  logitIndices = body->getArgument(4);
  logitPositions = nullptr;

  for (Operation &op : forward.getBody().front().without_terminator())
    if (failed(rewrite(op)))
      return failure();

  // The logits of the picked rows, [R, V].
  FailureOr<Value> out = lookup(logits, Rows::Logits);
  if (failed(out))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(*out);
  Value result = ReshapeOp::create(
      b, loc,
      RankedTensorType::get({rowsOut, shape.back()},
                            cast<RankedTensorType>(out->getType())
                                .getElementType()),
      *out);
  SmallVector<Value> results{result};
  llvm::append_range(results, cacheUpdates);
  func::ReturnOp::create(b, loc, results);
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  step.setFunctionType(
      b.getFunctionType(body->getArgumentTypes(), resultTypes));
  step.setResultAttr(0, "onnx.name", b.getStringAttr("logits"));
  for (auto [k, arg] : llvm::enumerate(cacheArgs))
    step.setResultAttr(
        1 + k, kUpdateAttr,
        b.getI64IntegerAttr(cast<BlockArgument>(arg).getArgNumber()));
  return step;
}

} // namespace

LogicalResult pcc::deriveGeneration(ModuleOp module,
                                    const GenerationOptions &options) {
  SmallVector<func::FuncOp> publics;
  for (auto f : module.getOps<func::FuncOp>())
    if (f.isPublic() && !f.isDeclaration())
      publics.push_back(f);
  if (publics.size() != 1)
    return module.emitError("--generate needs one forward function, found ")
           << publics.size();
  func::FuncOp forward = publics.front();
  if (!llvm::hasSingleElement(forward.getBody()))
    return forward.emitError("--generate needs a forward of one block");

  // The ids: the first int64 input of rank 2, [1, S]; the logits: the first
  // float result of rank 3, [1, S, V].
  Value ids;
  for (BlockArgument arg : forward.getArguments()) {
    auto t = cast<RankedTensorType>(arg.getType());
    if (t.getElementType().isInteger(64) && t.getRank() == 2) {
      ids = arg;
      break;
    }
  }
  if (!ids)
    return forward.emitError("--generate needs a causal language model: no "
                             "int64 input of rank 2 holds the token ids");
  ArrayRef<int64_t> idShape = shapeOf(ids);
  if (idShape[0] != 1 || idShape[1] < 2)
    return forward.emitError("--generate: the token ids are ")
           << ids.getType() << ", not one sequence [1, S] with S > 1";
  for (BlockArgument arg : forward.getArguments())
    if (arg != ids && !arg.use_empty())
      return forward.emitError("--generate: the forward reads input ")
             << arg.getArgNumber()
             << " besides the token ids; give it with --bind NAME=FILE.pb";
  auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
  Value logits;
  for (Value v : ret.getOperands()) {
    auto t = cast<RankedTensorType>(v.getType());
    if (isa<FloatType>(t.getElementType()) && t.getRank() == 3 &&
        t.getDimSize(0) == 1 && t.getDimSize(1) == idShape[1]) {
      logits = v;
      break;
    }
  }
  if (!logits)
    return forward.emitError("--generate needs a causal language model: no "
                             "result holds [1, S, vocabulary] logits");

  // A table the sequence reads at fixed indices (positions 0 .. S-1 of a
  // learned position table) must hold them all: a model of P positions
  // serves sequences of at most P.
  WalkResult tooLong = forward.walk([&](GatherOp gather) {
    DenseIntElementsAttr indices;
    if (!matchPattern(gather.getIndices(), m_Constant(&indices)))
      return WalkResult::advance();
    int64_t extent = shapeOf(gather.getData())[gather.getAxis()];
    for (const APInt &index : indices.getValues<APInt>()) {
      int64_t i = index.getSExtValue();
      if (i >= extent || i < -extent) {
        gather.emitError("--generate at --max-seq ")
            << idShape[1] << ": this gather reads index " << i
            << " of a dimension of " << extent
            << " (the model holds fewer positions); give --max-seq "
            << extent << " or less";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  if (tooLong.wasInterrupted())
    return failure();

  FailureOr<TokenFlow> flow = analyzeTokens(forward, ids);
  if (failed(flow))
    return failure();
  if (flow->attentions.empty())
    return forward.emitError(
        "--generate needs a causal language model: no causal attention was "
        "found (pcc-fuse-attention forms it from the exported ops)");
  if (!flow->tokenDim.count(logits) || flow->tokenDim.lookup(logits) != 1 ||
      scaleOf(*flow, logits) != 1)
    return forward.emitError(
        "--generate: the logits do not run along the token ids");
  llvm::DenseMap<Operation *, Rows> rows = planRows(forward, *flow, logits);

  // The block table's rows hold a sequence of the longest length.
  int64_t blocksPerSequence =
      (idShape[1] + options.blockSize - 1) / options.blockSize;
  int64_t numBlocks = options.numBlocks > 0
                          ? options.numBlocks
                          : options.maxBatch * blocksPerSequence;
  StepBuilder steps(forward, *flow, rows, ids, logits, options,
                    blocksPerSequence, numBlocks);
  int64_t decodeTokens =
      options.decodeTokens > 0 ? options.decodeTokens : options.maxBatch;
  if (failed(steps.build(module, "prefill", options.maxTokens,
                         options.maxBatch)) ||
      failed(steps.build(module, "decode", decodeTokens, decodeTokens)))
    return failure();
  forward.erase();
  return success();
}

namespace {
struct DeriveGenerationPass
    : public pcc::impl::DeriveGenerationBase<DeriveGenerationPass> {
  using DeriveGenerationBase::DeriveGenerationBase;

  void runOnOperation() override {
    GenerationOptions options;
    options.maxBatch = maxBatch;
    options.maxTokens = maxTokens;
    options.decodeTokens = decodeTokens;
    options.blockSize = kvBlock;
    options.numBlocks = kvBlocks;
    if (failed(deriveGeneration(getOperation(), options)))
      signalPassFailure();
  }
};
} // namespace

void pcc::resizeKvCache(ModuleOp module, int64_t blocks) {
  auto resized = [&](Type type) {
    auto t = cast<RankedTensorType>(type);
    SmallVector<int64_t> shape(t.getShape());
    shape[0] = blocks;
    return RankedTensorType::get(shape, t.getElementType());
  };
  for (auto func : module.getOps<func::FuncOp>()) {
    Block &body = func.getBody().front();
    for (BlockArgument arg : body.getArguments()) {
      unsigned i = arg.getArgNumber();
      if (!func.getArgAttr(i, kCacheAttr))
        continue;
      RankedTensorType type = resized(arg.getType());
      arg.setType(type);
      // The whole initial value: a split cache keeps its whole extents but
      // the first, which no layout splits.
      auto init = func.getArgAttrOfType<DenseElementsAttr>(i, kInitAttr);
      func.setArgAttr(i, kInitAttr,
                      DenseElementsAttr::get(resized(init.getType()),
                                             init.getSplatValue<Attribute>()));
      // The cache flows through its writes (and views of it) to the
      // function's results.
      SmallVector<Value> work{arg};
      while (!work.empty()) {
        Value v = work.pop_back_val();
        for (Operation *user : v.getUsers()) {
          if (!isa<CacheWriteOp>(user) ||
              user->getOperand(0) != v)
            continue;
          user->getResult(0).setType(resized(user->getResult(0).getType()));
          work.push_back(user->getResult(0));
        }
      }
    }
    func.setFunctionType(FunctionType::get(
        module.getContext(), body.getArgumentTypes(),
        body.getTerminator()->getOperandTypes()));
  }
}
