//===- Safetensors.cpp - safetensors reader and writer --------------------===//
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON describing each tensor's dtype, shape and byte range, then the data.
// The JSON parser handles just what such headers hold (objects, arrays,
// strings, integers) and, like the rest of the reader, is fuzzed.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <unistd.h>

using namespace pccrt;
using namespace pccrt::detail;

namespace {
struct Json {
  enum Kind { Object, Array, String, Integer } kind = Integer;
  std::string str;
  int64_t num = 0;
  std::vector<std::string> keys; // object member names, parallel to items
  std::vector<Json> items;       // object member values or array elements

  const Json *member(const std::string &key) const {
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key)
        return &items[i];
    return nullptr;
  }
};

class JsonParser {
public:
  JsonParser(const char *begin, size_t size, const std::string &what)
      : begin(begin), pos(begin), end(begin + size), what(what) {}

  Json parseDocument() {
    Json doc = value(0);
    skipSpace();
    if (pos != end)
      error("trailing characters");
    return doc;
  }

private:
  // Headers nest three deep; the bound keeps hostile input off the stack.
  static constexpr int kMaxDepth = 16;

  [[noreturn]] void error(const std::string &message) {
    fail(what, "bad safetensors header: " + message + " at offset " +
                   std::to_string(pos - begin));
  }

  void skipSpace() {
    while (pos != end &&
           (*pos == ' ' || *pos == '\t' || *pos == '\n' || *pos == '\r'))
      ++pos;
  }

  bool consume(char c) {
    skipSpace();
    if (pos == end || *pos != c)
      return false;
    ++pos;
    return true;
  }

  void expect(char c) {
    if (!consume(c))
      error(std::string("expected '") + c + "'");
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  Json value(int depth) {
    if (depth > kMaxDepth)
      error("nesting too deep");
    skipSpace();
    if (pos == end)
      error("unexpected end");
    Json v;
    if (consume('{')) {
      v.kind = Json::Object;
      if (consume('}'))
        return v;
      do {
        skipSpace();
        v.keys.push_back(string());
        expect(':');
        v.items.push_back(value(depth + 1));
      } while (consume(','));
      expect('}');
    } else if (consume('[')) {
      v.kind = Json::Array;
      if (consume(']'))
        return v;
      do
        v.items.push_back(value(depth + 1));
      while (consume(','));
      expect(']');
    } else if (*pos == '"') {
      v.kind = Json::String;
      v.str = string();
    } else if (*pos == '-' || isDigit(*pos)) {
      v.num = integer();
    } else {
      error("unexpected character");
    }
    return v;
  }

  std::string string() {
    if (pos == end || *pos != '"')
      error("expected string");
    ++pos;
    std::string out;
    while (true) {
      if (pos == end)
        error("unterminated string");
      unsigned char c = *pos++;
      if (c == '"')
        return out;
      if (c < 0x20)
        error("control character in string");
      if (c != '\\') {
        out += char(c);
        continue;
      }
      if (pos == end)
        error("unterminated string");
      static const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      char escape = *pos++;
      const char *known = escape ? std::strchr(from, escape) : nullptr;
      if (escape == 'u')
        appendUtf8(out, codePoint());
      else if (known)
        out += to[known - from];
      else
        error("bad escape");
    }
  }

  unsigned hex4() {
    if (end - pos < 4)
      error("truncated \\u escape");
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      char c = *pos++;
      unsigned digit = isDigit(c)               ? c - '0'
                       : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                       : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                                : 16;
      if (digit == 16)
        error("bad \\u escape");
      value = value << 4 | digit;
    }
    return value;
  }

  unsigned codePoint() {
    unsigned cp = hex4();
    if (cp >= 0xdc00 && cp <= 0xdfff)
      error("unpaired surrogate");
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (end - pos < 2 || pos[0] != '\\' || pos[1] != 'u')
        error("unpaired surrogate");
      pos += 2;
      unsigned low = hex4();
      if (low < 0xdc00 || low > 0xdfff)
        error("unpaired surrogate");
      cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    return cp;
  }

  static void appendUtf8(std::string &out, unsigned cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xc0 | cp >> 6);
      out += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += char(0xe0 | cp >> 12);
      out += char(0x80 | (cp >> 6 & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    } else {
      out += char(0xf0 | cp >> 18);
      out += char(0x80 | (cp >> 12 & 0x3f));
      out += char(0x80 | (cp >> 6 & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    }
  }

  int64_t integer() {
    bool negative = pos != end && *pos == '-';
    if (negative)
      ++pos;
    if (pos == end || !isDigit(*pos))
      error("expected digits");
    uint64_t value = 0;
    for (; pos != end && isDigit(*pos); ++pos) {
      unsigned digit = *pos - '0';
      if (value > (uint64_t(INT64_MAX) - digit) / 10)
        error("integer too large");
      value = value * 10 + digit;
    }
    if (pos != end && (*pos == '.' || *pos == 'e' || *pos == 'E'))
      error("only integers are supported");
    return negative ? -int64_t(value) : int64_t(value);
  }

  const char *begin, *pos, *end;
  const std::string &what;
};

using Entry = SafetensorsFile::Entry;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;

/// Returns N, the JSON header's length, after checking it against the file.
uint64_t headerLength(const uint8_t *first8, uint64_t fileSize,
                      const std::string &what) {
  if (fileSize == 0)
    fail(what, "empty file");
  if (fileSize < 8)
    fail(what, "too short for a safetensors file (" + std::to_string(fileSize) +
                   " bytes)");
  uint64_t length;
  std::memcpy(&length, first8, 8);
  if (length > fileSize - 8)
    fail(what, "header length " + std::to_string(length) +
                   " runs past end of file (" + std::to_string(fileSize) +
                   " bytes)");
  // The reference implementation's limit; it also bounds what a hostile
  // header can make the JSON parser allocate.
  if (length > kMaxHeaderBytes)
    fail(what, "header length " + std::to_string(length) + " exceeds 100 MB");
  return length;
}

std::vector<Entry> parseHeader(const char *json, size_t size, uint64_t dataSize,
                               const std::string &what,
                               std::map<std::string, std::string> *metadata) {
  Json doc = JsonParser(json, size, what).parseDocument();
  if (doc.kind != Json::Object)
    fail(what, "safetensors header is not a JSON object");
  std::vector<Entry> entries;
  std::set<std::string> names;
  for (size_t i = 0; i < doc.keys.size(); ++i) {
    const std::string &name = doc.keys[i];
    const Json &value = doc.items[i];
    if (name == "__metadata__") {
      if (value.kind != Json::Object)
        fail(what, "__metadata__ must map strings to strings");
      for (size_t j = 0; j < value.keys.size(); ++j) {
        if (value.items[j].kind != Json::String)
          fail(what, "__metadata__ must map strings to strings");
        if (metadata)
          (*metadata)[value.keys[j]] = value.items[j].str;
      }
      continue;
    }
    std::string label = "tensor " + quote(name);
    if (!names.insert(name).second)
      fail(what, "duplicate " + label);
    if (value.kind != Json::Object)
      fail(what, label + " is not a JSON object");
    Entry entry;
    entry.tensor.name = name;
    const Json *dtype = value.member("dtype");
    if (!dtype || dtype->kind != Json::String)
      fail(what, label + ": \"dtype\" must be a string");
    entry.tensor.dtype = dtypeFromSafetensorsName(dtype->str);
    if (!entry.tensor.dtype)
      fail(what, label + ": unknown dtype " + quote(dtype->str));
    const Json *shape = value.member("shape");
    if (!shape || shape->kind != Json::Array)
      fail(what, label + ": \"shape\" must be an array of integers");
    for (const Json &extent : shape->items) {
      if (extent.kind != Json::Integer)
        fail(what, label + ": \"shape\" must be an array of integers");
      entry.tensor.shape.push_back(extent.num);
    }
    uint64_t byteSize = checkedByteSize(entry.tensor.dtype, entry.tensor.shape,
                                        what + ": " + label);
    const Json *offsets = value.member("data_offsets");
    if (!offsets || offsets->kind != Json::Array ||
        offsets->items.size() != 2 || offsets->items[0].kind != Json::Integer ||
        offsets->items[1].kind != Json::Integer)
      fail(what, label + ": \"data_offsets\" must be two integers");
    int64_t begin = offsets->items[0].num, end = offsets->items[1].num;
    if (begin < 0 || end < begin || uint64_t(end) > dataSize)
      fail(what, label + ": data_offsets [" + std::to_string(begin) + "," +
                     std::to_string(end) + "] out of range (data section has " +
                     std::to_string(dataSize) + " bytes)");
    if (uint64_t(end - begin) != byteSize)
      fail(what, label + ": data_offsets span " + std::to_string(end - begin) +
                     " bytes but " +
                     describeType(entry.tensor.dtype, entry.tensor.shape) +
                     " needs " + std::to_string(byteSize));
    entry.begin = uint64_t(begin);
    entry.size = byteSize;
    entries.push_back(std::move(entry));
  }

  // Overlapping ranges would let a small file claim many copies of its data
  // section, so reject them; order and gaps do not matter.
  std::vector<const Entry *> sorted;
  for (const Entry &entry : entries)
    if (entry.size)
      sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(),
            [](const Entry *a, const Entry *b) { return a->begin < b->begin; });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->begin < sorted[i - 1]->begin + sorted[i - 1]->size)
      fail(what, "data of tensors " + quote(sorted[i - 1]->tensor.name) +
                     " and " + quote(sorted[i]->tensor.name) + " overlap");
  return entries;
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

struct FileCloser {
  void operator()(std::FILE *file) const { std::fclose(file); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;
} // namespace

std::vector<Tensor>
pccrt::parseSafetensors(const uint8_t *bytes, size_t size,
                        const std::string &what,
                        std::map<std::string, std::string> *metadata) {
  uint64_t length = headerLength(bytes, size, what);
  const uint8_t *data = bytes + 8 + length;
  std::vector<Entry> entries =
      parseHeader(reinterpret_cast<const char *>(bytes + 8), length,
                  size - 8 - length, what, metadata);
  std::vector<Tensor> tensors;
  for (Entry &entry : entries) {
    entry.tensor.data.assign(data + entry.begin,
                             data + entry.begin + entry.size);
    tensors.push_back(std::move(entry.tensor));
  }
  return tensors;
}

SafetensorsFile::SafetensorsFile(const std::string &path,
                                 std::map<std::string, std::string> *metadata)
    : filePath(path), file(std::fopen(path.c_str(), "rb"), &std::fclose) {
  if (!file)
    fail(path, std::string("cannot open: ") + std::strerror(errno));
  off_t fileSize = -1;
  if (fseeko(file.get(), 0, SEEK_END) == 0)
    fileSize = ftello(file.get());
  if (fileSize < 0)
    fail(path, std::string("cannot read: ") + std::strerror(errno));
  uint8_t first8[8] = {};
  if (fileSize >= 8)
    readAt(0, first8, 8);
  uint64_t length = headerLength(first8, uint64_t(fileSize), path);
  std::string json(length, '\0');
  readAt(8, json.data(), length);
  list = parseHeader(json.data(), length, uint64_t(fileSize) - 8 - length, path,
                     metadata);
  dataStart = 8 + length;
  for (size_t i = 0; i < list.size(); ++i)
    byName.emplace(list[i].tensor.name, i);
}

const SafetensorsFile::Entry *
SafetensorsFile::find(const std::string &name) const {
  auto found = byName.find(name);
  return found == byName.end() ? nullptr : &list[found->second];
}

void SafetensorsFile::readAt(uint64_t offset, void *buffer, size_t size) const {
  if (fseeko(file.get(), off_t(offset), SEEK_SET) != 0 ||
      std::fread(buffer, 1, size, file.get()) != size)
    fail(filePath, std::string("cannot read: ") +
                       (std::ferror(file.get()) ? std::strerror(errno)
                                                : "unexpected end of file"));
}

void SafetensorsFile::read(const Entry &entry, uint64_t offset, void *buffer,
                           size_t size) const {
  if (offset > entry.size || size > entry.size - offset)
    fail(filePath, "tensor " + quote(entry.tensor.name) + ": read of " +
                       std::to_string(size) + " bytes at " +
                       std::to_string(offset) + " past its data");
  if (size)
    readAt(dataStart + entry.begin + offset, buffer, size);
}

Tensor SafetensorsFile::readTensor(const Entry &entry) const {
  Tensor tensor = entry.tensor;
  tensor.data.resize(entry.size);
  read(entry, 0, tensor.data.data(), entry.size);
  return tensor;
}

std::vector<Tensor>
pccrt::readSafetensors(const std::string &path,
                       std::map<std::string, std::string> *metadata) {
  SafetensorsFile file(path, metadata);
  std::vector<Tensor> tensors;
  for (const Entry &entry : file.entries())
    tensors.push_back(file.readTensor(entry));
  return tensors;
}

void pccrt::writeSafetensors(
    const std::string &path, const std::vector<Tensor> &tensors,
    const std::map<std::string, std::string> &metadata) {
  std::vector<TensorRef> refs;
  for (const Tensor &tensor : tensors)
    refs.push_back({tensor.name, tensor.dtype, tensor.shape, tensor.data.data(),
                    tensor.data.size()});
  writeSafetensorRefs(path, refs, metadata);
}

void pccrt::writeSafetensorRefs(
    const std::string &path, const std::vector<TensorRef> &tensors,
    const std::map<std::string, std::string> &metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto &[key, value] : metadata)
      header += (header.back() == '{' ? "" : ",") + jsonString(key) + ":" +
                jsonString(value);
    header += "}";
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorRef &tensor : tensors) {
    std::string what = path + ": tensor " + quote(tensor.name);
    if (tensor.name == "__metadata__" || !names.insert(tensor.name).second)
      fail(path, "duplicate or reserved tensor name " + quote(tensor.name));
    uint64_t byteSize = checkedByteSize(tensor.dtype, tensor.shape, what);
    if (tensor.size != byteSize)
      fail(what, "has " + std::to_string(tensor.size) + " bytes of data but " +
                     describeType(tensor.dtype, tensor.shape) + " needs " +
                     std::to_string(byteSize));
    std::string shape = formatShape(tensor.shape);
    header += (header.back() == '{' ? "" : ",") + jsonString(tensor.name) +
              ":{\"dtype\":\"" + dtypeName(tensor.dtype) +
              "\",\"shape\":" + shape + ",\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + byteSize) +
              "]}";
    offset += byteSize;
  }
  header += "}";
  // Padding keeps the data section 8-byte aligned, as safetensors expects.
  header.append((8 - header.size() % 8) % 8, ' ');

  // Write a sibling and rename it, so that readers never see half a file.
  std::string temporary = path + ".tmp." + std::to_string(getpid());
  FilePtr file(std::fopen(temporary.c_str(), "wb"));
  if (!file)
    fail(path, std::string("cannot write: ") + std::strerror(errno));
  uint64_t length = header.size();
  bool ok = std::fwrite(&length, 8, 1, file.get()) == 1 &&
            std::fwrite(header.data(), header.size(), 1, file.get()) == 1;
  std::vector<uint8_t> chunk;
  std::string sourceError;
  // The source file of the last tensor read from one: a model's external
  // data is usually one file, opened once.
  FilePtr source;
  std::string sourcePath;
  for (const TensorRef &tensor : tensors) {
    if (!ok || tensor.size == 0)
      continue;
    if (tensor.zeros) {
      ok = fseeko(file.get(), off_t(tensor.size), SEEK_CUR) == 0;
      continue;
    }
    if (tensor.file.empty()) {
      ok = std::fwrite(tensor.data, tensor.size, 1, file.get()) == 1;
      continue;
    }
    // From file to file: what is read lives in the page cache and this
    // buffer only, however large the tensor.
    constexpr uint64_t kChunkBytes = uint64_t(16) << 20;
    if (!source || sourcePath != tensor.file) {
      source.reset(std::fopen(tensor.file.c_str(), "rb"));
      sourcePath = tensor.file;
    }
    if (!source || fseeko(source.get(), off_t(tensor.fileOffset), SEEK_SET)) {
      sourceError = tensor.file + ": " + std::strerror(errno);
      ok = false;
      continue;
    }
    chunk.resize(std::min(kChunkBytes, tensor.size));
    for (uint64_t done = 0; ok && done < tensor.size;) {
      size_t n = size_t(std::min<uint64_t>(chunk.size(), tensor.size - done));
      if (std::fread(chunk.data(), 1, n, source.get()) != n) {
        sourceError = tensor.file + ": " +
                      (std::ferror(source.get()) ? std::strerror(errno)
                                                 : "unexpected end of file");
        ok = false;
        break;
      }
      ok = std::fwrite(chunk.data(), n, 1, file.get()) == 1;
      done += n;
    }
  }
  // A hole at the end needs the file's length set: seeking alone does not.
  if (ok)
    ok =
        std::fflush(file.get()) == 0 &&
        ::ftruncate(fileno(file.get()), off_t(8 + header.size() + offset)) == 0;
  int error = ok ? 0 : errno;
  if (std::fclose(file.release()) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (ok && std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::string cause = std::strerror(errno);
    std::remove(temporary.c_str());
    fail(path, "cannot write: " + cause);
  }
  if (!ok) {
    std::remove(temporary.c_str());
    if (!sourceError.empty())
      fail(path, "cannot read " + sourceError);
    fail(path, std::string("cannot write: ") + std::strerror(error));
  }
}
