//===- EmitProducts.cpp - Matrix products of the program ------------------===//
//
// The program emitter's graph.matmul and graph.gemm: a GEMM call on the
// operands where their data movement started (GemmOperands), with the
// bias and the element-wise op that pcc-fuse marked as its epilogue run
// on each block of C where the target supports it.
//
//===----------------------------------------------------------------------===//

#include "FunctionEmitter.h"

#include "pcc/Target/ScalarExpr.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::detail;
using namespace pcc::graph;

void FunctionEmitter::emitGemm(const GemmCall &call) {
  hooks.emitGemm(call);
  if (call.preparableB >= 0 && hooks.readsPreparedB(call))
    tables.noteWeightRead(call.preparableB, /*prepared=*/true);
}

GemmEpilogue FunctionEmitter::getEpilogue(Operation *product, int64_t m,
                                          int64_t n, Value bias, float beta,
                                          Operation *consumer) {
  Value result = product->getResult(0);
  GemmEpilogue e;
  auto add = [&](Value v, bool written, int64_t row, int64_t column) {
    e.buffers.push_back(buffer(v, written));
    e.rowStrides.push_back(row);
    e.columnStrides.push_back(column);
  };
  add(result, /*written=*/true, n, 1);
  if (bias) {
    Access a = Access::broadcast(shapeOf(bias), {m, n});
    add(bias, false, a.strides[0], a.strides[1]);
  }
  // The consumer's results, then its operands other than the product's
  // result (each once); `reads[k]` is the buffer of consumer operand k, or
  // -1 for the product's value.
  SmallVector<int> reads;
  unsigned firstResult = e.buffers.size();
  ArrayRef<int64_t> space;
  unsigned t = 0;
  if (consumer) {
    space = shapeOf(consumer->getResult(0));
    t = *pcc::getRowDims(space, n);
    for (Value r : consumer->getResults())
      add(r, /*written=*/true, n, 1);
    llvm::SmallPtrSet<Value, 4> views;
    pcc::getViewChain(result, views);
    llvm::DenseMap<Value, int> seen;
    for (Value in : consumer->getOperands()) {
      if (views.contains(in)) {
        reads.push_back(-1);
        continue;
      }
      auto [it, inserted] = seen.try_emplace(in, e.buffers.size());
      if (inserted) {
        auto [row, column] = *pcc::getRowColumnStrides(
            Access::broadcast(shapeOf(in), space).strides, space, t);
        add(in, false, row, column);
      }
      reads.push_back(it->second);
    }
  }
  std::string t0 = type(result);
  e.element = [=, this](ArrayRef<std::string> name,
                        ArrayRef<std::string> off) -> std::string {
    std::string value = name[0] + "[" + off[0] + "]";
    if (bias)
      value = t0 + "(" + value + " + " + t0 + "(" +
              getFloatLiteral(beta, true) + ") * " + name[1] + "[" + off[1] +
              "])";
    if (!consumer)
      return name[0] + "[" + off[0] + "] = " + value + ";";
    std::string text = t0 + " c = " + value + "; ";
    SmallVector<std::string> args;
    for (int k : reads)
      args.push_back(k < 0 ? std::string("c") : name[k] + "[" + off[k] + "]");
    SmallVector<std::string> results;
    if (auto f = dyn_cast<FusionOp>(consumer))
      results = fusionScalars(f, args, text);
    else
      results.push_back(*getScalarExpr(consumer, args, hooks));
    for (auto [k, r] : llvm::enumerate(results))
      text += name[firstResult + k] + "[" + off[firstResult + k] + "] = " + r +
              "; ";
    return text;
  };
  return e;
}

std::optional<LogicalResult> FunctionEmitter::emitProductOp(Operation *op) {
  auto result = [&](unsigned i = 0) { return op->getResult(i); };
  std::string t = op->getNumResults() ? type(result()) : "";
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](MatMulOp m) {
        SmallVector<int64_t> a(shapeOf(m.getLhs())), b(shapeOf(m.getRhs()));
        if (a.size() == 1)
          a.insert(a.begin(), 1);
        if (b.size() == 1)
          b.push_back(1);
        int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
        if (M * N == 0)
          return success();
        // The operands are read where their data movement started (the
        // buffer its chain of views reads), as the layout says.
        MatrixOperand lhs = gemmOperands->get(m->getOpOperand(0));
        MatrixOperand rhs = gemmOperands->get(m->getOpOperand(1));
        SmallVector<int64_t> batch(
            *broadcastShapes(ArrayRef<int64_t>(a).drop_back(2),
                             ArrayRef<int64_t>(b).drop_back(2)));
        // Each operand's batch dimensions step by their strides in the
        // layout (0 where broadcast).
        auto batchAccess = [&](ArrayRef<int64_t> shape,
                               const MatrixOperand &operand) {
          return Access::broadcast(shape, batch, operand.batchStrides,
                                   operand.offset);
        };
        Access ac = Access::contiguous(batch);
        for (int64_t &s : ac.strides)
          s *= M * N;
        LoopNest nest(
            batch, {batchAccess(ArrayRef<int64_t>(a).drop_back(2), lhs),
                    batchAccess(ArrayRef<int64_t>(b).drop_back(2), rhs), ac});
        // A batch that runs as one product: all of A's rows at once.
        if (std::optional<int64_t> rows = gemmOperands->getProductRows(m)) {
          M = *rows;
          batch.clear();
          nest = LoopNest(
              {}, {Access{lhs.offset, {}}, Access{rhs.offset, {}}, Access()});
        }
        GemmCall call{elemOf(result()),
                      M,
                      N,
                      K,
                      t + "(1)",
                      t + "(0)",
                      ptr(lhs.buffer),
                      ptr(rhs.buffer),
                      ptr(result()),
                      lhs.ld,
                      rhs.ld,
                      N,
                      lhs.transposed,
                      rhs.transposed,
                      nest};
        if (getNumElements(batch) == 1)
          setPreparableB(call, rhs, m.getRhs());
        GemmEpilogue epilogue;
        Operation *consumer = epilogueConsumer.lookup(op);
        // pcc-fuse gives an epilogue to one product only.
        if (consumer && getNumElements(batch) != 1)
          return LogicalResult(op->emitOpError(
              "has an epilogue but runs as a batch of products"));
        if (Operation *sum = accumulateInto.lookup(op)) {
          // The product adds itself to the partial sum, in its buffer.
          call.c = ptr(sum->getResult(0));
          call.beta = t + "(1)";
        } else if (consumer) {
          epilogue = getEpilogue(op, M, N, Value(), 0.0f, consumer);
          call.epilogue = &epilogue;
        }
        emitGemm(call);
        return success();
      })
      .Case([&](GemmOp g) {
        ArrayRef<int64_t> c = shapeOf(result());
        ArrayRef<int64_t> as = shapeOf(g.getA());
        int64_t K = g.getTransA() ? as[0] : as[1];
        float beta = g.getBeta().convertToFloat();
        // The bias is added as the product finishes each block of C where
        // the target runs epilogues; else C is scaled by beta first, then
        // accumulated into.
        Value bias = g.getC();
        bool biasAfter = bias && hooks.supportsGemmEpilogue();
        if (bias && !biasAfter)
          elementwise(op, {bias}, [&](ArrayRef<std::string> a) {
            return t + "(" + getFloatLiteral(beta, true) + " * " + a[0] + ")";
          });
        // The operands are read where their data movement started: a
        // transposed layout flips the flag, and the leading dimension and
        // offset are the layout's.
        MatrixOperand lhs = gemmOperands->get(g->getOpOperand(0));
        MatrixOperand rhs = gemmOperands->get(g->getOpOperand(1));
        GemmCall call{elemOf(result()),
                      c[0],
                      c[1],
                      K,
                      t + "(" +
                          getFloatLiteral(g.getAlpha().convertToFloat(), true) +
                          ")",
                      t + (bias && !biasAfter ? "(1)" : "(0)"),
                      ptr(lhs.buffer),
                      ptr(rhs.buffer),
                      ptr(result()),
                      lhs.ld,
                      rhs.ld,
                      c[1],
                      g.getTransA() != lhs.transposed,
                      g.getTransB() != rhs.transposed,
                      LoopNest({}, {Access{lhs.offset, {}},
                                    Access{rhs.offset, {}}, Access()})};
        setPreparableB(call, rhs, g.getB());
        GemmEpilogue epilogue;
        Operation *consumer = epilogueConsumer.lookup(op);
        if (Operation *sum = accumulateInto.lookup(op)) {
          // The product adds itself to the partial sum, in its buffer.
          call.c = ptr(sum->getResult(0));
          call.beta = t + "(1)";
        } else if (biasAfter || consumer) {
          epilogue = getEpilogue(op, c[0], c[1], biasAfter ? bias : Value(),
                                 beta, consumer);
          call.epilogue = &epilogue;
        }
        emitGemm(call);
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
