//===- Shard.cpp - Splitting whole tensors into ranks' parts and back -----===//
//
// The layout of a split entry is defined in pccrt.h. Everything here works
// on runs of whole rows of the split dimension (ShardLayout::forEachRun), so
// that slicing a weight, gathering a gradient and reading a rank's part
// straight from a file share one definition of who holds what.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <cstring>

using namespace pccrt;
using namespace pccrt::detail;

int64_t pccrt::meshGroupSize(const pccrt_model_info &info, uint32_t axes) {
  int64_t n = 1;
  for (int32_t a = 0; a < info.mesh_rank && a < 32; ++a)
    if (axes & (1u << a))
      n *= info.mesh_shape[a];
  return n;
}

ShardLayout detail::shardLayout(const pccrt_model_info &info,
                                const pccrt_tensor_info &entry) {
  ShardLayout layout;
  std::vector<int64_t> shape;
  if (entry.rank > 0)
    shape.assign(entry.shape, entry.shape + entry.rank);
  uint64_t elementBytes = dtypeSize(entry.dtype);
  if (entry.shard_axes == 0) {
    // One run of one row: the whole tensor.
    uint64_t bytes = elementBytes;
    for (int64_t extent : shape)
      bytes *= uint64_t(extent);
    layout.rowBytes = bytes;
    layout.local = layout.whole = layout.real = 1;
    return layout;
  }
  int32_t dim = entry.shard_dim;
  layout.rowBytes = elementBytes;
  for (int32_t d = 0; d < entry.rank; ++d) {
    if (d < dim)
      layout.outer *= shape[d];
    else if (d > dim)
      layout.rowBytes *= uint64_t(shape[d]);
  }
  layout.size = meshGroupSize(info, entry.shard_axes);
  for (int32_t a = 0; a < info.mesh_rank && a < 32; ++a)
    if (entry.shard_axes & (1u << a))
      layout.axes.push_back(
          {info.mesh_shape[a], (entry.shard_outer_axes & (1u << a)) != 0});
  layout.groups = std::max<int64_t>(1, entry.shard_groups);
  layout.local = shape[dim];
  layout.whole = layout.local * layout.size;
  layout.real = entry.full_extent ? entry.full_extent : layout.whole;
  return layout;
}

std::vector<int64_t> pccrt::wholeShape(const pccrt_model_info &info,
                                       const pccrt_tensor_info &entry) {
  std::vector<int64_t> shape;
  if (entry.rank > 0)
    shape.assign(entry.shape, entry.shape + entry.rank);
  if (entry.shard_axes != 0)
    shape[entry.shard_dim] = shardLayout(info, entry).real;
  return shape;
}

Tensor pccrt::sliceShard(const pccrt_model_info &info,
                         const pccrt_tensor_info &entry, int64_t position,
                         const Tensor &whole) {
  ShardLayout layout = shardLayout(info, entry);
  Tensor part;
  part.name = whole.name;
  part.dtype = whole.dtype;
  part.kind = whole.kind;
  if (entry.rank > 0)
    part.shape.assign(entry.shape, entry.shape + entry.rank);
  uint64_t bytes =
      uint64_t(layout.outer) * uint64_t(layout.local) * layout.rowBytes;
  uint64_t wholeBytes =
      uint64_t(layout.outer) * uint64_t(layout.real) * layout.rowBytes;
  if (whole.data.size() != wholeBytes || position < 0 ||
      position >= layout.size)
    throw Error("tensor " + detail::quote(whole.name) + ": cannot take part " +
                std::to_string(position) + " of " +
                std::to_string(layout.size) + " from " +
                std::to_string(whole.data.size()) + " bytes");
  // Zeros stay where the padding is.
  part.data.assign(bytes, 0);
  layout.forEachRun(position, [&](int64_t o, int64_t localRow, int64_t wholeRow,
                                  int64_t realRows, int64_t) {
    if (realRows == 0)
      return;
    std::memcpy(part.data.data() +
                    (uint64_t(o * layout.local + localRow)) * layout.rowBytes,
                whole.data.data() +
                    (uint64_t(o * layout.real + wholeRow)) * layout.rowBytes,
                uint64_t(realRows) * layout.rowBytes);
  });
  return part;
}

Tensor pccrt::joinShards(const pccrt_model_info &info,
                         const pccrt_tensor_info &entry,
                         const std::vector<Tensor> &parts) {
  ShardLayout layout = shardLayout(info, entry);
  uint64_t partBytes =
      uint64_t(layout.outer) * uint64_t(layout.local) * layout.rowBytes;
  if (parts.size() != size_t(layout.size))
    throw Error("tensor " + detail::quote(entry.name) + ": " +
                std::to_string(parts.size()) + " parts for a group of " +
                std::to_string(layout.size));
  for (const Tensor &part : parts)
    if (part.data.size() != partBytes)
      throw Error("tensor " + detail::quote(entry.name) + ": a part of " +
                  std::to_string(part.data.size()) + " bytes, expected " +
                  std::to_string(partBytes));
  Tensor whole;
  whole.name = entry.name;
  whole.dtype = entry.dtype;
  whole.kind = entry.kind;
  whole.shape = wholeShape(info, entry);
  whole.data.resize(uint64_t(layout.outer) * uint64_t(layout.real) *
                    layout.rowBytes);
  for (int64_t p = 0; p < layout.size; ++p)
    layout.forEachRun(p, [&](int64_t o, int64_t localRow, int64_t wholeRow,
                             int64_t realRows, int64_t) {
      if (realRows == 0)
        return;
      std::memcpy(whole.data.data() +
                      uint64_t(o * layout.real + wholeRow) * layout.rowBytes,
                  parts[size_t(p)].data.data() +
                      uint64_t(o * layout.local + localRow) * layout.rowBytes,
                  uint64_t(realRows) * layout.rowBytes);
    });
  return whole;
}
