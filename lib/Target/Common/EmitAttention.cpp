//===- EmitAttention.cpp - Fused attention of the program -----------------===//
//
// The program emitter's graph.attention and graph.attention_grad: one call
// of the target's FlashAttention kernels (pcc_k::attention on the CPU,
// pcc_cu::attention on CUDA), given the extents and, per operand, the
// strides of its batch, head and sequence dimensions and of a bias's
// broadcast over [batch, heads, queries, keys], and a soft cap and a
// sliding window if any. A generation step's paged KV cache:
// graph.cache_write and graph.paged_attention, one kernel call each, given
// the extents of the step and the cache (PagedShape).
//
//===----------------------------------------------------------------------===//

#include "FunctionEmitter.h"

#include "pcc/Target/ScalarExpr.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::detail;
using namespace pcc::graph;

/// The shapes' last members, a soft cap and a sliding window, where set
/// (both default to 0, none).
static std::string capAndWindow(std::optional<APFloat> softcap,
                                std::optional<int64_t> window) {
  if (!softcap && !window)
    return "";
  std::string text =
      ", " + getFloatLiteral(softcap ? softcap->convertToFloat() : 0.0f,
                             /*isFloat=*/true);
  if (window)
    text += ", " + std::to_string(*window);
  return text;
}

/// The kernels' AttentionShape, as a braced initializer: extents, the
/// strides of query, key and value (`operands`: each one's four, in the
/// op's dimension order, where it is read), of the output (dense, [B, H,
/// T, E] or with `sequenceFirst` [B, T, H, E]) and the bias's.
static std::string attentionShape(ArrayRef<AttentionOperand> operands,
                                  Value query, Value key, Value value,
                                  Value bias, float scale, bool causal,
                                  std::optional<APFloat> softcap,
                                  std::optional<int64_t> window,
                                  bool sequenceFirst = false) {
  SmallVector<int64_t, 4> q = swapHeadsSequence(shapeOf(query), sequenceFirst),
                          k = swapHeadsSequence(shapeOf(key), sequenceFirst),
                          v = swapHeadsSequence(shapeOf(value), sequenceFirst);
  // The strides of the batch, head and sequence dimensions of strides in
  // the op's layout.
  auto strides = [&](ArrayRef<int64_t> layout) {
    SmallVector<int64_t> s = swapHeadsSequence(layout, sequenceFirst);
    return "{" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " +
           std::to_string(s[2]) + "}";
  };
  SmallVector<int64_t> biasStrides(4, 0);
  if (bias)
    biasStrides =
        Access::broadcast(shapeOf(bias), {q[0], q[1], q[2], k[2]}).strides;
  SmallVector<int64_t> out{q[0], q[1], q[2], v[3]};
  std::string text = "{";
  for (int64_t extent : {q[0], q[1], k[1], q[2], k[2], q[3], v[3]})
    text += std::to_string(extent) + ", ";
  for (const AttentionOperand &operand : operands)
    text += strides(operand.strides) + ", ";
  text += strides(getContiguousStrides(swapHeadsSequence(out, sequenceFirst))) +
          ", {";
  llvm::interleave(
      biasStrides, [&](int64_t s) { text += std::to_string(s); },
      [&] { text += ", "; });
  text += "}, " + getFloatLiteral(scale, /*isFloat=*/true) + ", " +
          (causal ? "true" : "false");
  return text + capAndWindow(softcap, window) + "}";
}

/// The kernels' PagedShape, as a braced initializer, of a step whose
/// queries (or rows) are `query` [1, H, N, D], whose caches are `keys` and
/// `values` and whose block table is `table`.
static std::string pagedShape(Value query, Value keys, Value values,
                              Value table, float scale,
                              std::optional<APFloat> softcap = std::nullopt,
                              std::optional<int64_t> window = std::nullopt) {
  ArrayRef<int64_t> q = shapeOf(query), k = shapeOf(keys), t = shapeOf(table);
  std::string text = "{";
  for (int64_t extent : {q[2], q[1], k[1], k[3], shapeOf(values)[3], k[0],
                         k[2], t[0], t[1]})
    text += std::to_string(extent) + ", ";
  text += getFloatLiteral(scale, /*isFloat=*/true);
  return text + capAndWindow(softcap, window) + "}";
}

std::optional<LogicalResult> FunctionEmitter::emitAttentionOp(Operation *op) {
  // The query, key and value where their data movement started (the split
  // of a fused QKV projection, the head transposes), at their layouts.
  SmallVector<AttentionOperand, 3> operands;
  SmallVector<std::string, 3> pointers;
  if (isa<AttentionOp, AttentionGradOp>(op))
    for (OpOperand &operand : op->getOpOperands().take_front(3)) {
      operands.push_back(gemmOperands->getAttention(operand));
      pointers.push_back(ptr(operands.back().buffer));
      if (int64_t offset = operands.back().offset)
        pointers.back() += " + " + std::to_string(offset);
    }
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](AttentionOp a) -> LogicalResult {
        hooks.emitKernelCall(
            "attention", {elemOf(a.getOutput())},
            {pointers[0], pointers[1], pointers[2],
             a.getBias() ? ptr(a.getBias()) : "nullptr",
             a.getSinks() ? ptr(a.getSinks()) : "nullptr", ptr(a.getOutput()),
             ptr(a.getLse()),
             attentionShape(operands, a.getQuery(), a.getKey(), a.getValue(),
                            a.getBias(), a.getScale().convertToFloat(),
                            a.getCausal(), a.getSoftcap(), a.getWindow(),
                            a.getSequenceFirst())});
        return success();
      })
      .Case([&](AttentionGradOp g) -> LogicalResult {
        hooks.emitKernelCall(
            "attentionGrad", {elemOf(g.getQueryGrad())},
            {pointers[0], pointers[1], pointers[2],
             g.getBias() ? ptr(g.getBias()) : "nullptr", ptr(g.getOutput()),
             ptr(g.getLse()), ptr(g.getOutputGrad()), ptr(g.getQueryGrad()),
             ptr(g.getKeyGrad()), ptr(g.getValueGrad()),
             attentionShape(operands, g.getQuery(), g.getKey(), g.getValue(),
                            g.getBias(), g.getScale().convertToFloat(),
                            g.getCausal(), g.getSoftcap(), g.getWindow())});
        return success();
      })
      .Case([&](CacheWriteOp w) -> LogicalResult {
        // In place, unless the buffer plan gave the result a buffer of its
        // own (the cache operand is a constant): then the cache is copied
        // there first.
        hooks.emitCopy(ptr(w.getUpdated()), ptr(w.getCache()),
                       getTensorBytes(w.getCache().getType()),
                       /*mayAlias=*/true);
        hooks.emitKernelCall(
            "cacheWrite", {elemOf(w.getUpdated())},
            {ptr(w.getUpdated()), ptr(w.getRows()), ptr(w.getSlots()),
             ptr(w.getPositions()), ptr(w.getBlockTables()),
             pagedShape(w.getRows(), w.getCache(), w.getCache(),
                        w.getBlockTables(), 1.0f),
             std::to_string(shapeOf(w.getCache())[3])},
            "PCCRT_ERR_INDEX_OUT_OF_RANGE");
        return success();
      })
      .Case([&](PagedAttentionOp a) -> LogicalResult {
        hooks.emitKernelCall(
            "pagedAttention", {elemOf(a.getOutput())},
            {ptr(a.getQuery()), ptr(a.getKeyCache()), ptr(a.getValueCache()),
             ptr(a.getSlots()), ptr(a.getPositions()), ptr(a.getBlockTables()),
             ptr(a.getOutput()),
             pagedShape(a.getQuery(), a.getKeyCache(), a.getValueCache(),
                        a.getBlockTables(), a.getScale().convertToFloat(),
                        a.getSoftcap(), a.getWindow()),
             a.getSlopes() ? ptr(a.getSlopes()) : "nullptr",
             a.getSinks() ? ptr(a.getSinks()) : "nullptr"},
            "PCCRT_ERR_INDEX_OUT_OF_RANGE");
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
