//===- DataParallel.cpp - The batch split over a data-parallel axis -------===//
//
// Data parallelism is one more mesh axis that the sharding passes lay out:
// this pass only adds the axis and states that the graph inputs are split
// along their batch dimension over it. Propagation over `dp` then carries
// the split through the step (every op's rule says where its batch factor
// goes); parameters stay whole, so the products that contract over the
// batch (weight gradients, the loss's mean) leave partial results that are
// combined over `dp` where they are first needed whole: each gradient as
// soon as it is final, which the optimizer reads.
//
//===----------------------------------------------------------------------===//

#include "ShardingSolver.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipeline/Pipeline.h"

#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace pcc {
#define GEN_PASS_DEF_DATAPARALLEL
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;
using namespace pcc::sharding;

/// The batch dimension of graph input `arg`: the one the microbatch pass
/// sliced (`dist.batch_dim`), else the leading one.
static int64_t batchDimOf(func::FuncOp func, BlockArgument arg) {
  if (auto d =
          func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kBatchDimAttr))
    return d.getInt();
  return 0;
}

/// Makes the outputs of `func` that an earlier axis split along another
/// dimension than their batch (a training step's logits, split over tp's
/// vocabulary) whole along it, gathered over that axis, so that data
/// parallelism keeps them split along their batch: a runtime tensor splits
/// one dimension, and gathering them over dp instead would send every
/// replica's outputs to every rank (the logits of the whole batch, between
/// nodes) where the earlier axis's group stays inside one.
static void gatherOtherSplits(func::FuncOp func) {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (unsigned k = 0; k < func.getNumResults(); ++k) {
    auto stated =
        func.getResultAttrOfType<dist::ShardingAttr>(k, kShardingAttr);
    if (!stated || func.getResultAttr(k, kLossAttr) ||
        getStateIndex(func, k, kGradAttr) ||
        getStateIndex(func, k, kUpdateAttr) ||
        (stated.getPartialAxes() && !stated.getPartialAxes().empty()))
      continue;
    auto type = dyn_cast<RankedTensorType>(ret.getOperand(k).getType());
    int64_t batchDim = 0;
    if (auto d = func.getResultAttrOfType<IntegerAttr>(k, kBatchDimAttr))
      batchDim = d.getInt();
    // One split dimension, not the batch's, of contiguous blocks.
    SmallVector<unsigned> split;
    for (unsigned d = 0; d < stated.getDims().size(); ++d)
      if (!stated.getDimAxes(d).empty())
        split.push_back(d);
    if (!type || split.size() != 1 || int64_t(split[0]) == batchDim ||
        (stated.getGroups() && llvm::any_of(stated.getGroups().asArrayRef(),
                                            [](int64_t g) { return g != 1; })))
      continue;
    unsigned dim = split[0];
    SmallVector<StringRef> axes = stated.getDimAxes(dim);
    auto module = func->getParentOfType<ModuleOp>();
    auto mesh = module.lookupSymbol<dist::MeshOp>(dist::kMeshName);
    int64_t shards = 1;
    for (StringRef axis : axes)
      shards *= mesh.getAxisSize(axis).value_or(1);
    OpBuilder b(ret);
    Type elem = type.getElementType();
    SmallVector<Attribute> axisNames;
    for (StringRef axis : axes)
      axisNames.push_back(b.getStringAttr(axis));
    Value result = alongOutermost(
        b, ret.getLoc(), ret.getOperand(k), dim, [&](Value x) -> Value {
          SmallVector<int64_t> whole(
              cast<RankedTensorType>(x.getType()).getShape());
          whole[0] *= shards;
          return dist::AllGatherOp::create(
              b, ret.getLoc(), RankedTensorType::get(whole, elem), x,
              FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
              b.getArrayAttr(axisNames), b.getI64IntegerAttr(0));
        });
    ret.setOperand(k, result);
    func.removeResultAttr(k, StringAttr::get(func.getContext(), kShardingAttr));
  }
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                 ret.getOperandTypes()));
}

LogicalResult pcc::splitBatch(func::FuncOp func, int64_t dp) {
  if (dp == 1)
    return success();
  if (dp < 1)
    return func.emitError("--dp must be at least 1, got ") << dp;
  Block &body = func.getBody().front();
  auto isInput = [&](BlockArgument arg) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    return t && t.getRank() > 0 &&
           !func.getArgAttr(arg.getArgNumber(), kStateAttr);
  };
  // The batch: the extent of the first graph input's batch dimension.
  int64_t batch = -1;
  for (BlockArgument arg : body.getArguments())
    if (isInput(arg)) {
      batch = cast<RankedTensorType>(arg.getType())
                  .getDimSize(batchDimOf(func, arg));
      break;
    }
  if (batch < 0)
    return func.emitError("--dp ")
           << dp << ": the model has no input with a batch dimension";
  MLIRContext *ctx = func.getContext();
  for (BlockArgument arg : body.getArguments()) {
    if (!isInput(arg))
      continue;
    auto t = cast<RankedTensorType>(arg.getType());
    int64_t dim = batchDimOf(func, arg);
    if (dim >= t.getRank() || t.getDimSize(dim) != batch)
      continue; // not per example (a position table of one row)
    if (batch % dp != 0) {
      auto name =
          func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kOnnxNameAttr);
      // A microbatched step computes one of M slices of the batch: each
      // replica's share must split into them.
      auto m = func->getAttrOfType<IntegerAttr>(kMicrobatchesAttr);
      if (m && m.getInt() > 1)
        return func.emitError("--dp ")
               << dp << " x " << m.getInt()
               << " microbatches does not divide the batch ("
               << batch * m.getInt() << ") of input '"
               << (name ? name.getValue() : StringRef("?")) << "'";
      return func.emitError("--dp ")
             << dp << " does not divide the batch (" << batch << ") of input '"
             << (name ? name.getValue() : StringRef("?")) << "'";
    }
    func.setArgAttr(
        arg.getArgNumber(), kShardingAttr,
        toAttr(ctx, dist::kDataAxis, Layout::split(dim), t.getRank(),
               func.getArgAttrOfType<dist::ShardingAttr>(arg.getArgNumber(),
                                                         kShardingAttr)));
  }
  return success();
}

/// ZeRO 3: the backward reads its own copy of every value computed from
/// parameters alone (through ops of the forward), so that it gathers the
/// parameter again rather than keeping the forward's gathered copy alive.
static void separateBackwardReads(func::FuncOp func) {
  Block &body = func.getBody().front();
  // Values computed from state and constants alone, by forward ops.
  llvm::DenseSet<Value> fromParameters;
  for (BlockArgument arg : body.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), kStateAttr))
      fromParameters.insert(arg);
  for (Operation &op : body.without_terminator())
    if (op.getNumResults() > 0 && !op.hasAttr(kBackwardAttr) &&
        op.getNumRegions() == 0 && llvm::all_of(op.getOperands(), [&](Value v) {
          return fromParameters.contains(v) ||
                 (v.getDefiningOp() && isa<ConstantOp>(v.getDefiningOp()));
        }))
      fromParameters.insert_range(op.getResults());
  llvm::DenseMap<Value, Value> copies;
  std::function<Value(Value, OpBuilder &)> copy = [&](Value v,
                                                      OpBuilder &b) -> Value {
    Operation *def = v.getDefiningOp();
    if (!def || isa<ConstantOp>(def) || !fromParameters.contains(v))
      return v;
    if (Value known = copies.lookup(v))
      return known;
    IRMapping mapping;
    for (Value o : def->getOperands())
      mapping.map(o, copy(o, b));
    Operation *clone = b.clone(*def, mapping);
    clone->setAttr(kBackwardAttr, b.getUnitAttr());
    for (auto [from, to] : llvm::zip(def->getResults(), clone->getResults()))
      copies[from] = to;
    return copies.lookup(v);
  };
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    if (!op.hasAttr(kBackwardAttr))
      continue;
    OpBuilder b(&op);
    for (OpOperand &use : op.getOpOperands())
      if (Operation *def = use.get().getDefiningOp();
          def && !def->hasAttr(kBackwardAttr) &&
          fromParameters.contains(use.get()))
        use.set(copy(use.get(), b));
  }
}

namespace {
struct DataParallelPass : pcc::impl::DataParallelBase<DataParallelPass> {
  using DataParallelBase::DataParallelBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dp == 1)
      return;
    if (dp < 1) {
      module.emitError("--dp must be at least 1, got ") << int64_t(dp);
      return signalPassFailure();
    }
    FailureOr<dist::MeshOp> mesh =
        dist::getOrAddMeshAxis(module, dist::kDataAxis, dp);
    if (failed(mesh))
      return signalPassFailure();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (!func.isExternal())
        gatherOtherSplits(func);
      if (failed(splitBatch(func, dp)))
        return signalPassFailure();
      if (zero >= 3)
        separateBackwardReads(func);
    }
  }
};
} // namespace
