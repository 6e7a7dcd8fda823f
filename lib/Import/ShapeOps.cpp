//===- ShapeOps.cpp - Import constants and shape computations -------------===//
//
// Every shape is static, so Shape, Size, ConstantOfShape and Range become
// constants at import time; the folders then evaluate the arithmetic that
// exporters build on them.
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

#include <cmath>

using namespace mlir;
using namespace pcc;
using namespace pcc::import;

static Value i64Constant(NodeImporter &n, ArrayRef<int64_t> values,
                         bool scalar = false) {
  auto type = RankedTensorType::get(
      scalar ? ArrayRef<int64_t>{} : ArrayRef<int64_t>{int64_t(values.size())},
      n.b.getIntegerType(64));
  return n.constant(DenseElementsAttr::get(type, values));
}

static LogicalResult importShape(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  ArrayRef<int64_t> shape = n.inputType(0).getShape();
  int64_t rank = shape.size();
  auto clampAxis = [&](int64_t a) {
    if (a < 0)
      a += rank;
    return std::min(std::max<int64_t>(a, 0), rank);
  };
  int64_t start = clampAxis(n.attrInt("start", 0));
  int64_t end = clampAxis(n.attrInt("end", rank));
  SmallVector<int64_t> dims;
  for (int64_t i = start; i < end; ++i)
    dims.push_back(shape[i]);
  n.results = {i64Constant(n, dims)};
  return success();
}

static LogicalResult importSize(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  n.results = {i64Constant(n, {n.inputType(0).getNumElements()}, true)};
  return success();
}

static LogicalResult importConstantOfShape(NodeImporter &n) {
  if (failed(n.requireInputs(1)))
    return failure();
  auto shape = n.constInts(0, "input");
  if (failed(shape))
    return failure();
  if (failed(n.checkElements(*shape, kMaxTensorElements)))
    return failure();
  DenseElementsAttr value;
  if (const auto *a = n.attr("value")) {
    value = convertTensor(a->t(), n.getModelDir(), n.loc);
    if (!value)
      return failure();
    if (value.getNumElements() != 1)
      return emitError(n.loc) << "ConstantOfShape: value must hold one element",
             failure();
  } else {
    value = DenseElementsAttr::get(RankedTensorType::get({1}, n.b.getF32Type()),
                                   0.0f);
  }
  auto type = RankedTensorType::get(*shape, value.getElementType());
  n.results = {n.constant(
      DenseElementsAttr::get(type, value.getValues<Attribute>()[0]))};
  return success();
}

static LogicalResult importRange(NodeImporter &n) {
  if (failed(n.requireInputs(3)))
    return failure();
  DenseElementsAttr start = NodeImporter::constantOf(n.input(0));
  DenseElementsAttr limit = NodeImporter::constantOf(n.input(1));
  DenseElementsAttr delta = NodeImporter::constantOf(n.input(2));
  if (!start || !limit || !delta)
    return emitError(n.loc) << "Range: start, limit and delta must be "
                               "compile-time constants; fix graph inputs "
                               "with --bind NAME=FILE.pb",
           failure();
  Type et = start.getElementType();
  for (DenseElementsAttr a : {start, limit, delta})
    if (a.getElementType() != et || a.getNumElements() != 1 ||
        !(isa<FloatType>(et) || isa<IntegerType>(et)))
      return emitError(n.loc) << "Range: start, limit and delta must be "
                                 "scalars of one numeric type",
             failure();
  auto scalar = [&](DenseElementsAttr a) {
    return isa<FloatType>(et) ? a.getValues<APFloat>()[0].convertToDouble()
                              : double(a.getValues<APInt>()[0].getSExtValue());
  };
  double s = scalar(start), l = scalar(limit), d = scalar(delta);
  if (d == 0)
    return emitError(n.loc) << "Range: delta is 0", failure();
  double count = std::ceil((l - s) / d);
  if (std::isnan(count))
    return emitError(n.loc) << "Range: start, limit or delta is not a number",
           failure();
  if (count > double(kMaxMaterializedElements))
    return emitError(n.loc) << "Range: result of " << formatCount(count)
                            << " elements exceeds pcc's limit of "
                            << kMaxMaterializedElements,
           failure();
  int64_t num = std::max<int64_t>(0, int64_t(count));
  auto type = RankedTensorType::get({num}, et);
  if (auto ft = dyn_cast<FloatType>(et)) {
    SmallVector<APFloat> vals;
    for (int64_t i = 0; i < num; ++i) {
      APFloat v(s + double(i) * d);
      bool lost;
      v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(v);
    }
    n.results = {n.constant(DenseElementsAttr::get(type, vals))};
  } else {
    int64_t si = int64_t(s), di = int64_t(d);
    SmallVector<APInt> vals;
    for (int64_t i = 0; i < num; ++i)
      vals.push_back(APInt(et.getIntOrFloatBitWidth(), uint64_t(si + i * di),
                           /*isSigned=*/true, /*implicitTrunc=*/true));
    n.results = {n.constant(DenseElementsAttr::get(type, vals))};
  }
  return success();
}

static LogicalResult importConstant(NodeImporter &n) {
  Builder &b = n.b;
  DenseElementsAttr value;
  if (const auto *a = n.attr("value")) {
    value = convertTensor(a->t(), n.getModelDir(), n.loc);
  } else if (const auto *a = n.attr("value_float")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                   a->f());
  } else if (const auto *a = n.attr("value_floats")) {
    SmallVector<float> v(a->floats().begin(), a->floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({int64_t(v.size())}, b.getF32Type()),
        ArrayRef<float>(v));
  } else if (const auto *a = n.attr("value_int")) {
    value = DenseElementsAttr::get(
        RankedTensorType::get({}, b.getIntegerType(64)), a->i());
  } else if (const auto *a = n.attr("value_ints")) {
    SmallVector<int64_t> v(a->ints().begin(), a->ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({int64_t(v.size())}, b.getIntegerType(64)),
        ArrayRef<int64_t>(v));
  } else {
    return emitError(n.loc) << "Constant: unsupported value form (string or "
                               "sparse tensors are not supported)",
           failure();
  }
  if (!value)
    return failure();
  n.results = {n.constant(value)};
  return success();
}

void pcc::import::registerShapeImporters(ImporterMap &map) {
  map["Shape"] = importShape;
  map["Size"] = importSize;
  map["ConstantOfShape"] = importConstantOfShape;
  map["Range"] = importRange;
  map["Constant"] = importConstant;
}
