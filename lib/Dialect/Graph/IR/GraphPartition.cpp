//===- GraphPartition.cpp - Local computations of partitioned Graph ops ---===//
//
// ShardingRuleOpInterface::partition for the ops whose local computation is
// not the op itself on local shapes: lookups in a table split along the
// looked-up axis (Megatron's vocabulary-parallel embedding, and the pick of
// the label's log-probability), their adjoints, a log-softmax over a split
// axis (the vocabulary-parallel cross-entropy), slices and splits whose
// attributes hold extents, and a Gemm whose bias must be added once.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace pcc::graph;

LogicalResult pcc::graph::detail::partitionByCloning(
    Operation *op, OpBuilder &builder, ValueRange operands,
    TypeRange resultTypes, SmallVectorImpl<Value> &results) {
  Operation *clone = builder.clone(*op);
  clone->setOperands(operands);
  for (auto [r, t] : llvm::zip(clone->getResults(), resultTypes))
    r.setType(t);
  results.append(clone->result_begin(), clone->result_end());
  return success();
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
static ArrayRef<int64_t> shapeOf(Type t) {
  return cast<RankedTensorType>(t).getShape();
}

static Value scalarConstant(OpBuilder &b, Location loc, Type elem,
                            double value) {
  auto t = RankedTensorType::get({}, elem);
  Attribute a = isa<FloatType>(elem)
                    ? Attribute(FloatAttr::get(elem, value))
                    : Attribute(IntegerAttr::get(elem, int64_t(value)));
  return ConstantOp::create(b, loc, DenseElementsAttr::get(t, a));
}

namespace {
/// Indices into a table of which this rank holds rows [offset, offset +
/// local) of `global`: the local indices (0 where the row is elsewhere) and
/// the mask of the rows that are here.
struct LocalIndices {
  Value indices, mask;
};
} // namespace

static LocalIndices localizeIndices(OpBuilder &b, Location loc, Value indices,
                                    int64_t local, int64_t global,
                                    PartitionContext &context) {
  Type i64 = b.getI64Type();
  auto type = RankedTensorType::get(shapeOf(indices), i64);
  Value idx = indices;
  if (!getElementTypeOrSelf(idx.getType()).isInteger(64))
    idx = CastOp::create(b, loc, type, idx);
  Value zero = scalarConstant(b, loc, i64, 0);
  // Negative indices count from the end of the whole table.
  Value wrapped =
      AddOp::create(b, loc, idx, scalarConstant(b, loc, i64, global));
  idx =
      WhereOp::create(b, loc, LessOp::create(b, loc, idx, zero), wrapped, idx);
  // The axis is [groups, n]; this rank holds rows [r * block, (r + 1) *
  // block) of every group's n, stored group after group.
  int64_t groups = context.numGroups();
  int64_t n = global / groups, block = local / groups;
  Value group = zero, within = idx;
  if (groups > 1) {
    Value nc = scalarConstant(b, loc, i64, n);
    group = DivOp::create(b, loc, idx, nc);
    within = SubOp::create(b, loc, idx, MulOp::create(b, loc, group, nc));
  }
  Value offset = MulOp::create(b, loc, context.shardIndex(b, loc),
                               scalarConstant(b, loc, i64, block));
  Value shifted = SubOp::create(b, loc, within, offset);
  Value here = AndOp::create(
      b, loc, GreaterOrEqualOp::create(b, loc, shifted, zero),
      LessOp::create(b, loc, shifted, scalarConstant(b, loc, i64, block)));
  if (groups > 1)
    shifted = AddOp::create(
        b, loc,
        MulOp::create(b, loc, group, scalarConstant(b, loc, i64, block)),
        shifted);
  return {WhereOp::create(b, loc, here, shifted, zero), here};
}

/// `mask` (i1) as `like`'s element type, reshaped to broadcast against a
/// tensor of shape `target` whose dimensions [at, at + mask rank) it covers.
static Value maskAs(OpBuilder &b, Location loc, Value mask, Type elem,
                    ArrayRef<int64_t> target, size_t at) {
  ArrayRef<int64_t> m = shapeOf(mask);
  SmallVector<int64_t> shape(target.size(), 1);
  for (size_t i = 0; i < m.size(); ++i)
    shape[at + i] = m[i];
  Value f = CastOp::create(b, loc, RankedTensorType::get(m, elem), mask);
  if (shape == SmallVector<int64_t>(m))
    return f;
  return ReshapeOp::create(b, loc, RankedTensorType::get(shape, elem), f);
}

/// `v` where `mask` holds, zero elsewhere (`mask` covers `v`'s dimensions
/// from `at`).
static Value maskedBy(OpBuilder &b, Location loc, Value v, Value mask,
                      size_t at) {
  return MulOp::create(
      b, loc, v,
      maskAs(b, loc, mask, getElementTypeOrSelf(v.getType()), shapeOf(v), at));
}

/// Whether `local` is a block of `global` along `axis` (the axis is split).
static bool splitAlong(ArrayRef<int64_t> local, ArrayRef<int64_t> global,
                       int64_t axis) {
  return local[axis] != global[axis];
}

LogicalResult GatherOp::partition(OpBuilder &b, ValueRange operands,
                                  TypeRange resultTypes, int64_t factor,
                                  PartitionContext &context,
                                  SmallVectorImpl<Value> &results) {
  int64_t axis = getAxis();
  ArrayRef<int64_t> local = shapeOf(operands[0]);
  if (!splitAlong(local, shapeOf(getData()), axis))
    return detail::partitionByCloning(*this, b, operands, resultTypes, results);
  // Look up the rows this rank holds; the others contribute zeros to a
  // partial sum.
  Location loc = getLoc();
  LocalIndices li = localizeIndices(b, loc, operands[1], local[axis],
                                    shapeOf(getData())[axis], context);
  Value rows =
      GatherOp::create(b, loc, resultTypes[0], operands[0], li.indices, axis);
  results.push_back(maskedBy(b, loc, rows, li.mask, axis));
  return success();
}

LogicalResult ScatterAddOp::partition(OpBuilder &b, ValueRange operands,
                                      TypeRange resultTypes, int64_t factor,
                                      PartitionContext &context,
                                      SmallVectorImpl<Value> &results) {
  int64_t axis = getAxis();
  ArrayRef<int64_t> local = shapeOf(resultTypes[0]);
  if (!splitAlong(local, shapeOf(getOutput()), axis))
    return detail::partitionByCloning(*this, b, operands, resultTypes, results);
  // Add only the updates of rows this rank holds.
  Location loc = getLoc();
  LocalIndices li = localizeIndices(b, loc, operands[1], local[axis],
                                    shapeOf(getOutput())[axis], context);
  Value updates = maskedBy(b, loc, operands[0], li.mask, axis);
  results.push_back(
      ScatterAddOp::create(b, loc, resultTypes[0], updates, li.indices, axis));
  return success();
}

LogicalResult GatherElementsOp::partition(OpBuilder &b, ValueRange operands,
                                          TypeRange resultTypes, int64_t factor,
                                          PartitionContext &context,
                                          SmallVectorImpl<Value> &results) {
  int64_t axis = getAxis();
  ArrayRef<int64_t> local = shapeOf(operands[0]);
  if (!splitAlong(local, shapeOf(getData()), axis))
    return detail::partitionByCloning(*this, b, operands, resultTypes, results);
  Location loc = getLoc();
  LocalIndices li = localizeIndices(b, loc, operands[1], local[axis],
                                    shapeOf(getData())[axis], context);
  Value picked = GatherElementsOp::create(b, loc, resultTypes[0], operands[0],
                                          li.indices, axis);
  results.push_back(maskedBy(b, loc, picked, li.mask, 0));
  return success();
}

LogicalResult ScatterElementsAddOp::partition(OpBuilder &b, ValueRange operands,
                                              TypeRange resultTypes,
                                              int64_t factor,
                                              PartitionContext &context,
                                              SmallVectorImpl<Value> &results) {
  int64_t axis = getAxis();
  ArrayRef<int64_t> local = shapeOf(resultTypes[0]);
  if (!splitAlong(local, shapeOf(getOutput()), axis))
    return detail::partitionByCloning(*this, b, operands, resultTypes, results);
  Location loc = getLoc();
  LocalIndices li = localizeIndices(b, loc, operands[1], local[axis],
                                    shapeOf(getOutput())[axis], context);
  Value updates = maskedBy(b, loc, operands[0], li.mask, 0);
  results.push_back(ScatterElementsAddOp::create(b, loc, resultTypes[0],
                                                 updates, li.indices, axis));
  return success();
}

LogicalResult LogSoftmaxOp::partition(OpBuilder &b, ValueRange operands,
                                      TypeRange resultTypes, int64_t factor,
                                      PartitionContext &context,
                                      SmallVectorImpl<Value> &results) {
  int64_t axis = getAxis();
  if (!splitAlong(shapeOf(operands[0]), shapeOf(getInput()), axis))
    return detail::partitionByCloning(*this, b, operands, resultTypes, results);
  // log_softmax(x) = x - max - log(sum(exp(x - max))), with the maximum
  // and the sum taken over every rank's block of the axis.
  Location loc = getLoc();
  Value x = operands[0];
  Value max = ReduceMaxOp::create(b, loc, x, ArrayRef<int64_t>{axis}, true);
  max = context.allReduce(b, loc, max, ShardingRule::ReductionKind::Max);
  Value shifted = SubOp::create(b, loc, x, max);
  Value e = ExpOp::create(b, loc, shifted.getType(), shifted);
  Value sum = ReduceSumOp::create(b, loc, e, ArrayRef<int64_t>{axis}, true);
  sum = context.allReduce(b, loc, sum, ShardingRule::ReductionKind::Sum);
  Value logSum = LogOp::create(b, loc, sum.getType(), sum);
  results.push_back(SubOp::create(b, loc, shifted, logSum));
  return success();
}

LogicalResult SliceOp::partition(OpBuilder &b, ValueRange operands,
                                 TypeRange resultTypes, int64_t factor,
                                 PartitionContext &context,
                                 SmallVectorImpl<Value> &results) {
  // A split dimension is either whole (start 0) or one of equal, aligned
  // parts whose every block each rank holds: starts scale with the blocks.
  ArrayRef<int64_t> local = shapeOf(operands[0]), global = shapeOf(getInput());
  SmallVector<int64_t> starts(getStarts()), sizes(getSizes());
  ArrayRef<int64_t> out = shapeOf(resultTypes[0]);
  for (size_t d = 0; d < local.size(); ++d) {
    if (local[d] == global[d])
      continue;
    int64_t shards = global[d] / local[d];
    starts[d] /= shards;
    sizes[d] = out[d];
  }
  results.push_back(SliceOp::create(b, getLoc(), resultTypes[0], operands[0],
                                    starts, sizes, getSteps()));
  return success();
}

LogicalResult SplitOp::partition(OpBuilder &b, ValueRange operands,
                                 TypeRange resultTypes, int64_t factor,
                                 PartitionContext &context,
                                 SmallVectorImpl<Value> &results) {
  SmallVector<int64_t> sizes;
  for (Type t : resultTypes)
    sizes.push_back(shapeOf(t)[getAxis()]);
  auto split =
      SplitOp::create(b, getLoc(), resultTypes, operands[0], getAxis(), sizes);
  results.append(split->result_begin(), split->result_end());
  return success();
}

LogicalResult GemmOp::partition(OpBuilder &b, ValueRange operands,
                                TypeRange resultTypes, int64_t factor,
                                PartitionContext &context,
                                SmallVectorImpl<Value> &results) {
  ShardingRule rule = getShardingRule();
  if (!getC() || factor < 0 ||
      rule.factors[factor].kind != ShardingRule::FactorKind::Reduction)
    return detail::partitionByCloning(*this, b, operands, resultTypes, results);
  // Every rank's product is a partial sum: the bias joins only one of them.
  Location loc = getLoc();
  Type i64 = b.getI64Type();
  Value first = EqualOp::create(b, loc, context.shardIndex(b, loc),
                                scalarConstant(b, loc, i64, 0));
  Type elem = getElementTypeOrSelf(operands[2].getType());
  Value once = CastOp::create(b, loc, RankedTensorType::get({}, elem), first);
  SmallVector<Value> newOperands(operands);
  newOperands[2] = MulOp::create(b, loc, operands[2], once);
  return detail::partitionByCloning(*this, b, newOperands, resultTypes,
                                    results);
}
