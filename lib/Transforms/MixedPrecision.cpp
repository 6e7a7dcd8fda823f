//===- MixedPrecision.cpp - Matrix products on 16-bit floats --------------===//
//
// `--dtype bf16`: the products run on bf16 operands (cuBLASLt's bf16 GEMMs
// with f32 accumulation on a GPU), everything else in f32. The products are
// the ops with the LowPrecisionProduct trait; their operands are cast down
// where they are read and their results cast back up, so that no other op
// sees a 16-bit value and the parameters stay f32 master weights.
//
//===----------------------------------------------------------------------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace pcc::graph;

namespace pcc {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

namespace {

struct MixedPrecisionPass
    : public pcc::impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Type narrow;
    if (dtype == "bf16")
      narrow = BFloat16Type::get(ctx);
    else if (dtype == "f16")
      narrow = Float16Type::get(ctx);
    else {
      getOperation().emitError("pcc-mixed-precision: dtype '")
          << dtype << "' is not bf16 or f16";
      return signalPassFailure();
    }
    auto isWide = [&](Type t) {
      auto rt = dyn_cast<RankedTensorType>(t);
      return rt && rt.getElementType().isF32();
    };
    SmallVector<Operation *> products;
    getOperation().walk([&](Operation *op) {
      if (op->hasTrait<pcc::graph::OpTrait::LowPrecisionProduct>() &&
          llvm::any_of(op->getResultTypes(), isWide) &&
          llvm::all_of(op->getOperandTypes(), isWide))
        products.push_back(op);
    });
    for (Operation *op : products) {
      OpBuilder builder(op);
      // Gemm's addend (the bias) is added in f32 after the product: its
      // gradient, a sum over the batch, then stays f32 too.
      if (auto gemm = dyn_cast<GemmOp>(op); gemm && gemm.getC()) {
        auto product = GemmOp::create(
            builder, gemm.getLoc(), gemm.getA(), gemm.getB(), Value(),
            gemm.getAlpha(), APFloat(0.0f), gemm.getTransA(),
            gemm.getTransB());
        Value bias = gemm.getC();
        float beta = gemm.getBeta().convertToFloat();
        if (beta != 1.0f) {
          auto biasType = cast<RankedTensorType>(bias.getType());
          auto scalarType =
              RankedTensorType::get({}, biasType.getElementType());
          Value scale = ConstantOp::create(
              builder, gemm.getLoc(),
              DenseElementsAttr::get(
                  scalarType,
                  FloatAttr::get(biasType.getElementType(), beta)));
          bias = MulOp::create(builder, gemm.getLoc(), bias, scale);
        }
        auto sum = AddOp::create(builder, gemm.getLoc(), product, bias);
        gemm.replaceAllUsesWith(sum.getResult());
        gemm.erase();
        op = product;
        builder.setInsertionPoint(op);
      }
      for (OpOperand &operand : op->getOpOperands()) {
        auto type = cast<RankedTensorType>(operand.get().getType());
        operand.set(CastOp::create(builder, op->getLoc(),
                                   type.clone(narrow), operand.get()));
      }
      // The results take the types the narrowed operands give them (an
      // attention's log-sum-exp stays f32); each narrowed one is cast up.
      SmallVector<Type> types;
      if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
        if (failed(infer.inferReturnTypes(ctx, op->getLoc(), op->getOperands(),
                                          op->getRawDictionaryAttrs(),
                                          op->getPropertiesStorage(),
                                          op->getRegions(), types)))
          return signalPassFailure();
      } else {
        for (Type t : op->getResultTypes())
          types.push_back(cast<RankedTensorType>(t).clone(narrow));
      }
      builder.setInsertionPointAfter(op);
      for (auto [result, type] : llvm::zip(op->getResults(), types)) {
        Type wide = result.getType();
        if (type == wide)
          continue;
        result.setType(type);
        auto up = CastOp::create(builder, op->getLoc(), wide, result);
        result.replaceAllUsesExcept(up, up);
      }
    }
  }
};

} // namespace
