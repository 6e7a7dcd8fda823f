//===- DeferProducts.cpp - Weight-gradient products once a step ----------===//
//
// A pipeline stage's backward runs once per microbatch, and the step adds
// each microbatch's gradients to the sum of the earlier ones: a product
// makes its gradient with beta 1, into the partial sum. Where that sum is
// large and the microbatch's positions few (a tied LM head's gradient, 50
// MB, from a microbatch of 31 positions), the addition, a read and a write
// of the whole sum, costs as much as the product's arithmetic. The product
// is linear in its operands' positions, so the sum over the microbatches
// is one product over all their positions: the backward keeps its
// operands instead, stacked by the step, and one function computes the
// products after the stage's last backward. Megatron-LM's deferred
// embedding weight gradient does the same by hand.
//
//===----------------------------------------------------------------------===//

#include "pcc/Analysis/BufferPlan.h"
#include "pcc/Analysis/TensorBytes.h"
#include "pcc/Dialect/Graph/IR/GemmOperands.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Transforms/Pipeline/Pipeline.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::pipeline;

bool pipeline::defersProducts(StringRef kind) {
  return kind == "gpipe" || kind == "1f1b" || kind == "interleaved";
}

/// Whether `m`, an operand of `rows` x `columns` as the product reads it,
/// has index `k` of its K extent (its rows when `kRows`, else its
/// columns) slowest, its elements dense: in a buffer of exactly them, or,
/// with `inPart`, in any part of one.
static bool isStackable(const MatrixOperand &m, int64_t rows, int64_t columns,
                        bool kRows, bool inPart) {
  if (!m.buffer || !m.batchStrides.empty() || m.transposed == kRows ||
      m.ld != (kRows ? columns : rows))
    return false;
  if (inPart)
    return true;
  auto type = dyn_cast<RankedTensorType>(m.buffer.getType());
  return m.offset == 0 && type && type.hasStaticShape() &&
         type.getRank() >= 1 && type.getNumElements() == rows * columns;
}

SmallVector<DeferredProduct>
pipeline::getDeferredProducts(func::FuncOp func, int64_t microbatches,
                              llvm::function_ref<bool(unsigned)> isGradient,
                              bool inParts) {
  SmallVector<DeferredProduct> found;
  if (microbatches < 2 || func.isExternal())
    return found;
  Block &body = func.getBody().front();
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!ret)
    return found;
  std::optional<GemmOperands> operands;
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    if (!isGradient(unsigned(k)))
      continue;
    SmallVector<Value> terms = getAccumulatedTerms(v);
    if (terms.empty())
      terms.push_back(v);
    for (Value term : terms) {
      auto product = dyn_cast_or_null<graph::MatMulOp>(getViewedOp(term));
      if (!product || !term.hasOneUse() || !product->hasOneUse())
        continue;
      auto lhsType = cast<RankedTensorType>(product.getLhs().getType());
      auto rhsType = cast<RankedTensorType>(product.getRhs().getType());
      if (lhsType.getRank() != 2 || rhsType.getRank() != 2 ||
          !lhsType.hasStaticShape() || !rhsType.hasStaticShape())
        continue;
      int64_t m = lhsType.getDimSize(0), kk = lhsType.getDimSize(1),
              n = rhsType.getDimSize(1);
      // The stack of both operands no larger than the result.
      int64_t bytes =
          microbatches * (getTensorBytes(lhsType) + getTensorBytes(rhsType));
      if (bytes > getTensorBytes(product.getType()))
        continue;
      if (!operands)
        operands.emplace(func);
      MatrixOperand a = operands->get(product->getOpOperand(0));
      MatrixOperand b = operands->get(product->getOpOperand(1));
      if (!isStackable(a, m, kk, /*kRows=*/false, inParts) ||
          !isStackable(b, kk, n, /*kRows=*/true, inParts))
        continue;
      found.push_back({product, unsigned(k), term, a.buffer, b.buffer, bytes});
    }
  }
  llvm::sort(found, [](const DeferredProduct &x, const DeferredProduct &y) {
    return x.product->isBeforeInBlock(y.product);
  });
  return found;
}

/// `type` with `count` times its first dimension.
static RankedTensorType stacked(Type type, int64_t count) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[0] *= count;
  return RankedTensorType::get(shape, t.getElementType());
}

std::optional<DeferringBackward>
pipeline::deferProducts(func::FuncOp backward, int64_t microbatches) {
  MLIRContext *ctx = backward.getContext();
  // Where the backward alone reads the gradient: it is returned, nothing
  // else sees it change.
  Operation *backwardRet = backward.getBody().front().getTerminator();
  SmallVector<DeferredProduct> deferred = llvm::filter_to_vector(
      getDeferredProducts(
          backward, microbatches,
          [&](unsigned k) {
            return bool(backward.getResultAttr(k, kGradRole));
          }),
      [&](const DeferredProduct &d) {
        return backwardRet->getOperand(d.result).hasOneUse();
      });
  if (deferred.empty())
    return std::nullopt;
  // The variant, and what was found, in it.
  IRMapping mapping;
  func::FuncOp variant = backward.clone(mapping);
  variant.setSymName((backward.getSymName() + "_deferring").str());
  variant->removeAttr(kPhaseAttr);
  variant->removeAttr(kStageAttr);
  SymbolTable symbols(backward->getParentOfType<ModuleOp>());
  symbols.insert(variant, ++Block::iterator(backward));
  for (DeferredProduct &d : deferred) {
    d.product = mapping.lookup(d.product->getResult(0)).getDefiningOp();
    d.term = mapping.lookup(d.term);
    d.lhs = mapping.lookup(d.lhs);
    d.rhs = mapping.lookup(d.rhs);
  }
  auto ret = cast<func::ReturnOp>(variant.getBody().front().getTerminator());

  OpBuilder mb(ctx);
  mb.setInsertionPointAfter(variant);
  Location loc = backward.getLoc();
  auto products = func::FuncOp::create(
      mb, loc, (backward.getSymName() + "_products").str(),
      FunctionType::get(ctx, {}, {}));
  products.setPrivate();
  symbols.insert(products);
  Block *body = products.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockEnd(body);
  SmallVector<Value> made;
  SmallVector<Attribute> argAttrs, madeAttrs;
  auto i64 = [&](int64_t x) { return b.getI64IntegerAttr(x); };
  llvm::BitVector dropped(variant.getNumResults());
  for (DeferredProduct &d : deferred) {
    // The one product, over the stacked operands: A's rows of K (its
    // transpose's), B's.
    auto product = cast<graph::MatMulOp>(d.product);
    auto lhsType = cast<RankedTensorType>(product.getLhs().getType());
    auto rhsType = cast<RankedTensorType>(product.getRhs().getType());
    int64_t positions = microbatches * lhsType.getDimSize(1);
    Type elem = lhsType.getElementType();
    SmallVector<Value> matrices;
    for (auto [buffer, columns] :
         {std::pair(d.lhs, lhsType.getDimSize(0)),
          std::pair(d.rhs, rhsType.getDimSize(1))}) {
      int64_t j = int64_t(argAttrs.size());
      argAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(dist::kDeferredRole, i64(j))));
      Value arg = body->addArgument(stacked(buffer.getType(), microbatches),
                                    buffer.getLoc());
      matrices.push_back(graph::ReshapeOp::create(
          b, loc, RankedTensorType::get({positions, columns}, elem), arg));
      // The backward returns the buffer in place of the product.
      ret.getOperandsMutable().append(buffer);
      if (failed(variant.insertResult(
              variant.getNumResults(), buffer.getType(),
              b.getDictionaryAttr(
                  b.getNamedAttr(dist::kDeferredRole, i64(j))))))
        return std::nullopt;
    }
    Value lhs = graph::TransposeOp::create(b, loc, matrices[0],
                                           ArrayRef<int64_t>{1, 0});
    Value sum = graph::MatMulOp::create(b, loc, lhs, matrices[1]);
    if (sum.getType() != d.term.getType())
      sum = graph::ReshapeOp::create(b, loc, d.term.getType(), sum);
    made.push_back(sum);
    NamedAttrList attrs;
    attrs.set(kGradRole, variant.getResultAttr(d.result, kGradRole));
    if (Attribute axes = variant.getResultAttr(d.result, kReduceAxesAttr))
      attrs.set(kReduceAxesAttr, axes);
    madeAttrs.push_back(attrs.getDictionary(ctx));
    // The backward's gradient without the term: the other side of the add
    // that reads it, or no gradient at all.
    Operation *user = *d.term.getUsers().begin();
    if (isa<func::ReturnOp>(user)) {
      dropped.set(d.result);
    } else {
      auto add = cast<graph::AddOp>(user);
      add.getResult().replaceAllUsesWith(add.getLhs() == d.term ? add.getRhs()
                                                                : add.getLhs());
      add->erase();
    }
  }
  // Dropped gradients go before the deferred results, which keep their
  // order.
  dropped.resize(variant.getNumResults());
  ret->eraseOperands(dropped);
  if (failed(variant.eraseResults(dropped)))
    return std::nullopt;
  // The products, the views between them and their terms, and what they
  // alone read (their operands' transposes), now unread.
  for (DeferredProduct &d : deferred) {
    SmallVector<Operation *> dead{d.term.getDefiningOp()};
    while (!dead.empty()) {
      Operation *op = dead.pop_back_val();
      if (!op || !isOpTriviallyDead(op))
        continue;
      SmallVector<Value> inputs(op->getOperands());
      op->erase();
      for (Value v : inputs)
        dead.push_back(v.getDefiningOp());
    }
  }
  func::ReturnOp::create(b, loc, made);
  products.setType(
      FunctionType::get(ctx, body->getArgumentTypes(), ValueRange(made).getTypes()));
  products.setAllArgAttrs(argAttrs);
  products.setAllResultAttrs(madeAttrs);
  return DeferringBackward{variant, products};
}
