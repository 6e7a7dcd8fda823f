//===- TensorProto.cpp - onnx.TensorProto wire-format reader and writer ---===//
//
// Hand-written so that the runtime needs no protobuf library. The reader
// sees untrusted bytes (and is fuzzed): every length is checked against the
// bytes left before it is used, and nothing is allocated before the element
// count has been checked against the payload actually present.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <cstring>

using namespace pccrt;
using namespace pccrt::detail;

namespace {
enum WireType : unsigned { Varint = 0, Fixed64 = 1, Bytes = 2, Fixed32 = 5 };

// Field numbers of onnx.TensorProto.
enum Field : unsigned {
  Dims = 1,
  DataType = 2,
  FloatData = 4,
  Int32Data = 5,
  StringData = 6,
  Int64Data = 7,
  Name = 8,
  RawData = 9,
  DoubleData = 10,
  Uint64Data = 11,
  ExternalData = 13,
  DataLocation = 14
};

constexpr uint64_t kMaxFieldNumber = (uint64_t(1) << 29) - 1;
constexpr int32_t kOnnxString = 8;

std::string fieldName(unsigned field) {
  return field == FloatData    ? "float_data"
         : field == Int32Data  ? "int32_data"
         : field == Int64Data  ? "int64_data"
         : field == DoubleData ? "double_data"
                               : "uint64_data";
}

/// The typed field that ONNX uses for elements of \p dtype: narrow integers,
/// BOOL, F16 and BF16 all widen to int32_data.
unsigned typedFieldFor(int32_t dtype) {
  return dtype == PCCRT_F32                         ? FloatData
         : dtype == PCCRT_F64                       ? DoubleData
         : dtype == PCCRT_I64                       ? Int64Data
         : dtype == PCCRT_U32 || dtype == PCCRT_U64 ? Uint64Data
                                                    : Int32Data;
}

/// The wire type of one unpacked element of a typed field.
unsigned scalarWireFor(unsigned field) {
  return field == FloatData ? Fixed32 : field == DoubleData ? Fixed64 : Varint;
}

class Reader {
public:
  Reader(const uint8_t *pos, const uint8_t *end, const std::string &what)
      : pos(pos), end(end), what(what) {}

  bool atEnd() const { return pos == end; }

  uint64_t varint() {
    uint64_t value = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (pos == end)
        truncated();
      uint8_t byte = *pos++;
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return value;
    }
    fail(what, "malformed varint in field " + std::to_string(field) +
                   " (longer than 10 bytes)");
  }

  uint64_t fixed(size_t size) {
    if (size_t(end - pos) < size)
      truncated();
    uint64_t value = 0;
    std::memcpy(&value, pos, size);
    pos += size;
    return value;
  }

  uint64_t scalar(unsigned wire) {
    return wire == Varint ? varint() : fixed(wire == Fixed32 ? 4 : 8);
  }

  /// Reads a length-delimited value and returns a reader over it.
  Reader bytes() {
    uint64_t size = varint();
    if (size > uint64_t(end - pos))
      truncated();
    Reader sub(pos, pos + size, what);
    sub.field = field;
    pos += size;
    return sub;
  }

  void skip(unsigned wire) {
    if (wire == 3 || wire == 4)
      fail(what, "protobuf groups are not supported (field " +
                     std::to_string(field) + ")");
    if (wire == Bytes)
      bytes();
    else if (wire == Varint || wire == Fixed64 || wire == Fixed32)
      scalar(wire);
    else
      badWire(wire);
  }

  void expectWire(unsigned wire, unsigned expected) {
    if (wire != expected)
      badWire(wire);
  }

  [[noreturn]] void badWire(unsigned wire) {
    fail(what, "unexpected wire type " + std::to_string(wire) + " for field " +
                   std::to_string(field));
  }

  [[noreturn]] void truncated() {
    fail(what, field
                   ? "truncated TensorProto (field " + std::to_string(field) +
                         " runs past end)"
                   : std::string("truncated TensorProto (tag runs past end)"));
  }

  const uint8_t *pos, *end;
  const std::string &what;
  /// The field being read, for messages; 0 while reading a tag.
  unsigned field = 0;
};

/// Appends one occurrence of a repeated scalar field, packed or not.
void readScalars(Reader &in, unsigned wire, unsigned scalarWire,
                 std::vector<uint64_t> &out) {
  if (wire == scalarWire) {
    out.push_back(in.scalar(scalarWire));
    return;
  }
  in.expectWire(wire, Bytes);
  Reader packed = in.bytes();
  while (!packed.atEnd())
    out.push_back(packed.scalar(scalarWire));
}

void putVarint(std::vector<uint8_t> &out, uint64_t value) {
  for (; value >= 0x80; value >>= 7)
    out.push_back(uint8_t(value | 0x80));
  out.push_back(uint8_t(value));
}

void putBytes(std::vector<uint8_t> &out, unsigned field, const void *data,
              size_t size) {
  putVarint(out, field << 3 | Bytes);
  putVarint(out, size);
  const uint8_t *bytes = static_cast<const uint8_t *>(data);
  out.insert(out.end(), bytes, bytes + size);
}
} // namespace

Tensor pccrt::parseTensorProto(const uint8_t *bytes, size_t size,
                               const std::string &what) {
  if (size == 0)
    fail(what, "empty file");
  Reader in(bytes, bytes + size, what);
  Tensor tensor;
  uint64_t dataType = 0;
  std::vector<uint64_t> dims, values;
  unsigned valueField = 0; // the typed field that `values` came from
  const uint8_t *raw = nullptr;
  size_t rawSize = 0;
  while (!in.atEnd()) {
    in.field = 0;
    uint64_t key = in.varint();
    unsigned wire = key & 7;
    if ((key >> 3) == 0 || (key >> 3) > kMaxFieldNumber)
      fail(what, "invalid field number " + std::to_string(key >> 3));
    in.field = unsigned(key >> 3);
    switch (in.field) {
    case Dims:
      readScalars(in, wire, Varint, dims);
      break;
    case DataType:
      in.expectWire(wire, Varint);
      dataType = in.varint();
      break;
    case FloatData:
    case Int32Data:
    case Int64Data:
    case DoubleData:
    case Uint64Data:
      if (valueField && valueField != in.field)
        fail(what, "TensorProto has both " + fieldName(valueField) + " and " +
                       fieldName(in.field));
      valueField = in.field;
      readScalars(in, wire, scalarWireFor(in.field), values);
      break;
    case StringData:
      fail(what, "string tensors are not supported");
    case Name: {
      in.expectWire(wire, Bytes);
      Reader name = in.bytes();
      tensor.name.assign(name.pos, name.end);
      break;
    }
    case RawData: {
      in.expectWire(wire, Bytes);
      Reader data = in.bytes();
      raw = data.pos;
      rawSize = data.end - data.pos;
      break;
    }
    case ExternalData:
      fail(what, "external data is not supported in inputs");
    case DataLocation:
      in.expectWire(wire, Varint);
      if (in.varint() != 0) // 0 is DEFAULT, 1 is EXTERNAL
        fail(what, "external data is not supported in inputs");
      break;
    default: // segment, doc_string and fields from newer ONNX versions
      in.skip(wire);
    }
  }

  if (dataType == 0)
    fail(what, "TensorProto has no data_type");
  if (dataType == kOnnxString)
    fail(what, "string tensors are not supported");
  if (dataType > INT32_MAX || !dtypeSize(int32_t(dataType)))
    fail(what, "unsupported data type " + std::to_string(dataType));
  tensor.dtype = int32_t(dataType);
  for (uint64_t extent : dims)
    tensor.shape.push_back(int64_t(extent));
  uint64_t byteSize = checkedByteSize(tensor.dtype, tensor.shape, what);
  size_t elementSize = dtypeSize(tensor.dtype);
  uint64_t count = byteSize / elementSize;

  if (raw) {
    if (valueField)
      fail(what, "TensorProto has both raw_data and " + fieldName(valueField));
    if (rawSize != byteSize)
      fail(what, "raw_data has " + std::to_string(rawSize) + " bytes but " +
                     describeType(tensor.dtype, tensor.shape) + " needs " +
                     std::to_string(byteSize));
    tensor.data.assign(raw, raw + rawSize);
    return tensor;
  }
  if (valueField && valueField != typedFieldFor(tensor.dtype))
    fail(what, fieldName(valueField) + " cannot hold " +
                   dtypeName(tensor.dtype) + " elements");
  if (values.size() != count)
    fail(what, "TensorProto payload has " + std::to_string(values.size()) +
                   " elements but dims " + formatShape(tensor.shape) +
                   " need " + std::to_string(count));
  // Typed fields hold each element in the low bits of a wider value.
  tensor.data.resize(byteSize);
  for (size_t i = 0; i < values.size(); ++i) {
    uint64_t value = tensor.dtype == PCCRT_BOOL ? values[i] != 0 : values[i];
    std::memcpy(&tensor.data[i * elementSize], &value, elementSize);
  }
  return tensor;
}

Tensor pccrt::readTensorProto(const std::string &path) {
  std::vector<uint8_t> bytes = readFile(path);
  return parseTensorProto(bytes.data(), bytes.size(), path);
}

std::vector<uint8_t> pccrt::serializeTensorProto(const Tensor &tensor) {
  std::string what = "tensor " + quote(tensor.name);
  checkDataSize(tensor, what);
  // Fields in number order and dims unpacked, as protobuf itself writes
  // onnx.proto's proto2 messages.
  std::vector<uint8_t> out;
  for (int64_t extent : tensor.shape) {
    putVarint(out, Dims << 3 | Varint);
    putVarint(out, uint64_t(extent));
  }
  putVarint(out, DataType << 3 | Varint);
  putVarint(out, uint64_t(tensor.dtype));
  if (!tensor.name.empty())
    putBytes(out, Name, tensor.name.data(), tensor.name.size());
  putBytes(out, RawData, tensor.data.data(), tensor.data.size());
  return out;
}
