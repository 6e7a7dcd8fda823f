//===- AbiTables.cpp - The tables a generated library exports -------------===//

#include "pcc/Target/AbiTables.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
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

std::string pcc::getCStringLiteral(StringRef text) {
  std::string literal = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\')
      literal += '\\';
    if (llvm::isPrint(c)) {
      literal += c;
      continue;
    }
    // Three octal digits end the escape whatever follows.
    literal += {'\\', char('0' + (c >> 6)), char('0' + (c >> 3 & 7)),
                char('0' + (c & 7))};
  }
  return literal + "\"";
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

std::optional<unsigned> MeshLayout::getAxisIndex(StringRef name) const {
  if (mesh)
    for (auto [i, axis] : llvm::enumerate(mesh.getAxisNames()))
      if (cast<StringAttr>(axis).getValue() == name)
        return i;
  return std::nullopt;
}

std::string MeshLayout::getCoordinate(unsigned index) const {
  // Row-major over the mesh: axis i's coordinate is rank / stride_i % size_i.
  ArrayRef<int64_t> shape = mesh.getShape();
  int64_t stride = 1;
  for (unsigned i = index + 1; i < shape.size(); ++i)
    stride *= shape[i];
  return llvm::formatv("(int64_t)ctx->rank / {0} % {1}", stride, shape[index])
      .str();
}

std::string MeshLayout::getCoordinate(StringRef name) const {
  std::optional<unsigned> index = getAxisIndex(name);
  return index ? getCoordinate(*index) : "0";
}

std::string MeshLayout::getGroupPosition(ArrayAttr axes) const {
  // The group position runs row-major over the group's axes.
  std::string expr = "0";
  for (Attribute a : axes)
    if (std::optional<unsigned> index =
            getAxisIndex(cast<StringAttr>(a).getValue()))
      expr = llvm::formatv("(({0}) * {1} + {2})", expr, mesh.getShape()[*index],
                           getCoordinate(*index))
                 .str();
  return expr;
}

SmallVector<int64_t>
MeshLayout::getWholeShape(ArrayRef<int64_t> local,
                          dist::ShardingAttr sharding) const {
  SmallVector<int64_t> whole(local);
  if (sharding)
    for (unsigned d = 0; d < whole.size(); ++d)
      for (StringRef axis : sharding.getDimAxes(d))
        whole[d] *= getAxisSize(axis);
  return whole;
}

FailureOr<ShardFields>
MeshLayout::getShardFields(Location loc, dist::ShardingAttr sharding,
                           ArrayRef<int64_t> whole) const {
  ShardFields fields;
  if (!sharding)
    return fields;
  for (unsigned d = 0; d < sharding.getDims().size(); ++d) {
    if (sharding.getDimAxes(d).empty())
      continue;
    if (fields.axes)
      return emitError(loc, "a tensor of layout ")
             << sharding << " splits two dimensions; the runtime splits one";
    auto axes = cast<ArrayAttr>(sharding.getDims()[d]);
    fields = {getAxesMask(axes), int32_t(d), sharding.getDimGroups(d),
              whole[d]};
    // The dimension's axes nest in the order they are listed (the first
    // holds the largest blocks); the runtime takes them in the mesh's
    // order except that the outer ones come first.
    std::optional<unsigned> last;
    for (auto [i, a] : llvm::enumerate(axes)) {
      std::optional<unsigned> index =
          getAxisIndex(cast<StringAttr>(a).getValue());
      if (!index)
        continue;
      if (last && *index < *last) {
        if (i != 1)
          return emitError(loc, "a tensor of layout ")
                 << sharding
                 << " nests three axes out of the mesh's order; the runtime "
                    "nests one axis outside the others";
        fields.outerAxes = 1u << *last;
      }
      last = index;
    }
  }
  return fields;
}

//===----------------------------------------------------------------------===//
// AbiTables
//===----------------------------------------------------------------------===//

unsigned AbiTables::addEntryPoint(StringRef name) {
  for (auto [i, e] : llvm::enumerate(entryPoints))
    if (e.name == name)
      return i;
  entryPoints.push_back({name.str(), {}, {}, {}, {}});
  return entryPoints.size() - 1;
}

FailureOr<int64_t> AbiTables::addInput(unsigned entryPoint, Location loc,
                                       StringRef name, RankedTensorType type,
                                       ShardFields shard, uint64_t holders,
                                       IndexBound index) {
  EntryPoint &e = entryPoints[entryPoint];
  auto [it, inserted] = e.inputIndex.try_emplace(name, e.inputs.size());
  if (inserted) {
    e.inputs.push_back(
        {name.str(), type, false, shard, 0, holders, std::move(index)});
    return it->second;
  }
  Entry &known = e.inputs[it->second];
  if (known.type != type || !(known.shard == shard))
    return emitError(loc, "input '") << name << "' is " << type << " here but "
                                     << known.type << " on another entry";
  known.holders |= holders;
  // A pipeline's functions each bound what they read: the tightest holds.
  if (index.extent &&
      (!known.index.extent || index.extent < known.index.extent))
    known.index = std::move(index);
  return it->second;
}

FailureOr<unsigned> AbiTables::addOutput(unsigned entryPoint, Location loc,
                                         StringRef name, RankedTensorType type,
                                         bool isGrad, ShardFields shard,
                                         int64_t order, uint64_t holders) {
  EntryPoint &e = entryPoints[entryPoint];
  auto [it, inserted] =
      e.outputKeys.try_emplace({name.str(), isGrad}, e.outputs.size());
  if (inserted) {
    e.outputs.push_back({name.str(), type, isGrad, shard, order, holders});
    return it->second;
  }
  Entry &known = e.outputs[it->second];
  StringRef what = isGrad ? "gradient" : "output";
  if (known.type != type)
    return emitError(loc) << what << " '" << name << "' is " << type
                          << " here but " << known.type << " on another entry";
  if (!(known.shard == shard))
    return emitError(loc) << what << " '" << name
                          << "' is split differently here than on another "
                             "entry";
  known.holders |= holders;
  return it->second;
}

int64_t AbiTables::getOutputIndex(unsigned entryPoint, unsigned key) const {
  // Outputs are listed by order, then by key.
  const std::vector<Entry> &outputs = entryPoints[entryPoint].outputs;
  auto before = [&](unsigned a, unsigned b) {
    return std::make_pair(outputs[a].order, a) <
           std::make_pair(outputs[b].order, b);
  };
  int64_t index = 0;
  for (unsigned k = 0; k < outputs.size(); ++k)
    index += before(k, key);
  return index;
}

FailureOr<int64_t> AbiTables::addWeight(Location loc, WeightEntry entry) {
  auto [it, inserted] = weightIndex.try_emplace(entry.name, weights.size());
  if (inserted) {
    weights.push_back(std::move(entry));
    return it->second;
  }
  WeightEntry &known = weights[it->second];
  bool isState = entry.kind == WeightKind::State;
  if (known.kind != entry.kind)
    return emitError(loc) << (isState ? "state '" : "weight '") << entry.name
                          << "' has the name of a "
                          << (isState ? "weight" : "state argument");
  if (known.value != entry.value || known.localType != entry.localType ||
      known.shardAxes != entry.shardAxes || known.shardDim != entry.shardDim ||
      known.shardGroups != entry.shardGroups ||
      known.shardOuterAxes != entry.shardOuterAxes ||
      known.padding != entry.padding) {
    if (isState)
      return emitError(loc, "state '")
             << entry.name
             << "' has another initial value, type or layout here than on "
                "another entry";
    return emitError(loc, "weight '")
           << entry.name << "' is defined twice with different values or "
           << "layouts";
  }
  known.holders |= entry.holders;
  return it->second;
}

std::string AbiTables::printEntry(StringRef name, RankedTensorType type,
                                  int64_t index, StringRef group,
                                  StringRef kind, ShardFields shard,
                                  uint64_t holders, std::string &shapes,
                                  StringRef flags,
                                  const IndexBound &bound) const {
  std::string shapeName =
      llvm::formatv("{0}_{1}_shape{2}", prefix, group, index);
  std::string dims;
  llvm::raw_string_ostream os(dims);
  llvm::interleaveComma(type.getShape(), os);
  shapes += llvm::formatv("static const int64_t {0}[] = {{{1}};\n", shapeName,
                          type.getRank() ? dims : "0");
  std::string positions;
  if (bound.extent)
    positions = llvm::formatv(", {0}ll, {1}", bound.extent,
                              getCStringLiteral(bound.node));
  return llvm::formatv("  {{{0}, {1}, {2}, {3}, {4}, {5}u, {6}, {7}, "
                       "{8}, {9}ull, {10}, {11}u{12}},\n",
                       getCStringLiteral(name),
                       getOnnxDataType(type.getElementType()), type.getRank(),
                       shapeName, kind, shard.axes, shard.dim, shard.groups,
                       shard.fullExtent, holders, flags, shard.outerAxes, positions)
      .str();
}

void AbiTables::printTables(raw_ostream &os, const MeshLayout &mesh) const {
  // C++ has no empty arrays: an empty table holds one unused entry.
  static const char kNoEntry[] =
      "  {nullptr, 0, 0, nullptr, 0, 0u, 0, 0, 0, 0ull, 0u},\n";
  std::string shapes, tables;
  auto printTable = [&](StringRef name, const std::string &rows) {
    tables += "static const pccrt_tensor_info " + name.str() + "[] = {\n" +
              (rows.empty() ? kNoEntry : rows) + "};\n";
  };
  // Entry point 0's tables keep the names of a program of one step.
  for (auto [p, e] : llvm::enumerate(entryPoints)) {
    std::string suffix = p ? "_" + std::to_string(p) : "";
    std::string in, out;
    for (auto [i, input] : llvm::enumerate(e.inputs))
      in += printEntry(input.name, input.type, i, "in" + suffix,
                       "PCCRT_KIND_INPUT", input.shard, input.holders, shapes,
                       "0u", input.index);
    std::vector<const Entry *> sorted(e.outputs.size());
    for (unsigned key = 0; key < e.outputs.size(); ++key)
      sorted[getOutputIndex(p, key)] = &e.outputs[key];
    for (auto [i, output] : llvm::enumerate(sorted))
      out += printEntry(output->name, output->type, i, "out" + suffix,
                        output->isGrad ? "PCCRT_KIND_GRAD"
                                       : "PCCRT_KIND_OUTPUT",
                        output->shard, output->holders, shapes);
    printTable("inputs" + suffix, in);
    printTable("outputs" + suffix, out);
  }
  std::string w;
  for (auto [i, e] : llvm::enumerate(weights)) {
    ShardFields shard;
    if (e.shardAxes)
      shard = {e.shardAxes, e.shardDim, e.shardGroups,
               e.padding.first == e.shardDim
                   ? e.padding.second
                   : e.value.getShapedType().getDimSize(e.shardDim),
               e.shardOuterAxes};
    StringRef flags = "0u";
    if (e.kind == WeightKind::Constant && e.preparedReads &&
        e.preparedReads == e.reads)
      flags = "PCCRT_FLAG_PREPARED_ONLY";
    else if (e.kind == WeightKind::Cache)
      flags = "PCCRT_FLAG_CACHE";
    w += printEntry(e.name,
                    e.localType ? e.localType
                                : cast<RankedTensorType>(e.value.getType()),
                    i, "w",
                    e.kind == WeightKind::Constant ? "PCCRT_KIND_CONSTANT"
                                                   : "PCCRT_KIND_STATE",
                    shard, e.holders, shapes, flags);
  }
  printTable("weights", w);
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
  os << "\n" << tables;
}

void AbiTables::printModelInfo(raw_ostream &os, const MeshLayout &mesh,
                               ArrayRef<uint64_t> entryWorkspace,
                               ArrayRef<uint64_t> stageWorkspace,
                               StringRef device,
                               StringRef preparedBytes) const {
  std::string meshInfo = "0, nullptr, nullptr";
  if (!mesh.isSingleRank())
    meshInfo = llvm::formatv("{0}, {1}_mesh_axes, {1}_mesh_shape",
                             mesh.getAxes().size(), prefix);
  uint64_t workspaceBytes = 0;
  for (uint64_t bytes : entryWorkspace)
    workspaceBytes = std::max(workspaceBytes, bytes);
  os << "extern \"C\" const pccrt_model_info *" << prefix
     << "_model_info(void) {\n"
     << "  using namespace " << getNamespace() << ";\n"
     << "  static const pccrt_entry_info entries[] = {\n";
  for (auto [p, e] : llvm::enumerate(entryPoints)) {
    std::string suffix = p ? "_" + std::to_string(p) : "";
    os << "    {" << getCStringLiteral(e.name) << ", " << e.inputs.size()
       << ", inputs" << suffix << ", " << e.outputs.size() << ", outputs"
       << suffix << ", " << entryWorkspace[p] << "ULL, &"
       << (p ? getRunFunction(p) : "::" + prefix + "_model_run") << "},\n";
  }
  os << "  };\n";
  std::string stages = "nullptr";
  if (!stageWorkspace.empty()) {
    os << "  static const uint64_t stage_workspace[] = {";
    llvm::interleaveComma(stageWorkspace, os,
                          [&](uint64_t bytes) { os << bytes << "ULL"; });
    os << "};\n";
    stages = "stage_workspace";
  }
  const EntryPoint &first = entryPoints.front();
  os << "  static const pccrt_model_info info = {PCCRT_ABI_VERSION, "
     << first.inputs.size() << ", inputs, " << first.outputs.size()
     << ", outputs, " << weights.size() << ", weights, " << workspaceBytes
     << "ULL, " << meshInfo << ", " << stageAxis << ", "
     << (device.empty() ? "PCCRT_DEVICE_HOST" : device) << ", "
     << (preparedBytes.empty() ? "0, nullptr"
                               : (preparedBytes + ", &prepare").str())
     << ", " << entryPoints.size() << ", entries, " << stages
     << "};\n  return &info;\n}\n";
}
