//===- ReplicateKVHeads.cpp - A key/value head per tensor-parallel rank ---===//
//
// Grouped-query attention with fewer key/value heads G than tensor-parallel
// ranks cannot split its key/value heads over the ranks. Each rank's query
// heads (H / tp of them) all read one key/value head, h / (H / G), so each
// rank needs exactly one: the pass repeats every key/value head tp / G
// times before the attention, and the repeated heads split one per rank
// like any others (vLLM's replication of KV heads). The sharding solver
// then keeps the small key/value projections whole on each rank, and each
// rank gathers its head from them; a generation build's KV cache, derived
// from the attention's key and value, holds one head per rank.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace pcc {
#define GEN_PASS_DEF_REPLICATEKVHEADS
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

namespace {

/// `v` ([B, G, T, D], or [B, T, G, D] sequence-first) with each of its G
/// heads (along `axis`) repeated `copies` times, in order.
Value repeatHeads(OpBuilder &b, Location loc, Value v, int64_t axis,
                  int64_t copies) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t heads = type.getDimSize(axis);
  SmallVector<int64_t> picks;
  for (int64_t h = 0; h < heads * copies; ++h)
    picks.push_back(h / copies);
  auto indexType =
      RankedTensorType::get({heads * copies}, b.getIntegerType(64));
  Value indices = ConstantOp::create(
      b, loc, DenseElementsAttr::get(indexType, ArrayRef<int64_t>(picks)));
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = heads * copies;
  return GatherOp::create(b, loc,
                          RankedTensorType::get(shape, type.getElementType()),
                          v, indices, axis);
}

struct ReplicateKVHeadsPass
    : public pcc::impl::ReplicateKVHeadsBase<ReplicateKVHeadsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (tp <= 1)
      return;
    getOperation().walk([&](AttentionOp attention) {
      auto query = cast<RankedTensorType>(attention.getQuery().getType());
      auto key = cast<RankedTensorType>(attention.getKey().getType());
      if (query.getRank() != 4 || key.getRank() != 4)
        return;
      // The heads' dimension of either layout.
      int64_t headDim = attention.getSequenceFirst() ? 2 : 1;
      int64_t heads = query.getDimSize(headDim),
              groups = key.getDimSize(headDim);
      // Heads tp divides split as they are; heads that cannot split over
      // tp at all are ShardStrategy's error to report.
      if (groups % tp == 0 || tp % groups != 0 || heads % tp != 0)
        return;
      OpBuilder b(attention);
      int64_t copies = tp / groups;
      Location loc = attention.getLoc();
      attention.getKeyMutable().assign(
          repeatHeads(b, loc, attention.getKey(), headDim, copies));
      attention.getValueMutable().assign(
          repeatHeads(b, loc, attention.getValue(), headDim, copies));
    });
  }
};

} // namespace
