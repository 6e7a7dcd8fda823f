//===- OnnxImporter.cpp - ONNX models to the Graph dialect ----------------===//
//
// Reads the model (protobuf or ONNX text), turns initializers into named
// constants, graph inputs into function arguments, and each node, in
// topological order, into Graph ops through the per-family importers.
//
//===----------------------------------------------------------------------===//

#include "pcc/Import/OnnxImporter.h"

#include "NodeImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/unknown_field_set.h>
#include <onnx/defs/parser.h>

#include <deque>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>

using namespace mlir;
using namespace pcc;
using namespace pcc::import;

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

Type pcc::import::convertElementType(MLIRContext *ctx, int32_t t) {
  Builder b(ctx);
  using TP = onnx::TensorProto;
  switch (t) {
  case TP::FLOAT:
    return b.getF32Type();
  case TP::DOUBLE:
    return b.getF64Type();
  case TP::FLOAT16:
    return b.getF16Type();
  case TP::BFLOAT16:
    return b.getBF16Type();
  case TP::BOOL:
    return b.getI1Type();
  case TP::INT8:
    return b.getIntegerType(8);
  case TP::INT16:
    return b.getIntegerType(16);
  case TP::INT32:
    return b.getIntegerType(32);
  case TP::INT64:
    return b.getIntegerType(64);
  case TP::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case TP::UINT16:
    return b.getIntegerType(16, false);
  case TP::UINT32:
    return b.getIntegerType(32, false);
  case TP::UINT64:
    return b.getIntegerType(64, false);
  default:
    return {};
  }
}

std::string pcc::import::describeElementType(int32_t t) {
  // TensorProto.DataType as of ONNX 1.20 (the protobuf pcc builds with may
  // be older and not name the newer ones).
  static constexpr const char *kNames[] = {
      "UNDEFINED",      "FLOAT",      "UINT8",
      "INT8",           "UINT16",     "INT16",
      "INT32",          "INT64",      "STRING",
      "BOOL",           "FLOAT16",    "DOUBLE",
      "UINT32",         "UINT64",     "COMPLEX64",
      "COMPLEX128",     "BFLOAT16",   "FLOAT8E4M3FN",
      "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
      "UINT4",          "INT4",       "FLOAT4E2M1",
      "FLOAT8E8M0",     "UINT2",      "INT2"};
  if (t < 0 || size_t(t) >= std::size(kNames))
    return "ONNX type " + std::to_string(t);
  return std::string(kNames[t]) + " (ONNX type " + std::to_string(t) + ")";
}

/// Upper bound on elements of one tensor: rejects absurd dimensions before
/// anything is allocated.
static constexpr int64_t kMaxElements = int64_t(1) << 34;

static FailureOr<RankedTensorType> tensorType(ArrayRef<int64_t> dims,
                                              int32_t dtype, Location loc,
                                              StringRef what) {
  Type et = convertElementType(loc.getContext(), dtype);
  if (!et)
    return emitError(loc) << what << ": unsupported element type "
                          << describeElementType(dtype),
           failure();
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > kMaxElements / d))
      return emitError(loc) << what << ": absurd dimensions", failure();
    n *= d;
  }
  return RankedTensorType::get(dims, et);
}

namespace {
/// An external data file, mapped read-only once however many initializers
/// it holds: a weight's value is a view of it, so that the compiler holds
/// no copy of a large model's weights.
struct MappedFile {
  std::string path;
  std::unique_ptr<llvm::MemoryBuffer> buffer;
};

/// The files mapped and still in use (by a weight's value, or by an import
/// in progress), for `findExternalDataSource`.
struct MappedFiles {
  std::mutex mutex;
  std::vector<std::weak_ptr<MappedFile>> files;

  std::shared_ptr<MappedFile> find(StringRef path) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto &weak : files)
      if (auto file = weak.lock(); file && file->path == path)
        return file;
    return nullptr;
  }
  void add(const std::shared_ptr<MappedFile> &file) {
    std::lock_guard<std::mutex> lock(mutex);
    llvm::erase_if(files, [](const auto &weak) { return weak.expired(); });
    files.push_back(file);
  }
};
} // namespace

static MappedFiles &getMappedFiles() {
  static MappedFiles files;
  return files;
}

std::optional<std::pair<std::string, uint64_t>>
pcc::findExternalDataSource(ArrayRef<char> bytes) {
  MappedFiles &mapped = getMappedFiles();
  std::lock_guard<std::mutex> lock(mapped.mutex);
  for (const auto &weak : mapped.files) {
    std::shared_ptr<MappedFile> file = weak.lock();
    if (!file)
      continue;
    StringRef all = file->buffer->getBuffer();
    if (bytes.data() >= all.begin() && bytes.data() <= all.end() &&
        bytes.size() <= size_t(all.end() - bytes.data()))
      return std::make_pair(file->path, uint64_t(bytes.data() - all.begin()));
  }
  return std::nullopt;
}

/// The `length` bytes at `offset` of an external data file, which must lie
/// inside the model's folder: a view of the file, which `mapped` holds.
static FailureOr<StringRef> readExternal(const onnx::TensorProto &t,
                                         StringRef modelDir, Location loc,
                                         std::shared_ptr<MappedFile> &mapped) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length")
      length = std::atoll(kv.value().c_str());
  }
  if (location.empty() || llvm::sys::path::is_absolute(location))
    return emitError(loc) << "initializer '" << t.name()
                          << "': external data location '" << location
                          << "' must be a relative path inside the model's "
                             "folder",
           failure();
  SmallString<256> dir, file;
  if (llvm::sys::fs::real_path(modelDir.empty() ? "." : modelDir, dir))
    return emitError(loc) << "cannot resolve model folder '" << modelDir << "'",
           failure();
  SmallString<256> joined(dir);
  llvm::sys::path::append(joined, location);
  if (llvm::sys::fs::real_path(joined, file))
    return emitError(loc) << "initializer '" << t.name()
                          << "': external data file '" << location
                          << "' not found",
           failure();
  StringRef fileRef(file);
  if (!fileRef.starts_with(dir) ||
      !llvm::sys::path::is_separator(fileRef[dir.size()]))
    return emitError(loc) << "initializer '" << t.name() << "': external data '"
                          << location << "' points outside the model's folder",
           failure();
  // One mapping per file: every initializer of a model usually lies in the
  // same file, which reading once per initializer made quadratic.
  mapped = getMappedFiles().find(fileRef);
  if (!mapped) {
    auto buf = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
    if (!buf)
      return emitError(loc) << "cannot read external data '" << location << "'",
             failure();
    mapped = std::make_shared<MappedFile>(
        MappedFile{fileRef.str(), std::move(*buf)});
    getMappedFiles().add(mapped);
  }
  int64_t size = mapped->buffer->getBufferSize();
  if (length < 0)
    length = size - offset;
  if (offset < 0 || length < 0 || offset > size || length > size - offset)
    return emitError(loc) << "initializer '" << t.name()
                          << "': external data range out of file bounds",
           failure();
  return mapped->buffer->getBuffer().substr(offset, length);
}

/// That a tensor's data has the `expected` bytes of its shape.
static LogicalResult checkDataBytes(size_t bytes, int64_t expected,
                                    StringRef what, Location loc) {
  if (int64_t(bytes) == expected)
    return success();
  return emitError(loc) << what << ": data has " << bytes << " bytes, "
                        << expected << " expected for its shape",
         failure();
}

ElementsAttr pcc::import::convertInitializer(const onnx::TensorProto &t,
                                             StringRef modelDir, Location loc) {
  if (t.data_location() != onnx::TensorProto::EXTERNAL)
    return convertTensor(t, modelDir, loc);
  std::string what = "tensor '" + t.name() + "'";
  auto type = tensorType(SmallVector<int64_t>(t.dims().begin(), t.dims().end()),
                         t.data_type(), loc, what);
  if (failed(type))
    return {};
  Type et = type->getElementType();
  if (!isa<FloatType>(et))
    return convertTensor(t, modelDir, loc);
  std::shared_ptr<MappedFile> mapped;
  FailureOr<StringRef> raw = readExternal(t, modelDir, loc, mapped);
  if (failed(raw))
    return {};
  size_t width = et.getIntOrFloatBitWidth() / 8;
  if (failed(checkDataBytes(
          raw->size(), type->getNumElements() * int64_t(width), what, loc)))
    return {};
  // A view of the mapped file, which the blob keeps mapped; an element the
  // file does not align is copied instead.
  if (reinterpret_cast<uintptr_t>(raw->data()) % width != 0)
    return convertTensor(t, modelDir, loc);
  AsmResourceBlob blob(
      ArrayRef<char>(raw->data(), raw->size()), width,
      [mapped](void *, size_t, size_t) mutable { mapped.reset(); },
      /*dataIsMutable=*/false);
  return DenseResourceElementsAttr::get(*type, t.name(), std::move(blob));
}

DenseElementsAttr pcc::import::convertTensor(const onnx::TensorProto &t,
                                             StringRef modelDir, Location loc) {
  std::string what = "tensor '" + t.name() + "'";
  auto type = tensorType(SmallVector<int64_t>(t.dims().begin(), t.dims().end()),
                         t.data_type(), loc, what);
  if (failed(type))
    return {};
  int64_t n = type->getNumElements();
  Type et = type->getElementType();
  size_t width = et.isInteger(1) ? 1 : et.getIntOrFloatBitWidth() / 8;
  // The bytes as they are (in the file mapped for external data, in the
  // proto for raw data): a large model's weights are copied once, into the
  // attribute.
  StringRef raw;
  std::shared_ptr<MappedFile> external;
  std::string packed;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto ext = readExternal(t, modelDir, loc, external);
    if (failed(ext))
      return {};
    raw = *ext;
  } else if (t.has_raw_data()) {
    raw = t.raw_data();
  } else {
    // Typed fields: packed into little-endian raw bytes, once their count
    // is the shape's (a shape that claims gigabytes allocates nothing).
    // Each value's low `width` bytes: the field's type can be wider than
    // the element (int32 for 8- and 16-bit types, uint64 for uint32).
    auto pack = [&](const auto &field) -> LogicalResult {
      if (field.size() != n) {
        emitError(loc) << what << ": holds " << field.size() << " elements, "
                       << n << " expected for its shape";
        return failure();
      }
      using Field = std::decay_t<decltype(field[0])>;
      packed.resize(n * width);
      if (sizeof(Field) == width) {
        if (n)
          memcpy(packed.data(), field.data(), n * width);
        return success();
      }
      for (int64_t i = 0; i < n; ++i) {
        Field v = field[i];
        memcpy(packed.data() + i * width, &v, width);
      }
      return success();
    };
    using TP = onnx::TensorProto;
    LogicalResult packedAll = failure();
    switch (t.data_type()) {
    case TP::FLOAT:
      packedAll = pack(t.float_data());
      break;
    case TP::DOUBLE:
      packedAll = pack(t.double_data());
      break;
    case TP::INT64:
      packedAll = pack(t.int64_data());
      break;
    case TP::UINT32:
    case TP::UINT64:
      packedAll = pack(t.uint64_data());
      break;
    default:
      // INT32, INT16, INT8, UINT8, UINT16, BOOL, FLOAT16, BFLOAT16.
      packedAll = pack(t.int32_data());
    }
    if (failed(packedAll))
      return {};
    raw = packed;
  }
  if (failed(checkDataBytes(raw.size(), n * int64_t(width), what, loc)))
    return {};
  if (et.isInteger(1)) {
    SmallVector<bool> bits;
    for (char c : raw)
      bits.push_back(c != 0);
    return DenseElementsAttr::get(*type, bits);
  }
  bool detectedSplat = false;
  if (!DenseElementsAttr::isValidRawBuffer(
          *type, ArrayRef<char>(raw.data(), raw.size()), detectedSplat)) {
    emitError(loc) << what << ": invalid data buffer";
    return {};
  }
  return DenseElementsAttr::getFromRawBuffer(
      *type, ArrayRef<char>(raw.data(), raw.size()));
}

//===----------------------------------------------------------------------===//
// NodeImporter
//===----------------------------------------------------------------------===//

const SmallVector<Value> *NodeImporter::sequenceInput(size_t i) {
  if (int(i) < node.input_size()) {
    auto it = sequences.find(node.input(i));
    if (it != sequences.end())
      return &it->second;
  }
  emitError(loc) << node.op_type() << ": input #" << i
                 << " must be a sequence made by SplitToSequence";
  return nullptr;
}

LogicalResult NodeImporter::requireInputs(size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!input(i))
      return emitError(loc) << node.op_type() << " needs input #" << i,
             failure();
  return success();
}

DenseElementsAttr NodeImporter::constantOf(Value v) {
  if (!v)
    return {};
  // Import may read a parameter's value (a float Range bound given as an
  // initializer); folders never do.
  if (auto c = v.getDefiningOp<graph::ConstantOp>())
    return dyn_cast<DenseElementsAttr>(c.getValue());
  if (auto w = v.getDefiningOp<graph::WeightOp>())
    return graph::getDenseValue(w.getValue());
  return {};
}

FailureOr<SmallVector<int64_t>> NodeImporter::constInts(size_t i,
                                                        StringRef what) {
  DenseElementsAttr c = constantOf(input(i));
  if (!c || !isa<IntegerType>(c.getElementType()))
    return emitError(loc) << node.op_type() << ": input '" << what << "' (#"
                          << i
                          << ") must be a compile-time integer constant; "
                             "fix graph inputs with --bind NAME=FILE.pb",
           failure();
  SmallVector<int64_t> out;
  for (APInt v : c.getValues<APInt>())
    out.push_back(v.getSExtValue());
  return out;
}

const onnx::AttributeProto *NodeImporter::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeImporter::attrInt(StringRef name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

float NodeImporter::attrFloat(StringRef name, float dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}

std::string NodeImporter::attrString(StringRef name, StringRef dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt.str();
}

std::optional<SmallVector<int64_t>>
NodeImporter::attrInts(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

LogicalResult NodeImporter::checkElements(ArrayRef<int64_t> shape,
                                          int64_t limit) {
  // Saturating product: the extents come from the model's numbers.
  double n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return emitError(loc) << node.op_type() << ": negative extent " << d,
             failure();
    n *= double(d);
  }
  if (n <= double(limit))
    return success();
  return emitError(loc) << node.op_type() << ": result of " << formatCount(n)
                        << " elements exceeds pcc's limit of " << limit,
         failure();
}

FailureOr<int64_t> NodeImporter::normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return emitError(loc) << node.op_type() << ": axis " << axis
                          << " out of range for rank " << rank,
           failure();
  return axis < 0 ? axis + rank : axis;
}

FailureOr<SmallVector<Value>>
NodeImporter::createWithTypes(StringRef opName, TypeRange types,
                              ValueRange operands,
                              ArrayRef<NamedAttribute> attrs) {
  OperationState state(loc, opName);
  state.addOperands(operands);
  state.addAttributes(attrs);
  state.addTypes(types);
  Operation *op = b.create(state);
  if (failed(mlir::verify(op))) {
    op->erase();
    return failure();
  }
  SmallVector<Value> results;
  if (succeeded(b.tryFold(op, results)) && !results.empty()) {
    op->erase();
    return results;
  }
  return SmallVector<Value>(op->getResults());
}

FailureOr<Value> NodeImporter::create1WithType(StringRef opName, Type type,
                                               ValueRange operands) {
  auto r = createWithTypes(opName, type, operands);
  if (failed(r))
    return failure();
  return (*r)[0];
}

Value NodeImporter::constant(DenseElementsAttr value) {
  return graph::ConstantOp::create(b, loc, value);
}

Value NodeImporter::scalar(Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  if (isa<IntegerType>(elementType))
    return constant(DenseElementsAttr::get(
        type, IntegerAttr::get(elementType, int64_t(value))));
  return constant(
      DenseElementsAttr::get(type, FloatAttr::get(elementType, value)));
}

//===----------------------------------------------------------------------===//
// Graph import
//===----------------------------------------------------------------------===//

namespace {
class GraphImporter {
public:
  GraphImporter(MLIRContext &ctx, const onnx::ModelProto &model,
                StringRef modelDir, StringRef fileName,
                const ImportOptions &options, ImportReport *report)
      : ctx(ctx), model(model), modelDir(modelDir), fileName(fileName),
        options(options), report(report), builder(&ctx) {}

  OwningOpRef<ModuleOp> run();

private:
  Location nodeLoc(const onnx::NodeProto &node, size_t index) {
    std::string name = node.name().empty()
                           ? node.op_type() + "_" + std::to_string(index)
                           : node.name();
    return NameLoc::get(StringAttr::get(&ctx, name));
  }
  Location fileLoc() { return NameLoc::get(StringAttr::get(&ctx, fileName)); }
  LogicalResult importInitializers();
  void retieInitializers();
  /// Nodes in topological order, each with its index in the file.
  FailureOr<SmallVector<std::pair<size_t, const onnx::NodeProto *>>>
  sortNodes();
  LogicalResult importNode(const onnx::NodeProto &node, size_t index);
  int64_t opsetVersion();

  MLIRContext &ctx;
  const onnx::ModelProto &model;
  StringRef modelDir, fileName;
  const ImportOptions &options;
  ImportReport *report;
  OpBuilder builder;
  llvm::StringMap<Value> values;
  NodeImporter::SequenceMap sequences;
  ImporterMap importers;
  int64_t opset = 0;
};
} // namespace

int64_t GraphImporter::opsetVersion() {
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      return o.version();
  return 0;
}

/// Metadata entries a newer ONNX wrote into a message field that Debian's
/// ONNX 1.12 proto does not know: ValueInfoProto.metadata_props (field 4)
/// and TensorProto.metadata_props (field 16) arrive as unknown fields.
static void readUnknownMetadata(const google::protobuf::Message &msg,
                                int fieldNumber,
                                std::map<std::string, std::string> &out) {
  const google::protobuf::UnknownFieldSet &fields =
      msg.GetReflection()->GetUnknownFields(msg);
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField &f = fields.field(i);
    if (f.number() != fieldNumber ||
        f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(f.length_delimited()))
      out[entry.key()] = entry.value();
  }
}

/// What the exporter recorded about each initializer: the dynamo exporter
/// writes torch.export's InputSpec.kind (PARAMETER, BUFFER,
/// CONSTANT_TENSOR) into the metadata of the initializer's value_info.
static llvm::StringMap<std::string>
exporterRecords(const onnx::GraphProto &graph) {
  static constexpr char kKindKey[] =
      "pkg.torch.export.graph_signature.InputSpec.kind";
  llvm::StringMap<std::string> kinds;
  auto record = [&](const std::string &name,
                    const std::map<std::string, std::string> &meta) {
    auto it = meta.find(kKindKey);
    if (it == meta.end())
      return;
    StringRef kind = it->second;
    if (kind == "PARAMETER")
      kinds[name] = "parameter";
    else if (kind == "BUFFER")
      kinds[name] = "buffer";
    else if (kind == "CONSTANT_TENSOR")
      kinds[name] = "constant";
  };
  for (const auto &init : graph.initializer()) {
    std::map<std::string, std::string> meta;
    readUnknownMetadata(init, 16, meta);
    record(init.name(), meta);
  }
  for (const auto *infos : {&graph.value_info(), &graph.input()})
    for (const auto &vi : *infos) {
      std::map<std::string, std::string> meta;
      readUnknownMetadata(vi, 4, meta);
      record(vi.name(), meta);
    }
  return kinds;
}

LogicalResult GraphImporter::importInitializers() {
  llvm::StringMap<std::string> records = exporterRecords(model.graph());
  for (const auto &init : model.graph().initializer()) {
    if (init.name().empty())
      return emitError(fileLoc()) << "initializer without a name", failure();
    if (values.count(init.name()))
      return emitError(fileLoc())
                 << "duplicate initializer name '" << init.name() << "'",
             failure();
    ElementsAttr value = convertInitializer(init, modelDir, fileLoc());
    if (!value)
      return failure();
    // Float initializers are parameters; integer and bool ones (shape
    // pieces, masks, index tables) are constants that may fold.
    Location loc = NameLoc::get(StringAttr::get(&ctx, init.name()));
    if (isa<FloatType>(value.getElementType())) {
      auto record = records.find(init.name());
      values[init.name()] = graph::WeightOp::create(
          builder, loc, value.getType(), init.name(), value,
          record == records.end() ? StringAttr()
                                  : builder.getStringAttr(record->second));
    } else
      values[init.name()] = graph::ConstantOp::create(
          builder, loc, cast<DenseElementsAttr>(value));
  }
  return success();
}

/// A fingerprint of a 2-D constant read as its transpose when `transposed`:
/// the bytes of its top-left and bottom-right corners (up to 8 x 8 elements
/// each) as read. Equal matrices have equal fingerprints; a matrix and the
/// transpose of another have equal ones only where their corners agree,
/// which for different parameters they almost never do. The corners lie in
/// at most 16 rows of the stored matrix, so that the check reads a few
/// pages of a weight that views a large external data file, not the whole
/// matrix nor a page per sample.
static llvm::hash_code sampledFingerprint(ArrayRef<char> raw, ShapedType type,
                                          bool transposed) {
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  size_t w = type.getElementType().getIntOrFloatBitWidth() / 8;
  // The places in the matrix as read: rows x cols, or cols x rows.
  int64_t readRows = transposed ? cols : rows;
  int64_t readCols = transposed ? rows : cols;
  llvm::hash_code hash = llvm::hash_value(readRows * readCols);
  constexpr int64_t kCorner = 8;
  int64_t nr = std::min(kCorner, readRows), nc = std::min(kCorner, readCols);
  for (int64_t r0 : {int64_t(0), readRows - nr})
    for (int64_t c0 : {int64_t(0), readCols - nc})
      if ((r0 == 0) == (c0 == 0))
        for (int64_t r = r0; r < r0 + nr; ++r)
          for (int64_t c = c0; c < c0 + nc; ++c) {
            int64_t index = transposed ? c * cols + r : r * cols + c;
            hash = llvm::hash_combine(
                hash, llvm::hash_value(StringRef(&raw[index * w], w)));
          }
  return hash;
}

static bool isTransposeOf(ArrayRef<char> ra, ArrayRef<char> rb,
                          ShapedType type) {
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  size_t w = type.getElementType().getIntOrFloatBitWidth() / 8;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (memcmp(&ra[(r * cols + c) * w], &rb[(c * rows + r) * w], w))
        return false;
  return true;
}

/// A constant-folding exporter may store a tied parameter twice (an
/// embedding and its transpose as the LM head). Training must see one
/// parameter, so a 2-D float initializer bit-identical to the transpose of
/// an earlier, non-symmetric one becomes a Transpose of it.
void GraphImporter::retieInitializers() {
  // Each candidate's fingerprints, as it is and transposed, are computed
  // when another candidate of the transposed shape first needs them.
  struct Candidate {
    graph::WeightOp op;
    ShapedType type;
    ArrayRef<char> raw;
    std::optional<llvm::hash_code> print, tPrint;
    std::optional<bool> symmetric;
    llvm::hash_code getPrint() {
      if (!print)
        print = sampledFingerprint(raw, type, /*transposed=*/false);
      return *print;
    }
    llvm::hash_code getTransposedPrint() {
      if (!tPrint)
        tPrint = sampledFingerprint(raw, type, /*transposed=*/true);
      return *tPrint;
    }
    /// A symmetric matrix is its own transpose: nothing to retie to.
    bool isSymmetric() {
      if (!symmetric)
        symmetric = type.getDimSize(0) == type.getDimSize(1) &&
                    getPrint() == getTransposedPrint() &&
                    isTransposeOf(raw, raw, type);
      return *symmetric;
    }
  };
  SmallVector<Candidate> seen;
  for (const auto &init : model.graph().initializer()) {
    auto op = values[init.name()].getDefiningOp<graph::WeightOp>();
    if (!op)
      continue;
    ElementsAttr value = op.getValue();
    std::optional<ArrayRef<char>> raw = graph::getStoredBytes(value);
    if (!raw || value.getShapedType().getRank() != 2 ||
        !isa<FloatType>(value.getElementType()))
      continue;
    Candidate cand{op,           value.getShapedType(), *raw,
                   std::nullopt, std::nullopt,          std::nullopt};
    for (Candidate &prev : seen) {
      ArrayRef<int64_t> ps = prev.type.getShape();
      ArrayRef<int64_t> cs = cand.type.getShape();
      if (ps[0] != cs[1] || ps[1] != cs[0] ||
          prev.type.getElementType() != cand.type.getElementType() ||
          cand.getPrint() != prev.getTransposedPrint() || prev.isSymmetric() ||
          !isTransposeOf(prev.raw, cand.raw, prev.type))
        continue;
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointAfter(op);
      Value t = graph::TransposeOp::create(
          builder, op.getLoc(), prev.op.getResult(), ArrayRef<int64_t>{1, 0});
      values[init.name()] = t;
      op.erase();
      if (report)
        report->reties.push_back({init.name(), prev.op.getName().str()});
      break;
    }
    if (values[init.name()].getDefiningOp<graph::WeightOp>())
      seen.push_back(cand);
  }
}

FailureOr<SmallVector<std::pair<size_t, const onnx::NodeProto *>>>
GraphImporter::sortNodes() {
  const auto &nodes = model.graph().node();
  llvm::StringMap<size_t> producer;
  for (int i = 0; i < nodes.size(); ++i)
    for (const auto &out : nodes[i].output())
      if (!out.empty())
        producer[out] = i;
  // Kahn's algorithm, stable in file order.
  SmallVector<SmallVector<size_t>> users(nodes.size());
  SmallVector<size_t> pending(nodes.size(), 0);
  for (int i = 0; i < nodes.size(); ++i)
    for (const auto &in : nodes[i].input()) {
      if (in.empty() || values.count(in))
        continue;
      auto it = producer.find(in);
      if (it == producer.end())
        return emitError(nodeLoc(nodes[i], i))
                   << nodes[i].op_type() << ": input '" << in
                   << "' is not produced by any node, initializer or graph "
                      "input",
               failure();
      users[it->second].push_back(i);
      ++pending[i];
    }
  std::deque<size_t> ready;
  for (size_t i = 0; i < pending.size(); ++i)
    if (!pending[i])
      ready.push_back(i);
  SmallVector<std::pair<size_t, const onnx::NodeProto *>> order;
  while (!ready.empty()) {
    size_t i = ready.front();
    ready.pop_front();
    order.push_back({i, &nodes[i]});
    for (size_t u : users[i])
      if (--pending[u] == 0)
        ready.push_back(u);
  }
  if (order.size() != size_t(nodes.size())) {
    for (size_t i = 0; i < pending.size(); ++i)
      if (pending[i])
        return emitError(nodeLoc(nodes[i], i))
                   << nodes[i].op_type() << ": the graph has a cycle "
                   << "through this node",
               failure();
  }
  return order;
}

LogicalResult GraphImporter::importNode(const onnx::NodeProto &node,
                                        size_t index) {
  Location loc = nodeLoc(node, index);
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return emitError(loc) << "unsupported op '" << node.domain()
                          << "::" << node.op_type() << "'",
           failure();
  auto it = importers.find(node.op_type());
  if (it == importers.end())
    return emitError(loc) << "unsupported op '" << node.op_type() << "'",
           failure();
  SmallVector<Value> inputs;
  for (const auto &in : node.input()) {
    if (in.empty()) {
      inputs.push_back({});
      continue;
    }
    if (sequences.count(in)) {
      inputs.push_back({});
      continue;
    }
    auto v = values.find(in);
    if (v == values.end() || !v->second)
      return emitError(loc) << node.op_type() << ": input '" << in
                            << "' is not available (an optional output "
                               "that the producer does not compute)",
             failure();
    inputs.push_back(v->second);
  }
  NodeImporter ni(node, opset, loc, builder, inputs, modelDir, sequences);
  if (failed(it->second(ni)))
    return failure();
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty() && !sequences.count(node.output(i)))
      values[node.output(i)] =
          size_t(i) < ni.results.size() ? ni.results[i] : Value();
  return success();
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  ctx.loadDialect<graph::GraphDialect, func::FuncDialect>();
  registerElementwiseImporters(importers);
  registerMathImporters(importers);
  registerMovementImporters(importers);
  registerShapeImporters(importers);

  if (!model.has_graph())
    return emitError(fileLoc()) << "not an ONNX model (no graph)", nullptr;
  opset = opsetVersion();
  if (opset < kMinImportedOpset)
    return emitError(fileLoc()) << "unsupported default-domain opset " << opset
                                << " (pcc imports opsets " << kMinImportedOpset
                                << " to 21, tested from 13)",
           nullptr;
  const onnx::GraphProto &graph = model.graph();
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc());
  builder.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(builder, fileLoc(), "main",
                                   builder.getFunctionType({}, {}));
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);

  if (failed(importInitializers()))
    return nullptr;
  if (options.retie)
    retieInitializers();

  // Graph inputs that are not initializers become arguments, unless bound.
  // Their symbolic dimensions take the extents --dim and --shape give;
  // those left are refused together, with the flags that would fix them.
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  std::set<std::string> bound;
  const InputShapes &given = options.inputShapes;
  // A generation build's sequence: its [S, S] causal masks fold, so that
  // attention's fusion finds them causal.
  int64_t sequence = given.tokenShape.empty() ? 0 : given.tokenShape.back();
  graph::FoldLimit foldLimit(sequence * sequence);
  // The inputs' dimension names, for --dim's check.
  std::set<std::string> usedDims, shapedInputs;
  bool tokenIdsSeen = false;
  // Symbolic dimension -> the inputs that have it ("" for one with no
  // name: its input needs --shape).
  std::map<std::string, std::vector<std::string>> unresolved;
  std::vector<std::string> unnamed;
  for (const auto &in : graph.input()) {
    if (values.count(in.name()))
      continue;
    auto bind = options.bindings.find(in.name());
    if (bind != options.bindings.end()) {
      onnx::TensorProto t;
      std::ifstream f(bind->second, std::ios::binary);
      if (!f || !t.ParseFromIstream(&f))
        return emitError(fileLoc())
                   << "--bind " << in.name() << ": cannot read "
                   << "TensorProto '" << bind->second << "'",
               nullptr;
      DenseElementsAttr value = convertTensor(
          t, llvm::sys::path::parent_path(bind->second), fileLoc());
      if (!value)
        return nullptr;
      values[in.name()] = graph::ConstantOp::create(builder, fileLoc(), value);
      bound.insert(in.name());
      continue;
    }
    // --generate: the inputs of the Hugging Face causal-LM interface that
    // Optimum's plain exports add, for one whole sequence: a mask that
    // hides nothing and the positions 0 .. S-1. (--bind overrides them.)
    if (!given.tokenShape.empty() &&
        (in.name() == "attention_mask" || in.name() == "position_ids") &&
        in.type().tensor_type().elem_type() == onnx::TensorProto::INT64 &&
        in.type().tensor_type().shape().dim_size() == 2) {
      auto type =
          RankedTensorType::get(given.tokenShape, builder.getI64Type());
      SmallVector<int64_t> data(size_t(type.getNumElements()), 1);
      if (in.name() == "position_ids")
        for (auto [i, x] : llvm::enumerate(data))
          x = int64_t(i) % given.tokenShape[1];
      values[in.name()] = graph::ConstantOp::create(
          builder, fileLoc(), DenseElementsAttr::get(type, ArrayRef(data)));
      continue;
    }
    // An Optimum with-past export's cache inputs (`past_key_values.<i>.key`
    // and `.value`, [batch, kv heads, past, head features]): empty, so that
    // the forward is the sequence's alone; its `present.*` outputs are the
    // keys and values that the derived steps write to their own cache.
    if (!given.tokenShape.empty() &&
        StringRef(in.name()).starts_with("past_key_values.") &&
        in.type().tensor_type().shape().dim_size() == 4) {
      const auto &dims = in.type().tensor_type().shape().dim();
      if (dims[1].has_dim_value() && dims[3].has_dim_value()) {
        Type element = import::convertElementType(
            builder.getContext(), in.type().tensor_type().elem_type());
        if (element && isa<FloatType>(element)) {
          auto type = RankedTensorType::get(
              {given.tokenShape[0], dims[1].dim_value(), 0,
               dims[3].dim_value()},
              element);
          values[in.name()] = graph::ConstantOp::create(
              builder, fileLoc(),
              DenseElementsAttr::get(type, ArrayRef<Attribute>()));
          continue;
        }
      }
    }
    if (!in.type().has_tensor_type())
      return emitError(fileLoc())
                 << "graph input '" << in.name() << "' is not a tensor",
             nullptr;
    const auto &tt = in.type().tensor_type();
    for (const auto &d : tt.shape().dim())
      if (!d.has_dim_value())
        usedDims.insert(d.dim_param());
    SmallVector<int64_t> dims;
    auto shape = given.shapes.find(in.name());
    bool isTokenIds = !tokenIdsSeen && !given.tokenShape.empty() &&
                      shape == given.shapes.end() &&
                      tt.elem_type() == onnx::TensorProto::INT64 &&
                      tt.shape().dim_size() == 2;
    if (isTokenIds) {
      tokenIdsSeen = true;
      for (auto [i, d] : llvm::enumerate(tt.shape().dim()))
        if (d.has_dim_value() && d.dim_value() != given.tokenShape[i])
          return emitError(fileLoc())
                     << "--generate imports the token ids '" << in.name()
                     << "' as [" << given.tokenShape[0] << ", "
                     << given.tokenShape[1] << "], but the model fixes "
                     << "dimension " << i << " at " << d.dim_value()
                     << ": export it with a dynamic batch and sequence",
                 nullptr;
      dims.assign(given.tokenShape.begin(), given.tokenShape.end());
    } else if (shape != given.shapes.end()) {
      shapedInputs.insert(in.name());
      const std::vector<int64_t> &extents = shape->second;
      if (int64_t(extents.size()) != tt.shape().dim_size())
        return emitError(fileLoc())
                   << "--shape " << in.name() << ": the input has "
                   << tt.shape().dim_size() << " dimension(s), not "
                   << extents.size(),
               nullptr;
      for (auto [i, d] : llvm::enumerate(tt.shape().dim()))
        if (d.has_dim_value() && d.dim_value() != extents[i])
          return emitError(fileLoc())
                     << "--shape " << in.name() << ": dimension " << i << " is "
                     << d.dim_value() << " in the model, not " << extents[i],
                 nullptr;
      dims.assign(extents.begin(), extents.end());
    } else {
      for (const auto &d : tt.shape().dim()) {
        if (d.has_dim_value()) {
          dims.push_back(d.dim_value());
          continue;
        }
        auto named = given.dims.find(d.dim_param());
        if (!d.dim_param().empty() && named != given.dims.end()) {
          dims.push_back(named->second);
          continue;
        }
        if (d.dim_param().empty())
          unnamed.push_back(in.name());
        else
          unresolved[d.dim_param()].push_back(in.name());
        dims.push_back(1); // refused below, with the others
      }
    }
    auto type = tensorType(dims, tt.elem_type(), fileLoc(),
                           "graph input '" + in.name() + "'");
    if (failed(type))
      return nullptr;
    argTypes.push_back(*type);
    argNames.push_back(in.name());
    values[in.name()] = body->addArgument(*type, fileLoc());
  }
  for (const auto &kv : options.bindings)
    if (!bound.count(kv.first))
      return emitError(fileLoc()) << "--bind " << kv.first
                                  << ": the model has no such graph input",
             nullptr;
  if (!unresolved.empty() || !unnamed.empty()) {
    // e.g. "graph inputs have symbolic dimensions 'batch_size' (of
    // 'input_ids', 'attention_mask') and 'sequence_length' (...); give
    // their extents with --dim batch_size=N --dim sequence_length=N"
    InFlightDiagnostic diag = emitError(fileLoc());
    auto quoted = [&](const std::vector<std::string> &names) {
      std::vector<std::string> unique;
      for (const std::string &n : names)
        if (!llvm::is_contained(unique, n))
          unique.push_back(n);
      llvm::interleave(
          unique, diag, [&](const std::string &n) { diag << "'" << n << "'"; },
          ", ");
    };
    if (!unresolved.empty()) {
      diag << "graph inputs have symbolic dimension"
           << (unresolved.size() > 1 ? "s " : " ");
      size_t i = 0;
      for (const auto &[name, inputs] : unresolved) {
        if (i++)
          diag << (i == unresolved.size() ? " and " : ", ");
        diag << "'" << name << "' (of ";
        quoted(inputs);
        diag << ")";
      }
      diag << "; give their extents with";
      for (const auto &[name, inputs] : unresolved)
        diag << " --dim "
             << (llvm::StringRef(name).contains(' ') ? "'" + name + "=N'"
                                                     : name + "=N");
    }
    if (!unnamed.empty()) {
      diag << (unresolved.empty() ? "" : "; ")
           << "dimensions without a name in ";
      quoted(unnamed);
      diag << " need the input's whole shape: --shape " << unnamed.front()
           << "=AxB...";
    }
    return nullptr;
  }
  for (const auto &[name, extent] : given.dims)
    if (!usedDims.count(name))
      return emitError(fileLoc())
                 << "--dim " << name
                 << ": no graph input has a dimension of that name",
             nullptr;
  for (const auto &[name, extents] : given.shapes)
    if (!shapedInputs.count(name))
      return emitError(fileLoc())
                 << "--shape " << name
                 << ": the model has no such graph input (or it is bound or "
                    "an initializer)",
             nullptr;

  auto order = sortNodes();
  if (failed(order))
    return nullptr;
  for (auto [index, node] : *order)
    if (failed(importNode(*node, index)))
      return nullptr;

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &out : graph.output()) {
    auto v = values.find(out.name());
    if ((v == values.end() || !v->second) && sequences.count(out.name()))
      return emitError(fileLoc())
                 << "graph output '" << out.name()
                 << "' is a sequence; pcc's inputs and outputs are tensors",
             nullptr;
    if (v == values.end() || !v->second)
      return emitError(fileLoc()) << "graph output '" << out.name()
                                  << "' is not produced by the graph",
             nullptr;
    results.push_back(v->second);
    resultTypes.push_back(v->second.getType());
  }
  if (results.empty())
    return emitError(fileLoc()) << "the graph has no outputs", nullptr;
  func::ReturnOp::create(builder, fileLoc(), results);
  func.setType(builder.getFunctionType(argTypes, resultTypes));
  for (auto [i, name] : llvm::enumerate(argNames))
    func.setArgAttr(i, kOnnxNameAttr, builder.getStringAttr(name));
  for (auto [i, out] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, kOnnxNameAttr, builder.getStringAttr(out.name()));

  // Drop what folding left unused, keeping parameters (they are model
  // state even when unused) out of it only if something uses them.
  SmallVector<Operation *> dead;
  for (Operation &op : llvm::reverse(*body))
    if (op.use_empty() && !isa<func::ReturnOp>(op) && isPure(&op))
      dead.push_back(&op);
  for (Operation *op : dead)
    if (op->use_empty())
      op->erase();
  return module;
}

static OwningOpRef<ModuleOp> importModel(MLIRContext &ctx,
                                         const onnx::ModelProto &model,
                                         StringRef modelDir, StringRef name,
                                         const ImportOptions &options,
                                         ImportReport *report) {
  GraphImporter importer(ctx, model, modelDir, name, options, report);
  return importer.run();
}

OwningOpRef<ModuleOp> pcc::importOnnxText(MLIRContext &ctx, StringRef text,
                                          StringRef name,
                                          const ImportOptions &options,
                                          ImportReport *report) {
  onnx::ModelProto model;
  std::string str = text.str();
  onnx::Status status;
  // ONNX's parser converts numbers with std::stol/stof, which throw on
  // malformed or out-of-range literals.
  try {
    status = onnx::OnnxParser::Parse(model, str.c_str());
  } catch (const std::exception &e) {
    emitError(NameLoc::get(StringAttr::get(&ctx, name)))
        << "cannot parse ONNX text: invalid number (" << e.what() << ")";
    return nullptr;
  }
  if (!status.IsOK()) {
    std::string msg = status.ErrorMessage();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    emitError(NameLoc::get(StringAttr::get(&ctx, name)))
        << "cannot parse ONNX text: " << msg;
    return nullptr;
  }
  return importModel(ctx, model, llvm::sys::path::parent_path(name), name,
                     options, report);
}

OwningOpRef<ModuleOp> pcc::importOnnxBuffer(MLIRContext &ctx, StringRef bytes,
                                            StringRef name,
                                            const ImportOptions &options,
                                            ImportReport *report) {
  Location loc = NameLoc::get(StringAttr::get(&ctx, name));
  if (bytes.empty())
    return emitError(loc) << "empty file", nullptr;
  if (bytes.size() > size_t(std::numeric_limits<int>::max()))
    return emitError(loc) << "model larger than 2 GiB; store the weights as "
                             "external data",
           nullptr;
  onnx::ModelProto model;
  if (model.ParseFromArray(bytes.data(), int(bytes.size())) &&
      model.has_graph())
    return importModel(ctx, model, llvm::sys::path::parent_path(name), name,
                       options, report);
  // ONNX text starts with the model header, possibly after '#' comments.
  StringRef trimmed = bytes.ltrim();
  while (trimmed.starts_with("#"))
    trimmed = trimmed.drop_until([](char c) { return c == '\n'; }).ltrim();
  if (trimmed.starts_with("<") || trimmed.starts_with("agraph"))
    return importOnnxText(ctx, bytes, name, options, report);
  return emitError(loc) << "not a valid ONNX model (protobuf parse failed: "
                           "truncated or corrupt file)",
         nullptr;
}

OwningOpRef<ModuleOp> pcc::importOnnxFile(MLIRContext &ctx,
                                          const std::string &path,
                                          const ImportOptions &options,
                                          ImportReport *report) {
  Location loc = NameLoc::get(StringAttr::get(&ctx, path));
  if (llvm::sys::fs::is_directory(path))
    return emitError(loc) << "is a directory, not an ONNX model", nullptr;
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buf)
    return emitError(loc) << "cannot read: " << buf.getError().message(),
           nullptr;
  return importOnnxBuffer(ctx, (*buf)->getBuffer(), path, options, report);
}
