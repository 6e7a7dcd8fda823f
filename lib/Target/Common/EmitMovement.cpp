//===- EmitMovement.cpp - Data movement of the program --------------------===//
//
// The program emitter's data movement that is not a view: transposes,
// broadcasts, slices, concatenation and splits as strided copies;
// gathers, scatters and trilu as calls of the target's kernel library.
//
//===----------------------------------------------------------------------===//

#include "FunctionEmitter.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::detail;
using namespace pcc::graph;

void FunctionEmitter::copy(Value src, const Access &srcAccess, Value dst,
                           const Access &dstAccess, ArrayRef<int64_t> shape) {
  copyFrom(ptr(src), src, srcAccess, dst, dstAccess, shape);
}

void FunctionEmitter::copyFrom(StringRef srcPointer, Value src,
                               const Access &srcAccess, Value dst,
                               const Access &dstAccess,
                               ArrayRef<int64_t> shape) {
  LoopNest nest(shape, {dstAccess, srcAccess});
  // A dense block onto a dense block (a concat's piece, a split's part, a
  // slice of whole rows) is one copy, not a loop of its own: a gradient
  // bucket packs a piece per parameter.
  ArrayRef<int64_t> bounds = nest.getBounds();
  if (!nest.isEmpty() && bounds.size() <= 1 &&
      (bounds.empty() || (nest.getAccess(0).strides[0] == 1 &&
                          nest.getAccess(1).strides[0] == 1))) {
    auto at = [](StringRef pointer, int64_t base) {
      return base ? "(" + pointer.str() + " + " + std::to_string(base) + ")"
                  : pointer.str();
    };
    int64_t elementBytes =
        getTensorBytes(RankedTensorType::get({1}, elemOf(src)));
    hooks.emitCopy(at(ptr(dst), nest.getAccess(0).base),
                   at(srcPointer, nest.getAccess(1).base),
                   nest.getNumIterations() * elementBytes, /*mayAlias=*/true);
    return;
  }
  LoopBuffer from{srcPointer.str(), elemOf(src)};
  hooks.emitParallelLoop(
      nest, {buffer(dst, true), from},
      [&](ArrayRef<std::string> name, ArrayRef<std::string> off) {
        return name[0] + "[" + off[0] + "] = " + name[1] + "[" + off[1] + "];";
      },
      /*prologue=*/nullptr);
}

void FunctionEmitter::slicesAlongAxis(StringRef kernel, Operation *op,
                                      Value src, Value idx,
                                      ArrayRef<int64_t> shape, int64_t axis,
                                      StringRef extra) {
  SmallVector<std::string> args{
      ptr(src),
      ptr(idx),
      ptr(op->getResult(0)),
      std::to_string(getNumElements(shape.take_front(axis))),
      std::to_string(shape[axis]),
      std::to_string(getNumElements(shape.drop_front(axis + 1))),
      std::to_string(getNumElements(shapeOf(idx)))};
  if (!extra.empty())
    args.push_back(extra.str());
  hooks.emitKernelCall(kernel, {}, args, "PCCRT_ERR_INDEX_OUT_OF_RANGE");
}

LogicalResult FunctionEmitter::elementsAlongAxis(StringRef kernel,
                                                 Operation *op, Value src,
                                                 Value idx,
                                                 ArrayRef<int64_t> dataShape,
                                                 int64_t axis,
                                                 StringRef extra) {
  if (dataShape.size() > 16)
    return op->emitOpError("of rank above 16 is not supported by ")
           << hooks.getTargetName();
  std::string dataDims = hooks.emitIndexArray(dataShape);
  std::string indexDims = hooks.emitIndexArray(shapeOf(idx));
  SmallVector<std::string> args{ptr(src),
                                ptr(idx),
                                ptr(op->getResult(0)),
                                std::to_string(dataShape.size()),
                                dataDims,
                                indexDims,
                                std::to_string(axis)};
  if (!extra.empty())
    args.push_back(extra.str());
  hooks.emitKernelCall(kernel, {}, args, "PCCRT_ERR_INDEX_OUT_OF_RANGE");
  return success();
}

std::optional<LogicalResult> FunctionEmitter::emitMovementOp(Operation *op) {
  auto result = [&](unsigned i = 0) { return op->getResult(i); };
  std::string t = op->getNumResults() ? type(result()) : "";
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](TransposeOp tr) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        SmallVector<int64_t> st = getContiguousStrides(shapeOf(tr.getInput()));
        Access src;
        for (int64_t p : tr.getPerm())
          src.strides.push_back(st[p]);
        copy(tr.getInput(), src, result(), Access::contiguous(outShape),
             outShape);
        return success();
      })
      .Case([&](ExpandOp e) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        copy(e.getInput(), Access::broadcast(shapeOf(e.getInput()), outShape),
             result(), Access::contiguous(outShape), outShape);
        return success();
      })
      .Case([&](SliceOp s) {
        // One block of its input, where it is: no copy.
        if (bufferPlan->isView(result()))
          return success();
        ArrayRef<int64_t> outShape = shapeOf(result());
        SmallVector<int64_t> st = getContiguousStrides(shapeOf(s.getInput()));
        Access src;
        for (size_t d = 0; d < st.size(); ++d) {
          src.base += s.getStarts()[d] * st[d];
          src.strides.push_back(s.getSteps()[d] * st[d]);
        }
        copy(s.getInput(), src, result(), Access::contiguous(outShape),
             outShape);
        return success();
      })
      .Case([&](ConcatOp c) {
        // Made in place: its inputs were computed in their parts.
        if (bufferPlan->isConcatenatedInPlace(result()))
          return success();
        ArrayRef<int64_t> outShape = shapeOf(result());
        SmallVector<int64_t> ost = getContiguousStrides(outShape);
        int64_t at = 0, axis = c.getAxis();
        for (Value in : c.getInputs()) {
          ArrayRef<int64_t> s = shapeOf(in);
          Access dst{at * ost[axis], ost};
          copy(in, Access::contiguous(s), result(), dst, s);
          at += s[axis];
        }
        return success();
      })
      .Case([&](SplitOp s) {
        ArrayRef<int64_t> inShape = shapeOf(s.getInput());
        SmallVector<int64_t> ist = getContiguousStrides(inShape);
        int64_t at = 0, axis = s.getAxis();
        for (Value o : s.getResults()) {
          ArrayRef<int64_t> os = shapeOf(o);
          Access src{at * ist[axis], ist};
          copy(s.getInput(), src, o, Access::contiguous(os), os);
          at += os[axis];
        }
        return success();
      })
      .Case([&](GatherOp g) {
        slicesAlongAxis("gather", op, g.getData(), g.getIndices(),
                        shapeOf(g.getData()), g.getAxis());
        return success();
      })
      .Case([&](GatherElementsOp g) {
        return elementsAlongAxis("gatherElements", op, g.getData(),
                                 g.getIndices(), shapeOf(g.getData()),
                                 g.getAxis());
      })
      .Case([&](TriluOp tr) {
        ArrayRef<int64_t> s = shapeOf(tr.getInput());
        int64_t rows = s[s.size() - 2], cols = s.back();
        hooks.emitKernelCall("trilu", {},
                             {ptr(tr.getInput()), ptr(result()),
                              std::to_string(getNumElements(s) /
                                             std::max<int64_t>(rows * cols, 1)),
                              std::to_string(rows), std::to_string(cols),
                              tr.getUpper() ? "true" : "false",
                              std::to_string(static_cast<int64_t>(tr.getK())) + "LL"});
        return success();
      })
      .Case([&](ScatterAddOp sc) {
        // Into the partial sum that the add reading it updates in place,
        // if any.
        Operation *sum = accumulateInto.lookup(op);
        slicesAlongAxis("scatterAdd", sum ? sum : op, sc.getUpdates(),
                        sc.getIndices(), shapeOf(result()), sc.getAxis(),
                        sum ? "true" : "");
        return success();
      })
      .Case([&](ScatterElementsAddOp sc) {
        // Into the partial sum that the add reading it updates in place,
        // if any.
        Operation *sum = accumulateInto.lookup(op);
        return elementsAlongAxis("scatterElementsAdd", sum ? sum : op,
                                 sc.getUpdates(), sc.getIndices(),
                                 shapeOf(result()), sc.getAxis(),
                                 sum ? "true" : "");
      })
      .Case([&](InsertSliceOp is) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        ArrayRef<int64_t> srcShape = shapeOf(is.getSource());
        SmallVector<int64_t> st = getContiguousStrides(outShape);
        Access dst;
        for (size_t d = 0; d < st.size(); ++d) {
          dst.base += is.getStarts()[d] * st[d];
          dst.strides.push_back(is.getSteps()[d] * st[d]);
        }
        // Zeros where the source does not go: around it where it is one
        // block of the result (a gradient of logits but their last row:
        // filling it all first wrote the block twice), else everywhere.
        int64_t total = getNumElements(outShape),
                count = getNumElements(srcShape);
        SmallVector<int64_t> block = getContiguousStrides(srcShape);
        bool isBlock =
            llvm::all_of(llvm::seq<size_t>(0, srcShape.size()), [&](size_t d) {
              return srcShape[d] <= 1 || dst.strides[d] == block[d];
            });
        if (!isBlock) {
          hooks.emitFill(ptr(result()), total, t + "(0)");
        } else {
          if (dst.base > 0)
            hooks.emitFill(ptr(result()), dst.base, t + "(0)");
          if (dst.base + count < total)
            hooks.emitFill(ptr(result()) + " + " +
                               std::to_string(dst.base + count),
                           total - dst.base - count, t + "(0)");
        }
        copy(is.getSource(), Access::contiguous(srcShape), result(), dst,
             srcShape);
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
