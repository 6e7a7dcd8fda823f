//===- Movement.cpp - Import data-movement ONNX operators -----------------===//
//
// Reshape, Squeeze, Unsqueeze and Flatten become graph.reshape; Slice is
// normalized to one (start, size, step) per dimension; operands that ONNX
// passes as tensors (shapes, axes, bounds, split sizes) must be constants.
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace pcc;
using namespace pcc::import;

static LogicalResult reshapeTo(NodeImporter &n, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, n.inputType(0).getElementType());
  if (type.getNumElements() != n.inputType(0).getNumElements())
    return emitError(n.loc) << n.node.op_type() << ": cannot reshape "
                            << n.inputType(0) << " to " << type,
           failure();
  auto r =
      n.create1WithType(graph::ReshapeOp::getOperationName(), type, n.input(0));
  return n.setResult(r);
}

static LogicalResult importReshape(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto shape = n.constInts(1, "shape");
  if (failed(shape))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  bool allowZero = n.attrInt("allowzero", 0);
  SmallVector<int64_t> out;
  int64_t inferred = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(*shape)) {
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return emitError(n.loc) << "Reshape: 0 at position " << i
                                << " has no input dimension to copy",
               failure();
      d = in[i];
    }
    if (d == -1) {
      if (inferred >= 0)
        return emitError(n.loc) << "Reshape: more than one -1", failure();
      inferred = i;
      out.push_back(1);
      continue;
    }
    if (d < 0)
      return emitError(n.loc) << "Reshape: invalid dimension " << d, failure();
    known *= d;
    out.push_back(d);
  }
  int64_t total = n.inputType(0).getNumElements();
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return emitError(n.loc)
                 << "Reshape: cannot infer -1 for " << n.inputType(0),
             failure();
    out[inferred] = total / known;
  }
  return reshapeTo(n, out);
}

/// Axes from the attribute (before `inputFromOpset`) or from input #1.
static FailureOr<SmallVector<int64_t>> axesOperand(NodeImporter &n,
                                                   int64_t inputFromOpset,
                                                   int64_t rank,
                                                   bool &present) {
  SmallVector<int64_t> axes;
  present = false;
  if (n.opset >= inputFromOpset) {
    if (n.input(1)) {
      auto c = n.constInts(1, "axes");
      if (failed(c))
        return failure();
      axes = *c;
      present = true;
    }
  } else if (auto a = n.attrInts("axes")) {
    axes = *a;
    present = true;
  }
  for (int64_t &a : axes) {
    auto na = n.normalizeAxis(a, rank);
    if (failed(na))
      return failure();
    a = *na;
  }
  return axes;
}

static LogicalResult importSqueeze(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  bool present;
  auto axes = axesOperand(n, 13, in.size(), present);
  if (failed(axes))
    return failure();
  SmallVector<int64_t> out;
  for (auto [i, d] : llvm::enumerate(in)) {
    bool listed = llvm::is_contained(*axes, int64_t(i));
    if (listed && d != 1)
      return emitError(n.loc) << "Squeeze: dimension " << i << " has extent "
                              << d << ", not 1",
             failure();
    if (!(listed || (!present && d == 1)))
      out.push_back(d);
  }
  return reshapeTo(n, out);
}

static LogicalResult importUnsqueeze(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  bool present;
  SmallVector<int64_t> raw;
  if (n.opset >= 13) {
    auto c = n.constInts(1, "axes");
    if (failed(c))
      return failure();
    raw = *c;
  } else if (auto a = n.attrInts("axes")) {
    raw = *a;
  }
  (void)present;
  int64_t rank = in.size() + raw.size();
  SmallVector<int64_t> axes;
  for (int64_t a : raw) {
    auto na = n.normalizeAxis(a, rank);
    if (failed(na))
      return failure();
    axes.push_back(*na);
  }
  SmallVector<int64_t> out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (llvm::is_contained(axes, i))
      out.push_back(1);
    else if (next < in.size())
      out.push_back(in[next++]);
    else
      return emitError(n.loc) << "Unsqueeze: repeated or invalid axes",
             failure();
  }
  return reshapeTo(n, out);
}

static LogicalResult importFlatten(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  int64_t axis = n.attrInt("axis", 1);
  if (axis < 0)
    axis += in.size();
  if (axis < 0 || axis > int64_t(in.size()))
    return emitError(n.loc) << "Flatten: axis out of range", failure();
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= in[i];
  int64_t total = n.inputType(0).getNumElements();
  return reshapeTo(n, {outer, outer ? total / outer : 0});
}

static LogicalResult importIdentity(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  n.results = {n.input(0)};
  return success();
}

/// Dropout in inference: the identity, and an all-true mask.
static LogicalResult importDropout(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  if (auto training = NodeImporter::constantOf(n.input(2)))
    if (!training.getElementType().isInteger(1) ||
        llvm::any_of(training.getValues<bool>(), [](bool b) { return b; }))
      return emitError(n.loc) << "Dropout: training mode is not supported",
             failure();
  auto maskType =
      RankedTensorType::get(n.inputType(0).getShape(), n.b.getI1Type());
  n.results = {n.input(0), n.constant(DenseElementsAttr::get(maskType, true))};
  return success();
}

static LogicalResult importTranspose(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  int64_t rank = n.inputType(0).getRank();
  SmallVector<int64_t> perm;
  if (auto p = n.attrInts("perm"))
    perm = *p;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  for (int64_t &p : perm)
    if (p < 0)
      p += rank;
  auto r = n.create1<graph::TransposeOp>(
      n.input(0), n.b.getNamedAttr("perm", n.b.getDenseI64ArrayAttr(perm)));
  return n.setResult(r);
}

static LogicalResult importExpand(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto shape = n.constInts(1, "shape");
  if (failed(shape))
    return failure();
  auto out = graph::broadcastShapes(n.inputType(0).getShape(), *shape);
  if (failed(out) || llvm::any_of(*shape, [](int64_t d) { return d < 0; }))
    return emitError(n.loc) << "Expand: cannot broadcast " << n.inputType(0)
                            << " to the requested shape",
           failure();
  if (failed(n.checkElements(*out, kMaxTensorElements)))
    return failure();
  auto type = RankedTensorType::get(*out, n.inputType(0).getElementType());
  auto r =
      n.create1WithType(graph::ExpandOp::getOperationName(), type, n.input(0));
  return n.setResult(r);
}

static FailureOr<Value> reshapeValue(NodeImporter &n, Value v,
                                     ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, getElementTypeOrSelf(v.getType()));
  return n.create1WithType(graph::ReshapeOp::getOperationName(), type, v);
}

/// Tile repeats the whole tensor along each dimension: the input reshaped
/// to [1, d0, 1, d1, ...], expanded to [r0, d0, r1, d1, ...] and merged back
/// to [r0 * d0, r1 * d1, ...]. Only movement ops, so it differentiates.
static LogicalResult importTile(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto repeats = n.constInts(1, "repeats");
  if (failed(repeats))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  if (repeats->size() != in.size())
    return emitError(n.loc) << "Tile: " << repeats->size()
                            << " repeats for an input of rank " << in.size(),
           failure();
  SmallVector<int64_t> spread, expanded, out;
  for (auto [d, r] : llvm::zip(in, *repeats)) {
    if (r < 0)
      return emitError(n.loc) << "Tile: negative repeat " << r, failure();
    spread.append({1, d});
    expanded.append({r, d});
    out.push_back(r * d);
  }
  if (failed(n.checkElements(expanded, kMaxTensorElements)))
    return failure();
  auto s = reshapeValue(n, n.input(0), spread);
  if (failed(s))
    return failure();
  auto type = RankedTensorType::get(expanded, n.inputType(0).getElementType());
  auto e = n.create1WithType(graph::ExpandOp::getOperationName(), type, *s);
  if (failed(e))
    return failure();
  return n.setResult(reshapeValue(n, *e, out));
}

/// GatherND becomes a gather along one merged axis: the data's batch and
/// indexed dimensions are merged, and each index tuple (negative entries
/// counted from the end) becomes one linear index, computed with Graph ops
/// so that constant indices fold and others run.
static LogicalResult importGatherND(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  ArrayRef<int64_t> data = n.inputType(0).getShape();
  ArrayRef<int64_t> idxShape = n.inputType(1).getShape();
  int64_t b = n.attrInt("batch_dims", 0), r = data.size(), q = idxShape.size();
  if (!n.inputType(1).getElementType().isInteger(64))
    return emitError(n.loc) << "GatherND: indices must be int64", failure();
  if (q < 1 || b < 0 || b >= q || b >= r)
    return emitError(n.loc)
               << "GatherND: batch_dims " << b << " does not fit data of rank "
               << r << " and indices of rank " << q,
           failure();
  int64_t k = idxShape.back();
  if (k < 1 || b + k > r)
    return emitError(n.loc)
               << "GatherND: index tuples of length " << k
               << " do not fit data of rank " << r << " with batch_dims " << b,
           failure();
  for (int64_t i = 0; i < b; ++i)
    if (data[i] != idxShape[i])
      return emitError(n.loc)
                 << "GatherND: batch dimension " << i << " differs (" << data[i]
                 << " vs " << idxShape[i] << ")",
             failure();
  Type i64 = n.b.getIntegerType(64);
  auto i64Const = [&](ArrayRef<int64_t> shape, ArrayRef<int64_t> values) {
    return n.constant(
        DenseElementsAttr::get(RankedTensorType::get(shape, i64), values));
  };
  // Merged data: [prod(data[0 : b + k]), data[b + k :]...].
  int64_t merged = 1, tuple = 1;
  for (int64_t i = 0; i < b + k; ++i)
    merged *= data[i];
  SmallVector<int64_t> flatShape{merged};
  flatShape.append(data.begin() + b + k, data.end());
  auto flat = reshapeValue(n, n.input(0), flatShape);
  if (failed(flat))
    return failure();
  // Linear index within the batch: sum_j norm(idx[..., j]) * stride_j.
  SmallVector<int64_t> extents(data.begin() + b, data.begin() + b + k);
  SmallVector<int64_t> strides(k, 1);
  for (int64_t j = k - 2; j >= 0; --j)
    strides[j] = strides[j + 1] * extents[j + 1];
  tuple = strides[0] * extents[0];
  Value idx = n.input(1);
  auto negative = n.create1<graph::LessOp>({idx, i64Const({}, {0})});
  auto wrapped = n.create1<graph::AddOp>({idx, i64Const({k}, extents)});
  if (failed(negative) || failed(wrapped))
    return failure();
  auto norm = n.create1<graph::WhereOp>({*negative, *wrapped, idx});
  if (failed(norm))
    return failure();
  auto scaled = n.create1<graph::MulOp>({*norm, i64Const({k}, strides)});
  if (failed(scaled))
    return failure();
  auto linear = n.create1<graph::ReduceSumOp>(
      *scaled, {n.b.getNamedAttr("axes", n.b.getDenseI64ArrayAttr({q - 1})),
                n.b.getNamedAttr("keepdims", n.b.getBoolAttr(false))});
  if (failed(linear))
    return failure();
  Value lin = *linear;
  if (b > 0) {
    // Each batch element's tuples start at its own block of the merged axis.
    SmallVector<int64_t> offShape(idxShape.begin(), idxShape.begin() + b);
    offShape.append(q - 1 - b, 1);
    int64_t batches = 1;
    for (int64_t i = 0; i < b; ++i)
      batches *= idxShape[i];
    SmallVector<int64_t> offsets;
    for (int64_t i = 0; i < batches; ++i)
      offsets.push_back(i * tuple);
    auto shifted = n.create1<graph::AddOp>({lin, i64Const(offShape, offsets)});
    if (failed(shifted))
      return failure();
    lin = *shifted;
  }
  auto r2 = n.create1<graph::GatherOp>(
      {*flat, lin}, n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(0)));
  return n.setResult(r2);
}

/// SplitToSequence: the parts of a split, kept as a sequence that
/// SequenceAt reads at import time.
static LogicalResult importSplitToSequence(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  auto axis = n.normalizeAxis(n.attrInt("axis", 0), in.size());
  if (failed(axis))
    return failure();
  int64_t dim = in[*axis];
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  if (n.input(1)) {
    auto split = n.constInts(1, "split");
    if (failed(split))
      return failure();
    if (cast<RankedTensorType>(n.input(1).getType()).getRank() == 0) {
      int64_t chunk = (*split)[0];
      if (chunk <= 0)
        return emitError(n.loc)
                   << "SplitToSequence: split " << chunk << " must be positive",
               failure();
      for (int64_t at = 0; at < dim; at += chunk)
        sizes.push_back(std::min(chunk, dim - at));
    } else {
      sizes = *split;
    }
  } else {
    sizes.assign(dim, 1);
    squeeze = n.attrInt("keepdims", 1) == 0;
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      return emitError(n.loc) << "SplitToSequence: negative split size",
             failure();
    total += s;
  }
  if (total != dim)
    return emitError(n.loc) << "SplitToSequence: split sizes sum to " << total
                            << ", not the extent " << dim,
           failure();
  auto parts = n.create<graph::SplitOp>(
      n.input(0), {n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(*axis)),
                   n.b.getNamedAttr("sizes", n.b.getDenseI64ArrayAttr(sizes))});
  if (failed(parts))
    return failure();
  SmallVector<Value> elements(*parts);
  if (squeeze)
    for (Value &e : elements) {
      SmallVector<int64_t> shape(in);
      shape.erase(shape.begin() + *axis);
      auto sq = reshapeValue(n, e, shape);
      if (failed(sq))
        return failure();
      e = *sq;
    }
  n.setSequenceOutput(0, std::move(elements));
  return success();
}

static LogicalResult importSequenceAt(NodeImporter &n) {
  const SmallVector<Value> *seq = n.sequenceInput(0);
  if (!seq)
    return failure();
  auto position = n.constInts(1, "position");
  if (failed(position))
    return failure();
  int64_t size = seq->size(), p = position->empty() ? 0 : (*position)[0];
  if (position->size() != 1 || p < -size || p >= size)
    return emitError(n.loc) << "SequenceAt: position out of range for a "
                               "sequence of "
                            << size << " tensors",
           failure();
  n.results = {(*seq)[p < 0 ? p + size : p]};
  return success();
}

static LogicalResult importSlice(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  int64_t rank = in.size();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (n.opset < 10) {
    starts = n.attrInts("starts").value_or(SmallVector<int64_t>{});
    ends = n.attrInts("ends").value_or(SmallVector<int64_t>{});
    axes = n.attrInts("axes").value_or(SmallVector<int64_t>{});
  } else {
    if (failed(n.requireInputs(3)))
      return failure();
    auto s = n.constInts(1, "starts"), e = n.constInts(2, "ends");
    if (failed(s) || failed(e))
      return failure();
    starts = *s, ends = *e;
    if (n.input(3)) {
      auto a = n.constInts(3, "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
    if (n.input(4)) {
      auto st = n.constInts(4, "steps");
      if (failed(st))
        return failure();
      steps = *st;
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return emitError(n.loc) << "Slice: starts, ends, axes and steps differ "
                               "in length",
           failure();
  SmallVector<int64_t> oStart(rank, 0), oSize(in), oStep(rank, 1);
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = n.normalizeAxis(axes[i], rank);
    if (failed(axis))
      return failure();
    if (seen[*axis])
      return emitError(n.loc) << "Slice: repeated axis", failure();
    seen[*axis] = true;
    int64_t dim = in[*axis], step = steps[i];
    if (step == 0)
      return emitError(n.loc) << "Slice: step 0", failure();
    // ONNX clamps starts and ends to the valid range (dimension-dependent
    // for negative steps).
    auto adjust = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0)
        v = v < -dim ? lo : v + dim;
      return std::min(std::max(v, lo), hi);
    };
    if (step == std::numeric_limits<int64_t>::min())
      step = -dim - 1;
    int64_t start, end, size;
    if (step > 0) {
      start = adjust(starts[i], 0, dim);
      end = adjust(ends[i], 0, dim);
      size = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = adjust(starts[i], 0, dim - 1);
      end = adjust(ends[i], -1, dim - 1);
      size = start > end ? (start - end - 1) / -step + 1 : 0;
    }
    oStart[*axis] = size ? start : 0;
    oSize[*axis] = size;
    oStep[*axis] = step;
  }
  auto r = n.create1<graph::SliceOp>(
      n.input(0), {n.b.getNamedAttr("starts", n.b.getDenseI64ArrayAttr(oStart)),
                   n.b.getNamedAttr("sizes", n.b.getDenseI64ArrayAttr(oSize)),
                   n.b.getNamedAttr("steps", n.b.getDenseI64ArrayAttr(oStep))});
  return n.setResult(r);
}

static LogicalResult importConcat(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  SmallVector<Value> operands;
  for (size_t i = 0; i < n.numInputs(); ++i)
    if (n.input(i))
      operands.push_back(n.input(i));
  auto axis = n.normalizeAxis(n.attrInt("axis", 0), n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  auto r = n.create1<graph::ConcatOp>(
      operands, n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(*axis)));
  return n.setResult(r);
}

static LogicalResult importSplit(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  auto axis = n.normalizeAxis(n.attrInt("axis", 0), in.size());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> sizes;
  if (n.opset >= 13 && n.input(1)) {
    auto c = n.constInts(1, "split");
    if (failed(c))
      return failure();
    sizes = *c;
  } else if (auto a = n.attrInts("split"); a && n.opset < 13) {
    sizes = *a;
  } else {
    // Equal parts: num_outputs (opset 18) or one per output; the last part
    // is smaller when the extent does not divide.
    int64_t parts = n.attrInt("num_outputs", n.node.output_size());
    if (parts <= 0)
      return emitError(n.loc) << "Split: no outputs", failure();
    if (parts != n.node.output_size())
      return emitError(n.loc) << "Split: num_outputs is " << parts
                              << " but the node has " << n.node.output_size()
                              << " outputs",
             failure();
    int64_t dim = in[*axis];
    int64_t chunk = (dim + parts - 1) / parts;
    if (!n.attr("num_outputs") && dim % parts)
      return emitError(n.loc)
                 << "Split: extent " << dim << " does not divide into " << parts
                 << " outputs",
             failure();
    for (int64_t p = 0; p < parts; ++p)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - p * chunk)));
  }
  auto r = n.create<graph::SplitOp>(
      n.input(0), {n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(*axis)),
                   n.b.getNamedAttr("sizes", n.b.getDenseI64ArrayAttr(sizes))});
  return n.setResults(r);
}

template <typename OpTy> static LogicalResult importGather(NodeImporter &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto axis = n.normalizeAxis(n.attrInt("axis", 0), n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  auto r =
      n.create1<OpTy>({n.input(0), n.input(1)},
                      n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(*axis)));
  return n.setResult(r);
}

static LogicalResult importTrilu(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  int64_t k = 0;
  if (n.input(1)) {
    auto c = n.constInts(1, "k");
    if (failed(c))
      return failure();
    if (c->size() != 1)
      return emitError(n.loc) << "Trilu: k must be a scalar", failure();
    k = (*c)[0];
  }
  auto r = n.createWithTypes(
      graph::TriluOp::getOperationName(), n.input(0).getType(), n.input(0),
      {n.b.getNamedAttr("upper", n.b.getBoolAttr(n.attrInt("upper", 1))),
       n.b.getNamedAttr("k", n.b.getI64IntegerAttr(k))});
  return n.setResults(r);
}

/// `shape` as [a, b, ...].
static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  return text + "]";
}

/// A run-time ScatterND whose constant indices write `rows` of the data's
/// first `k` dimensions merged, in any order (a strided slice assignment,
/// `x[..., a::3] = u`, which exporters write along the first axis after a
/// transpose: Qwen3-VL's interleaved multimodal rotary sections): the data's
/// rows and the updates stacked, and the row each output row takes from
/// them gathered by constant indices. A row written twice takes the last
/// write (ONNX leaves it undefined).
static LogicalResult importScatteredRows(NodeImporter &n,
                                         ArrayRef<int64_t> shape, int64_t k,
                                         ArrayRef<int64_t> rows) {
  int64_t merged = 1;
  for (int64_t d : shape.take_front(k))
    merged *= d;
  SmallVector<int64_t> dataRows{merged}, updateRows{int64_t(rows.size())};
  dataRows.append(shape.begin() + k, shape.end());
  updateRows.append(shape.begin() + k, shape.end());
  FailureOr<Value> data = reshapeValue(n, n.input(0), dataRows);
  FailureOr<Value> updates = reshapeValue(n, n.input(2), updateRows);
  if (failed(data) || failed(updates))
    return failure();
  FailureOr<Value> stacked = n.create1<graph::ConcatOp>(
      {*data, *updates}, n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(0)));
  if (failed(stacked))
    return failure();
  SmallVector<int64_t> from = llvm::to_vector(llvm::seq<int64_t>(0, merged));
  for (auto [u, row] : llvm::enumerate(rows))
    from[row] = merged + int64_t(u);
  Value indices = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({merged}, n.b.getIntegerType(64)),
      ArrayRef<int64_t>(from)));
  FailureOr<Value> gathered = n.create1<graph::GatherOp>(
      {*stacked, indices}, n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(0)));
  if (failed(gathered))
    return failure();
  return n.setResult(reshapeValue(n, *gathered, shape));
}

/// ScatterND (reduction "none"): the data with the updates written at the
/// indices, which must be constants. Of constant data and updates (the
/// masks that exporters build by slice assignment, `mask[..., :n] = x`,
/// constant once shapes are fixed), evaluated at import. Of values computed
/// at run time, where the indices write rows [a, b) of the data's first
/// dimension in order (a slice assignment, `x[a:b] = u`, which exporters
/// make of one along any axis by transposing it first: MLA's query
/// halves), the rows before, the updates and the rows after concatenated;
/// any other rows, importScatteredRows.
static LogicalResult importScatterND(NodeImporter &n) {
  if (failed(n.requireInputs(3)))
    return failure();
  auto indices = n.constInts(1, "indices");
  if (failed(indices))
    return failure();
  if (n.inputType(0).getElementType() != n.inputType(2).getElementType())
    return emitError(n.loc) << "ScatterND: the updates' element type differs "
                               "from the data's",
           failure();
  std::string reduction = n.attrString("reduction", "none");
  if (reduction != "none")
    return emitError(n.loc) << "ScatterND: reduction '" << reduction
                            << "' is not supported (only 'none')",
           failure();
  ArrayRef<int64_t> shape = n.inputType(0).getShape(),
                    indexShape = n.inputType(1).getShape(),
                    updateShape = n.inputType(2).getShape();
  int64_t k = indexShape.empty() ? 0 : indexShape.back();
  if (k < 1 || k > int64_t(shape.size()))
    return emitError(n.loc)
               << "ScatterND: indices' last dimension " << k
               << " is not in 1 .. the data's rank " << shape.size(),
           failure();
  // The updates: the indices' shape but its last dimension, then the
  // data's past the first k.
  SmallVector<int64_t> expected(indexShape.drop_back());
  llvm::append_range(expected, shape.drop_front(k));
  if (updateShape != ArrayRef<int64_t>(expected))
    return emitError(n.loc)
               << "ScatterND: updates of shape " << shapeString(updateShape)
               << " do not fit the indices and the data ("
               << shapeString(expected) << ")",
           failure();
  // The flat row of the data's first k dimensions that each update writes.
  int64_t count = int64_t(indices->size()) / k;
  SmallVector<int64_t> rows;
  for (int64_t u = 0; u < count; ++u) {
    int64_t offset = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t i = (*indices)[u * k + d];
      if (i < -shape[d] || i >= shape[d])
        return emitError(n.loc)
                   << "ScatterND: index " << i << " out of range for "
                   << "dimension " << d << " of extent " << shape[d],
               failure();
      offset = offset * shape[d] + (i < 0 ? i + shape[d] : i);
    }
    rows.push_back(offset);
  }
  DenseElementsAttr data = NodeImporter::constantOf(n.input(0)),
                    updates = NodeImporter::constantOf(n.input(2));
  if (data && updates) {
    if (failed(n.checkElements(shape, kMaxMaterializedElements)))
      return failure();
    SmallVector<Attribute> out(data.getValues<Attribute>());
    SmallVector<Attribute> in(updates.getValues<Attribute>());
    int64_t slice = 1;
    for (int64_t d : shape.drop_front(k))
      slice *= d;
    for (auto [u, row] : llvm::enumerate(rows))
      std::copy_n(in.begin() + u * slice, slice, out.begin() + row * slice);
    n.results = {n.constant(DenseElementsAttr::get(data.getType(), out))};
    return success();
  }
  bool range = k == 1 && count > 0 &&
               llvm::all_of(llvm::seq<int64_t>(1, count),
                            [&](int64_t u) { return rows[u] == rows[0] + u; });
  if (!range)
    return importScatteredRows(n, shape, k, rows);
  // Rows [first, last) of the data, the slice's other dimensions whole.
  auto rowsOf = [&](Value v, int64_t first, int64_t last) {
    SmallVector<int64_t> starts(shape.size(), 0), sizes(shape),
        steps(shape.size(), 1);
    starts[0] = first;
    sizes[0] = last - first;
    return n.create1<graph::SliceOp>(
        v, {n.b.getNamedAttr("starts", n.b.getDenseI64ArrayAttr(starts)),
            n.b.getNamedAttr("sizes", n.b.getDenseI64ArrayAttr(sizes)),
            n.b.getNamedAttr("steps", n.b.getDenseI64ArrayAttr(steps))});
  };
  SmallVector<Value> parts;
  if (rows[0] > 0) {
    auto before = rowsOf(n.input(0), 0, rows[0]);
    if (failed(before))
      return failure();
    parts.push_back(*before);
  }
  parts.push_back(n.input(2));
  if (rows[0] + count < shape[0]) {
    auto after = rowsOf(n.input(0), rows[0] + count, shape[0]);
    if (failed(after))
      return failure();
    parts.push_back(*after);
  }
  if (parts.size() == 1) {
    n.results = {n.input(2)};
    return success();
  }
  return n.setResult(n.create1<graph::ConcatOp>(
      parts, n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(0))));
}

/// ScatterElements: the data with updates[i][j] written (reduction "none")
/// or added ("add") at data[indices[i][j]][j] along `axis`. An "add" is the
/// data plus graph.scatter_elements_add of the updates. A write, whose
/// indices ONNX requires to be distinct, selects (graph.where) the
/// scattered updates where a scatter of ones counts a write, the data
/// elsewhere: exactly the updates, whatever the data held (a difference
/// added to the data, updates - data, gave NaN over -inf data, as
/// Llama 4's router fills its scores, and rounded finite ones). DeepSeek's
/// router marks its chosen groups so (`mask.scatter_(1, top_groups, 1)`).
/// Other reductions are refused.
static LogicalResult importScatterElements(NodeImporter &n) {
  if (failed(n.requireInputs(3)))
    return failure();
  RankedTensorType data = n.inputType(0);
  std::string reduction = n.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return emitError(n.loc) << "ScatterElements: reduction '" << reduction
                            << "' is not supported (only 'none' and 'add')",
           failure();
  if (n.inputType(1).getShape() != n.inputType(2).getShape() ||
      n.inputType(1).getRank() != data.getRank())
    return emitError(n.loc)
               << "ScatterElements: indices of shape "
               << shapeString(n.inputType(1).getShape()) << " and updates of "
               << shapeString(n.inputType(2).getShape())
               << " must have one shape, of the data's rank",
           failure();
  if (n.inputType(2).getElementType() != data.getElementType())
    return emitError(n.loc) << "ScatterElements: the updates' element type "
                               "differs from the data's",
           failure();
  if (!isa<FloatType>(data.getElementType()))
    return emitError(n.loc)
               << "ScatterElements: of data of element type "
               << data.getElementType() << " (only floats are supported)",
           failure();
  auto axis = n.normalizeAxis(n.attrInt("axis", 0), data.getRank());
  if (failed(axis))
    return failure();
  auto axisAttr = n.b.getNamedAttr("axis", n.b.getI64IntegerAttr(*axis));
  auto scatter = [&](Value updates) {
    return n.createWithTypes(graph::ScatterElementsAddOp::getOperationName(),
                             data, {updates, n.input(1)}, {axisAttr});
  };
  auto added = scatter(n.input(2));
  if (failed(added))
    return failure();
  if (reduction == "add")
    return n.setResult(n.create1<graph::AddOp>({n.input(0), (*added)[0]}));
  RankedTensorType updatesType = n.inputType(2);
  Value ones = n.constant(DenseElementsAttr::get(
      updatesType, FloatAttr::get(updatesType.getElementType(), 1.0)));
  auto counts = scatter(ones);
  if (failed(counts))
    return failure();
  Value zero = n.scalar(data.getElementType(), 0.0);
  auto written = n.create1<graph::GreaterOp>({(*counts)[0], zero});
  if (failed(written))
    return failure();
  return n.setResult(
      n.create1<graph::WhereOp>({*written, (*added)[0], n.input(0)}));
}

/// OneHot: `values[1]` where the index (wrapped when negative) equals the
/// position along the new axis of `depth` (a constant), `values[0]`
/// elsewhere; a comparison of the indices with a constant range and a
/// `where`. TorchScript exports `repeat_interleave` by a count so (the
/// counts of a Tile, as transformers' batched experts repeat each token);
/// constant indices fold at import.
static LogicalResult importOneHot(NodeImporter &n) {
  if (failed(n.requireInputs(3)))
    return failure();
  // A depth of any number type, truncated to an integer (ONNX's rule).
  DenseElementsAttr depthValue = NodeImporter::constantOf(n.input(1));
  if (!depthValue)
    return emitError(n.loc) << "OneHot: input 'depth' (#1) must be a "
                               "compile-time constant; fix graph inputs with "
                               "--bind NAME=FILE.pb",
           failure();
  SmallVector<int64_t> depth;
  if (isa<FloatType>(depthValue.getElementType()))
    for (APFloat v : depthValue.getValues<APFloat>()) {
      double x = v.convertToDouble();
      depth.push_back(std::isfinite(x) && std::abs(x) < 1e15 ? int64_t(x) : 0);
    }
  else
    for (APInt v : depthValue.getValues<APInt>())
      depth.push_back(v.getSExtValue());
  if (depth.size() != 1 || depth[0] < 1)
    return emitError(n.loc) << "OneHot: depth must be one positive number",
           failure();
  RankedTensorType indicesType = n.inputType(0),
                   valuesType = n.inputType(2);
  if (!isa<IntegerType, FloatType>(indicesType.getElementType()))
    return emitError(n.loc) << "OneHot: indices must be numbers", failure();
  if (valuesType.getRank() != 1 || valuesType.getDimSize(0) != 2)
    return emitError(n.loc)
               << "OneHot: values must be [off, on], a tensor of 2 elements",
           failure();
  int64_t d = depth[0], rank = indicesType.getRank() + 1;
  auto axis = n.normalizeAxis(n.attrInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  SmallVector<int64_t> outShape(indicesType.getShape());
  outShape.insert(outShape.begin() + *axis, d);
  if (failed(n.checkElements(outShape, kMaxMaterializedElements)))
    return failure();
  Type i64 = n.b.getIntegerType(64);
  Value indices = n.input(0);
  if (indicesType.getElementType() != i64) {
    auto cast = n.create1WithType(graph::CastOp::getOperationName(),
                                  indicesType.clone(i64), indices);
    if (failed(cast))
      return failure();
    indices = *cast;
  }
  // Negative indices count from the end of the axis.
  auto scalar = [&](int64_t v) {
    return n.constant(
        DenseElementsAttr::get(RankedTensorType::get({}, i64), v));
  };
  auto negative = n.create1<graph::LessOp>({indices, scalar(0)});
  auto wrapped = n.create1<graph::AddOp>({indices, scalar(d)});
  if (failed(negative) || failed(wrapped))
    return failure();
  auto index = n.create1<graph::WhereOp>({*negative, *wrapped, indices});
  if (failed(index))
    return failure();
  // The indices with an axis of 1 where the new one goes, against 0 .. d-1
  // along it.
  SmallVector<int64_t> spread(indicesType.getShape()), along(rank, 1);
  spread.insert(spread.begin() + *axis, 1);
  along[*axis] = d;
  auto spreadIndex = reshapeValue(n, *index, spread);
  if (failed(spreadIndex))
    return failure();
  Value positions = n.constant(DenseElementsAttr::get(
      RankedTensorType::get(along, i64),
      ArrayRef<int64_t>(llvm::to_vector(llvm::seq<int64_t>(0, d)))));
  auto hot = n.create1<graph::EqualOp>({*spreadIndex, positions});
  if (failed(hot))
    return failure();
  // values[0] and values[1] as scalars.
  auto element = [&](int64_t i) -> FailureOr<Value> {
    auto one = n.create1<graph::SliceOp>(
        n.input(2), {n.b.getNamedAttr("starts", n.b.getDenseI64ArrayAttr({i})),
                     n.b.getNamedAttr("sizes", n.b.getDenseI64ArrayAttr({1})),
                     n.b.getNamedAttr("steps", n.b.getDenseI64ArrayAttr({1}))});
    if (failed(one))
      return failure();
    return reshapeValue(n, *one, {});
  };
  FailureOr<Value> off = element(0), on = element(1);
  if (failed(off) || failed(on))
    return failure();
  return n.setResult(n.create1<graph::WhereOp>({*hot, *on, *off}));
}

void pcc::import::registerMovementImporters(ImporterMap &map) {
  map["Reshape"] = importReshape;
  map["Squeeze"] = importSqueeze;
  map["Unsqueeze"] = importUnsqueeze;
  map["Flatten"] = importFlatten;
  map["Identity"] = importIdentity;
  map["Dropout"] = importDropout;
  map["Transpose"] = importTranspose;
  map["Expand"] = importExpand;
  map["Slice"] = importSlice;
  map["Concat"] = importConcat;
  map["Split"] = importSplit;
  map["Gather"] = importGather<graph::GatherOp>;
  map["GatherElements"] = importGather<graph::GatherElementsOp>;
  map["Trilu"] = importTrilu;
  map["OneHot"] = importOneHot;
  map["Tile"] = importTile;
  map["GatherND"] = importGatherND;
  map["ScatterND"] = importScatterND;
  map["ScatterElements"] = importScatterElements;
  map["SplitToSequence"] = importSplitToSequence;
  map["SequenceAt"] = importSequenceAt;
}
