//===- Training.cpp - Checkpoints, gradient dumps and token batches -------===//
//
// What `pcc run` needs beyond running a model once: saving and restoring the
// STATE weights of a training step, dumping gradients, and sampling token
// batches from a flat token file.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include "pccrt/Comm.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace pccrt;
using namespace pccrt::detail;

namespace {
constexpr const char *kCheckpointFormat = "pcc-checkpoint";

/// \p tensor as F32: gradients are compared as float32 whatever the
/// parameter's type.
Tensor toFloat32(const Tensor &tensor) {
  if (tensor.dtype == PCCRT_F32)
    return tensor;
  size_t width = dtypeSize(tensor.dtype);
  if (tensor.dtype != PCCRT_F16 && tensor.dtype != PCCRT_BF16 &&
      tensor.dtype != PCCRT_F64)
    throw Error("gradient " + quote(tensor.name) + " has dtype " +
                dtypeName(tensor.dtype) + ", not a float type");
  Tensor out = tensor;
  out.dtype = PCCRT_F32;
  int64_t n = int64_t(tensor.data.size() / width);
  out.data.assign(size_t(n) * 4, 0);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t *p = tensor.data.data() + i * width;
    float f;
    if (tensor.dtype == PCCRT_F64) {
      double d;
      std::memcpy(&d, p, 8);
      f = float(d);
    } else {
      uint16_t h;
      std::memcpy(&h, p, 2);
      f = tensor.dtype == PCCRT_F16 ? halfToFloat(h) : bfloatToFloat(h);
    }
    std::memcpy(out.data.data() + i * 4, &f, 4);
  }
  return out;
}

void createDirectory(const std::string &dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    fail(dir, "cannot create directory: " + error.message());
}
} // namespace

void pccrt::dumpGrads(const std::string &dir,
                      const std::vector<Tensor> &grads) {
  std::vector<Tensor> converted;
  for (const Tensor &grad : grads)
    converted.push_back(toFloat32(grad));
  createDirectory(dir);
  writeSafetensors((std::filesystem::path(dir) / "grads.safetensors").string(),
                   converted);
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

void pccrt::saveCheckpoint(const std::string &path, const Model &model,
                           const std::map<std::string, std::string> &metadata) {
  // Copies the STATE weights only: CONSTANT ones may be most of the model.
  // Every rank takes part in gathering the split ones; rank 0 writes.
  std::vector<Tensor> tensors;
  for (int32_t i = 0; i < model.modelInfo->num_weights; ++i)
    if (isModelState(model.modelInfo->weights[i]))
      tensors.push_back(model.wholeWeight(i));
  if (model.comm && model.comm->rank() != 0)
    return;
  std::map<std::string, std::string> all = metadata;
  all["format"] = kCheckpointFormat;
  all["model"] = model.fingerprint();
  // The trained parameters, one name a line: what a forward build loads.
  std::string parameters;
  for (const std::string &name : model.parameterNames())
    parameters += (parameters.empty() ? "" : "\n") + name;
  all["parameters"] = parameters;
  writeSafetensors(path, tensors, all);
}

/// Reads a checkpoint, refusing files that are not one in one line.
static std::vector<Tensor>
readCheckpoint(const std::string &path,
               std::map<std::string, std::string> &metadata) {
  std::vector<Tensor> tensors;
  try {
    tensors = readSafetensors(path, &metadata);
  } catch (const Error &e) {
    std::string cause = e.what();
    if (cause.rfind(path + ": ", 0) == 0)
      cause = cause.substr(path.size() + 2);
    if (cause.rfind("cannot open", 0) == 0)
      throw;
    fail(path, "not a pcc checkpoint (not a safetensors file: " + cause + ")");
  }
  auto format = metadata.find("format");
  if (format == metadata.end() || format->second != kCheckpointFormat)
    fail(path, "not a pcc checkpoint (no \"format\": \"pcc-checkpoint\" in "
               "its metadata)");
  return tensors;
}

size_t pccrt::loadCheckpointParameters(const std::string &path, Model &model,
                                       const std::string &stripPrefix) {
  std::map<std::string, std::string> metadata;
  std::vector<Tensor> tensors = readCheckpoint(path, metadata);
  auto listed = metadata.find("parameters");
  if (listed == metadata.end() || listed->second.empty())
    fail(path, "the checkpoint lists no trained parameters");
  std::vector<std::string> names;
  std::string rest = listed->second;
  for (size_t at = 0; at <= rest.size();) {
    size_t end = rest.find('\n', at);
    if (end == std::string::npos)
      end = rest.size();
    names.push_back(rest.substr(at, end - at));
    at = end + 1;
  }
  return model.loadParameters(tensors, names, path, stripPrefix);
}

std::map<std::string, std::string>
pccrt::loadCheckpoint(const std::string &path, Model &model) {
  std::map<std::string, std::string> metadata;
  std::vector<Tensor> tensors = readCheckpoint(path, metadata);
  std::string expected = model.fingerprint();
  auto saved = metadata.find("model");
  if (saved == metadata.end() || saved->second != expected)
    fail(path, "checkpoint of a different model (state fingerprint " +
                   quote(saved == metadata.end() ? "" : saved->second) +
                   ", this model's is " + quote(expected) + ")");
  model.loadState(tensors, path);
  return metadata;
}

//===----------------------------------------------------------------------===//
// Token data
//===----------------------------------------------------------------------===//

namespace {
/// llm.c's token files start with 256 int32: magic, version, token count.
constexpr int32_t kLlmcMagic = 20240520;
constexpr size_t kLlmcHeaderBytes = 256 * 4;

/// SplitMix64: a well-mixed 64-bit sequence from any seed, the same on every
/// platform (the standard distributions are not).
uint64_t splitMix(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
} // namespace

int32_t TokenData::dtypeFromName(const std::string &name) {
  if (name == "uint16")
    return PCCRT_U16;
  if (name == "int32")
    return PCCRT_I32;
  return 0;
}

TokenData::TokenData(const std::string &path, int32_t dtype, uint64_t seed)
    : path(path), dtype(dtype), seed(seed) {
  if (dtype != PCCRT_U16 && dtype != PCCRT_I32)
    fail(path, "token dtype must be uint16 or int32, got " + dtypeName(dtype));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  size_t size = size_t(info.st_size);
  if (size == 0) {
    ::close(fd);
    fail(path, "empty token file");
  }
  // Mapped, not read: token files are often gigabytes, and a batch touches
  // only a few pages.
  void *mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int error = errno;
  ::close(fd);
  if (mapped == MAP_FAILED)
    fail(path, std::string("cannot map: ") + std::strerror(error));
  mapping = mapped;
  mappingSize = size;
  const uint8_t *bytes = static_cast<const uint8_t *>(mapped);
  size_t width = dtypeSize(dtype), offset = 0;
  if (size >= kLlmcHeaderBytes) {
    int32_t header[3];
    std::memcpy(header, bytes, sizeof header);
    if (header[0] == kLlmcMagic && header[2] >= 0 &&
        kLlmcHeaderBytes + uint64_t(header[2]) * width == size)
      offset = kLlmcHeaderBytes;
  }
  if ((size - offset) % width != 0) {
    ::munmap(mapping, mappingSize);
    fail(path, std::to_string(size - offset) + " bytes of tokens is not a " +
                   "multiple of " + std::to_string(width) + " (" +
                   (dtype == PCCRT_U16 ? "uint16" : "int32") +
                   " tokens; see --data-dtype)");
  }
  tokens = bytes + offset;
  count = int64_t((size - offset) / width);
}

TokenData::~TokenData() {
  if (mapping)
    ::munmap(mapping, mappingSize);
}

void TokenData::checkInput(const pccrt_tensor_info &input) {
  if (input.dtype == PCCRT_I64 && input.rank == 2)
    return;
  std::vector<int64_t> shape;
  if (input.rank > 0)
    shape.assign(input.shape, input.shape + input.rank);
  throw Error("--data needs a model whose first input is int64 [B,T] token "
              "ids; input " +
              quote(input.name) + " is " + describeType(input.dtype, shape));
}

void TokenData::check(const pccrt_tensor_info &input) const {
  checkInput(input);
  if (input.shape[1] > count)
    fail(path, "too short: " + std::to_string(count) +
                   " tokens, a batch row of input " + quote(input.name) +
                   " needs " + std::to_string(input.shape[1]));
}

int64_t TokenData::tokenAt(int64_t at) const {
  if (dtype == PCCRT_U16) {
    uint16_t v;
    std::memcpy(&v, tokens + at * 2, 2);
    return v;
  }
  int32_t v;
  std::memcpy(&v, tokens + at * 4, 4);
  return v;
}

void TokenData::checkIndices(const pccrt_tensor_info &input) const {
  int64_t bound = input.index_bound;
  if (bound <= 0)
    return;
  for (int64_t at = 0; at < count; ++at) {
    int64_t token = tokenAt(at);
    if (token < 0 || token >= bound)
      fail(path, "token " + std::to_string(token) + " at position " +
                     std::to_string(at) + " is outside the " +
                     std::to_string(bound) + " positions that node " +
                     quote(input.index_of ? input.index_of : "?") +
                     " reads for input " + quote(input.name) + " (valid: 0 to " +
                     std::to_string(bound - 1) + ")");
  }
}

Tensor TokenData::batch(const pccrt_tensor_info &input, uint64_t step,
                        int64_t firstRow, int64_t numRows) const {
  check(input);
  int64_t rows = input.shape[0], length = input.shape[1];
  Tensor out;
  out.name = input.name;
  out.dtype = PCCRT_I64;
  out.shape = {rows, length};
  out.kind = PCCRT_KIND_INPUT;
  out.data.resize(size_t(rows * length) * 8);
  int64_t *ids = reinterpret_cast<int64_t *>(out.data.data());
  // One generator per step, seeded by (seed, step): batch s does not depend
  // on which batches were drawn before it.
  uint64_t state = seed;
  splitMix(state);
  state ^= step * 0xd1b54a32d192ed03ull;
  uint64_t windows = uint64_t(count - length) + 1;
  if (numRows < 0)
    numRows = rows;
  for (int64_t r = 0; r < rows; ++r) {
    // The modulo bias is below windows / 2^64: negligible.
    int64_t start = int64_t(splitMix(state) % windows);
    if (r < firstRow || r >= firstRow + numRows)
      continue;
    for (int64_t t = 0; t < length; ++t) {
      int64_t at = start + t, token = tokenAt(at);
      // A negative id would index from the end of the embedding table.
      if (token < 0)
        fail(path, "negative token " + std::to_string(token) + " at token " +
                       std::to_string(at));
      ids[r * length + t] = token;
    }
  }
  return out;
}
