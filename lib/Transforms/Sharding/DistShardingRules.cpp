//===- DistShardingRules.cpp - Sharding rules of Dist collectives ---------===//
//
// A mesh is laid out one axis at a time, so the program that a later axis
// lays out holds the collectives of the earlier ones (data parallelism's
// gradient all-reduces, when tensor parallelism is laid out). Their rules
// let the later axis's layouts pass through them: every dimension a
// collective does not move is parallel; the dimension it gathers, scatters
// or slices maps to no factor and stays whole over the later axis. The
// default partition hook (a clone with local types) is right for all of
// them, since their attributes hold dimensions, not extents.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

/// One parallel factor per dimension of `type` but `moved` (and those of
/// extent 1), shared by the operand and the result.
static ShardingRule alongOtherDims(Operation *op, ArrayRef<int64_t> moved) {
  ShardingRule rule;
  auto in = cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = cast<RankedTensorType>(op->getResult(0).getType());
  ShardingRule::TensorFactors operand, result;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    ShardingRule::DimFactors f;
    if (!llvm::is_contained(moved, d) && in.getDimSize(d) != 1 &&
        in.getDimSize(d) == out.getDimSize(d))
      f.push_back(rule.addFactor(in.getDimSize(d)));
    operand.push_back(f);
    result.push_back(f);
  }
  rule.operandFactors = {operand};
  rule.resultFactors = {result};
  return rule;
}

namespace {
template <typename OpT>
struct CollectiveRule
    : ShardingRuleOpInterface::ExternalModel<CollectiveRule<OpT>, OpT> {
  ShardingRule getShardingRule(Operation *op) const {
    auto c = cast<OpT>(op);
    if constexpr (std::is_same_v<OpT, dist::AllReduceOp>)
      return alongOtherDims(op, {});
    else if constexpr (std::is_same_v<OpT, dist::AllToAllOp>)
      return alongOtherDims(op, {c.getSplitDim(), c.getConcatDim()});
    else
      return alongOtherDims(op, {c.getDim()});
  }
};
} // namespace

void pcc::registerDistShardingRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, dist::DistDialect *) {
    dist::AllReduceOp::attachInterface<CollectiveRule<dist::AllReduceOp>>(*ctx);
    dist::AllGatherOp::attachInterface<CollectiveRule<dist::AllGatherOp>>(*ctx);
    dist::ReduceScatterOp::attachInterface<
        CollectiveRule<dist::ReduceScatterOp>>(*ctx);
    dist::AllToAllOp::attachInterface<CollectiveRule<dist::AllToAllOp>>(*ctx);
    dist::AllSliceOp::attachInterface<CollectiveRule<dist::AllSliceOp>>(*ctx);
  });
}
