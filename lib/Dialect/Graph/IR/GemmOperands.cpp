//===- GemmOperands.cpp - Product operands read in place ------------------===//

#include "pcc/Dialect/Graph/IR/GemmOperands.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// A rows x cols matrix at the given strides as a GEMM reads it: row-major
/// (unit column stride) or the transpose of a row-major matrix (unit row
/// stride), with a leading dimension no smaller than the other extent, as
/// BLAS requires; the step along an extent-1 dimension does not matter.
static std::optional<std::pair<bool, int64_t>>
getMatrixLayout(int64_t rows, int64_t cols, int64_t rowStride,
                int64_t colStride) {
  if ((cols == 1 || colStride == 1) && (rows == 1 || rowStride >= cols))
    return std::make_pair(false, rows == 1 ? std::max<int64_t>(cols, 1)
                                           : std::max<int64_t>(rowStride, 1));
  if ((rows == 1 || rowStride == 1) && (cols == 1 || colStride >= rows))
    return std::make_pair(true, cols == 1 ? std::max<int64_t>(rows, 1)
                                          : std::max<int64_t>(colStride, 1));
  return std::nullopt;
}

bool GemmOperands::isMatrixOperand(OpOperand &operand) {
  return isa<MatMulOp, GemmOp>(operand.getOwner()) &&
         operand.getOperandNumber() < 2;
}

bool GemmOperands::isAttentionOperand(OpOperand &operand) {
  Operation *op = operand.getOwner();
  unsigned n = operand.getOperandNumber();
  if (auto a = dyn_cast<AttentionOp>(op))
    return n == a.getQueryMutable().getOperandNumber() ||
           n == a.getKeyMutable().getOperandNumber() ||
           n == a.getValueMutable().getOperandNumber();
  if (auto g = dyn_cast<AttentionGradOp>(op))
    return n == g.getQueryMutable().getOperandNumber() ||
           n == g.getKeyMutable().getOperandNumber() ||
           n == g.getValueMutable().getOperandNumber();
  return false;
}

/// Whether `op` is a data-movement op that may be read in place: one with a
/// strided layout of its input that is not a reshape (reshapes are views for
/// every target already).
static bool isCandidate(Operation *op) {
  return isa<StridedViewOpInterface>(op) && !isa<ViewLikeOpInterface>(op) &&
         op->getNumOperands() == 1;
}

GemmOperands::GemmOperands(func::FuncOp func) {
  Block &block = func.getBody().front();
  // The data-movement ops start as candidates and drop out until every one
  // left is read by products and attention only.
  SmallVector<Operation *> order;
  for (Operation &op : llvm::reverse(block))
    if (isCandidate(&op)) {
      inPlace.insert(&op);
      order.push_back(&op);
    }
  dropCopiedCandidates(order);
}

void GemmOperands::dropCopiedCandidates(ArrayRef<Operation *> order) {
  // Dropping one can only make its producers' readers fail too (it becomes
  // a reader that reads it dense), so the loop ends.
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation *op : order)
      if (inPlace.contains(op) && !onlyStridedReadersRead(op)) {
        inPlace.erase(op);
        changed = true;
      }
  }
}

bool GemmOperands::isReadInPlaceAlone(Operation *op) {
  if (!isCandidate(op))
    return false;
  GemmOperands local;
  SmallVector<Operation *> order;
  auto add = [&](Operation *candidate) {
    if (local.inPlace.insert(candidate).second)
      order.push_back(candidate);
  };
  // Its readers, through reshapes and further candidates.
  SmallVector<Operation *> walk{op};
  while (!walk.empty()) {
    Operation *at = walk.pop_back_val();
    if (isCandidate(at))
      add(at);
    for (Operation *user : at->getUsers())
      if (isCandidate(user) || (isa<ViewLikeOpInterface>(user) &&
                                isa<StridedViewOpInterface>(user)))
        walk.push_back(user);
  }
  // The chain that makes its input. The order does not change what the
  // loop that drops candidates ends with.
  Operation *def = op->getOperand(0).getDefiningOp();
  while (def && isa<StridedViewOpInterface>(def) &&
         def->getNumOperands() == 1) {
    if (isCandidate(def))
      add(def);
    def = def->getOperand(0).getDefiningOp();
  }
  local.dropCopiedCandidates(order);
  return local.inPlace.contains(op);
}

std::optional<std::pair<Value, StridedLayout>>
GemmOperands::compose(Value v) const {
  Operation *op = v.getDefiningOp();
  auto view = dyn_cast_or_null<StridedViewOpInterface>(op);
  if (!view || !(isa<ViewLikeOpInterface>(op) || inPlace.contains(op)))
    return std::make_pair(v, StridedLayout::contiguous(shapeOf(v)));
  auto input = compose(op->getOperand(0));
  if (!input)
    return std::nullopt;
  std::optional<StridedLayout> layout =
      view.getResultLayout(cast<OpResult>(v).getResultNumber(), input->second);
  if (!layout)
    return std::nullopt;
  return std::make_pair(input->first, *layout);
}

std::optional<std::pair<Value, StridedLayout>>
GemmOperands::composeForward(Value v) const {
  auto composed = compose(v);
  if (!composed ||
      llvm::any_of(composed->second.strides, [](int64_t s) { return s < 0; }))
    return std::nullopt;
  return composed;
}

std::optional<MatrixOperand> GemmOperands::getMatrix(OpOperand &operand) const {
  auto composed = composeForward(operand.get());
  if (!composed)
    return std::nullopt;
  auto [buffer, layout] = *composed;
  ArrayRef<int64_t> shape = shapeOf(operand.get());
  ArrayRef<int64_t> strides = layout.strides;
  int64_t rank = shape.size();
  if (rank == 0)
    return std::nullopt;
  // A vector operand of matmul is one row (the first) or one column.
  int64_t rows, cols, rowStride, colStride;
  if (rank == 1) {
    bool isRow = operand.getOperandNumber() == 0;
    rows = isRow ? 1 : shape[0];
    cols = isRow ? shape[0] : 1;
    rowStride = isRow ? 0 : strides[0];
    colStride = isRow ? strides[0] : 0;
  } else {
    rows = shape[rank - 2];
    cols = shape[rank - 1];
    rowStride = strides[rank - 2];
    colStride = strides[rank - 1];
  }
  auto matrix = getMatrixLayout(rows, cols, rowStride, colStride);
  if (!matrix)
    return std::nullopt;
  MatrixOperand m;
  m.buffer = buffer;
  m.offset = layout.offset;
  m.transposed = matrix->first;
  m.ld = matrix->second;
  if (rank > 2)
    m.batchStrides.assign(strides.begin(), strides.end() - 2);
  return m;
}

std::optional<AttentionOperand>
GemmOperands::getAttentionLayout(OpOperand &operand) const {
  auto composed = composeForward(operand.get());
  if (!composed)
    return std::nullopt;
  auto [buffer, layout] = *composed;
  ArrayRef<int64_t> shape = shapeOf(operand.get());
  ArrayRef<int64_t> strides = layout.strides;
  if (shape.size() != 4 || (shape[3] != 1 && strides[3] != 1))
    return std::nullopt;
  return AttentionOperand{buffer, layout.offset,
                          SmallVector<int64_t, 4>(strides)};
}

AttentionOperand GemmOperands::getAttention(OpOperand &operand) const {
  assert(isAttentionOperand(operand) && "not an operand attention reads");
  std::optional<AttentionOperand> a = getAttentionLayout(operand);
  assert(a && "an attention operand that the analysis did not check");
  return *a;
}

MatrixOperand GemmOperands::get(OpOperand &operand) const {
  assert(isMatrixOperand(operand) && "not an operand of a product");
  std::optional<MatrixOperand> m = getMatrix(operand);
  assert(m && "a product operand that the analysis did not check");
  return *m;
}

std::optional<int64_t> GemmOperands::getProductRows(MatMulOp op) const {
  ArrayRef<int64_t> a = shapeOf(op.getLhs()), b = shapeOf(op.getRhs());
  // A vector is one row or one column: one product where nothing else
  // is batched.
  if (a.size() < 2 || b.size() < 2) {
    if (a.size() > 2 || b.size() > 2)
      return std::nullopt;
    return a.size() < 2 ? 1 : a[0];
  }
  int64_t rows = a[a.size() - 2];
  ArrayRef<int64_t> batch = shapeOf(op.getResult()).drop_back(2);
  if (ShapedType::getNumElements(batch) == 1)
    return rows;
  // A's batch is the whole batch, its matrices one after another.
  MatrixOperand lhs = get(op->getOpOperand(0));
  if (lhs.transposed || a.drop_back(2) != batch)
    return std::nullopt;
  int64_t step = rows * lhs.ld;
  for (size_t i = batch.size(); i-- > 0;) {
    if (batch[i] != 1 && lhs.batchStrides[i] != step)
      return std::nullopt;
    step *= batch[i];
  }
  // B is the same matrix all along the batch.
  MatrixOperand rhs = get(op->getOpOperand(1));
  ArrayRef<int64_t> rhsBatch = b.drop_back(2);
  for (auto [extent, stride] : llvm::zip(rhsBatch, rhs.batchStrides))
    if (extent != 1 && stride != 0)
      return std::nullopt;
  return rows * ShapedType::getNumElements(batch);
}

bool GemmOperands::onlyStridedReadersRead(Operation *op) const {
  SmallVector<Value> worklist(op->getResults());
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if ((isa<ViewLikeOpInterface>(user) &&
           isa<StridedViewOpInterface>(user)) ||
          inPlace.contains(user)) {
        llvm::append_range(worklist, user->getResults());
        continue;
      }
      if (isMatrixOperand(use)
              ? !getMatrix(use)
              : !isAttentionOperand(use) || !getAttentionLayout(use))
        return false;
    }
  }
  return true;
}

SmallVector<int64_t> pcc::getBroadcastStrides(ArrayRef<int64_t> shape,
                                              ArrayRef<int64_t> space) {
  SmallVector<int64_t> strides(space.size(), 0);
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1)
      strides[i + space.size() - shape.size()] = step;
    step *= shape[i];
  }
  return strides;
}

std::optional<unsigned> pcc::getRowDims(ArrayRef<int64_t> space, int64_t n) {
  unsigned t = space.size();
  int64_t columns = 1;
  while (t > 0 && columns < n)
    columns *= space[--t];
  if (columns != n)
    return std::nullopt;
  return t;
}

std::optional<std::pair<int64_t, int64_t>>
pcc::getRowColumnStrides(ArrayRef<int64_t> strides, ArrayRef<int64_t> space,
                         unsigned t) {
  auto collapse = [&](unsigned lo, unsigned hi) -> std::optional<int64_t> {
    std::optional<int64_t> stride;
    int64_t span = 1;
    for (unsigned d = hi; d-- > lo;) {
      if (space[d] == 1)
        continue;
      if (!stride) {
        stride = strides[d];
        span = space[d];
        continue;
      }
      if (strides[d] != *stride * span)
        return std::nullopt;
      span *= space[d];
    }
    return stride.value_or(0);
  };
  std::optional<int64_t> row = collapse(0, t),
                         column = collapse(t, space.size());
  if (!row || !column)
    return std::nullopt;
  return std::make_pair(*row, *column);
}

Operation *pcc::getViewChain(Value v, SmallPtrSetImpl<Value> &chain) {
  chain.insert(v);
  while (v.hasOneUse()) {
    Operation *user = *v.getUsers().begin();
    if (!isa<ViewLikeOpInterface>(user))
      return user;
    v = user->getResult(0);
    chain.insert(v);
  }
  return nullptr;
}
