//===- CheckStaticShapes.cpp - Checks that every shape is static ----------===//

#include "pcc/Transforms/Passes.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace pcc {
#define GEN_PASS_DEF_CHECKSTATICSHAPES
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

static bool isSupportedElementType(Type t) {
  if (auto i = dyn_cast<IntegerType>(t))
    return llvm::is_contained({1u, 8u, 16u, 32u, 64u}, i.getWidth());
  return t.isF32() || t.isF64() || t.isF16() || t.isBF16();
}

static LogicalResult checkValue(Value v, Operation *where) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape())
    return where->emitError("value of type ")
           << v.getType() << " has no static shape";
  if (!isSupportedElementType(t.getElementType()))
    return where->emitError("element type ")
           << t.getElementType() << " is not supported by the code generator";
  return success();
}

LogicalResult pcc::checkStaticShapes(func::FuncOp func) {
  for (BlockArgument arg : func.getArguments())
    if (failed(checkValue(arg, func)))
      return failure();
  WalkResult r = func.walk([](Operation *op) {
    for (Value v : op->getResults())
      if (failed(checkValue(v, op)))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

namespace {
struct CheckStaticShapesPass
    : pcc::impl::CheckStaticShapesBase<CheckStaticShapesPass> {
  void runOnOperation() override {
    if (failed(pcc::checkStaticShapes(getOperation())))
      signalPassFailure();
  }
};
} // namespace
