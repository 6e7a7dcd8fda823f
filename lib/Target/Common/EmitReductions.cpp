//===- EmitReductions.cpp - Reductions of the program ---------------------===//
//
// The program emitter's reductions along an axis or over several: softmax
// and log-softmax (row by row over a fusion they compute on the fly
// where pcc-fuse marked it a row prologue), layer normalization,
// graph.reduce_* and cumulative sums.
//
//===----------------------------------------------------------------------===//

#include "FunctionEmitter.h"

#include "pcc/Target/ScalarExpr.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::detail;
using namespace pcc::graph;

void FunctionEmitter::rowSoftmax(Operation *softmax, FusionOp fusion,
                                 bool log) {
  // The rows are the leading dimensions; each operand of the fusion is
  // read broadcast to the softmax's shape, from its row start plus its
  // step along the row.
  ArrayRef<int64_t> shape = shapeOf(softmax->getResult(0));
  ArrayRef<int64_t> outer = shape.drop_back();
  int64_t n = shape.back();
  Access out = Access::contiguous(outer);
  for (int64_t &st : out.strides)
    st *= n;
  SmallVector<Access> rows{out};
  SmallVector<int64_t> columnStrides{1};
  SmallVector<LoopBuffer> buffers{buffer(softmax->getResult(0), true)};
  for (Value in : fusion.getInputs()) {
    Access a = Access::broadcast(shapeOf(in), shape);
    columnStrides.push_back(a.strides.back());
    a.strides.pop_back();
    rows.push_back(a);
    buffers.push_back(buffer(in));
  }
  hooks.emitRowSoftmax(
      {elemOf(softmax->getResult(0)), LoopNest(outer, rows), columnStrides, n,
       log},
      buffers,
      [&](ArrayRef<std::string> name, ArrayRef<std::string> off,
          StringRef var) {
        SmallVector<std::string> reads;
        for (unsigned k = 1; k < name.size(); ++k)
          reads.push_back(name[k] + "[" + off[k] + "]");
        std::string text;
        SmallVector<std::string> results = fusionScalars(fusion, reads, text);
        return text + var.str() + " = " + results.front() + ";";
      });
}

std::optional<LogicalResult> FunctionEmitter::emitReductionOp(Operation *op) {
  auto result = [&](unsigned i = 0) { return op->getResult(i); };
  std::string t = op->getNumResults() ? type(result()) : "";
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto s) {
        if (auto f = s.getInput().template getDefiningOp<FusionOp>();
            f && absorbed.contains(f)) {
          rowSoftmax(op, f, isa<LogSoftmaxOp>(op));
          return success();
        }
        ArrayRef<int64_t> sh = shapeOf(s.getInput());
        int64_t axis = s.getAxis();
        hooks.emitKernelCall(
            "softmax", {elemOf(result())},
            {ptr(s.getInput()), ptr(result()),
             std::to_string(getNumElements(sh.take_front(axis))),
             std::to_string(sh[axis]),
             std::to_string(getNumElements(sh.drop_front(axis + 1))),
             isa<LogSoftmaxOp>(op) ? "true" : "false"});
        return success();
      })
      .Case([&](LayerNormOp l) -> LogicalResult {
        ArrayRef<int64_t> sh = shapeOf(l.getInput());
        int64_t n = getNumElements(sh.drop_front(l.getAxis()));
        for (Value v : {l.getScale(), l.getBias()})
          if (v && getNumElements(shapeOf(v)) != n)
            return op->emitError("LayerNormalization: broadcast scale/bias "
                                 "is not supported by ")
                   << hooks.getTargetName();
        hooks.emitKernelCall(
            "layerNorm", {elemOf(result())},
            {ptr(l.getInput()), ptr(l.getScale()),
             l.getBias() ? ptr(l.getBias()) : "nullptr", ptr(result(0)),
             ptr(result(1)), ptr(result(2)),
             std::to_string(getNumElements(sh.take_front(l.getAxis()))),
             std::to_string(n),
             t + "(" + getFloatLiteral(l.getEpsilon().convertToFloat(), true) +
                 ")"});
        return success();
      })
      .Case<ReduceMeanOp, ReduceSumOp, ReduceMaxOp, ReduceMinOp>([&](auto r) {
        // Iterate over the input; the output access has stride 0 along
        // reduced dimensions.
        ArrayRef<int64_t> in = shapeOf(r.getInput());
        SmallVector<int64_t> kept;
        for (size_t d = 0; d < in.size(); ++d)
          kept.push_back(llvm::is_contained(r.getAxes(), int64_t(d)) ? 1
                                                                     : in[d]);
        Access ao = Access::broadcast(kept, in);
        for (size_t d = 0; d < in.size(); ++d)
          if (llvm::is_contained(r.getAxes(), int64_t(d)))
            ao.strides[d] = 0;
        using Kind = ReductionLoop::Kind;
        Kind kind = isa<ReduceMaxOp>(op)   ? Kind::Max
                    : isa<ReduceMinOp>(op) ? Kind::Min
                    : isa<ReduceSumOp>(op) ? Kind::Sum
                                           : Kind::Mean;
        int64_t outN = getNumElements(shapeOf(result()));
        ReductionLoop loop{kind,
                           elemOf(result()),
                           ptr(r.getInput()),
                           ptr(result()),
                           LoopNest(in, {ao, Access::contiguous(in)}),
                           outN,
                           getNumElements(in) / std::max<int64_t>(outN, 1)};
        // Over an empty set (a dimension of extent 0 reduced), each output
        // is the reduction's identity: 0 for a sum, -inf for a max, NaN
        // (0 / 0) for a mean.
        if (getNumElements(in) == 0) {
          std::string identity = loop.getIdentity(t);
          if (kind == Kind::Mean && isa<FloatType>(elemOf(result())))
            identity = "std::numeric_limits<" + t + ">::quiet_NaN()";
          hooks.emitFill(ptr(result()), outN, identity);
          return success();
        }
        hooks.emitReduction(loop);
        return success();
      })
      .Case([&](CumSumOp c) {
        ArrayRef<int64_t> s = shapeOf(result());
        int64_t axis = c.getAxis();
        hooks.emitKernelCall(
            "cumSum", {elemOf(result())},
            {ptr(c.getInput()), ptr(result()),
             std::to_string(getNumElements(s.take_front(axis))),
             std::to_string(s[axis]),
             std::to_string(getNumElements(s.drop_front(axis + 1))),
             c.getExclusive() ? "true" : "false",
             c.getReverse() ? "true" : "false"});
        return success();
      })
      .Case([&](TopKOp tk) {
        ArrayRef<int64_t> s = shapeOf(tk.getInput());
        int64_t axis = tk.getAxis();
        hooks.emitKernelCall(
            "topK", {elemOf(tk.getInput())},
            {ptr(tk.getInput()), ptr(result(0)), ptr(result(1)),
             std::to_string(getNumElements(s.take_front(axis))),
             std::to_string(s[axis]),
             std::to_string(getNumElements(s.drop_front(axis + 1))),
             std::to_string(tk.getK()), tk.getLargest() ? "true" : "false"});
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
