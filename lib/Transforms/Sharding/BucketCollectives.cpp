//===- BucketCollectives.cpp - Gradient all-reduces in buckets ------------===//
//
// Data parallelism all-reduces every parameter's gradient over `dp`. One
// collective per parameter pays a collective's latency hundreds of times
// per step (GPT-2 has 148 parameters, many of a few kilobytes); DDP and
// Megatron join the gradients into buckets of a few megabytes instead. This
// pass does the same in IR: the sum all-reduces over the axes `axes`, taken
// in the order their inputs are ready, are joined into buckets of at most
// `bucket-bytes` (a larger tensor forms a bucket of its own): the inputs
// are flattened and concatenated, reduced by one all-reduce, and cut back
// into the members' shapes. The bucket's collective stands right after its
// last input is made, so it starts once its last gradient is final; a
// bucket closes where the next input would be ready only after a member's
// result is read.
//
//===----------------------------------------------------------------------===//

#include "ShardingSolver.h"

#include "pcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"

namespace pcc {
#define GEN_PASS_DEF_BUCKETCOLLECTIVES
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;

/// Replaces `members` (all-reduces alike but for their shapes) by one
/// all-reduce of their flattened, concatenated inputs, placed before `at`.
static void join(MutableArrayRef<dist::AllReduceOp> members, Operation *at) {
  OpBuilder b(at);
  Location loc = members.back().getLoc();
  Type elem = getElementTypeOrSelf(members.front().getType());
  SmallVector<Value> flat;
  for (dist::AllReduceOp m : members) {
    auto t = cast<RankedTensorType>(m.getType());
    int64_t n = t.getNumElements();
    flat.push_back(
        t.getRank() == 1
            ? m.getInput()
            : graph::ReshapeOp::create(b, loc, RankedTensorType::get({n}, elem),
                                       m.getInput()));
  }
  Value bucket = graph::ConcatOp::create(b, loc, flat, 0);
  dist::AllReduceOp first = members.front();
  Value sum = dist::AllReduceOp::create(b, loc, bucket.getType(), bucket,
                                        first.getMeshAttr(), first.getAxes(),
                                        first.getKindAttr());
  int64_t offset = 0;
  for (dist::AllReduceOp m : members) {
    auto t = cast<RankedTensorType>(m.getType());
    int64_t n = t.getNumElements();
    Value part =
        graph::SliceOp::create(b, loc, sum, ArrayRef<int64_t>{offset},
                               ArrayRef<int64_t>{n}, ArrayRef<int64_t>{1});
    Value shaped =
        t.getRank() == 1 ? part : graph::ReshapeOp::create(b, loc, t, part);
    m.getResult().replaceAllUsesWith(shaped);
    offset += n;
  }
  for (dist::AllReduceOp m : members)
    m.erase();
}

namespace {
struct BucketCollectivesPass
    : pcc::impl::BucketCollectivesBase<BucketCollectivesPass> {
  using BucketCollectivesBase::BucketCollectivesBase;

  void runOnOperation() override {
    if (bucketBytes <= 0)
      return;
    SmallVector<StringRef> wanted;
    for (StringRef a : llvm::split(StringRef(axes), ','))
      if (!a.empty())
        wanted.push_back(a);
    for (Block &block : getOperation().getBody()) {
      llvm::DenseMap<Operation *, size_t> position;
      for (auto [i, op] : llvm::enumerate(block))
        position[&op] = i;
      auto readyAt = [&](dist::AllReduceOp op) -> size_t {
        Operation *def = op.getInput().getDefiningOp();
        return def && def->getBlock() == &block ? position[def] : 0;
      };
      // The candidates, in the order their inputs are ready.
      SmallVector<dist::AllReduceOp> candidates;
      for (auto op : block.getOps<dist::AllReduceOp>())
        if (op.getKind() == dist::ReductionKind::Sum &&
            llvm::equal(op.getAxes().getAsValueRange<StringAttr>(), wanted) &&
            isa<FloatType>(getElementTypeOrSelf(op.getType())))
          candidates.push_back(op);
      llvm::stable_sort(
          candidates, [&](auto a, auto b) { return readyAt(a) < readyAt(b); });
      // The first use of each candidate's result.
      auto firstUse = [&](dist::AllReduceOp op) {
        size_t first = SIZE_MAX;
        for (Operation *user : op->getUsers())
          first = std::min(first, position[block.findAncestorOpInBlock(*user)]);
        return first;
      };
      // A bucket's all-reduce goes right after its last input is made, so
      // every member's input must be ready before any member's result is
      // read.
      SmallVector<SmallVector<dist::AllReduceOp>> buckets;
      SmallVector<dist::AllReduceOp> current;
      int64_t bytes = 0;
      size_t ready = 0, use = SIZE_MAX;
      auto close = [&]() {
        if (current.size() > 1)
          buckets.push_back(current);
        current.clear();
        bytes = 0;
        ready = 0;
        use = SIZE_MAX;
      };
      for (dist::AllReduceOp op : candidates) {
        int64_t size = sharding::byteSize(op.getInput().getType());
        bool fits = !current.empty() && bytes + size <= bucketBytes &&
                    getElementTypeOrSelf(op.getType()) ==
                        getElementTypeOrSelf(current.front().getType()) &&
                    std::max(ready, readyAt(op)) < std::min(use, firstUse(op));
        if (!fits)
          close();
        current.push_back(op);
        bytes += size;
        ready = std::max(ready, readyAt(op));
        use = std::min(use, firstUse(op));
      }
      close();
      for (auto &bucket : buckets) {
        // Just after the input made last (inputs that are arguments are
        // ready at the start).
        Operation *lastInput = nullptr;
        for (dist::AllReduceOp op : bucket)
          if (Operation *def = op.getInput().getDefiningOp();
              def && def->getBlock() == &block &&
              (!lastInput || position[def] > position[lastInput]))
            lastInput = def;
        join(bucket, lastInput ? lastInput->getNextNode() : &block.front());
      }
    }
  }
};
} // namespace
