//===- WeightTensors.cpp - A program's weights file -----------------------===//

#include "pcc/Target/WeightTensors.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Import/OnnxImporter.h"
#include "pcc/Target/AbiTables.h"

using namespace mlir;
using namespace pcc;

std::vector<pccrt::TensorRef>
pcc::getWeightTensors(const CppEmitResult &emitted,
                      std::deque<std::vector<uint8_t>> &storage) {
  std::vector<pccrt::TensorRef> tensors;
  for (const WeightEntry &w : emitted.weights) {
    // A cache starts zeroed where it is run: the file does not hold it.
    if (w.kind == WeightKind::Cache)
      continue;
    pccrt::TensorRef t;
    t.name = w.name;
    t.dtype = getOnnxDataType(w.value.getElementType());
    auto shape = w.value.getShapedType().getShape();
    t.shape.assign(shape.begin(), shape.end());
    auto [dim, extent] = w.padding;
    // The IR's bytes are the file's for a tensor of whole bytes: no copy of
    // a large model's weights. Those that view the model's external data
    // are copied from file to file.
    std::optional<ArrayRef<char>> raw;
    if (dim < 0)
      raw = graph::getStoredBytes(w.value);
    if (raw) {
      if (auto source = findExternalDataSource(*raw)) {
        t.file = source->first;
        t.fileOffset = source->second;
      } else {
        t.data = reinterpret_cast<const uint8_t *>(raw->data());
      }
      t.size = raw->size();
      tensors.push_back(std::move(t));
      continue;
    }
    DenseElementsAttr dense = graph::getDenseValue(w.value);
    assert(dense && "the emitter takes dense values or stored bytes only");
    // Zeros (an optimizer's moments) become a hole in the file: neither
    // held here nor written to disk.
    if (dim < 0 && dense.isSplat() && !dense.getElementType().isInteger(1) &&
        dense.getRawData().size() >= 1 &&
        llvm::all_of(dense.getRawData(), [](char c) { return c == 0; })) {
      t.zeros = true;
      t.size = uint64_t(dense.getNumElements()) *
               (dense.getElementType().getIntOrFloatBitWidth() / 8);
      tensors.push_back(std::move(t));
      continue;
    }
    // A splat or bools: made into bytes here, kept in `storage`.
    std::optional<ArrayRef<char>> stored = graph::getStoredBytes(dense);
    if (!stored) {
      std::vector<uint8_t> &bytes = storage.emplace_back(getRawBytes(dense));
      stored = ArrayRef<char>(reinterpret_cast<const char *>(bytes.data()),
                              bytes.size());
    }
    t.data = reinterpret_cast<const uint8_t *>(stored->data());
    t.size = stored->size();
    if (dim < 0) {
      tensors.push_back(std::move(t));
      continue;
    }
    // The file holds the real vocabulary; each rank's part gets its padding
    // back as zeros when it is loaded. Where the padding is the outermost
    // dimension (an embedding table), the real rows are a prefix of the
    // stored bytes, written as they are.
    int64_t outer = 1;
    for (int64_t d = 0; d < dim; ++d)
      outer *= shape[d];
    int64_t inner =
        int64_t(stored->size()) / std::max<int64_t>(1, outer * shape[dim]);
    t.shape[dim] = extent;
    t.size = uint64_t(outer * extent * inner);
    if (outer == 1) {
      tensors.push_back(std::move(t));
      continue;
    }
    std::vector<uint8_t> &cut = storage.emplace_back();
    cut.reserve(t.size);
    for (int64_t o = 0; o < outer; ++o)
      cut.insert(cut.end(), stored->begin() + o * shape[dim] * inner,
                 stored->begin() + (o * shape[dim] + extent) * inner);
    t.data = cut.data();
    tensors.push_back(std::move(t));
  }
  return tensors;
}

