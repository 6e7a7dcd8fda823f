//===- AbiTables.cpp - The tables a generated library exports -------------===//

#include "pcc/Target/AbiTables.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstring>

using namespace mlir;
using namespace pcc;

//===----------------------------------------------------------------------===//
// Element types and bytes
//===----------------------------------------------------------------------===//

int32_t pcc::getOnnxDataType(Type t) {
  if (t.isF32())
    return 1;
  if (t.isF64())
    return 11;
  if (t.isF16())
    return 10;
  if (t.isBF16())
    return 16;
  auto i = dyn_cast<IntegerType>(t);
  if (!i)
    return 0;
  bool u = i.isUnsigned();
  switch (i.getWidth()) {
  case 1:
    return 9;
  case 8:
    return u ? 2 : 3;
  case 16:
    return u ? 4 : 5;
  case 32:
    return u ? 12 : 6;
  case 64:
    return u ? 13 : 7;
  default:
    return 0;
  }
}

std::vector<uint8_t> pcc::getRawBytes(DenseElementsAttr value) {
  Type et = value.getElementType();
  int64_t n = value.getNumElements();
  int64_t w = et.isInteger(1) ? 1 : et.getIntOrFloatBitWidth() / 8;
  std::vector<uint8_t> out(n * w);
  if (et.isInteger(1)) {
    int64_t i = 0;
    for (bool b : value.getValues<bool>())
      out[i++] = b;
    return out;
  }
  if (!value.isSplat()) {
    ArrayRef<char> raw = value.getRawData();
    std::memcpy(out.data(), raw.data(), out.size());
    return out;
  }
  APInt bits = isa<FloatType>(et)
                   ? value.getSplatValue<APFloat>().bitcastToAPInt()
                   : value.getSplatValue<APInt>();
  uint64_t word = bits.getZExtValue();
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(&out[i * w], &word, w);
  return out;
}

//===----------------------------------------------------------------------===//
// MeshLayout
//===----------------------------------------------------------------------===//

FailureOr<MeshLayout> MeshLayout::get(ModuleOp module) {
  MeshLayout layout;
  if (!module)
    return layout;
  for (auto m : module.getOps<dist::MeshOp>())
    if (m.getNumRanks() > 1) {
      if (layout.mesh)
        return m.emitError("a generated program takes one mesh per module");
      layout.mesh = m;
    }
  return layout;
}

std::vector<std::pair<std::string, int64_t>> MeshLayout::getAxes() const {
  std::vector<std::pair<std::string, int64_t>> axes;
  if (mesh)
    for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getShape()))
      axes.push_back({cast<StringAttr>(name).getValue().str(), size});
  return axes;
}

uint32_t MeshLayout::getAxesMask(ArrayAttr axes) const {
  uint32_t mask = 0;
  if (!mesh)
    return 0;
  for (Attribute a : axes)
    for (auto [i, name] : llvm::enumerate(mesh.getAxisNames()))
      if (cast<StringAttr>(name) == cast<StringAttr>(a))
        mask |= 1u << i;
  return mask;
}

int64_t MeshLayout::getAxisSize(StringRef name) const {
  return mesh ? mesh.getAxisSize(name).value_or(1) : 1;
}

std::string MeshLayout::getGroupPosition(ArrayAttr axes) const {
  // Row-major over the mesh: axis i's coordinate is rank / stride_i % size_i;
  // the group position runs row-major over the group's axes.
  std::string expr = "0";
  if (!mesh)
    return expr;
  ArrayRef<int64_t> shape = mesh.getShape();
  for (Attribute a : axes) {
    int64_t stride = 1, size = 1;
    bool found = false;
    for (int64_t i = shape.size() - 1; i >= 0; --i) {
      if (cast<StringAttr>(mesh.getAxisNames()[i]) == cast<StringAttr>(a)) {
        size = shape[i];
        found = true;
        break;
      }
      stride *= shape[i];
    }
    if (!found)
      continue;
    expr = llvm::formatv("(({0}) * {1} + (int64_t)ctx->rank / {2} % {1})", expr,
                         size, stride)
               .str();
  }
  return expr;
}

ShardFields MeshLayout::getShardFields(dist::ShardingAttr sharding,
                                       ArrayRef<int64_t> whole) const {
  if (sharding)
    for (unsigned d = 0; d < sharding.getDims().size(); ++d)
      if (!sharding.getDimAxes(d).empty())
        return {getAxesMask(cast<ArrayAttr>(sharding.getDims()[d])), int32_t(d),
                sharding.getDimGroups(d), whole[d]};
  return {};
}

//===----------------------------------------------------------------------===//
// AbiTables
//===----------------------------------------------------------------------===//

void AbiTables::addInput(StringRef name, RankedTensorType type) {
  inputs.push_back({name.str(), type, false, {}});
}

void AbiTables::addOutput(StringRef name, RankedTensorType type, bool isGrad,
                          ShardFields shard) {
  outputs.push_back({name.str(), type, isGrad, shard});
}

int64_t AbiTables::lookupWeight(StringRef name) const {
  auto it = weightIndex.find(name);
  return it == weightIndex.end() ? -1 : it->second;
}

int64_t AbiTables::addWeight(WeightEntry entry) {
  int64_t index = weights.size();
  bool inserted = weightIndex.try_emplace(entry.name, index).second;
  assert(inserted && "weight names are unique");
  (void)inserted;
  weights.push_back(std::move(entry));
  return index;
}

std::string AbiTables::printEntry(StringRef name, RankedTensorType type,
                                  int64_t index, StringRef group,
                                  StringRef kind, ShardFields shard,
                                  std::string &shapes) const {
  std::string shapeName =
      llvm::formatv("{0}_{1}_shape{2}", prefix, group, index);
  std::string dims;
  llvm::raw_string_ostream os(dims);
  llvm::interleaveComma(type.getShape(), os);
  shapes += llvm::formatv("static const int64_t {0}[] = {{{1}};\n", shapeName,
                          type.getRank() ? dims : "0");
  std::string escaped;
  for (char ch : name) {
    if (ch == '"' || ch == '\\')
      escaped += '\\';
    escaped += ch;
  }
  return llvm::formatv("  {{\"{0}\", {1}, {2}, {3}, {4}, {5}u, {6}, {7}, "
                       "{8}},\n",
                       escaped, getOnnxDataType(type.getElementType()),
                       type.getRank(), shapeName, kind, shard.axes, shard.dim,
                       shard.groups, shard.fullExtent)
      .str();
}

void AbiTables::printTables(raw_ostream &os, const MeshLayout &mesh) const {
  std::string shapes, in, out, w;
  for (auto [i, e] : llvm::enumerate(inputs))
    in += printEntry(e.name, e.type, i, "in", "PCCRT_KIND_INPUT", e.shard,
                     shapes);
  for (auto [i, e] : llvm::enumerate(outputs))
    out += printEntry(e.name, e.type, i, "out",
                      e.isGrad ? "PCCRT_KIND_GRAD" : "PCCRT_KIND_OUTPUT",
                      e.shard, shapes);
  for (auto [i, e] : llvm::enumerate(weights)) {
    ShardFields shard;
    if (e.shardAxes)
      shard = {e.shardAxes, e.shardDim, e.shardGroups,
               e.padding.first == e.shardDim
                   ? e.padding.second
                   : e.value.getType().getDimSize(e.shardDim)};
    w += printEntry(e.name,
                    e.localType ? e.localType
                                : cast<RankedTensorType>(e.value.getType()),
                    i, "w",
                    e.kind == WeightKind::State ? "PCCRT_KIND_STATE"
                                                : "PCCRT_KIND_CONSTANT",
                    shard, shapes);
  }
  os << shapes;
  if (!mesh.isSingleRank()) {
    std::string names, sizes;
    for (auto &[name, size] : mesh.getAxes()) {
      names += "\"" + name + "\", ";
      sizes += std::to_string(size) + ", ";
    }
    os << llvm::formatv("static const char *const {0}_mesh_axes[] = "
                        "{{{1}};\nstatic const int64_t {0}_mesh_shape[] "
                        "= {{{2}};\n",
                        prefix, names, sizes);
  }
  // C++ has no empty arrays: an empty table holds one unused entry.
  static const char kNoEntry[] =
      "  {nullptr, 0, 0, nullptr, 0, 0u, 0, 0, 0},\n";
  os << "\nstatic const pccrt_tensor_info inputs[] = {\n"
     << (in.empty() ? kNoEntry : in)
     << "};\nstatic const pccrt_tensor_info outputs[] = {\n"
     << (out.empty() ? kNoEntry : out)
     << "};\nstatic const pccrt_tensor_info weights[] = {\n"
     << (w.empty() ? kNoEntry : w) << "};\n";
}

void AbiTables::printModelInfo(raw_ostream &os, const MeshLayout &mesh,
                               uint64_t workspaceBytes) const {
  std::string meshInfo = "0, nullptr, nullptr";
  if (!mesh.isSingleRank())
    meshInfo = llvm::formatv("{0}, {1}_mesh_axes, {1}_mesh_shape",
                             mesh.getAxes().size(), prefix);
  os << "extern \"C\" const pccrt_model_info *" << prefix
     << "_model_info(void) {\n"
     << "  using namespace " << getNamespace() << ";\n"
     << "  static const pccrt_model_info info = {PCCRT_ABI_VERSION, "
     << inputs.size() << ", inputs, " << outputs.size() << ", outputs, "
     << weights.size() << ", weights, " << workspaceBytes << "ULL, " << meshInfo
     << "};\n  return &info;\n}\n";
}
