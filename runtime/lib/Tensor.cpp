//===- Tensor.cpp - Element types, shapes and shared helpers --------------===//

#include "Internal.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

using namespace pccrt;

namespace {
struct DtypeEntry {
  int32_t dtype;
  const char *name;
  size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {PCCRT_F32, "F32", 4},   {PCCRT_F64, "F64", 8}, {PCCRT_F16, "F16", 2},
    {PCCRT_BF16, "BF16", 2}, {PCCRT_I64, "I64", 8}, {PCCRT_I32, "I32", 4},
    {PCCRT_I16, "I16", 2},   {PCCRT_I8, "I8", 1},   {PCCRT_U64, "U64", 8},
    {PCCRT_U32, "U32", 4},   {PCCRT_U16, "U16", 2}, {PCCRT_U8, "U8", 1},
    {PCCRT_BOOL, "BOOL", 1}};

const DtypeEntry *findDtype(int32_t dtype) {
  for (const DtypeEntry &entry : kDtypes)
    if (entry.dtype == dtype)
      return &entry;
  return nullptr;
}
} // namespace

size_t pccrt::dtypeSize(int32_t dtype) {
  const DtypeEntry *entry = findDtype(dtype);
  return entry ? entry->size : 0;
}

std::string pccrt::dtypeName(int32_t dtype) {
  const DtypeEntry *entry = findDtype(dtype);
  return entry ? entry->name : "dtype(" + std::to_string(dtype) + ")";
}

int32_t pccrt::dtypeFromSafetensorsName(const std::string &name) {
  for (const DtypeEntry &entry : kDtypes)
    if (name == entry.name)
      return entry.dtype;
  return 0;
}

std::string pccrt::formatShape(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string pccrt::describeType(int32_t dtype,
                                const std::vector<int64_t> &shape) {
  return formatShape(shape) + " of " + dtypeName(dtype);
}

int64_t Tensor::numElements() const {
  // Unsigned so that a nonsensical shape wraps instead of being UB.
  uint64_t count = 1;
  for (int64_t extent : shape)
    count *= uint64_t(extent);
  return int64_t(count);
}

void detail::fail(const std::string &what, const std::string &cause) {
  throw Error(what + ": " + cause);
}

std::string detail::quote(const std::string &s) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c >= 0x20 && c != 0x7f) {
      out += char(c);
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  }
  return out + "'";
}

void detail::checkDataSize(const Tensor &tensor, const std::string &what) {
  uint64_t byteSize = checkedByteSize(tensor.dtype, tensor.shape, what);
  if (tensor.data.size() != byteSize)
    fail(what, "has " + std::to_string(tensor.data.size()) +
                   " bytes of data but " +
                   describeType(tensor.dtype, tensor.shape) + " needs " +
                   std::to_string(byteSize));
}

uint64_t detail::checkedByteSize(int32_t dtype,
                                 const std::vector<int64_t> &shape,
                                 const std::string &what) {
  size_t elementSize = dtypeSize(dtype);
  if (!elementSize)
    fail(what, "unsupported data type " + std::to_string(dtype));
  uint64_t limit = kMaxTensorBytes / elementSize, count = 1;
  for (int64_t extent : shape) {
    if (extent < 0)
      fail(what, "negative extent in shape " + formatShape(shape));
    uint64_t e = uint64_t(extent);
    if (e > limit || (e && count > limit / e))
      fail(what, "shape " + formatShape(shape) + " of " + dtypeName(dtype) +
                     " exceeds 16 GiB");
    count *= e;
  }
  return count * elementSize;
}

std::vector<uint8_t> detail::readFile(const std::string &path) {
  std::FILE *file = std::fopen(path.c_str(), "rb");
  if (!file)
    fail(path, std::string("cannot open: ") + std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t buffer[1 << 16];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, file))
    bytes.insert(bytes.end(), buffer, buffer + n);
  int error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (error)
    fail(path, std::string("cannot read: ") + std::strerror(error));
  return bytes;
}

//===----------------------------------------------------------------------===//
// 16-bit floats
//===----------------------------------------------------------------------===//

float pccrt::detail::halfToFloat(uint16_t h) {
  uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(float(mantissa), -24);
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude = std::ldexp(float(mantissa | 0x400), int(exponent) - 25);
  return (h >> 15) ? -magnitude : magnitude;
}

float pccrt::detail::bfloatToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t pccrt::detail::floatToBfloat(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000)
    return uint16_t((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

uint16_t pccrt::detail::floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t magnitude = x & 0x7fffffff;
  if (magnitude > 0x7f800000)
    return uint16_t(sign | 0x7e00);
  if (magnitude >= 0x477ff000) // rounds to 65520 or more: infinity
    return uint16_t(sign | 0x7c00);
  if (magnitude < 0x38800000) {
    // A subnormal half: the value in units of 2^-24, rounded to even.
    float scaled = std::ldexp(std::fabs(f), 24);
    return uint16_t(sign | uint16_t(std::nearbyint(scaled)));
  }
  uint32_t h = ((magnitude >> 13) - (112u << 10));
  uint32_t rest = magnitude & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    ++h;
  return uint16_t(sign | h);
}
