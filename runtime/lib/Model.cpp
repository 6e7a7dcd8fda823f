//===- Model.cpp - Loading and running generated model libraries ----------===//

#include "Internal.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>

using namespace pccrt;
using namespace pccrt::detail;

namespace {
/// Stands in for the data of empty tensors, so generated code never sees a
/// null pointer.
alignas(64) uint8_t emptyBuffer[64];

std::vector<int64_t> shapeOf(const pccrt_tensor_info &info) {
  if (info.rank <= 0)
    return {};
  return std::vector<int64_t>(info.shape, info.shape + info.rank);
}

/// Empty if \p tensor fits \p info, else "expected ..., got ...".
std::string mismatch(const pccrt_tensor_info &info, const Tensor &tensor) {
  std::vector<int64_t> shape = shapeOf(info);
  if (tensor.dtype != info.dtype || tensor.shape != shape)
    return "expected shape " + describeType(info.dtype, shape) + ", got " +
           describeType(tensor.dtype, tensor.shape);
  uint64_t byteSize = uint64_t(tensor.numElements()) * dtypeSize(info.dtype);
  if (tensor.data.size() != byteSize)
    return "expected " + std::to_string(byteSize) + " bytes of data, got " +
           std::to_string(tensor.data.size());
  return {};
}

/// Checks one table of a model's info, so that later code may trust it:
/// every entry has a name, a valid type and one of the kinds \p kindA or
/// \p kindB that its table allows.
void validateTable(int32_t count, const pccrt_tensor_info *table,
                   const std::string &kind, const std::string &library,
                   int32_t kindA, int32_t kindB) {
  if (count < 0 || (count > 0 && !table))
    fail(library, "malformed model info: bad " + kind + " table");
  for (int32_t i = 0; i < count; ++i) {
    const pccrt_tensor_info &info = table[i];
    if (!info.name)
      fail(library, "malformed model info: " + kind + " " + std::to_string(i) +
                        " has no name");
    std::string label = library + ": " + kind + " " + quote(info.name);
    if (info.rank < 0 || (info.rank > 0 && !info.shape))
      fail(label, "malformed model info: bad shape");
    if (info.kind != kindA && info.kind != kindB)
      fail(label, "malformed model info: kind " + kindName(info.kind) +
                      " is not allowed in the " + kind + " table");
    checkedByteSize(info.dtype, shapeOf(info), label);
  }
}

std::string runErrorName(int code) {
  switch (code) {
  case PCCRT_ERR_INDEX_OUT_OF_RANGE:
    return "index out of range";
  case PCCRT_ERR_ABI_MISMATCH:
    return "the library was built for another ABI version";
  default:
    return "unknown error";
  }
}

void *dataPointer(const Tensor &tensor) {
  return tensor.data.empty() ? emptyBuffer
                             : const_cast<uint8_t *>(tensor.data.data());
}
} // namespace

std::string pccrt::kindName(int32_t kind) {
  switch (kind) {
  case PCCRT_KIND_INPUT:
    return "INPUT";
  case PCCRT_KIND_OUTPUT:
    return "OUTPUT";
  case PCCRT_KIND_GRAD:
    return "GRAD";
  case PCCRT_KIND_CONSTANT:
    return "CONSTANT";
  case PCCRT_KIND_STATE:
    return "STATE";
  default:
    return "kind(" + std::to_string(kind) + ")";
  }
}

void Model::FreeDeleter::operator()(void *p) const { std::free(p); }

Model::~Model() {
  if (handle)
    dlclose(handle);
}

std::unique_ptr<Model> Model::load(const std::string &libraryPath,
                                   const std::string &weightsPath,
                                   const std::string &symbolPrefix) {
  std::unique_ptr<Model> model(new Model());
  // Without a slash dlopen searches the library path, not the current
  // directory, which is never what a user naming a file means.
  std::string path = libraryPath.find('/') == std::string::npos
                         ? "./" + libraryPath
                         : libraryPath;
  model->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!model->handle) {
    const char *cause = dlerror();
    fail(libraryPath, std::string("cannot load model library: ") +
                          (cause ? cause : "unknown error"));
  }
  auto symbol = [&](const std::string &name) {
    void *address = dlsym(model->handle, name.c_str());
    if (!address)
      fail(libraryPath, "missing symbol " + quote(name));
    return address;
  };
  auto infoFn = reinterpret_cast<const pccrt_model_info *(*)()>(
      symbol(symbolPrefix + "_model_info"));
  model->runFn = reinterpret_cast<RunFn>(symbol(symbolPrefix + "_model_run"));
  const pccrt_model_info *info = infoFn();
  if (!info)
    fail(libraryPath, symbolPrefix + "_model_info returned null");
  if (info->abi_version != PCCRT_ABI_VERSION)
    fail(libraryPath, "model ABI version " + std::to_string(info->abi_version) +
                          ", runtime expects " +
                          std::to_string(PCCRT_ABI_VERSION));
  validateTable(info->num_inputs, info->inputs, "input", libraryPath,
                PCCRT_KIND_INPUT, PCCRT_KIND_INPUT);
  validateTable(info->num_outputs, info->outputs, "output", libraryPath,
                PCCRT_KIND_OUTPUT, PCCRT_KIND_GRAD);
  validateTable(info->num_weights, info->weights, "weight", libraryPath,
                PCCRT_KIND_CONSTANT, PCCRT_KIND_STATE);
  // Each weight gets its own buffer; two entries of one name would have to
  // share a STATE buffer that two updates write.
  std::unordered_set<std::string> weightNames;
  for (int32_t i = 0; i < info->num_weights; ++i)
    if (!weightNames.insert(info->weights[i].name).second)
      fail(libraryPath, "malformed model info: weight " +
                            quote(info->weights[i].name) + " appears twice");
  model->modelInfo = info;

  if (info->num_weights == 0)
    return model;
  if (weightsPath.empty())
    fail(libraryPath, "model needs " + std::to_string(info->num_weights) +
                          " weights but no weights file was given");
  std::vector<Tensor> file = readSafetensors(weightsPath);
  std::unordered_map<std::string, size_t> byName;
  for (size_t i = 0; i < file.size(); ++i)
    byName.emplace(file[i].name, i);
  std::vector<size_t> order;
  for (int32_t i = 0; i < info->num_weights; ++i) {
    const pccrt_tensor_info &expected = info->weights[i];
    std::string label = "weight " + quote(expected.name);
    auto found = byName.find(expected.name);
    if (found == byName.end())
      fail(weightsPath, "missing " + label);
    if (std::string problem = mismatch(expected, file[found->second]);
        !problem.empty())
      fail(weightsPath, label + ": " + problem);
    order.push_back(found->second);
  }
  // Move the file's tensors (no copies of large weights) into table order;
  // those the model does not use are freed with `file`.
  for (int32_t i = 0; i < info->num_weights; ++i) {
    Tensor &weight = model->weights.emplace_back(std::move(file[order[i]]));
    weight.kind = info->weights[i].kind;
  }
  for (Tensor &weight : model->weights)
    model->weightPointers.push_back(dataPointer(weight));
  return model;
}

std::vector<Tensor> Model::run(const std::vector<Tensor> &inputs) {
  const pccrt_model_info &info = *modelInfo;
  if (inputs.size() != size_t(info.num_inputs))
    throw Error("model expects " + std::to_string(info.num_inputs) +
                " inputs, got " + std::to_string(inputs.size()));
  std::vector<void *> inputPointers;
  for (int32_t i = 0; i < info.num_inputs; ++i) {
    if (std::string problem = mismatch(info.inputs[i], inputs[i]);
        !problem.empty())
      throw Error("input " + quote(info.inputs[i].name) + ": " + problem);
    inputPointers.push_back(dataPointer(inputs[i]));
  }

  std::vector<Tensor> outputs(info.num_outputs);
  std::vector<void *> outputPointers;
  for (int32_t i = 0; i < info.num_outputs; ++i) {
    Tensor &output = outputs[i];
    output.name = info.outputs[i].name;
    output.kind = info.outputs[i].kind;
    output.dtype = info.outputs[i].dtype;
    output.shape = shapeOf(info.outputs[i]);
    output.data.resize(output.numElements() * dtypeSize(output.dtype));
    outputPointers.push_back(dataPointer(output));
  }

  if (!workspace && info.workspace_bytes) {
    // aligned_alloc wants a multiple of the alignment.
    uint64_t size = (info.workspace_bytes + 63) / 64 * 64;
    void *memory = size >= info.workspace_bytes && size <= SIZE_MAX
                       ? std::aligned_alloc(64, size_t(size))
                       : nullptr;
    if (!memory)
      throw Error("cannot allocate " + std::to_string(info.workspace_bytes) +
                  " bytes of workspace");
    workspace.reset(memory);
  }

  pccrt_context context{};
  context.abi_version = PCCRT_ABI_VERSION;
  context.inputs = inputPointers.data();
  context.outputs = outputPointers.data();
  context.weights = weightPointers.data();
  context.workspace = workspace ? workspace.get() : emptyBuffer;
  context.rank = 0;
  context.num_ranks = 1;
  int code = runFn(&context);
  if (code != PCCRT_OK)
    throw Error("model run failed: " + runErrorName(code) + " (code " +
                std::to_string(code) + ")");
  return outputs;
}

bool Model::isTraining() const {
  for (const Tensor &weight : weights)
    if (weight.kind == PCCRT_KIND_STATE)
      return true;
  for (int32_t i = 0; i < modelInfo->num_outputs; ++i)
    if (std::string(modelInfo->outputs[i].name) == "loss")
      return true;
  return false;
}

std::vector<Tensor> Model::state() const { return weights; }

void Model::loadState(const std::vector<Tensor> &tensors,
                      const std::string &source) {
  std::string what =
      "checkpoint" + (source.empty() ? std::string() : " " + source);
  std::unordered_map<std::string, const Tensor *> byName;
  for (const Tensor &tensor : tensors)
    byName.emplace(tensor.name, &tensor);
  // Check everything before changing anything.
  std::vector<std::pair<Tensor *, const Tensor *>> updates;
  for (int32_t i = 0; i < modelInfo->num_weights; ++i) {
    const pccrt_tensor_info &expected = modelInfo->weights[i];
    if (expected.kind != PCCRT_KIND_STATE)
      continue;
    auto found = byName.find(expected.name);
    if (found == byName.end())
      throw Error(what + " does not match this model: missing " +
                  quote(expected.name));
    if (std::string problem = mismatch(expected, *found->second);
        !problem.empty())
      throw Error(what + " does not match this model: mismatched " +
                  quote(expected.name) + ": " + problem);
    updates.emplace_back(&weights[i], found->second);
  }
  // Copy into the existing buffers, which weightPointers point to.
  for (auto [weight, tensor] : updates)
    if (!tensor->data.empty())
      std::memcpy(weight->data.data(), tensor->data.data(),
                  tensor->data.size());
}

std::vector<std::string> Model::parameterNames() const {
  std::unordered_map<std::string, bool> graded;
  for (int32_t i = 0; i < modelInfo->num_outputs; ++i)
    if (modelInfo->outputs[i].kind == PCCRT_KIND_GRAD)
      graded[modelInfo->outputs[i].name] = true;
  std::vector<std::string> names;
  for (int32_t i = 0; i < modelInfo->num_weights; ++i)
    if (modelInfo->weights[i].kind == PCCRT_KIND_STATE &&
        graded.count(modelInfo->weights[i].name))
      names.push_back(modelInfo->weights[i].name);
  return names;
}

size_t Model::loadParameters(const std::vector<Tensor> &tensors,
                             const std::vector<std::string> &parameters,
                             const std::string &source) {
  std::unordered_map<std::string, const Tensor *> byName;
  for (const Tensor &tensor : tensors)
    byName.emplace(tensor.name, &tensor);
  std::unordered_map<std::string, int32_t> weightIndex;
  for (int32_t i = 0; i < modelInfo->num_weights; ++i)
    weightIndex.emplace(modelInfo->weights[i].name, i);
  // Check everything before changing anything.
  std::vector<std::pair<Tensor *, const Tensor *>> updates;
  for (const std::string &name : parameters) {
    auto tensor = byName.find(name);
    if (tensor == byName.end())
      throw Error(source + ": parameter " + quote(name) +
                  " is listed but not stored");
    auto index = weightIndex.find(name);
    if (index == weightIndex.end())
      throw Error(source + ": parameter " + quote(name) +
                  " is not a weight of this model (a checkpoint of another "
                  "model?)");
    const pccrt_tensor_info &expected = modelInfo->weights[index->second];
    if (std::string problem = mismatch(expected, *tensor->second);
        !problem.empty())
      throw Error(source + ": parameter " + quote(name) +
                  " does not fit this model: " + problem);
    updates.emplace_back(&weights[index->second], tensor->second);
  }
  for (auto [weight, tensor] : updates)
    if (!tensor->data.empty())
      std::memcpy(weight->data.data(), tensor->data.data(),
                  tensor->data.size());
  return updates.size();
}

std::string Model::fingerprint() const {
  // Sorted by name: the order of the weights table does not matter to a
  // checkpoint, which binds by name.
  std::vector<std::string> entries;
  for (int32_t i = 0; i < modelInfo->num_weights; ++i) {
    const pccrt_tensor_info &w = modelInfo->weights[i];
    if (w.kind == PCCRT_KIND_STATE)
      entries.push_back(std::string(w.name) + '\0' +
                        describeType(w.dtype, shapeOf(w)));
  }
  std::sort(entries.begin(), entries.end());
  // FNV-1a, 64 bits: stable across builds and platforms, unlike std::hash.
  uint64_t hash = 0xcbf29ce484222325ull;
  auto mix = [&](unsigned char byte) {
    hash ^= byte;
    hash *= 0x100000001b3ull;
  };
  for (const std::string &entry : entries) {
    for (unsigned char c : entry)
      mix(c);
    mix('\n');
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", (unsigned long long)hash);
  return text;
}

std::vector<Tensor> pccrt::bindInputs(const pccrt_model_info &info,
                                      const std::vector<std::string> &files) {
  size_t numInputs = info.num_inputs > 0 ? size_t(info.num_inputs) : 0;
  std::vector<Tensor> bound(numInputs);
  std::vector<bool> isBound(numInputs, false);
  size_t nextPositional = 0, numProtoFiles = 0;
  bool anySafetensors = false;

  auto bind = [&](size_t index, Tensor tensor, const std::string &file) {
    std::string label = "input " + quote(info.inputs[index].name);
    if (isBound[index])
      fail(file, label + " is given twice");
    if (std::string problem = mismatch(info.inputs[index], tensor);
        !problem.empty())
      fail(file, label + ": " + problem);
    tensor.name = info.inputs[index].name;
    bound[index] = std::move(tensor);
    isBound[index] = true;
  };

  for (const std::string &file : files) {
    static const std::string suffix = ".safetensors";
    if (file.size() >= suffix.size() &&
        file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0) {
      anySafetensors = true;
      for (Tensor &tensor : readSafetensors(file))
        for (size_t i = 0; i < numInputs; ++i)
          if (tensor.name == info.inputs[i].name) {
            bind(i, std::move(tensor), file);
            break;
          }
      continue;
    }
    ++numProtoFiles;
    while (nextPositional < numInputs && isBound[nextPositional])
      ++nextPositional;
    if (nextPositional == numInputs)
      fail(file, "too many input files: model has " +
                     std::to_string(numInputs) + " inputs");
    bind(nextPositional, readTensorProto(file), file);
  }

  for (size_t i = 0; i < numInputs; ++i)
    if (!isBound[i])
      throw Error("missing input " + quote(info.inputs[i].name) + ": " +
                  (anySafetensors
                       ? std::string("not found in the .safetensors files")
                       : "too few input files (model has " +
                             std::to_string(numInputs) + " inputs, got " +
                             std::to_string(numProtoFiles) +
                             "; give one --input per input, or --data for "
                             "the token input)"));
  return bound;
}

void pccrt::checkWritableFile(const std::string &path) {
  std::filesystem::path file(path);
  std::error_code error;
  if (std::filesystem::is_directory(file, error))
    fail(path, "is a folder, not a file");
  std::filesystem::path dir =
      file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(dir, error))
    fail(path, "cannot be written: folder " + quote(dir.string()) +
                   " does not exist");
  // A probe beside the file: the one sure test of permissions, read-only
  // mounts and the like.
  std::string probe = path + ".pcc-probe." + std::to_string(getpid());
  FILE *f = std::fopen(probe.c_str(), "wb");
  if (!f)
    fail(path, std::string("cannot be written: ") + std::strerror(errno));
  std::fclose(f);
  std::remove(probe.c_str());
}

void pccrt::checkWritableDirectory(const std::string &dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    fail(dir, "cannot create directory: " + error.message());
  checkWritableFile(
      (std::filesystem::path(dir) / "outputs.safetensors").string());
}

void pccrt::dumpOutputs(const std::string &dir,
                        const std::vector<Tensor> &outputs) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    fail(dir, "cannot create directory: " + error.message());
  writeSafetensors(
      (std::filesystem::path(dir) / "outputs.safetensors").string(), outputs);
}
