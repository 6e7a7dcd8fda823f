//===- GraphOps.cpp - Graph dialect: type inference, verifiers, folders ---===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace pcc::graph;

#include "pcc/Dialect/Graph/IR/GraphDialect.cpp.inc"
#include "pcc/Dialect/Graph/IR/GraphInterfaces.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "pcc/Dialect/Graph/IR/GraphOpsMended.cpp.inc"
      >();
}

Operation *GraphDialect::materializeConstant(OpBuilder &builder,
                                             Attribute value, Type type,
                                             Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

static int64_t numElements(ArrayRef<int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

static SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// `v` truncated to an int64, saturated at its limits and 0 for NaN, as a
/// folder's integer view of a float (a C++ conversion of a value out of
/// range is undefined: found by fuzzing).
static int64_t toInt64(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 0x1p63)
    return std::numeric_limits<int64_t>::max();
  if (v < -0x1p63)
    return std::numeric_limits<int64_t>::min();
  return int64_t(v);
}

std::optional<ArrayRef<char>> pcc::graph::getStoredBytes(ElementsAttr value) {
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    return blob->getData();
  }
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense || dense.isSplat() || dense.getElementType().isInteger(1))
    return std::nullopt;
  return dense.getRawData();
}

DenseElementsAttr pcc::graph::getDenseValue(ElementsAttr value) {
  if (auto dense = dyn_cast<DenseElementsAttr>(value))
    return dense;
  std::optional<ArrayRef<char>> bytes = getStoredBytes(value);
  auto type = dyn_cast<RankedTensorType>(value.getType());
  bool splat = false;
  if (!bytes || !type ||
      !DenseElementsAttr::isValidRawBuffer(type, *bytes, splat))
    return {};
  return DenseElementsAttr::getFromRawBuffer(type, *bytes);
}

FailureOr<SmallVector<int64_t>>
pcc::graph::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  return out;
}

static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, ",");
  return s + "]";
}

LogicalResult pcc::graph::detail::inferBroadcastType(
    std::optional<Location> loc, ValueRange operands, Type elementType,
    SmallVectorImpl<Type> &types, StringRef opName, unsigned firstValue,
    bool sameType) {
  if (sameType)
    for (Value v : operands.drop_front(firstValue))
      if (getElementTypeOrSelf(v.getType()) !=
          getElementTypeOrSelf(operands[firstValue].getType()))
        return emitOptionalError(
            loc, opName, ": operand element types differ (",
            getElementTypeOrSelf(operands[firstValue].getType()), " vs ",
            getElementTypeOrSelf(v.getType()), ")");
  SmallVector<int64_t> shape;
  for (Value v : operands) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || !t.hasStaticShape())
      return emitOptionalError(loc, opName,
                               ": operands must be static tensors");
    auto b = broadcastShapes(shape, t.getShape());
    if (failed(b))
      return emitOptionalError(loc, opName, ": shapes ", shapeStr(shape),
                               " and ", shapeStr(t.getShape()),
                               " do not broadcast");
    shape = *b;
  }
  types.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

//===----------------------------------------------------------------------===//
// Cost
//===----------------------------------------------------------------------===//

static int64_t bytesOf(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return 0;
  int64_t bits = t.getElementTypeBitWidth();
  return numElements(t.getShape()) * std::max<int64_t>(1, bits / 8);
}

bool pcc::graph::isFusibleElementwise(Operation *op) {
  if (!op->hasTrait<OpTrait::Elementwise>() || op->getNumResults() != 1)
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type && type.hasStaticShape();
}

bool pcc::graph::detail::isLowPrecisionProduct(Operation *op) {
  return op->hasTrait<OpTrait::LowPrecisionProduct>();
}

int64_t pcc::graph::detail::defaultFlops(Operation *op) {
  int64_t flops = 0;
  for (Type t : op->getResultTypes())
    if (auto rt = dyn_cast<RankedTensorType>(t))
      flops += numElements(rt.getShape());
  return isa<ConstantOp>(op) ? 0 : flops;
}

int64_t pcc::graph::detail::defaultBytesAccessed(Operation *op) {
  int64_t bytes = 0;
  for (Type t : op->getOperandTypes())
    bytes += bytesOf(t);
  for (Type t : op->getResultTypes())
    bytes += bytesOf(t);
  return bytes;
}

// Data movement performs no arithmetic.
int64_t WeightOp::getFlops() { return 0; }
int64_t ReshapeOp::getFlops() { return 0; }
int64_t TransposeOp::getFlops() { return 0; }
int64_t ExpandOp::getFlops() { return 0; }
int64_t SliceOp::getFlops() { return 0; }
int64_t ConcatOp::getFlops() { return 0; }
int64_t SplitOp::getFlops() { return 0; }
int64_t GatherOp::getFlops() { return 0; }
int64_t GatherElementsOp::getFlops() { return 0; }
int64_t TriluOp::getFlops() { return 0; }
// One comparison per element and kept place.
int64_t TopKOp::getFlops() {
  return numElements(shapeOf(getInput())) * std::max<int64_t>(getK(), 1);
}
int64_t InsertSliceOp::getFlops() { return 0; }
// A reshape is a view of its operand's buffer: it moves nothing.
int64_t ReshapeOp::getBytesAccessed() { return 0; }
// A slice and a gather read what they take, not their whole operand (a
// bucket of gradients, an embedding table).
int64_t SliceOp::getBytesAccessed() { return 2 * bytesOf(getType()); }
int64_t GatherOp::getBytesAccessed() {
  return 2 * bytesOf(getType()) + bytesOf(getIndices().getType());
}
int64_t ScatterAddOp::getFlops() { return numElements(shapeOf(getUpdates())); }

StringRef pcc::getNodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().getValue();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      if (StringRef name = getNodeName(part); !name.empty())
        return name;
  return "";
}

int64_t GatherOp::getIndexedExtent() {
  return getData().getType().getDimSize(getAxis());
}
int64_t GatherElementsOp::getIndexedExtent() {
  return getData().getType().getDimSize(getAxis());
}
int64_t ScatterAddOp::getIndexedExtent() {
  return getOutput().getType().getDimSize(getAxis());
}
int64_t ScatterElementsAddOp::getIndexedExtent() {
  return getOutput().getType().getDimSize(getAxis());
}
int64_t ScatterElementsAddOp::getFlops() {
  return numElements(shapeOf(getUpdates()));
}

//===----------------------------------------------------------------------===//
// Strided views
//===----------------------------------------------------------------------===//

StridedLayout StridedLayout::contiguous(ArrayRef<int64_t> shape) {
  return {0, stridesOf(shape)};
}

std::optional<StridedLayout>
StridedLayout::reshape(ArrayRef<int64_t> from, ArrayRef<int64_t> to) const {
  assert(strides.size() == from.size() && "one stride per dimension");
  if (numElements(from) != numElements(to))
    return std::nullopt;
  StridedLayout out{offset, SmallVector<int64_t>(to.size(), 0)};
  if (numElements(to) == 0)
    return out;
  // Extent-1 dimensions hold no step; the others match up in groups of
  // equal element counts, and each group of `from` must be evenly spaced
  // to be walked with the strides of any shape of the same count.
  SmallVector<int64_t> extents, steps;
  for (auto [extent, stride] : llvm::zip_equal(from, strides))
    if (extent != 1) {
      extents.push_back(extent);
      steps.push_back(stride);
    }
  size_t i = 0, j = 0;
  while (j < to.size()) {
    if (to[j] == 1) {
      ++j;
      continue;
    }
    size_t iEnd = i + 1, jEnd = j + 1;
    int64_t countFrom = extents[i], countTo = to[j];
    while (countFrom != countTo) {
      if (countFrom < countTo)
        countFrom *= extents[iEnd++];
      else
        countTo *= to[jEnd++];
    }
    for (size_t k = i; k + 1 < iEnd; ++k)
      if (steps[k] != steps[k + 1] * extents[k + 1])
        return std::nullopt;
    int64_t step = steps[iEnd - 1];
    for (size_t k = jEnd; k-- > j;) {
      out.strides[k] = to[k] == 1 ? 0 : step;
      step *= to[k];
    }
    i = iEnd;
    j = jEnd;
  }
  return out;
}

std::optional<StridedLayout>
ReshapeOp::getResultLayout(unsigned, const StridedLayout &input) {
  return input.reshape(shapeOf(getInput()), shapeOf(getOutput()));
}

std::optional<StridedLayout>
TransposeOp::getResultLayout(unsigned, const StridedLayout &input) {
  StridedLayout out{input.offset, {}};
  for (int64_t p : getPerm())
    out.strides.push_back(input.strides[p]);
  return out;
}

std::optional<StridedLayout>
ExpandOp::getResultLayout(unsigned, const StridedLayout &input) {
  // Broadcast dimensions (new leading ones, extent 1 stretched) repeat the
  // same elements: stride 0.
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getOutput());
  size_t lead = out.size() - in.size();
  StridedLayout result{input.offset, SmallVector<int64_t>(out.size(), 0)};
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] == out[lead + d])
      result.strides[lead + d] = input.strides[d];
  return result;
}

std::optional<StridedLayout>
SliceOp::getResultLayout(unsigned, const StridedLayout &input) {
  StridedLayout out = input;
  for (auto [d, start, step] : llvm::enumerate(getStarts(), getSteps())) {
    out.offset += start * input.strides[d];
    out.strides[d] *= step;
  }
  return out;
}

std::optional<StridedLayout>
SplitOp::getResultLayout(unsigned result, const StridedLayout &input) {
  StridedLayout out = input;
  int64_t axis = getAxis();
  for (int64_t size : getSizes().take_front(result))
    out.offset += size * input.strides[axis];
  return out;
}

int64_t MatMulOp::getFlops() {
  ArrayRef<int64_t> a = shapeOf(getLhs());
  int64_t k = a.back();
  return 2 * k * numElements(shapeOf(getOutput()));
}

/// Per batch entry and head, two products of Tq x Tk x D (scores) and
/// Tq x Tk x E (output) and the softmax's few operations per score; half
/// of that under a causal mask, whose kernels skip the masked blocks.
static int64_t attentionFlops(Value query, Value key, Value value, bool causal,
                              std::optional<int64_t> window,
                              bool sequenceFirst = false) {
  SmallVector<int64_t, 4> q = swapHeadsSequence(shapeOf(query), sequenceFirst);
  int64_t tk = swapHeadsSequence(shapeOf(key), sequenceFirst)[2],
          e = shapeOf(value)[3];
  // The keys a row reads: all, half under a causal mask, at most the
  // window under a sliding one.
  int64_t keys = causal ? tk / 2 : tk;
  if (window)
    keys = std::min(keys, *window);
  int64_t scores = q[0] * q[1] * q[2] * std::max<int64_t>(keys, 1);
  return scores * (2 * q[3] + 2 * e + 5);
}

// A token attends to as many keys as its position: counted as half of
// what the cache holds per sequence, as for a causal mask, at most its
// window.
int64_t PagedAttentionOp::getFlops() {
  ArrayRef<int64_t> q = shapeOf(getQuery()), t = shapeOf(getBlockTables());
  int64_t keys = t[1] * shapeOf(getKeyCache())[2] / 2;
  if (std::optional<int64_t> window = getWindow())
    keys = std::min(keys, *window);
  int64_t e = shapeOf(getValueCache())[3];
  return q[1] * q[2] * keys * (2 * q[3] + 2 * e + 5);
}

// Reads the keys or values of each token at its position and writes them
// there: the cache's other positions are not touched.
int64_t CacheWriteOp::getBytesAccessed() {
  auto values = cast<RankedTensorType>(getRows().getType());
  int64_t indices = 0;
  for (Value v : {getSlots(), getPositions(), getBlockTables()})
    indices += cast<RankedTensorType>(v.getType()).getNumElements() * 8;
  return 2 * values.getNumElements() *
             std::max<int64_t>(1, values.getElementTypeBitWidth() / 8) +
         indices;
}

// Each token reads the keys and values of its sequence up to its position
// (counted, as the flops, as half of what a block-table row holds, at most
// its window), at most the whole cache.
int64_t PagedAttentionOp::getBytesAccessed() {
  ArrayRef<int64_t> q = shapeOf(getQuery()), t = shapeOf(getBlockTables()),
                    k = shapeOf(getKeyCache());
  auto cache = cast<RankedTensorType>(getKeyCache().getType());
  int64_t element = std::max<int64_t>(1, cache.getElementTypeBitWidth() / 8);
  int64_t perPosition = k[1] * k[3] * element;
  int64_t keys = t[1] * k[2] / 2;
  if (std::optional<int64_t> window = getWindow())
    keys = std::min(keys, *window);
  int64_t read =
      std::min(q[2] * keys * perPosition, cache.getNumElements() * element);
  int64_t queries = cast<RankedTensorType>(getQuery().getType())
                        .getNumElements() *
                    element;
  return 2 * read + 2 * queries;
}

int64_t AttentionOp::getFlops() {
  return attentionFlops(getQuery(), getKey(), getValue(), getCausal(),
                        getWindow(), getSequenceFirst());
}

// The backward recomputes the scores (one product), then makes the value,
// probability, query and key gradients (four more).
int64_t AttentionGradOp::getFlops() {
  return attentionFlops(getQuery(), getKey(), getValue(), getCausal(),
                        getWindow()) *
         5 / 2;
}

// Attention's backward and a decode step's attention are products too.
bool AttentionGradOp::runsOnMatrixUnits() { return true; }
bool PagedAttentionOp::runsOnMatrixUnits() { return true; }

int64_t GemmOp::getFlops() {
  ArrayRef<int64_t> a = shapeOf(getA());
  int64_t k = getTransA() ? a[0] : a[1];
  return 2 * k * numElements(shapeOf(getOutput()));
}

//===----------------------------------------------------------------------===//
// Type inference and verifiers
//===----------------------------------------------------------------------===//

static RankedTensorType tensorOf(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto a = tensorOf(adaptor.getLhs()), b = tensorOf(adaptor.getRhs());
  if (a.getRank() == 0 || b.getRank() == 0)
    return emitOptionalError(loc, "MatMul: operands must have rank >= 1");
  if (a.getElementType() != b.getElementType())
    return emitOptionalError(loc, "MatMul: element types differ");
  SmallVector<int64_t> sa(a.getShape()), sb(b.getShape());
  bool vecA = sa.size() == 1, vecB = sb.size() == 1;
  if (vecA)
    sa.insert(sa.begin(), 1);
  if (vecB)
    sb.push_back(1);
  if (sa.back() != sb[sb.size() - 2])
    return emitOptionalError(loc, "MatMul: contraction sizes differ (",
                             shapeStr(a.getShape()), " x ",
                             shapeStr(b.getShape()), ")");
  auto batch = broadcastShapes(ArrayRef<int64_t>(sa).drop_back(2),
                               ArrayRef<int64_t>(sb).drop_back(2));
  if (failed(batch))
    return emitOptionalError(loc, "MatMul: batch dimensions do not broadcast");
  SmallVector<int64_t> shape(*batch);
  if (!vecA)
    shape.push_back(sa[sa.size() - 2]);
  if (!vecB)
    shape.push_back(sb.back());
  types.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto a = tensorOf(adaptor.getA()), b = tensorOf(adaptor.getB());
  if (a.getRank() != 2 || b.getRank() != 2)
    return emitOptionalError(loc, "Gemm: operands must be matrices");
  if (a.getElementType() != b.getElementType() ||
      (adaptor.getC() &&
       tensorOf(adaptor.getC()).getElementType() != a.getElementType()))
    return emitOptionalError(loc, "Gemm: operand element types differ");
  int64_t m = adaptor.getTransA() ? a.getDimSize(1) : a.getDimSize(0);
  int64_t ka = adaptor.getTransA() ? a.getDimSize(0) : a.getDimSize(1);
  int64_t kb = adaptor.getTransB() ? b.getDimSize(1) : b.getDimSize(0);
  int64_t n = adaptor.getTransB() ? b.getDimSize(0) : b.getDimSize(1);
  if (ka != kb)
    return emitOptionalError(loc, "Gemm: contraction sizes differ (", ka,
                             " vs ", kb, ")");
  if (Value c = adaptor.getC()) {
    auto bc = broadcastShapes({m, n}, tensorOf(c).getShape());
    if (failed(bc) || (*bc)[0] != m || (*bc)[1] != n || bc->size() != 2)
      return emitOptionalError(loc, "Gemm: C does not broadcast to [", m, ",",
                               n, "]");
  }
  types.push_back(RankedTensorType::get({m, n}, a.getElementType()));
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto x = tensorOf(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= x.getRank())
    return emitOptionalError(loc, "LayerNormalization: axis ", axis,
                             " out of range for rank ", x.getRank());
  ArrayRef<int64_t> normalized = x.getShape().drop_front(axis);
  for (Value v : {adaptor.getScale(), adaptor.getBias()}) {
    if (!v)
      continue;
    auto bc = broadcastShapes(normalized, tensorOf(v).getShape());
    if (failed(bc) || ArrayRef<int64_t>(*bc) != normalized)
      return emitOptionalError(loc, "LayerNormalization: scale/bias shape ",
                               shapeStr(tensorOf(v).getShape()),
                               " does not broadcast to the normalized shape ",
                               shapeStr(normalized));
  }
  SmallVector<int64_t> stat(x.getShape());
  for (size_t i = axis; i < stat.size(); ++i)
    stat[i] = 1;
  types.push_back(x);
  auto statType = RankedTensorType::get(stat, x.getElementType());
  types.push_back(statType);
  types.push_back(statType);
  return success();
}

/// The checks graph.attention and graph.attention_grad share: query
/// [B, H, Tq, D], key [B, G, Tk, D], value [B, G, Tk, E] (with
/// `sequenceFirst`, [B, Tq, H, D], [B, Tk, G, D], [B, Tk, G, E]), H a
/// multiple of G, and a bias that broadcasts to [B, H, Tq, Tk]. Appends the
/// types of attention's results: the output [B, H, Tq, E] (or [B, Tq, H,
/// E]) in the query's type and the log-sum-exp [B, H, Tq] in f32.
static LogicalResult verifyAttentionShapes(std::optional<Location> loc,
                                           StringRef name, Value query,
                                           Value key, Value value, Value bias,
                                           SmallVectorImpl<Type> &results,
                                           bool sequenceFirst = false) {
  auto q = tensorOf(query), k = tensorOf(key), v = tensorOf(value);
  if (!q || !k || !v || q.getRank() != 4 || k.getRank() != 4 ||
      v.getRank() != 4)
    return emitOptionalError(
        loc, name,
        ": query, key and value must be ranked tensors of rank 4 ([batch, ",
        sequenceFirst ? "sequence, heads" : "heads, sequence", ", features])");
  SmallVector<int64_t, 4> qs = swapHeadsSequence(q.getShape(), sequenceFirst),
                          ks = swapHeadsSequence(k.getShape(), sequenceFirst),
                          vs = swapHeadsSequence(v.getShape(), sequenceFirst);
  if (qs[0] != ks[0] || ks[0] != vs[0] || ks[1] != vs[1] || ks[2] != vs[2] ||
      qs[3] != ks[3] || ks[1] < 1 || qs[1] % ks[1] != 0)
    return emitOptionalError(
        loc, name, ": query ", shapeStr(q.getShape()), ", key ",
        shapeStr(k.getShape()), " and value ", shapeStr(v.getShape()),
        " do not fit ",
        sequenceFirst ? "[B, Tq, H, D], [B, Tk, G, D], [B, Tk, G, E]"
                      : "[B, H, Tq, D], [B, G, Tk, D], [B, G, Tk, E]",
        " with H a multiple of G");
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType() ||
      !isa<FloatType>(q.getElementType()))
    return emitOptionalError(loc, name,
                             ": query, key and value must share one float "
                             "element type");
  if (bias) {
    auto b = tensorOf(bias);
    SmallVector<int64_t> scores{qs[0], qs[1], qs[2], ks[2]};
    auto bc = b ? broadcastShapes(scores, b.getShape())
                : FailureOr<SmallVector<int64_t>>(failure());
    if (failed(bc) || ArrayRef<int64_t>(*bc) != ArrayRef<int64_t>(scores) ||
        b.getElementType() != q.getElementType())
      return emitOptionalError(loc, name, ": bias ",
                               b ? shapeStr(b.getShape()) : "",
                               " does not broadcast to the scores ",
                               shapeStr(scores), " of the query's type");
  }
  results.push_back(RankedTensorType::get(
      swapHeadsSequence({qs[0], qs[1], qs[2], vs[3]}, sequenceFirst),
      q.getElementType()));
  results.push_back(RankedTensorType::get({qs[0], qs[1], qs[2]},
                                          Float32Type::get(q.getContext())));
  return success();
}

/// The check of a per-head operand (ALiBi's slopes, attention sinks): [H]
/// of the query's element type, H its heads.
static LogicalResult verifyPerHead(std::optional<Location> loc, StringRef name,
                                   StringRef what, Value operand, int64_t heads,
                                   Type elementType) {
  auto s = tensorOf(operand);
  if (!s || s.getRank() != 1 || s.getDimSize(0) != heads ||
      s.getElementType() != elementType)
    return emitOptionalError(loc, name, ": ", what, " ",
                             s ? shapeStr(s.getShape()) : "",
                             " are not one per query head, of the query's "
                             "element type");
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  if (failed(verifyAttentionShapes(loc, "attention", adaptor.getQuery(),
                                   adaptor.getKey(), adaptor.getValue(),
                                   adaptor.getBias(), types,
                                   adaptor.getSequenceFirst())))
    return failure();
  if (Value sinks = adaptor.getSinks()) {
    auto q = cast<RankedTensorType>(adaptor.getQuery().getType());
    int64_t heads = q.getDimSize(adaptor.getSequenceFirst() ? 2 : 1);
    return verifyPerHead(loc, "attention", "sinks", sinks, heads,
                         q.getElementType());
  }
  return success();
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *context,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  SmallVector<Type, 2> forward;
  if (failed(verifyAttentionShapes(loc, "attention_grad", adaptor.getQuery(),
                                   adaptor.getKey(), adaptor.getValue(),
                                   adaptor.getBias(), forward)))
    return failure();
  if (adaptor.getOutput().getType() != forward[0] ||
      adaptor.getOutputGrad().getType() != forward[0] ||
      adaptor.getLse().getType() != forward[1])
    return emitOptionalError(loc,
                             "attention_grad: output and output_grad must be ",
                             forward[0], " and lse ", forward[1]);
  types.push_back(adaptor.getQuery().getType());
  types.push_back(adaptor.getKey().getType());
  types.push_back(adaptor.getValue().getType());
  return success();
}

/// The checks of a paged cache's index operands: `slots` and `positions`
/// [N] and `block_tables` [S, M], all i64.
static LogicalResult verifyPagedIndices(std::optional<Location> loc,
                                        StringRef name, Value slots,
                                        Value positions, Value blockTables,
                                        int64_t tokens) {
  auto s = tensorOf(slots), p = tensorOf(positions), t = tensorOf(blockTables);
  auto isI64 = [](RankedTensorType x) {
    return x && x.getElementType().isInteger(64);
  };
  if (!isI64(s) || !isI64(p) || !isI64(t) || s.getRank() != 1 ||
      p.getRank() != 1 || t.getRank() != 2 || s.getDimSize(0) != tokens ||
      p.getDimSize(0) != tokens)
    return emitOptionalError(loc, name, ": slots and positions must be [",
                             tokens, "] and block_tables [S, M], all i64");
  return success();
}

LogicalResult CacheWriteOp::inferReturnTypes(MLIRContext *context,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  auto c = tensorOf(adaptor.getCache()), r = tensorOf(adaptor.getRows());
  if (!c || !r || c.getRank() != 4 || r.getRank() != 4 ||
      r.getDimSize(0) != 1 || r.getDimSize(1) != c.getDimSize(1) ||
      r.getDimSize(3) != c.getDimSize(3) ||
      r.getElementType() != c.getElementType())
    return emitOptionalError(
        loc, "cache_write: cache ", c ? shapeStr(c.getShape()) : "",
        " and rows ", r ? shapeStr(r.getShape()) : "",
        " do not fit [blocks, G, block_size, D] and [1, G, N, D] of one type");
  if (failed(verifyPagedIndices(loc, "cache_write", adaptor.getSlots(),
                                adaptor.getPositions(),
                                adaptor.getBlockTables(), r.getDimSize(2))))
    return failure();
  types.push_back(c);
  return success();
}

LogicalResult CacheWriteOp::verify() {
  // The result takes the operand's buffer: nothing else may read it.
  if (!getCache().hasOneUse())
    return emitOpError("updates its cache in place, so nothing else may read "
                       "the cache operand");
  return success();
}

LogicalResult PagedAttentionOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  auto q = tensorOf(adaptor.getQuery()), k = tensorOf(adaptor.getKeyCache()),
       v = tensorOf(adaptor.getValueCache());
  if (!q || !k || !v || q.getRank() != 4 || k.getRank() != 4 ||
      v.getRank() != 4 || q.getDimSize(0) != 1 ||
      k.getShape().take_front(3) != v.getShape().take_front(3) ||
      q.getDimSize(3) != k.getDimSize(3) || k.getDimSize(1) < 1 ||
      q.getDimSize(1) % k.getDimSize(1) != 0 ||
      q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return emitOptionalError(
        loc, "paged_attention: query ", q ? shapeStr(q.getShape()) : "",
        ", key cache ", k ? shapeStr(k.getShape()) : "", " and value cache ",
        v ? shapeStr(v.getShape()) : "",
        " do not fit [1, H, N, D], [blocks, G, block_size, D] and [blocks, G, "
        "block_size, E] of one type, H a multiple of G");
  if (failed(verifyPagedIndices(loc, "paged_attention", adaptor.getSlots(),
                                adaptor.getPositions(),
                                adaptor.getBlockTables(), q.getDimSize(2))))
    return failure();
  for (auto [operand, what] : {std::pair(adaptor.getSlopes(), "slopes"),
                               std::pair(adaptor.getSinks(), "sinks")})
    if (operand && failed(verifyPerHead(loc, "paged_attention", what, operand,
                                        q.getDimSize(1), q.getElementType())))
      return failure();
  types.push_back(RankedTensorType::get(
      {1, q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
      q.getElementType()));
  return success();
}

template <typename AdaptorT>
static LogicalResult inferReduce(std::optional<Location> loc, AdaptorT adaptor,
                                 SmallVectorImpl<Type> &types) {
  auto x = tensorOf(adaptor.getInput());
  SmallVector<int64_t> shape;
  ArrayRef<int64_t> axes = adaptor.getAxes();
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= x.getRank() || (i && axes[i] <= axes[i - 1]))
      return emitOptionalError(
          loc, "reduce: axes must be sorted, unique and in [0, rank)");
  for (int64_t i = 0; i < x.getRank(); ++i) {
    if (!llvm::is_contained(axes, i))
      shape.push_back(x.getDimSize(i));
    else if (adaptor.getKeepdims())
      shape.push_back(1);
  }
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

#define PCC_INFER_REDUCE(Op)                                                   \
  LogicalResult Op::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &types) {                                          \
    return inferReduce(loc, adaptor, types);                                   \
  }
PCC_INFER_REDUCE(ReduceMeanOp)
PCC_INFER_REDUCE(ReduceSumOp)
PCC_INFER_REDUCE(ReduceMaxOp)
PCC_INFER_REDUCE(ReduceMinOp)
#undef PCC_INFER_REDUCE

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto x = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  SmallVector<bool> seen(x.getRank(), false);
  if (int64_t(perm.size()) != x.getRank())
    return emitOptionalError(loc, "Transpose: perm has ", perm.size(),
                             " entries for rank ", x.getRank());
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.getRank() || seen[p])
      return emitOptionalError(loc, "Transpose: perm is not a permutation");
    seen[p] = true;
    shape.push_back(x.getDimSize(p));
  }
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto x = tensorOf(adaptor.getInput());
  if (int64_t(adaptor.getSizes().size()) != x.getRank())
    return emitOptionalError(loc, "Slice: one size per dimension expected");
  types.push_back(
      RankedTensorType::get(adaptor.getSizes(), x.getElementType()));
  return success();
}

LogicalResult WeightOp::verify() {
  if (std::optional<StringRef> kind = getExportedAs();
      kind && !llvm::is_contained({"parameter", "buffer", "constant"}, *kind))
    return emitOpError("exported_as must be \"parameter\", \"buffer\" or "
                       "\"constant\", got \"")
           << *kind << "\"";
  if (getTrainable() &&
      !isa<FloatType>(getElementTypeOrSelf(getOutput().getType())))
    return emitOpError("only a float weight can be trainable");
  return success();
}

LogicalResult SliceOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput());
  if (getStarts().size() != in.size() || getSteps().size() != in.size() ||
      getSizes().size() != in.size())
    return emitOpError("needs one start, size and step per dimension");
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t start = getStarts()[d], size = getSizes()[d], step = getSteps()[d];
    if (step == 0 || size < 0)
      return emitOpError("dimension ") << d << ": zero step or negative size";
    if (size == 0)
      continue;
    int64_t last = start + (size - 1) * step;
    if (start < 0 || start >= in[d] || last < 0 || last >= in[d])
      return emitOpError("dimension ") << d << ": slice out of bounds";
  }
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "Concat: no inputs");
  auto first = tensorOf(adaptor.getInputs()[0]);
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return emitOptionalError(loc, "Concat: axis ", axis, " out of range");
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : adaptor.getInputs()) {
    auto t = tensorOf(v);
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "Concat: inputs differ in rank or type");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "Concat: input shapes ",
                                 shapeStr(first.getShape()), " and ",
                                 shapeStr(t.getShape()), " differ off axis");
    shape[axis] += t.getDimSize(axis);
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto x = tensorOf(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= x.getRank())
    return emitOptionalError(loc, "Split: axis ", axis, " out of range");
  int64_t total = 0;
  for (int64_t s : adaptor.getSizes()) {
    if (s < 0)
      return emitOptionalError(loc, "Split: negative size");
    total += s;
    SmallVector<int64_t> shape(x.getShape());
    shape[axis] = s;
    types.push_back(RankedTensorType::get(shape, x.getElementType()));
  }
  if (total != x.getDimSize(axis))
    return emitOptionalError(loc, "Split: sizes add up to ", total,
                             " but the axis has ", x.getDimSize(axis));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto data = tensorOf(adaptor.getData());
  auto idx = tensorOf(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= data.getRank())
    return emitOptionalError(loc, "Gather: axis ", axis, " out of range");
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, idx.getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  types.push_back(RankedTensorType::get(shape, data.getElementType()));
  return success();
}

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *,
                                                 std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  auto data = tensorOf(adaptor.getData());
  auto idx = tensorOf(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= data.getRank() || idx.getRank() != data.getRank())
    return emitOptionalError(loc, "GatherElements: axis out of range or "
                                  "ranks differ");
  types.push_back(RankedTensorType::get(idx.getShape(), data.getElementType()));
  return success();
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto input = tensorOf(adaptor.getInput());
  int64_t axis = adaptor.getAxis(), k = adaptor.getK();
  if (axis < 0 || axis >= input.getRank())
    return emitOptionalError(loc, "TopK: axis ", axis, " out of range");
  if (k < 0 || (!ShapedType::isDynamic(input.getDimSize(axis)) &&
                k > input.getDimSize(axis)))
    return emitOptionalError(loc, "TopK: k = ", k,
                             " is not within the axis' extent ",
                             input.getDimSize(axis));
  SmallVector<int64_t> shape(input.getShape());
  shape[axis] = k;
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  types.push_back(RankedTensorType::get(shape, IntegerType::get(context, 64)));
  return success();
}

LogicalResult WhereOp::verify() {
  if (getLhs().getType().getElementType() !=
      getRhs().getType().getElementType())
    return emitOpError("branches have different element types");
  return success();
}

static LogicalResult verifyAxis(Operation *op, int64_t axis) {
  int64_t rank = cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
  if (axis < 0 || axis >= rank)
    return op->emitOpError("axis ")
           << axis << " out of range for rank " << rank;
  return success();
}

LogicalResult SoftmaxOp::verify() { return verifyAxis(*this, getAxis()); }
LogicalResult LogSoftmaxOp::verify() { return verifyAxis(*this, getAxis()); }

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getOutput().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  if (!in.hasStaticShape() || !out.hasStaticShape() ||
      in.getNumElements() != out.getNumElements())
    return emitOpError("element counts differ: ")
           << shapeStr(in.getShape()) << " vs " << shapeStr(out.getShape());
  return success();
}

LogicalResult ExpandOp::verify() {
  auto in = getInput().getType(), out = getOutput().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  auto b = broadcastShapes(in.getShape(), out.getShape());
  if (failed(b) || ArrayRef<int64_t>(*b) != out.getShape())
    return emitOpError("cannot broadcast ")
           << shapeStr(in.getShape()) << " to " << shapeStr(out.getShape());
  return success();
}

LogicalResult ScatterAddOp::verify() {
  ArrayRef<int64_t> out = shapeOf(getOutput()), idx = shapeOf(getIndices());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= int64_t(out.size()))
    return emitOpError("axis ") << axis << " out of range";
  SmallVector<int64_t> expected(out.take_front(axis));
  llvm::append_range(expected, idx);
  llvm::append_range(expected, out.drop_front(axis + 1));
  if (ArrayRef<int64_t>(expected) != shapeOf(getUpdates()))
    return emitOpError("updates must have shape ") << shapeStr(expected);
  if (getUpdates().getType().getElementType() !=
      getOutput().getType().getElementType())
    return emitOpError("changes the element type");
  return success();
}

LogicalResult ScatterElementsAddOp::verify() {
  int64_t rank = getOutput().getType().getRank(), axis = getAxis();
  if (axis < 0 || axis >= rank)
    return emitOpError("axis ") << axis << " out of range";
  if (shapeOf(getUpdates()) != shapeOf(getIndices()) ||
      getUpdates().getType().getRank() != rank)
    return emitOpError("updates and indices must have one shape and the "
                       "result's rank");
  if (getUpdates().getType().getElementType() !=
      getOutput().getType().getElementType())
    return emitOpError("changes the element type");
  return success();
}

LogicalResult InsertSliceOp::verify() {
  ArrayRef<int64_t> out = shapeOf(getOutput()), src = shapeOf(getSource());
  if (src.size() != out.size() || getStarts().size() != out.size() ||
      getSteps().size() != out.size())
    return emitOpError("needs one start and step per dimension of a result "
                       "of the source's rank");
  if (getSource().getType().getElementType() !=
      getOutput().getType().getElementType())
    return emitOpError("changes the element type");
  for (size_t d = 0; d < out.size(); ++d) {
    int64_t start = getStarts()[d], step = getSteps()[d];
    if (step == 0)
      return emitOpError("dimension ") << d << ": zero step";
    if (src[d] == 0)
      continue;
    int64_t last = start + (src[d] - 1) * step;
    if (start < 0 || start >= out[d] || last < 0 || last >= out[d])
      return emitOpError("dimension ") << d << ": slice out of bounds";
  }
  return success();
}

LogicalResult TriluOp::verify() {
  if (getInput().getType().getRank() < 2)
    return emitOpError("needs rank >= 2");
  return success();
}

//===----------------------------------------------------------------------===//
// Folding
//===----------------------------------------------------------------------===//

/// Folding copies constants, so keep it to small tensors (shape
/// computations, masks). Parameters (graph.weight) never reach a folder.
static constexpr int64_t kMaxFoldElements = 1 << 16;
static thread_local int64_t maxFoldElements = kMaxFoldElements;

FoldLimit::FoldLimit(int64_t elements) : previous(maxFoldElements) {
  maxFoldElements = std::max(elements, kMaxFoldElements);
}
FoldLimit::~FoldLimit() { maxFoldElements = previous; }

static bool mayFold(Operation *op) {
  for (Type t : op->getResultTypes()) {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt || !rt.hasStaticShape() || rt.getNumElements() > maxFoldElements)
      return false;
  }
  return true;
}

static DenseElementsAttr denseOf(Attribute a) {
  return dyn_cast_or_null<DenseElementsAttr>(a);
}

/// Scalars of a constant, as doubles (floats) or int64 (integers, i1).
namespace {
struct Scalars {
  bool isFloat = false;
  SmallVector<double> f;
  SmallVector<int64_t> i;
};
} // namespace

/// Fails for unsigned 64-bit values that int64 cannot hold.
static std::optional<Scalars> scalarsOf(DenseElementsAttr a) {
  Scalars s;
  Type et = a.getElementType();
  if (isa<FloatType>(et)) {
    s.isFloat = true;
    for (APFloat v : a.getValues<APFloat>())
      s.f.push_back(v.convertToDouble());
  } else {
    bool isUnsigned = et.isUnsignedInteger() || et.isInteger(1);
    for (APInt v : a.getValues<APInt>()) {
      if (isUnsigned && v.isNegative() && v.getBitWidth() == 64)
        return std::nullopt;
      s.i.push_back(isUnsigned ? int64_t(v.getZExtValue()) : v.getSExtValue());
    }
  }
  return s;
}

static DenseElementsAttr makeDense(RankedTensorType type, ArrayRef<double> f,
                                   ArrayRef<int64_t> i) {
  Type et = type.getElementType();
  if (auto ft = dyn_cast<FloatType>(et)) {
    SmallVector<APFloat> vals;
    for (double d : f) {
      APFloat v(d);
      bool lost;
      v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(v);
    }
    return DenseElementsAttr::get(type, vals);
  }
  unsigned width = et.getIntOrFloatBitWidth();
  SmallVector<APInt> vals;
  for (int64_t v : i)
    vals.push_back(APInt(width, uint64_t(v), /*isSigned=*/true,
                         /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, vals);
}

/// Maps each result element to an element of the operand; `src` returns the
/// operand's linear index for a result multi-index.
static Attribute
foldMovement(Operation *op, DenseElementsAttr in,
             llvm::function_ref<int64_t(ArrayRef<int64_t>)> src) {
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  ArrayRef<int64_t> shape = outType.getShape();
  if (in.isSplat())
    return DenseElementsAttr::get(outType, in.getSplatValue<Attribute>());
  SmallVector<Attribute> vals(in.getValues<Attribute>());
  SmallVector<Attribute> out;
  SmallVector<int64_t> idx(shape.size(), 0);
  int64_t n = numElements(shape);
  out.reserve(n);
  for (int64_t e = 0; e < n; ++e) {
    out.push_back(vals[src(idx)]);
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return DenseElementsAttr::get(outType, out);
}

/// Folds a broadcasting element-wise op on constant operands.
static Attribute
foldBroadcast(Operation *op, ArrayRef<Attribute> operands,
              llvm::function_ref<double(ArrayRef<double>)> fnF,
              llvm::function_ref<int64_t(ArrayRef<int64_t>)> fnI,
              bool floatCompare = false) {
  if (!mayFold(op))
    return {};
  SmallVector<DenseElementsAttr> in;
  for (Attribute a : operands) {
    if (!denseOf(a))
      return {};
    in.push_back(denseOf(a));
  }
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  ArrayRef<int64_t> shape = outType.getShape();
  SmallVector<Scalars> vals;
  SmallVector<SmallVector<int64_t>> strides;
  for (DenseElementsAttr a : in) {
    std::optional<Scalars> sc = scalarsOf(a);
    if (!sc)
      return {};
    vals.push_back(std::move(*sc));
    ArrayRef<int64_t> s = a.getType().getShape();
    SmallVector<int64_t> st = stridesOf(s), full(shape.size(), 0);
    for (size_t i = 0; i < s.size(); ++i)
      full[i + shape.size() - s.size()] = s[i] == 1 ? 0 : st[i];
    strides.push_back(full);
  }
  bool isFloat = isa<FloatType>(outType.getElementType()) || floatCompare;
  int64_t n = numElements(shape);
  SmallVector<double> outF;
  SmallVector<int64_t> outI;
  SmallVector<int64_t> idx(shape.size(), 0);
  SmallVector<double> argsF(in.size());
  SmallVector<int64_t> argsI(in.size());
  for (int64_t e = 0; e < n; ++e) {
    for (size_t k = 0; k < in.size(); ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < shape.size(); ++d)
        off += idx[d] * strides[k][d];
      if (in[k].isSplat())
        off = 0;
      if (vals[k].isFloat)
        argsF[k] = vals[k].f[off], argsI[k] = toInt64(vals[k].f[off]);
      else
        argsI[k] = vals[k].i[off], argsF[k] = double(vals[k].i[off]);
    }
    if (isFloat) {
      double r = fnF(argsF);
      outF.push_back(r);
      outI.push_back(toInt64(r));
    } else {
      outI.push_back(fnI(argsI));
    }
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  if (!isa<FloatType>(outType.getElementType()) && isFloat)
    outF.clear();
  return makeDense(outType, outF, outI);
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

template <typename F>
static Attribute foldUnaryF(Operation *op, Attribute a, F fn) {
  return foldBroadcast(
      op, {a}, [&](ArrayRef<double> x) { return fn(x[0]); },
      [&](ArrayRef<int64_t> x) { return int64_t(fn(double(x[0]))); });
}

OpFoldResult SqrtOp::fold(FoldAdaptor a) {
  return foldUnaryF(*this, a.getInput(), [](double x) { return std::sqrt(x); });
}
OpFoldResult ReciprocalOp::fold(FoldAdaptor a) {
  return foldUnaryF(*this, a.getInput(), [](double x) { return 1.0 / x; });
}
OpFoldResult NegOp::fold(FoldAdaptor a) {
  return foldBroadcast(
      *this, {a.getInput()}, [](ArrayRef<double> x) { return -x[0]; },
      [](ArrayRef<int64_t> x) { return -x[0]; });
}
OpFoldResult AbsOp::fold(FoldAdaptor a) {
  return foldBroadcast(
      *this, {a.getInput()}, [](ArrayRef<double> x) { return std::fabs(x[0]); },
      [](ArrayRef<int64_t> x) { return x[0] < 0 ? -x[0] : x[0]; });
}
OpFoldResult ErfOp::fold(FoldAdaptor a) {
  return foldUnaryF(*this, a.getInput(), [](double x) { return std::erf(x); });
}
OpFoldResult TanhOp::fold(FoldAdaptor a) {
  return foldUnaryF(*this, a.getInput(), [](double x) { return std::tanh(x); });
}
OpFoldResult SigmoidOp::fold(FoldAdaptor a) {
  return foldUnaryF(*this, a.getInput(),
                    [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}
OpFoldResult ExpOp::fold(FoldAdaptor a) {
  return foldUnaryF(*this, a.getInput(), [](double x) { return std::exp(x); });
}
OpFoldResult LogOp::fold(FoldAdaptor a) {
  return foldUnaryF(*this, a.getInput(), [](double x) { return std::log(x); });
}
OpFoldResult ReluOp::fold(FoldAdaptor a) {
  return foldBroadcast(
      *this, {a.getInput()},
      [](ArrayRef<double> x) { return x[0] > 0 ? x[0] : 0.0; },
      [](ArrayRef<int64_t> x) { return x[0] > 0 ? x[0] : int64_t(0); });
}
OpFoldResult FloorOp::fold(FoldAdaptor a) {
  return foldUnaryF(*this, a.getInput(),
                    [](double x) { return std::floor(x); });
}
OpFoldResult CeilOp::fold(FoldAdaptor a) {
  return foldUnaryF(*this, a.getInput(), [](double x) { return std::ceil(x); });
}
OpFoldResult SinOp::fold(FoldAdaptor a) {
  return foldUnaryF(*this, a.getInput(), [](double x) { return std::sin(x); });
}
OpFoldResult CosOp::fold(FoldAdaptor a) {
  return foldUnaryF(*this, a.getInput(), [](double x) { return std::cos(x); });
}
OpFoldResult IsNaNOp::fold(FoldAdaptor a) {
  return foldBroadcast(
      *this, {a.getInput()},
      [](ArrayRef<double> x) { return double(std::isnan(x[0])); },
      [](ArrayRef<int64_t>) { return int64_t(0); }, /*floatCompare=*/true);
}

OpFoldResult CumSumOp::fold(FoldAdaptor a) {
  DenseElementsAttr in = denseOf(a.getInput());
  if (!in || !mayFold(*this))
    return {};
  std::optional<Scalars> vals = scalarsOf(in);
  if (!vals)
    return {};
  auto type = cast<RankedTensorType>(getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t axis = getAxis(), n = shape[axis];
  int64_t inner = numElements(shape.drop_front(axis + 1));
  int64_t outer = numElements(shape.take_front(axis));
  int64_t total = numElements(shape);
  auto at = [&](int64_t o, int64_t i, int64_t k) {
    return in.isSplat() ? 0 : (o * n + i) * inner + k;
  };
  SmallVector<double> outF(vals->isFloat ? total : 0);
  SmallVector<int64_t> outI(vals->isFloat ? 0 : total);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      double sumF = 0;
      int64_t sumI = 0;
      for (int64_t step = 0; step < n; ++step) {
        int64_t i = getReverse() ? n - 1 - step : step;
        int64_t src = at(o, i, k), dst = (o * n + i) * inner + k;
        if (getExclusive()) {
          vals->isFloat ? outF[dst] = sumF : outI[dst] = sumI;
        }
        if (vals->isFloat)
          sumF += vals->f[src];
        else
          sumI += vals->i[src];
        if (!getExclusive()) {
          vals->isFloat ? outF[dst] = sumF : outI[dst] = sumI;
        }
      }
    }
  return makeDense(type, outF, outI);
}

OpFoldResult ReduceSumOp::fold(FoldAdaptor a) {
  // A sum over extents of 1 that keeps its dimensions adds nothing (the
  // backward's sum over a batch of one).
  if (getInput().getType() == getType())
    return getInput();
  // The sum along its axis of a scatter into zeros that puts one update in
  // each row along it (a cross-entropy's gradient, one label a row) is
  // the updates: every other term is a zero, so no rounding differs. Only
  // where something else reads the scatter, which stays with its check of
  // the indices.
  // (Axes are sorted and in [0, rank): inferReduce.)
  if (auto scatter = getInput().getDefiningOp<ScatterElementsAddOp>())
    if (getAxes() == ArrayRef<int64_t>{int64_t(scatter.getAxis())} &&
        !scatter->hasOneUse() && scatter.getUpdates().getType() == getType())
      return scatter.getUpdates();
  DenseElementsAttr in = denseOf(a.getInput());
  // Integers only: a float sum folded here would round differently from
  // the one the target computes.
  if (!in || !mayFold(*this) ||
      !isa<IntegerType>(in.getType().getElementType()))
    return {};
  std::optional<Scalars> vals = scalarsOf(in);
  if (!vals || vals->isFloat)
    return {};
  auto type = cast<RankedTensorType>(getType());
  ArrayRef<int64_t> inShape = shapeOf(getInput());
  int64_t rank = inShape.size();
  SmallVector<bool> reduced(rank, false);
  for (int64_t axis : getAxes()) {
    if (axis < 0 || axis >= rank)
      return {};
    reduced[axis] = true;
  }
  // The output index of each input element: the kept dimensions, row-major.
  SmallVector<int64_t> outI(numElements(type.getShape()), 0);
  int64_t total = numElements(inShape);
  SmallVector<int64_t> idx(rank, 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t out = 0;
    for (int64_t d = 0; d < rank; ++d)
      if (!reduced[d])
        out = out * inShape[d] + idx[d];
    outI[out] += vals->i[in.isSplat() ? 0 : e];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < inShape[d])
        break;
      idx[d] = 0;
    }
  }
  return makeDense(type, {}, outI);
}

LogicalResult CumSumOp::verify() {
  int64_t rank = cast<RankedTensorType>(getType()).getRank();
  uint64_t axis = getAxis();
  if (rank == 0 || axis >= uint64_t(rank))
    return emitOpError("axis ")
           << int64_t(axis) << " out of range for rank " << rank;
  return success();
}

OpFoldResult NotOp::fold(FoldAdaptor a) {
  return foldBroadcast(
      *this, {a.getInput()}, [](ArrayRef<double> x) { return double(!x[0]); },
      [](ArrayRef<int64_t> x) { return int64_t(!x[0]); });
}

#define PCC_FOLD_BINARY(Op, EXPR_F, EXPR_I)                                    \
  OpFoldResult Op::fold(FoldAdaptor a) {                                       \
    return foldBroadcast(                                                      \
        *this, {a.getLhs(), a.getRhs()},                                       \
        [](ArrayRef<double> x) -> double { return EXPR_F; },                   \
        [](ArrayRef<int64_t> x) -> int64_t { return EXPR_I; });                \
  }
PCC_FOLD_BINARY(AddOp, x[0] + x[1], x[0] + x[1])
PCC_FOLD_BINARY(SubOp, x[0] - x[1], x[0] - x[1])
PCC_FOLD_BINARY(MulOp, x[0] * x[1], x[0] * x[1])
PCC_FOLD_BINARY(PowOp, std::pow(x[0], x[1]),
                int64_t(std::pow(double(x[0]), double(x[1]))))
PCC_FOLD_BINARY(MaxOp, std::max(x[0], x[1]), std::max(x[0], x[1]))
PCC_FOLD_BINARY(MinOp, std::min(x[0], x[1]), std::min(x[0], x[1]))
PCC_FOLD_BINARY(AndOp, double(x[0] && x[1]), int64_t(x[0] && x[1]))
PCC_FOLD_BINARY(OrOp, double(x[0] || x[1]), int64_t(x[0] || x[1]))
PCC_FOLD_BINARY(XorOp, double(bool(x[0]) != bool(x[1])),
                int64_t(bool(x[0]) != bool(x[1])))
#undef PCC_FOLD_BINARY

OpFoldResult DivOp::fold(FoldAdaptor a) {
  // Integer division by zero is left to run time, where it is defined by
  // the target.
  if (auto rhs = denseOf(a.getRhs());
      rhs && !isa<FloatType>(rhs.getElementType()))
    for (APInt v : rhs.getValues<APInt>())
      if (v.isZero())
        return {};
  return foldBroadcast(
      *this, {a.getLhs(), a.getRhs()},
      [](ArrayRef<double> x) { return x[0] / x[1]; },
      [](ArrayRef<int64_t> x) { return x[0] / x[1]; });
}

#define PCC_FOLD_COMPARE(Op, CMP)                                              \
  OpFoldResult Op::fold(FoldAdaptor a) {                                       \
    auto lhs = denseOf(a.getLhs());                                            \
    bool f = lhs && isa<FloatType>(lhs.getElementType());                      \
    return foldBroadcast(                                                      \
        *this, {a.getLhs(), a.getRhs()},                                       \
        [](ArrayRef<double> x) -> double { return x[0] CMP x[1]; },            \
        [](ArrayRef<int64_t> x) -> int64_t { return x[0] CMP x[1]; }, f);      \
  }
PCC_FOLD_COMPARE(EqualOp, ==)
PCC_FOLD_COMPARE(LessOp, <)
PCC_FOLD_COMPARE(LessOrEqualOp, <=)
PCC_FOLD_COMPARE(GreaterOp, >)
PCC_FOLD_COMPARE(GreaterOrEqualOp, >=)
#undef PCC_FOLD_COMPARE

OpFoldResult WhereOp::fold(FoldAdaptor a) {
  return foldBroadcast(
      *this, {a.getLhs(), a.getRhs(), a.getCondition()},
      [](ArrayRef<double> x) { return x[2] ? x[0] : x[1]; },
      [](ArrayRef<int64_t> x) { return x[2] ? x[0] : x[1]; });
}

OpFoldResult CastOp::fold(FoldAdaptor a) {
  if (getInput().getType() == getOutput().getType())
    return getInput();
  auto in = denseOf(a.getInput());
  if (!in || !mayFold(*this))
    return {};
  auto outType = getOutput().getType();
  std::optional<Scalars> maybe = scalarsOf(in);
  if (!maybe)
    return {};
  Scalars &s = *maybe;
  Type et = outType.getElementType();
  SmallVector<double> f;
  SmallVector<int64_t> i;
  size_t n = s.isFloat ? s.f.size() : s.i.size();
  for (size_t k = 0; k < n; ++k) {
    double d = s.isFloat ? s.f[k] : double(s.i[k]);
    if (isa<FloatType>(et))
      f.push_back(d);
    else if (et.isInteger(1))
      i.push_back(d != 0);
    else
      i.push_back(s.isFloat ? toInt64(d) : s.i[k]);
  }
  return makeDense(outType, f, i);
}

OpFoldResult ReshapeOp::fold(FoldAdaptor a) {
  if (getInput().getType() == getOutput().getType())
    return getInput();
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  if (auto in = denseOf(a.getInput()); in && mayFold(*this))
    return in.reshape(getOutput().getType());
  return {};
}

OpFoldResult TriluOp::fold(FoldAdaptor a) {
  auto in = denseOf(a.getInput());
  if (!in || !mayFold(*this))
    return {};
  auto type = cast<RankedTensorType>(getOutput().getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  Attribute zero = Builder(getContext()).getZeroAttr(type.getElementType());
  SmallVector<Attribute> values(in.getValues<Attribute>());
  int64_t k = getK();
  for (int64_t i = 0, e = int64_t(values.size()); i < e; ++i) {
    int64_t diagonal = i % cols - i / cols % rows;
    if (getUpper() ? diagonal < k : diagonal > k)
      values[size_t(i)] = zero;
  }
  return DenseElementsAttr::get(type, values);
}

OpFoldResult TransposeOp::fold(FoldAdaptor a) {
  auto isIdentity = [](ArrayRef<int64_t> perm) {
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != int64_t(i))
        return false;
    return true;
  };
  if (isIdentity(getPerm()))
    return getInput();
  // A transpose of a transpose is one transpose of the first one's input
  // (the backward of a product with a transposed weight transposes it
  // back), or that input itself.
  if (auto producer = getInput().getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> composed;
    for (int64_t d : getPerm())
      composed.push_back(producer.getPerm()[d]);
    if (isIdentity(composed))
      return producer.getInput();
    getInputMutable().assign(producer.getInput());
    setPerm(composed);
    return getResult();
  }
  ArrayRef<int64_t> perm = getPerm();
  auto in = denseOf(a.getInput());
  if (!in || !mayFold(*this))
    return {};
  SmallVector<int64_t> st = stridesOf(shapeOf(getInput()));
  return foldMovement(*this, in, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0;
    for (size_t i = 0; i < idx.size(); ++i)
      off += idx[i] * st[perm[i]];
    return off;
  });
}

bool TransposeOp::swapsLastTwo() {
  ArrayRef<int64_t> perm = getPerm();
  int64_t rank = perm.size();
  if (rank < 2 || perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2)
    return false;
  for (int64_t d = 0; d < rank - 2; ++d)
    if (perm[d] != d)
      return false;
  return true;
}

TransposeOp TransposeOp::createSwapLastTwo(OpBuilder &builder, Location loc,
                                           Value input) {
  SmallVector<int64_t> perm = llvm::to_vector(
      llvm::seq<int64_t>(0, cast<RankedTensorType>(input.getType()).getRank()));
  std::swap(perm[perm.size() - 2], perm.back());
  return TransposeOp::create(builder, loc, input, perm);
}

namespace {
/// The marks of `from` (the backward's, a stage's) on `to`, an op that
/// replaces it or part of it.
void copyDiscardableAttrs(Operation *from, Operation *to) {
  for (NamedAttribute a : from->getDiscardableAttrs())
    to->setDiscardableAttr(a.getName(), a.getValue());
}

/// `v` with its last two dimensions swapped, marked as `marks` is.
Value createMarkedSwapLastTwo(PatternRewriter &rewriter, Location loc, Value v,
                              Operation *marks) {
  auto t = TransposeOp::createSwapLastTwo(rewriter, loc, v);
  copyDiscardableAttrs(marks, t);
  return t;
}

/// Whether a transpose of `v`'s last two dimensions costs no copy once
/// pushed into what makes it: a product only the transpose reads
/// (TransposeOfMatMul), or a sum, only it read, of such values.
bool transposeFoldsInto(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def || !def->hasOneUse())
    return false;
  // Vectors are not matrices: their product drops a dimension.
  if (auto product = dyn_cast<MatMulOp>(def))
    return cast<RankedTensorType>(product.getLhs().getType()).getRank() >= 2 &&
           cast<RankedTensorType>(product.getRhs().getType()).getRank() >= 2;
  auto sum = dyn_cast<AddOp>(def);
  return sum && sum.getLhs().getType() == sum.getType() &&
         sum.getRhs().getType() == sum.getType() &&
         transposeFoldsInto(sum.getLhs()) && transposeFoldsInto(sum.getRhs());
}

/// (A B)^T = B^T A^T over the last two dimensions: a transpose of a
/// product that only it reads becomes the product of its operands'
/// transposes, which a GEMM reads in place, so C^T is never copied (the
/// backward of a tied LM head computes the embedding's gradient
/// transposed).
struct TransposeOfMatMul : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto product = op.getInput().getDefiningOp<MatMulOp>();
    if (!product || !op.swapsLastTwo() || !transposeFoldsInto(product))
      return failure();
    // The new ops are the product's: its marks go along.
    Value lhs = createMarkedSwapLastTwo(rewriter, op.getLoc(), product.getRhs(),
                                        product);
    Value rhs = createMarkedSwapLastTwo(rewriter, op.getLoc(), product.getLhs(),
                                        product);
    auto swapped =
        MatMulOp::create(rewriter, op.getLoc(), op.getType(), lhs, rhs);
    copyDiscardableAttrs(product, swapped);
    rewriter.replaceOp(op, swapped);
    return success();
  }
};

/// (A + B)^T = A^T + B^T where each term's transpose folds into the
/// product that makes it: a tied LM head computed in pieces (a pipeline's)
/// sums the pieces' weight gradients, and its transpose to the embedding's
/// layout would otherwise copy the whole gradient once per microbatch.
struct TransposeOfSum : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto sum = op.getInput().getDefiningOp<AddOp>();
    if (!sum || !op.swapsLastTwo() || !transposeFoldsInto(sum.getResult()))
      return failure();
    Value lhs =
        createMarkedSwapLastTwo(rewriter, op.getLoc(), sum.getLhs(), op);
    Value rhs =
        createMarkedSwapLastTwo(rewriter, op.getLoc(), sum.getRhs(), op);
    auto swapped = AddOp::create(rewriter, op.getLoc(), op.getType(), lhs, rhs);
    copyDiscardableAttrs(sum, swapped);
    rewriter.replaceOp(op, swapped);
    return success();
  }
};

/// A transpose of the last two dimensions commutes with a reshape that
/// keeps them and changes only the leading ones: transposed first, the
/// reshape's source may be a product that TransposeOfMatMul rewrites.
struct TransposeOfReshape : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto reshape = op.getInput().getDefiningOp<ReshapeOp>();
    if (!reshape || !reshape->hasOneUse() || !op.swapsLastTwo())
      return failure();
    auto from = cast<RankedTensorType>(reshape.getInput().getType());
    auto to = cast<RankedTensorType>(reshape.getType());
    if (from.getRank() < 2 ||
        from.getShape().take_back(2) != to.getShape().take_back(2))
      return failure();
    Value t =
        createMarkedSwapLastTwo(rewriter, op.getLoc(), reshape.getInput(), op);
    auto r = ReshapeOp::create(rewriter, op.getLoc(), op.getType(), t);
    copyDiscardableAttrs(reshape, r);
    rewriter.replaceOp(op, r);
    return success();
  }
};
} // namespace

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<TransposeOfMatMul, TransposeOfSum, TransposeOfReshape>(context);
}

OpFoldResult ExpandOp::fold(FoldAdaptor a) {
  if (getInput().getType() == getOutput().getType())
    return getInput();
  auto in = denseOf(a.getInput());
  if (!in || !mayFold(*this))
    return {};
  ArrayRef<int64_t> s = shapeOf(getInput());
  size_t rank = shapeOf(getOutput()).size();
  SmallVector<int64_t> st = stridesOf(s);
  return foldMovement(*this, in, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0;
    for (size_t i = 0; i < s.size(); ++i)
      off += s[i] == 1 ? 0 : idx[i + rank - s.size()] * st[i];
    return off;
  });
}

OpFoldResult SliceOp::fold(FoldAdaptor a) {
  if (getInput().getType() == getOutput().getType() &&
      llvm::all_of(getStarts(), [](int64_t s) { return s == 0; }) &&
      llvm::all_of(getSteps(), [](int64_t s) { return s == 1; }))
    return getInput();
  auto in = denseOf(a.getInput());
  if (!in || !mayFold(*this))
    return {};
  SmallVector<int64_t> st = stridesOf(shapeOf(getInput()));
  return foldMovement(*this, in, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0;
    for (size_t i = 0; i < idx.size(); ++i)
      off += (getStarts()[i] + idx[i] * getSteps()[i]) * st[i];
    return off;
  });
}

/// A concatenation of constants, as one constant.
static OpFoldResult foldConstantConcat(ConcatOp op, ConcatOp::FoldAdaptor a) {
  if (!mayFold(op))
    return {};
  SmallVector<Attribute> vals;
  SmallVector<DenseElementsAttr> ins;
  for (Attribute attr : a.getInputs()) {
    if (!denseOf(attr))
      return {};
    ins.push_back(denseOf(attr));
  }
  // Row-major concatenation: for each outer index, append each input's
  // block of `dim[axis] * inner` elements.
  ArrayRef<int64_t> shape = shapeOf(op.getOutput());
  int64_t axis = op.getAxis();
  int64_t outer = numElements(shape.take_front(axis));
  int64_t inner = numElements(shape.drop_front(axis + 1));
  SmallVector<SmallVector<Attribute>> inVals;
  for (DenseElementsAttr d : ins) {
    SmallVector<Attribute> v;
    if (d.isSplat())
      v.assign(d.getNumElements(), d.getSplatValue<Attribute>());
    else
      v.assign(d.getValues<Attribute>().begin(),
               d.getValues<Attribute>().end());
    inVals.push_back(std::move(v));
  }
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < ins.size(); ++k) {
      int64_t block = ins[k].getType().getShape()[axis] * inner;
      for (int64_t e = 0; e < block; ++e)
        vals.push_back(inVals[k][o * block + e]);
    }
  return DenseElementsAttr::get(op.getOutput().getType(), vals);
}

OpFoldResult ConcatOp::fold(FoldAdaptor a) {
  if (getInputs().size() == 1)
    return getInputs()[0];
  // Empty inputs add nothing (an empty past's keys before the new ones):
  // where one input is all there is, it is the result.
  Value only;
  for (Value in : getInputs()) {
    if (cast<ShapedType>(in.getType()).getNumElements() == 0)
      continue;
    if (only)
      return foldConstantConcat(*this, a);
    only = in;
  }
  if (only && only.getType() == getOutput().getType())
    return only;
  return foldConstantConcat(*this, a);
}

OpFoldResult GatherOp::fold(FoldAdaptor a) {
  auto data = denseOf(a.getData());
  auto indices = denseOf(a.getIndices());
  if (!data || !indices || !mayFold(*this))
    return {};
  ArrayRef<int64_t> ds = shapeOf(getData());
  int64_t axis = getAxis(), extent = ds[axis];
  SmallVector<int64_t> idxVals;
  for (APInt v : indices.getValues<APInt>()) {
    int64_t i = v.getSExtValue();
    if (i < -extent || i >= extent)
      return {};
    idxVals.push_back(i < 0 ? i + extent : i);
  }
  ArrayRef<int64_t> is = shapeOf(getIndices());
  SmallVector<int64_t> dst = stridesOf(ds), ist = stridesOf(is);
  return foldMovement(*this, data, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0, ioff = 0;
    for (int64_t i = 0; i < axis; ++i)
      off += idx[i] * dst[i];
    for (size_t i = 0; i < is.size(); ++i)
      ioff += idx[axis + i] * ist[i];
    off += idxVals[ioff] * dst[axis];
    for (size_t i = axis + 1; i < ds.size(); ++i)
      off += idx[i - 1 + is.size()] * dst[i];
    return off;
  });
}

#define GET_OP_CLASSES
#include "pcc/Dialect/Graph/IR/GraphOpsMended.cpp.inc"

//===----------------------------------------------------------------------===//
// FusionOp
//===----------------------------------------------------------------------===//

void FusionOp::build(OpBuilder &builder, OperationState &state,
                     TypeRange resultTypes, ValueRange inputs) {
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value v : inputs)
    block->addArgument(v.getType(), v.getLoc());
}

int64_t FusionOp::getFlops() {
  int64_t flops = 0;
  for (Operation &op : getBody().front().without_terminator())
    if (auto cost = dyn_cast<CostOpInterface>(&op))
      flops += cost.getFlops();
  return flops;
}

LogicalResult FusionOp::verify() {
  Block &block = getBody().front();
  if (block.getNumArguments() != getNumOperands())
    return emitOpError("has ") << block.getNumArguments()
                               << " body arguments for " << getNumOperands()
                               << " operands";
  for (auto [arg, input] : llvm::zip(block.getArguments(), getInputs()))
    if (arg.getType() != input.getType())
      return emitOpError("body argument ")
             << arg.getArgNumber() << " has type " << arg.getType()
             << ", its operand " << input.getType();
  auto yield = cast<YieldOp>(block.getTerminator());
  if (yield->getOperandTypes() != getResultTypes())
    return emitOpError("yields ")
           << yield->getOperandTypes() << " for results " << getResultTypes();
  if (getNumResults() == 0)
    return emitOpError("has no result");
  ArrayRef<int64_t> space =
      cast<RankedTensorType>(getResult(0).getType()).getShape();
  for (Type t : getResultTypes())
    if (cast<RankedTensorType>(t).getShape() != space)
      return emitOpError("results differ in shape: every result has the "
                         "iteration space's shape");
  for (Operation &op : block.without_terminator()) {
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      auto value = dyn_cast<DenseElementsAttr>(constant.getValue());
      if (value && value.isSplat())
        continue;
    }
    if (!op.hasTrait<pcc::graph::OpTrait::Elementwise>() ||
        op.getNumResults() != 1)
      return op.emitOpError("inside graph.fusion is not element-wise");
  }
  return success();
}

ParseResult FusionOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand> inputs;
  FunctionType type;
  if (parser.parseOperandList(inputs) || parser.parseColon() ||
      parser.parseType(type) ||
      parser.resolveOperands(inputs, type.getInputs(),
                             parser.getCurrentLocation(), result.operands))
    return failure();
  result.addTypes(type.getResults());
  SmallVector<OpAsmParser::Argument> args;
  Region *body = result.addRegion();
  if (parser.parseRegion(*body, args, /*enableNameShadowing=*/false) ||
      parser.parseOptionalAttrDict(result.attributes))
    return failure();
  FusionOp::ensureTerminator(*body, parser.getBuilder(), result.location);
  return success();
}

void FusionOp::print(OpAsmPrinter &p) {
  p << ' ' << getInputs() << " : "
    << FunctionType::get(getContext(), getInputs().getTypes(),
                         getResultTypes())
    << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/true,
                /*printBlockTerminators=*/true);
  p.printOptionalAttrDict((*this)->getAttrs());
}
