//===- Model.cpp - Loading and running generated model libraries ----------===//

#include "Internal.h"

#include "pccrt/Comm.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <sys/mman.h>
#include <thread>
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

/// Empty if \p tensor has \p dtype and \p shape, else "expected ..., got
/// ...".
std::string mismatch(int32_t dtype, const std::vector<int64_t> &shape,
                     const Tensor &tensor) {
  if (tensor.dtype != dtype || tensor.shape != shape)
    return "expected shape " + describeType(dtype, shape) + ", got " +
           describeType(tensor.dtype, tensor.shape);
  uint64_t byteSize = uint64_t(tensor.numElements()) * dtypeSize(dtype);
  if (tensor.data.size() != byteSize)
    return "expected " + std::to_string(byteSize) + " bytes of data, got " +
           std::to_string(tensor.data.size());
  return {};
}

/// Empty if \p tensor fits the rank's part \p info.
std::string mismatch(const pccrt_tensor_info &info, const Tensor &tensor) {
  return mismatch(info.dtype, shapeOf(info), tensor);
}

/// Empty if \p tensor is a whole tensor of which \p entry is a part.
std::string wholeMismatch(const pccrt_model_info &model,
                          const pccrt_tensor_info &entry,
                          const Tensor &tensor) {
  return mismatch(entry.dtype, wholeShape(model, entry), tensor);
}

/// Checks the mesh of a model's info: at most 31 axes of positive sizes.
void validateMesh(const pccrt_model_info &info, const std::string &library) {
  if (info.mesh_rank < 0 || info.mesh_rank > 31 ||
      (info.mesh_rank > 0 && !info.mesh_shape))
    fail(library, "malformed model info: bad mesh (" +
                      std::to_string(info.mesh_rank) + " axes)");
  int64_t ranks = 1;
  for (int32_t a = 0; a < info.mesh_rank; ++a) {
    int64_t size = info.mesh_shape[a];
    if (size < 1 || size > (int64_t(1) << 20) || ranks > (int64_t(1) << 20))
      fail(library, "malformed model info: mesh axis " + std::to_string(a) +
                        " has size " + std::to_string(size));
    ranks *= size;
  }
}

/// Checks the sharding fields of \p entry against \p info's mesh, so that
/// slicing and gathering may trust them.
void validateSharding(const pccrt_model_info &info,
                      const pccrt_tensor_info &entry,
                      const std::string &label) {
  auto bad = [&](const std::string &what) {
    fail(label, "malformed model info: " + what);
  };
  if (entry.shard_axes == 0) {
    if (entry.shard_groups > 1 || entry.shard_groups < 0 ||
        entry.full_extent != 0 || entry.shard_outer_axes != 0)
      bad("groups, a full extent or outer axes on a tensor that is not "
          "split");
    return;
  }
  if ((entry.shard_outer_axes & ~entry.shard_axes) != 0)
    bad("outer axes mask " + std::to_string(entry.shard_outer_axes) +
        " not within the axes mask " + std::to_string(entry.shard_axes));
  if (info.mesh_rank == 0 || (entry.shard_axes >> info.mesh_rank) != 0)
    bad("split over axes mask " + std::to_string(entry.shard_axes) +
        " of a mesh of " + std::to_string(info.mesh_rank) + " axes");
  if (entry.shard_dim < 0 || entry.shard_dim >= entry.rank)
    bad("split dimension " + std::to_string(entry.shard_dim) +
        " of a tensor of rank " + std::to_string(entry.rank));
  int64_t local = entry.shape[entry.shard_dim];
  int64_t size = meshGroupSize(info, entry.shard_axes);
  int64_t groups = std::max<int64_t>(1, entry.shard_groups);
  if (entry.shard_groups < 0 || local % groups != 0)
    bad(std::to_string(entry.shard_groups) + " groups of a local extent of " +
        std::to_string(local));
  if (local > INT64_MAX / size)
    bad("whole extent overflows");
  int64_t whole = local * size;
  if (entry.full_extent < 0 || entry.full_extent > whole)
    bad("full extent " + std::to_string(entry.full_extent) +
        " of a whole extent of " + std::to_string(whole));
  // Padding sits at the end of the whole extent; with groups it would fall
  // inside the last group only, which no layout produces.
  if (entry.full_extent != 0 && entry.full_extent != whole && groups > 1)
    bad("padding with " + std::to_string(groups) + " groups");
  checkedByteSize(entry.dtype, wholeShape(info, entry), label);
}

/// Checks the pipeline fields: a stage axis of the mesh, and holders among
/// its coordinates.
void validateStages(const pccrt_model_info &info,
                    const pccrt_tensor_info &entry, const std::string &label) {
  if (entry.holders == 0)
    return;
  if (info.stage_axis < 0 || info.stage_axis >= info.mesh_rank)
    fail(label, "malformed model info: holders without a stage axis");
  int64_t stages = info.mesh_shape[info.stage_axis];
  if (stages < 64 && (entry.holders >> stages) != 0)
    fail(label, "malformed model info: holders " +
                    std::to_string(entry.holders) + " beyond " +
                    std::to_string(stages) + " stages");
}

/// Checks one table of a model's info, so that later code may trust it:
/// every entry has a name, a valid type and one of the kinds \p kindA or
/// \p kindB that its table allows.
void validateTable(const pccrt_model_info &model, int32_t count,
                   const pccrt_tensor_info *table, const std::string &kind,
                   const std::string &library, int32_t kindA, int32_t kindB) {
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
    if (info.index_bound < 0 ||
        (info.index_bound > 0 &&
         ((info.dtype != PCCRT_I64 && info.dtype != PCCRT_I32) ||
          !info.index_of)))
      fail(label, "malformed model info: bad index bound");
    validateSharding(model, info, label);
    validateStages(model, info, label);
  }
}

std::string runErrorName(int code) {
  switch (code) {
  case PCCRT_ERR_INDEX_OUT_OF_RANGE:
    return "index out of range";
  case PCCRT_ERR_ABI_MISMATCH:
    return "the library was built for another ABI version";
  case PCCRT_ERR_COMM:
    return "a collective operation failed";
  case PCCRT_ERR_DEVICE:
    return "a CUDA call or kernel failed (the library printed why)";
  default:
    return "unknown error";
  }
}

constexpr uint64_t kHugePage = uint64_t(2) << 20;

/// Asks Linux for transparent huge pages for the 2 MiB-aligned part of the
/// \p bytes at \p begin, before their pages are first touched. Advice
/// only: without huge pages the memory works the same.
void adviseHugePages([[maybe_unused]] void *begin,
                     [[maybe_unused]] uint64_t bytes) {
#ifdef MADV_HUGEPAGE
  auto at = reinterpret_cast<uintptr_t>(begin);
  uintptr_t first = (at + kHugePage - 1) / kHugePage * kHugePage;
  uintptr_t last = (at + bytes) / kHugePage * kHugePage;
  if (last > first)
    (void)madvise(reinterpret_cast<void *>(first), size_t(last - first),
                  MADV_HUGEPAGE);
#endif
}

/// \p bytes of memory aligned to 64, as the ABI promises its buffers, to
/// be released with std::free. A buffer of several megabytes (the prepared
/// operands, a large workspace) is aligned to 2 MiB and, on Linux, asks
/// for transparent huge pages: the packed weights stream through it on
/// every run, and with 4 KiB pages that is a TLB miss every 64 cache lines.
void *allocateAligned(uint64_t bytes, const std::string &what) {
  uint64_t alignment = bytes >= 2 * kHugePage ? kHugePage : 64;
  // aligned_alloc wants a multiple of the alignment.
  uint64_t size = (bytes + alignment - 1) / alignment * alignment;
  void *memory = size >= bytes && size <= SIZE_MAX
                     ? std::aligned_alloc(size_t(alignment), size_t(size))
                     : nullptr;
  if (!memory)
    throw Error("cannot allocate " + std::to_string(bytes) + " bytes of " +
                what);
  if (alignment == kHugePage)
    adviseHugePages(memory, size);
  return memory;
}

/// Sizes \p data to \p bytes zeros. A buffer of several megabytes asks for
/// huge pages for its 2 MiB-aligned part before its pages are first touched
/// (reserve, advise, then resize): a training step's products read the
/// weights as they are, and the optimizer streams the weights and its
/// moments through memory, every step; with 4 KiB pages each 4 KiB of a
/// weight's rows is a TLB miss, and a product of 128 rows reading a weight
/// of 768 x 2304 ran 12% slower (bench/RESULTS.md, forty-fourth session).
void resizeOnHugePages(std::vector<uint8_t> &data, uint64_t bytes) {
  if (data.empty() && bytes >= 2 * kHugePage) {
    data.reserve(size_t(bytes));
    adviseHugePages(data.data(), bytes);
  }
  data.resize(size_t(bytes), 0);
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
  if (deviceOps)
    for (auto *slots :
         {&deviceWeights, &deviceInputs, &deviceOutputs, &deviceWorkspace})
      for (auto [memory, bytes] : *slots)
        if (memory)
          deviceOps->release(memory);
  if (handle)
    dlclose(handle);
}

void Model::checkDevice(int code, const std::string &what) const {
  if (code != PCCRT_OK)
    throw Error(what + " failed: " + runErrorName(code));
}

void *Model::deviceBuffer(std::vector<std::pair<void *, uint64_t>> &slots,
                          size_t slot, uint64_t bytes) {
  if (slots.size() <= slot)
    slots.resize(slot + 1, {nullptr, 0});
  auto &[memory, size] = slots[slot];
  if (memory && size == bytes)
    return memory;
  if (memory)
    deviceOps->release(memory);
  memory = nullptr;
  size = 0;
  checkDevice(deviceOps->alloc(&memory, bytes),
              "allocating " + std::to_string(bytes) + " bytes on the device");
  size = bytes;
  return memory;
}

void Model::syncHostState() const {
  if (!deviceOps || !hostStateStale)
    return;
  for (size_t i = 0; i < weights.size(); ++i)
    if (weights[i].kind == PCCRT_KIND_STATE && !weights[i].data.empty() &&
        i < deviceWeights.size() && deviceWeights[i].first)
      checkDevice(deviceOps->download(weights[i].data.data(),
                                      deviceWeights[i].first,
                                      weights[i].data.size()),
                  "reading state " + quote(weights[i].name) +
                      " from the device");
  hostStateStale = false;
}

std::unique_ptr<Model> Model::open(const std::string &libraryPath,
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
  const pccrt_model_info *info = infoFn();
  if (!info)
    fail(libraryPath, symbolPrefix + "_model_info returned null");
  if (info->abi_version != PCCRT_ABI_VERSION)
    fail(libraryPath, "model ABI version " + std::to_string(info->abi_version) +
                          ", runtime expects " +
                          std::to_string(PCCRT_ABI_VERSION));
  validateMesh(*info, libraryPath);
  if (info->prepared_bytes && !info->prepare)
    fail(libraryPath,
         "malformed model info: " + std::to_string(info->prepared_bytes) +
             " prepared bytes and no prepare function");
  if (info->device != PCCRT_DEVICE_HOST) {
    if (info->device != PCCRT_DEVICE_CUDA)
      fail(libraryPath,
           "malformed model info: unknown device " + std::to_string(info->device));
    model->deviceOps = reinterpret_cast<const pccrt_device_ops *(*)()>(
        symbol(symbolPrefix + "_device_ops"))();
    if (!model->deviceOps)
      fail(libraryPath, symbolPrefix + "_device_ops returned null");
  }
  // A program without an entries table has one: its tables and
  // <prefix>_model_run.
  if (info->num_entries == 0) {
    auto run = reinterpret_cast<int (*)(const pccrt_context *)>(
        symbol(symbolPrefix + "_model_run"));
    model->entries.push_back({"main", info->num_inputs, info->inputs,
                              info->num_outputs, info->outputs,
                              info->workspace_bytes, run});
  } else if (info->num_entries < 0 || !info->entries ||
             info->entries[0].inputs != info->inputs ||
             info->entries[0].outputs != info->outputs) {
    fail(libraryPath, "malformed model info: entry 0 is not the model's step");
  } else {
    model->entries.assign(info->entries, info->entries + info->num_entries);
  }
  if (info->stage_workspace_bytes) {
    if (info->stage_axis < 0 || info->stage_axis >= info->mesh_rank)
      fail(libraryPath,
           "malformed model info: stage workspaces without a stage axis");
    for (int64_t s = 0; s < info->mesh_shape[info->stage_axis]; ++s)
      if (info->stage_workspace_bytes[s] > info->workspace_bytes)
        fail(libraryPath, "malformed model info: stage " + std::to_string(s) +
                              "'s workspace exceeds the program's");
  }
  std::unordered_set<std::string> entryNames;
  for (const pccrt_entry_info &entry : model->entries) {
    if (!entry.name || !entry.run || !entryNames.insert(entry.name).second ||
        entry.workspace_bytes > info->workspace_bytes)
      fail(libraryPath, "malformed model info: bad entry " +
                            quote(entry.name ? entry.name : ""));
    validateTable(*info, entry.num_inputs, entry.inputs, "input", libraryPath,
                  PCCRT_KIND_INPUT, PCCRT_KIND_INPUT);
    validateTable(*info, entry.num_outputs, entry.outputs, "output",
                  libraryPath, PCCRT_KIND_OUTPUT, PCCRT_KIND_GRAD);
  }
  validateTable(*info, info->num_weights, info->weights, "weight", libraryPath,
                PCCRT_KIND_CONSTANT, PCCRT_KIND_STATE);
  // Each weight gets its own buffer; two entries of one name would have to
  // share a STATE buffer that two updates write.
  std::unordered_set<std::string> weightNames;
  for (int32_t i = 0; i < info->num_weights; ++i)
    if (!weightNames.insert(info->weights[i].name).second)
      fail(libraryPath, "malformed model info: weight " +
                            quote(info->weights[i].name) + " appears twice");
  model->modelInfo = info;
  return model;
}

std::vector<int64_t> Model::meshOf(const std::string &libraryPath,
                                   const std::string &symbolPrefix) {
  return open(libraryPath, symbolPrefix)->mesh();
}

std::vector<int64_t> Model::mesh() const {
  if (modelInfo->mesh_rank <= 0)
    return {};
  return std::vector<int64_t>(modelInfo->mesh_shape,
                              modelInfo->mesh_shape + modelInfo->mesh_rank);
}

int64_t Model::groupPosition(uint32_t axes) const {
  return comm && axes ? comm->groupPosition(axes) : 0;
}

std::pair<int64_t, int64_t>
Model::heldRows(const pccrt_tensor_info &entry) const {
  std::vector<int64_t> whole = wholeShape(*modelInfo, entry);
  int64_t all = whole.empty() ? 1 : whole[0];
  if (entry.shard_axes == 0 || entry.shard_dim != 0 || entry.shard_groups > 1)
    return {0, all};
  detail::ShardLayout layout = detail::shardLayout(*modelInfo, entry);
  int64_t first = all, last = 0;
  layout.forEachRun(
      groupPosition(entry.shard_axes),
      [&](int64_t, int64_t, int64_t wholeRow, int64_t realRows, int64_t) {
        first = std::min(first, wholeRow);
        last = std::max(last, wholeRow + realRows);
      });
  return first < last ? std::make_pair(first, last - first)
                      : std::make_pair(int64_t(0), int64_t(0));
}

void Model::setRunCommunicator(Communicator *other) {
  // Generated code takes its rank and groups from the context's numbers,
  // which come from `comm`: the two must agree.
  if (other && (!comm || other->rank() != comm->rank() ||
                other->meshShape() != comm->meshShape()))
    throw Error("a run communicator must have the ranks and mesh of the "
                "model's communicator");
  runComm = other;
}

namespace {
/// Reads this rank's part of the split weight \p entry from the whole
/// tensor \p stored of \p file into \p part (zeroed, of the part's size).
/// Reads whole rows in chunks when they are small, so that a weight split
/// along an inner dimension does not take one read per row; each run of
/// the part alone when rows are large.
void readPart(const SafetensorsFile &file, const SafetensorsFile::Entry &stored,
              const ShardLayout &layout, int64_t position, uint8_t *part) {
  constexpr uint64_t kChunkBytes = uint64_t(16) << 20;
  uint64_t outerBytes = uint64_t(layout.real) * layout.rowBytes;
  if (outerBytes == 0)
    return;
  if (outerBytes > kChunkBytes) {
    layout.forEachRun(position, [&](int64_t o, int64_t localRow,
                                    int64_t wholeRow, int64_t realRows,
                                    int64_t) {
      // Runs of padding alone lie past the stored data.
      if (realRows == 0)
        return;
      file.read(stored,
                uint64_t(o) * outerBytes + uint64_t(wholeRow) * layout.rowBytes,
                part + uint64_t(o * layout.local + localRow) * layout.rowBytes,
                uint64_t(realRows) * layout.rowBytes);
    });
    return;
  }
  int64_t perChunk = int64_t(kChunkBytes / outerBytes);
  std::vector<uint8_t> chunk;
  int64_t first = -1;
  layout.forEachRun(position, [&](int64_t o, int64_t localRow, int64_t wholeRow,
                                  int64_t realRows, int64_t) {
    if (realRows == 0)
      return;
    if (first < 0 || o >= first + perChunk) {
      first = o;
      int64_t n = std::min(perChunk, layout.outer - o);
      chunk.resize(uint64_t(n) * outerBytes);
      file.read(stored, uint64_t(o) * outerBytes, chunk.data(), chunk.size());
    }
    std::memcpy(part + uint64_t(o * layout.local + localRow) * layout.rowBytes,
                chunk.data() + uint64_t(o - first) * outerBytes +
                    uint64_t(wholeRow) * layout.rowBytes,
                uint64_t(realRows) * layout.rowBytes);
  });
}

std::string formatMesh(const std::vector<int64_t> &mesh) {
  return formatShape(mesh);
}
} // namespace

namespace {
/// The positive integer in environment variable \p name, else 0.
int32_t positiveEnv(const char *name) {
  const char *text = std::getenv(name);
  long value = text ? std::strtol(text, nullptr, 10) : 0;
  return value > 0 && value < 4096 ? int32_t(value) : 0;
}
} // namespace

int32_t detail::localRanks(int32_t ranks) {
  int32_t local = positiveEnv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!local)
    local = positiveEnv("MPI_LOCALNRANKS");
  return local ? local : std::max(ranks, 1);
}

int32_t detail::threadsPerRank(int32_t ranks) {
  if (int32_t n = positiveEnv("OMP_NUM_THREADS"))
    return n;
  int32_t cores = int32_t(std::thread::hardware_concurrency());
  return std::max(1, cores / localRanks(ranks));
}

detail::ThreadBudget::ThreadBudget(int32_t limit, bool adapt)
    : limit(std::max(limit, 1)), current(std::max(limit, 1)),
      cores(std::max(1, int32_t(std::thread::hardware_concurrency()))),
      adapt(adapt && limit > 1) {
  if (this->adapt && !sample(lastHostBusy, lastOwn))
    this->adapt = false;
  lastTime = std::chrono::steady_clock::now();
}

bool detail::ThreadBudget::sample(uint64_t &hostBusy, uint64_t &own) const {
  // The host: "cpu  user nice system idle iowait irq softirq steal ...".
  FILE *stat = std::fopen("/proc/stat", "r");
  if (!stat)
    return false;
  unsigned long long t[8] = {};
  int read = std::fscanf(stat, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
                         &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6],
                         &t[7]);
  std::fclose(stat);
  if (read < 7)
    return false;
  hostBusy = t[0] + t[1] + t[2] + t[5] + t[6] + t[7];
  // This process: utime and stime, fields 14 and 15, after the command
  // name in parentheses (which may hold spaces).
  std::vector<uint8_t> self;
  try {
    self = readFile("/proc/self/stat");
  } catch (const Error &) {
    return false;
  }
  std::string text(self.begin(), self.end());
  size_t close = text.rfind(')');
  if (close == std::string::npos)
    return false;
  unsigned long long utime = 0, stime = 0;
  if (std::sscanf(text.c_str() + close + 1,
                  " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                  &utime, &stime) != 2)
    return false;
  own = utime + stime;
  return true;
}

int32_t detail::ThreadBudget::threads() {
  if (!adapt)
    return limit;
  auto now = std::chrono::steady_clock::now();
  double seconds = std::chrono::duration<double>(now - lastTime).count();
  if (seconds < 0.25)
    return current;
  uint64_t hostBusy = 0, own = 0;
  if (!sample(hostBusy, own))
    return current;
  // The cores other processes kept busy since the last sample.
  static const double ticksPerSecond = double(sysconf(_SC_CLK_TCK));
  uint64_t hostTicks = hostBusy - lastHostBusy, ownTicks = own - lastOwn;
  double others = hostTicks > ownTicks ? double(hostTicks - ownTicks) /
                                             (seconds * ticksPerSecond)
                                       : 0;
  // A core counts as taken once another process holds most of it.
  int32_t free = cores - int32_t(others + 0.5);
  current = std::clamp(free, 1, limit);
  lastHostBusy = hostBusy;
  lastOwn = own;
  lastTime = now;
  return current;
}

std::unique_ptr<Model> Model::load(const std::string &libraryPath,
                                   const std::string &weightsPath,
                                   const std::string &symbolPrefix,
                                   Communicator *comm) {
  std::unique_ptr<Model> model = open(libraryPath, symbolPrefix);
  const pccrt_model_info *info = model->modelInfo;
  std::vector<int64_t> mesh = model->mesh();
  int64_t ranks =
      meshGroupSize(*info, uint32_t((uint64_t(1) << mesh.size()) - 1));
  if (ranks > 1 && !comm)
    fail(libraryPath, "a program of " + std::to_string(ranks) +
                          " ranks (mesh " + formatMesh(mesh) +
                          ") needs a communicator");
  if (comm && ranks > 1 && comm->meshShape() != mesh)
    fail(libraryPath, "the program's mesh is " + formatMesh(mesh) +
                          ", the communicator's " +
                          formatMesh(comm->meshShape()));
  if (comm && ranks == 1 && comm->numRanks() != 1)
    fail(libraryPath, "a single-rank program cannot run on a communicator of " +
                          std::to_string(comm->numRanks()) + " ranks");
  model->comm = comm;
  // OMP_NUM_THREADS fixes the count; otherwise it follows the cores that
  // other processes leave free.
  model->threadBudget = std::make_unique<detail::ThreadBudget>(
      detail::threadsPerRank(comm ? comm->numRanks() : 1),
      !positiveEnv("OMP_NUM_THREADS"));

  if (info->num_weights == 0)
    return model;
  if (weightsPath.empty())
    fail(libraryPath, "model needs " + std::to_string(info->num_weights) +
                          " weights but no weights file was given");
  SafetensorsFile file(weightsPath);
  // Check every weight against the file before reading any data.
  std::vector<const SafetensorsFile::Entry *> stored;
  for (int32_t i = 0; i < info->num_weights; ++i) {
    const pccrt_tensor_info &expected = info->weights[i];
    // A cache is scratch that starts zeroed: the file does not hold it.
    if (expected.flags & PCCRT_FLAG_CACHE)
      continue;
    std::string label = "weight " + quote(expected.name);
    const SafetensorsFile::Entry *entry = file.find(expected.name);
    if (!entry)
      fail(weightsPath, "missing " + label);
    // The file holds whole tensors, so it fits a model on any mesh. (The
    // reader checked that the data's size fits the header's shape.)
    std::vector<int64_t> shape = wholeShape(*info, expected);
    if (entry->tensor.dtype != expected.dtype || entry->tensor.shape != shape)
      fail(weightsPath,
           label + ": expected shape " + describeType(expected.dtype, shape) +
               ", got " +
               describeType(entry->tensor.dtype, entry->tensor.shape));
    stored.push_back(entry);
  }
  model->weightsPath = weightsPath;
  for (int32_t i = 0; i < info->num_weights; ++i) {
    const pccrt_tensor_info &expected = info->weights[i];
    Tensor &weight = model->weights.emplace_back();
    weight.name = expected.name;
    weight.dtype = expected.dtype;
    weight.shape = shapeOf(expected);
    weight.kind = expected.kind;
    // Another pipeline stage's weight: not read, no memory.
    if (!model->holds(expected))
      continue;
    if (expected.flags & PCCRT_FLAG_CACHE) {
      resizeOnHugePages(weight.data, uint64_t(weight.numElements()) *
                                         dtypeSize(weight.dtype));
      continue;
    }
    weight.data = model->readHeldWeight(file, i);
    // Read only through its prepared operands: prepared now and freed, so
    // that the rank never holds a weight twice.
    if (model->releasesAfterPrepare(i)) {
      model->prepareWeight(i, weight.data.data());
      std::vector<uint8_t>().swap(weight.data);
    }
  }
  // A weight another stage holds, or one freed once prepared, is a null
  // pointer, as the ABI says (the prepare function packs only the weights
  // it is given).
  for (int32_t i = 0; i < info->num_weights; ++i)
    model->weightPointers.push_back(
        model->holds(info->weights[i]) &&
                !(model->releasesAfterPrepare(i) &&
                  model->weights[i].data.empty())
            ? dataPointer(model->weights[i])
            : nullptr);
  if (model->deviceOps)
    // The run reads and updates the device's copies; the host keeps its
    // own for checkpoints and dumps.
    for (size_t i = 0; i < model->weights.size(); ++i) {
      const Tensor &weight = model->weights[i];
      if (weight.data.empty()) {
        model->weightPointers[i] = nullptr;
        continue;
      }
      void *memory = model->deviceBuffer(model->deviceWeights, i,
                                         weight.data.size());
      model->checkDevice(model->deviceOps->upload(memory, weight.data.data(),
                                                  weight.data.size()),
                         "copying weight " + quote(weight.name) +
                             " to the device");
      model->weightPointers[i] = memory;
    }
  return model;
}

std::vector<Tensor> Model::run(const std::vector<Tensor> &inputs) {
  std::vector<Tensor> outputs;
  run(inputs, outputs);
  return outputs;
}

void Model::run(const std::vector<Tensor> &inputs,
                std::vector<Tensor> &outputs) {
  run(0, inputs, outputs);
}

int32_t Model::findEntry(const std::string &name) const {
  for (size_t e = 0; e < entries.size(); ++e)
    if (name == entries[e].name)
      return int32_t(e);
  return -1;
}

void Model::run(int32_t entryIndex, const std::vector<Tensor> &inputs,
                std::vector<Tensor> &outputs) {
  const pccrt_model_info &model = *modelInfo;
  if (entryIndex < 0 || entryIndex >= numEntries())
    throw Error("model has no entry " + std::to_string(entryIndex));
  // The entry's tables; the mesh and the weights are the model's.
  pccrt_model_info info = model;
  const pccrt_entry_info &step = entries[size_t(entryIndex)];
  info.num_inputs = step.num_inputs;
  info.inputs = step.inputs;
  info.num_outputs = step.num_outputs;
  info.outputs = step.outputs;
  // Each entry's device buffers come after the previous entries'.
  size_t inputSlots = 0, outputSlots = 0;
  for (int32_t e = 0; e < entryIndex; ++e) {
    inputSlots += size_t(entries[size_t(e)].num_inputs);
    outputSlots += size_t(entries[size_t(e)].num_outputs);
  }
  std::string what =
      entryIndex ? "entry " + quote(step.name) + " expects " : "model expects ";
  if (inputs.size() != size_t(info.num_inputs))
    throw Error(what + std::to_string(info.num_inputs) + " inputs, got " +
                std::to_string(inputs.size()));
  std::vector<void *> inputPointers;
  // This rank's parts of split inputs; the others are passed as they are.
  std::vector<Tensor> parts(info.num_inputs);
  for (int32_t i = 0; i < info.num_inputs; ++i) {
    const pccrt_tensor_info &entry = info.inputs[i];
    if (std::string problem = wholeMismatch(info, entry, inputs[i]);
        !problem.empty())
      throw Error("input " + quote(entry.name) + ": " + problem);
    // Every rank sees the whole input, so all of them stop here alike.
    if (std::string problem = describeIndexOutOfRange(entry, inputs[i]);
        !problem.empty())
      throw Error("input " + quote(entry.name) + ": " + problem);
    if (entry.shard_axes == 0) {
      inputPointers.push_back(dataPointer(inputs[i]));
      continue;
    }
    parts[i] =
        sliceShard(info, entry, groupPosition(entry.shard_axes), inputs[i]);
    inputPointers.push_back(dataPointer(parts[i]));
  }

  // Storage of the last run is reused: a training step's outputs (its
  // gradients) are as large as the model, and fresh pages cost a fault and
  // a clear each. A gradient that nobody reads gets no buffer at all: the
  // step keeps it in its workspace (ABI 16).
  outputs.resize(info.num_outputs);
  std::vector<void *> outputPointers;
  for (int32_t i = 0; i < info.num_outputs; ++i) {
    Tensor &output = outputs[i];
    output.name = info.outputs[i].name;
    output.kind = info.outputs[i].kind;
    output.dtype = info.outputs[i].dtype;
    output.shape = shapeOf(info.outputs[i]);
    bool unread = output.kind == PCCRT_KIND_GRAD && !outputsRead.empty() &&
                  (size_t(i) >= outputsRead.size() || !outputsRead[size_t(i)]);
    // An output this rank does not hold, or a gradient nobody reads this
    // step, has no buffer (and gives its memory back).
    if (!holds(info.outputs[i]) || unread) {
      std::vector<uint8_t>().swap(output.data);
      outputPointers.push_back(nullptr);
      continue;
    }
    output.data.resize(output.numElements() * dtypeSize(output.dtype));
    outputPointers.push_back(dataPointer(output));
  }

  if (deviceOps) {
    // Inputs go to the device, outputs come back after the run.
    for (int32_t i = 0; i < info.num_inputs; ++i) {
      const Tensor &input =
          info.inputs[i].shard_axes == 0 ? inputs[i] : parts[i];
      void *memory =
          deviceBuffer(deviceInputs, inputSlots + i, input.data.size());
      checkDevice(deviceOps->upload(memory, dataPointer(input),
                                    input.data.size()),
                  "copying input " + quote(info.inputs[i].name) +
                      " to the device");
      inputPointers[i] = memory;
    }
    for (int32_t i = 0; i < info.num_outputs; ++i)
      if (outputPointers[i])
        outputPointers[i] = deviceBuffer(deviceOutputs, outputSlots + i,
                                         outputs[i].data.size());
  } else if (!workspace && workspaceBytes()) {
    workspace.reset(allocateAligned(workspaceBytes(), "workspace"));
  }

  pccrt_context context{};
  context.abi_version = PCCRT_ABI_VERSION;
  context.inputs = inputPointers.data();
  context.outputs = outputPointers.data();
  context.weights = weightPointers.data();
  context.workspace = workspace ? workspace.get() : emptyBuffer;
  if (deviceOps)
    context.workspace = deviceBuffer(deviceWorkspace, 0, workspaceBytes());
  Communicator *codeComm = runComm ? runComm : comm;
  context.rank = comm ? comm->rank() : 0;
  context.num_ranks = comm ? comm->numRanks() : 1;
  context.comm = codeComm ? codeComm->handle() : nullptr;
  context.num_threads = threadBudget ? threadBudget->threads() : 1;
  preparedOperands(context);
  if (tracing) {
    context.trace = &Model::recordAction;
    context.trace_user = this;
  }
  ++runs;
  const char *errorOp = nullptr;
  context.error_op = &errorOp;
  int code = step.run(&context);
  // A failed run may have updated a state and not yet its prepared
  // operands: they are made again before the next.
  if (code != PCCRT_OK)
    preparedValid = false;
  if (code == PCCRT_ERR_COMM && codeComm && !codeComm->lastError().empty())
    throw Error("model run failed: " + codeComm->lastError());
  if (code != PCCRT_OK)
    throw Error("model run failed: " + runErrorName(code) +
                (errorOp ? std::string(" in ") + errorOp : std::string()) +
                " (code " + std::to_string(code) + ")");
  if (deviceOps) {
    hostStateStale = true;
    for (int32_t i = 0; i < info.num_outputs; ++i)
      if (outputPointers[i] &&
          (outputsRead.empty() || (size_t(i) < outputsRead.size() &&
                                   outputsRead[size_t(i)])))
        checkDevice(deviceOps->download(dataPointer(outputs[i]),
                                        outputPointers[i],
                                        outputs[i].data.size()),
                    "copying output " + quote(info.outputs[i].name) +
                        " from the device");
  }
}

std::vector<uint8_t> Model::readHeldWeight(const SafetensorsFile &file,
                                           int32_t index) const {
  const pccrt_tensor_info &expected = modelInfo->weights[index];
  const SafetensorsFile::Entry *found = file.find(expected.name);
  if (!found)
    fail(weightsPath, "missing weight " + quote(expected.name));
  const SafetensorsFile::Entry &stored = *found;
  std::vector<uint8_t> data;
  if (expected.shard_axes == 0) {
    resizeOnHugePages(data, stored.size);
    file.read(stored, 0, data.data(), data.size());
    return data;
  }
  ShardLayout layout = shardLayout(*modelInfo, expected);
  resizeOnHugePages(data, uint64_t(layout.outer) * uint64_t(layout.local) *
                              layout.rowBytes);
  readPart(file, stored, layout, groupPosition(expected.shard_axes),
           data.data());
  return data;
}

bool Model::releasesAfterPrepare(int32_t index) const {
  const pccrt_tensor_info &entry = modelInfo->weights[index];
  return modelInfo->prepared_bytes && !deviceOps &&
         entry.kind == PCCRT_KIND_CONSTANT &&
         (entry.flags & PCCRT_FLAG_PREPARED_ONLY) && holds(entry);
}

void Model::prepareWeight(int32_t index, const void *data) {
  const pccrt_model_info &info = *modelInfo;
  if (!prepared)
    prepared.reset(allocateAligned(info.prepared_bytes, "prepared operands"));
  // The weight alone: the prepare function packs the non-null weights'
  // operands only, and leaves the others' as they are.
  std::vector<void *> pointers(size_t(info.num_weights), nullptr);
  pointers[size_t(index)] = const_cast<void *>(data);
  pccrt_context context{};
  context.abi_version = PCCRT_ABI_VERSION;
  context.weights = pointers.data();
  context.prepared = prepared.get();
  context.rank = comm ? comm->rank() : 0;
  context.num_ranks = comm ? comm->numRanks() : 1;
  context.num_threads = threadBudget ? threadBudget->threads() : 1;
  int code = info.prepare(&context);
  if (code != PCCRT_OK)
    throw Error("preparing the operands of weight " +
                quote(info.weights[index].name) + " failed: " +
                runErrorName(code) + " (code " + std::to_string(code) + ")");
}

void Model::preparedOperands(pccrt_context &context) {
  const pccrt_model_info &info = *modelInfo;
  if (!info.prepared_bytes)
    return;
  if (!prepared) {
    prepared.reset(allocateAligned(info.prepared_bytes, "prepared operands"));
    preparedValid = false;
  }
  context.prepared = prepared.get();
  if (preparedValid)
    return;
  int code = info.prepare(&context);
  if (code != PCCRT_OK)
    throw Error(
        "preparing the operands derived from the model's weights failed: " +
        runErrorName(code) + " (code " + std::to_string(code) + ")");
  preparedValid = true;
}

void Model::prepare() {
  pccrt_context context{};
  context.abi_version = PCCRT_ABI_VERSION;
  context.weights = weightPointers.data();
  context.rank = comm ? comm->rank() : 0;
  context.num_ranks = comm ? comm->numRanks() : 1;
  context.num_threads = threadBudget ? threadBudget->threads() : 1;
  preparedOperands(context);
}

void Model::startTrace() {
  tracing = true;
  events.clear();
  traceStart = std::chrono::steady_clock::now();
}

void Model::recordAction(void *user, const char *action, int32_t begin) {
  auto *self = static_cast<Model *>(user);
  double now = std::chrono::duration<double, std::micro>(
                   std::chrono::steady_clock::now() - self->traceStart)
                   .count();
  if (begin) {
    self->events.push_back({action ? action : "?", now, now, self->runs});
    return;
  }
  // The action that ends is the last one begun with its name.
  for (auto it = self->events.rbegin(); it != self->events.rend(); ++it)
    if (it->name == (action ? action : "?") && it->end == it->begin) {
      it->end = now;
      break;
    }
}

bool Model::holds(const pccrt_tensor_info &entry) const {
  if (entry.holders == 0 || modelInfo->stage_axis < 0)
    return true;
  int64_t stage = groupPosition(uint32_t(1) << modelInfo->stage_axis);
  return stage < 64 && ((entry.holders >> stage) & 1);
}

Tensor Model::fromHolder(const pccrt_tensor_info &entry, Tensor whole) const {
  if (entry.holders == 0 || modelInfo->stage_axis < 0)
    return whole;
  // Every rank passes a block of the whole size (zeros where the tensor is
  // not held); the first holder's is the tensor.
  uint32_t axis = uint32_t(1) << modelInfo->stage_axis;
  int64_t stages = meshGroupSize(*modelInfo, axis);
  int64_t first = 0;
  while (first < 63 && !((entry.holders >> first) & 1))
    ++first;
  std::vector<int64_t> shape = wholeShape(*modelInfo, entry);
  uint64_t bytes = uint64_t(dtypeSize(entry.dtype));
  for (int64_t d : shape)
    bytes *= uint64_t(d);
  whole.data.resize(bytes, 0);
  if (stages > 1) {
    if (!comm)
      throw Error("tensor " + quote(entry.name) +
                  " lives on another stage but the model has no "
                  "communicator");
    constexpr uint64_t kPiece = uint64_t(1) << 28;
    std::vector<uint8_t> gathered;
    for (uint64_t at = 0; at < bytes; at += kPiece) {
      uint64_t n = std::min(kPiece, bytes - at);
      gathered.resize(n * uint64_t(stages));
      comm->allGather(axis, whole.data.data() + at, gathered.data(),
                      int64_t(n), PCCRT_U8);
      std::memcpy(whole.data.data() + at,
                  gathered.data() + uint64_t(first) * n, n);
    }
  }
  whole.name = entry.name;
  whole.dtype = entry.dtype;
  whole.shape = shape;
  whole.kind = entry.kind;
  return whole;
}

namespace {
/// The whole tensor of \p entry from this rank's \p part: all_gather over
/// the entry's group, then the parts joined. Gathered as bytes, in pieces
/// that the backend's int counts can carry.
Tensor gatherWhole(Communicator *comm, const pccrt_model_info &info,
                   const pccrt_tensor_info &entry, const Tensor &part) {
  int64_t size = meshGroupSize(info, entry.shard_axes);
  std::vector<Tensor> parts(size_t(size), part);
  if (size > 1) {
    if (!comm)
      throw Error("tensor " + quote(entry.name) +
                  " is split but the model has no communicator");
    constexpr uint64_t kPiece = uint64_t(1) << 30;
    uint64_t bytes = part.data.size();
    std::vector<uint8_t> gathered;
    for (uint64_t at = 0; at < bytes; at += kPiece) {
      uint64_t n = std::min(kPiece, bytes - at);
      gathered.resize(n * uint64_t(size));
      comm->allGather(entry.shard_axes, part.data.data() + at, gathered.data(),
                      int64_t(n), PCCRT_U8);
      for (int64_t p = 0; p < size; ++p)
        std::memcpy(parts[size_t(p)].data.data() + at,
                    gathered.data() + uint64_t(p) * n, n);
    }
  }
  Tensor whole = joinShards(info, entry, parts);
  whole.kind = part.kind;
  return whole;
}
} // namespace

std::vector<Tensor> Model::gather(const std::vector<Tensor> &outputs) const {
  return gather(0, outputs);
}

std::vector<Tensor> Model::gather(int32_t entryIndex,
                                  const std::vector<Tensor> &outputs) const {
  const pccrt_entry_info &e = entry(entryIndex);
  if (outputs.size() != size_t(e.num_outputs))
    throw Error("model has " + std::to_string(e.num_outputs) +
                " outputs, got " + std::to_string(outputs.size()) +
                " to gather");
  std::vector<Tensor> whole;
  for (int32_t i = 0; i < e.num_outputs; ++i) {
    const pccrt_tensor_info &output = e.outputs[i];
    if (std::string problem = mismatch(output, outputs[i]);
        !problem.empty() && holds(output))
      throw Error("output " + quote(output.name) + ": " + problem);
    whole.push_back(gatherOutput(entryIndex, outputs, i));
  }
  return whole;
}

Tensor Model::gatherOutput(const std::vector<Tensor> &outputs,
                           int32_t i) const {
  return gatherOutput(0, outputs, i);
}

Tensor Model::gatherOutput(int32_t entryIndex,
                           const std::vector<Tensor> &outputs,
                           int32_t i) const {
  const pccrt_tensor_info &entry = this->entry(entryIndex).outputs[i];
  Tensor part = outputs[i];
  if (part.data.empty())
    part.data.resize(part.numElements() * dtypeSize(part.dtype), 0);
  Tensor whole = entry.shard_axes == 0
                     ? fromHolder(entry, std::move(part))
                     : fromHolder(entry, gatherWhole(comm, *modelInfo, entry,
                                                     part));
  whole.name = entry.name;
  return whole;
}

int64_t Model::numStages() const {
  if (modelInfo->stage_axis < 0)
    return 1;
  return meshGroupSize(*modelInfo, uint32_t(1) << modelInfo->stage_axis);
}

int64_t Model::stage() const {
  if (modelInfo->stage_axis < 0)
    return 0;
  return groupPosition(uint32_t(1) << modelInfo->stage_axis);
}

uint64_t Model::workspaceBytes() const {
  if (!modelInfo->stage_workspace_bytes)
    return modelInfo->workspace_bytes;
  return modelInfo->stage_workspace_bytes[stage()];
}

bool Model::holdsOutput(int32_t entryIndex, int32_t i) const {
  const pccrt_entry_info &e = entry(entryIndex);
  if (i < 0 || i >= e.num_outputs)
    throw Error("entry " + quote(e.name) + " has no output " +
                std::to_string(i));
  return holds(e.outputs[i]);
}

Tensor Model::gatherHeldOutput(int32_t entryIndex,
                               const std::vector<Tensor> &outputs,
                               int32_t i) const {
  if (!holdsOutput(entryIndex, i))
    throw Error("output " + std::to_string(i) + " of entry " +
                quote(entry(entryIndex).name) +
                " is not held by this rank's pipeline stage");
  const pccrt_tensor_info &info = entry(entryIndex).outputs[i];
  Tensor whole = info.shard_axes == 0
                     ? outputs[size_t(i)]
                     : gatherWhole(comm, *modelInfo, info, outputs[size_t(i)]);
  whole.name = info.name;
  return whole;
}

Tensor Model::wholeWeight(int32_t index) const {
  syncHostState();
  const pccrt_tensor_info &entry = modelInfo->weights[index];
  Tensor part = weights[index];
  if (part.data.empty() && releasesAfterPrepare(index)) {
    // Freed once prepared: read again.
    part.data = readHeldWeight(SafetensorsFile(weightsPath), index);
  }
  if (part.data.empty())
    part.data.resize(part.numElements() * dtypeSize(part.dtype), 0);
  if (entry.shard_axes == 0)
    return fromHolder(entry, std::move(part));
  return fromHolder(entry, gatherWhole(comm, *modelInfo, entry, part));
}

int32_t Model::findWeight(const std::string &name) const {
  for (int32_t i = 0; i < modelInfo->num_weights; ++i)
    if (name == modelInfo->weights[i].name)
      return i;
  return -1;
}

void Model::setWeight(int32_t index, const Tensor &tensor) {
  if (index < 0 || index >= modelInfo->num_weights)
    throw Error("model has no weight " + std::to_string(index));
  const pccrt_tensor_info &entry = modelInfo->weights[index];
  if (std::string problem = wholeMismatch(*modelInfo, entry, tensor);
      !problem.empty())
    throw Error("weight " + quote(entry.name) + ": " + problem);
  assignWeight(index, tensor);
}

void Model::assignWeight(int32_t index, const Tensor &tensor) {
  const pccrt_tensor_info &entry = modelInfo->weights[index];
  Tensor &weight = weights[index];
  if (!holds(entry))
    return;
  // What the program derived from the weights is made again before the
  // next run.
  preparedValid = false;
  // The host's other state must not be overwritten by a later download.
  syncHostState();
  if (weight.data.empty() && releasesAfterPrepare(index)) {
    // Freed once prepared: held again, since the weights file no longer
    // has its value.
    resizeOnHugePages(weight.data,
                      weight.numElements() * dtypeSize(weight.dtype));
    weightPointers[index] = dataPointer(weight);
  }
  // Copy into the existing buffer, which weightPointers points to (on a
  // device model, the host's copy, which then goes to the device).
  if (entry.shard_axes == 0) {
    if (!tensor.data.empty())
      std::memcpy(weight.data.data(), tensor.data.data(), tensor.data.size());
  } else {
    Tensor part =
        sliceShard(*modelInfo, entry, groupPosition(entry.shard_axes), tensor);
    if (!part.data.empty())
      std::memcpy(weight.data.data(), part.data.data(), part.data.size());
  }
  if (deviceOps && !weight.data.empty())
    checkDevice(deviceOps->upload(weightPointers[index], weight.data.data(),
                                  weight.data.size()),
                "copying weight " + quote(weight.name) + " to the device");
}

bool pccrt::isModelState(const pccrt_tensor_info &weight) {
  return weight.kind == PCCRT_KIND_STATE && !(weight.flags & PCCRT_FLAG_CACHE);
}

bool Model::isTraining() const {
  for (int32_t i = 0; i < modelInfo->num_weights; ++i)
    if (isModelState(modelInfo->weights[i]))
      return true;
  for (int32_t i = 0; i < modelInfo->num_outputs; ++i)
    if (std::string(modelInfo->outputs[i].name) == "loss")
      return true;
  return false;
}

std::vector<Tensor> Model::state() const {
  std::vector<Tensor> whole;
  for (int32_t i = 0; i < modelInfo->num_weights; ++i)
    whole.push_back(wholeWeight(i));
  return whole;
}

void Model::loadState(const std::vector<Tensor> &tensors,
                      const std::string &source) {
  std::string what =
      "checkpoint" + (source.empty() ? std::string() : " " + source);
  std::unordered_map<std::string, const Tensor *> byName;
  for (const Tensor &tensor : tensors)
    byName.emplace(tensor.name, &tensor);
  // Check everything before changing anything.
  std::vector<std::pair<int32_t, const Tensor *>> updates;
  for (int32_t i = 0; i < modelInfo->num_weights; ++i) {
    const pccrt_tensor_info &expected = modelInfo->weights[i];
    if (!isModelState(expected))
      continue;
    auto found = byName.find(expected.name);
    if (found == byName.end())
      throw Error(what + " does not match this model: missing " +
                  quote(expected.name));
    if (std::string problem =
            wholeMismatch(*modelInfo, expected, *found->second);
        !problem.empty())
      throw Error(what + " does not match this model: mismatched " +
                  quote(expected.name) + ": " + problem);
    updates.emplace_back(i, found->second);
  }
  for (auto [index, tensor] : updates)
    assignWeight(index, *tensor);
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

std::vector<Tensor> Model::parameters() const {
  std::vector<std::string> names = parameterNames();
  std::unordered_set<std::string> trained(names.begin(), names.end());
  std::vector<Tensor> whole;
  for (int32_t i = 0; i < modelInfo->num_weights; ++i)
    if (trained.count(modelInfo->weights[i].name))
      whole.push_back(wholeWeight(i));
  return whole;
}

/// `name` without `prefix` where it starts with it.
static std::string withoutPrefix(const std::string &name,
                                 const std::string &prefix) {
  if (!prefix.empty() && name.size() > prefix.size() &&
      name.compare(0, prefix.size(), prefix) == 0)
    return name.substr(prefix.size());
  return name;
}

/// The prefix that `name` has and some weight of `info` lacks, or that a
/// weight has and `name` lacks (the rest equal): what --strip-prefix would
/// take off. Empty when there is none.
static std::string differingPrefix(const pccrt_model_info &info,
                                   const std::string &name) {
  for (int32_t i = 0; i < info.num_weights; ++i) {
    std::string weight = info.weights[i].name;
    const std::string &longer = weight.size() > name.size() ? weight : name;
    const std::string &shorter = weight.size() > name.size() ? name : weight;
    if (shorter.empty() || longer.size() == shorter.size() ||
        longer.compare(longer.size() - shorter.size(), shorter.size(),
                       shorter) != 0)
      continue;
    std::string prefix = longer.substr(0, longer.size() - shorter.size());
    // A whole component ("m.", "model/"), not a piece of a name.
    if (prefix.back() == '.' || prefix.back() == '/')
      return prefix;
  }
  return "";
}

size_t Model::loadParameters(const std::vector<Tensor> &tensors,
                             const std::vector<std::string> &parameters,
                             const std::string &source,
                             const std::string &stripPrefix) {
  std::unordered_map<std::string, const Tensor *> byName;
  for (const Tensor &tensor : tensors)
    byName.emplace(tensor.name, &tensor);
  std::unordered_map<std::string, int32_t> weightIndex;
  for (int32_t i = 0; i < modelInfo->num_weights; ++i)
    weightIndex.emplace(withoutPrefix(modelInfo->weights[i].name, stripPrefix),
                        i);
  // Check everything before changing anything.
  std::vector<std::pair<int32_t, const Tensor *>> updates;
  for (const std::string &name : parameters) {
    auto tensor = byName.find(name);
    if (tensor == byName.end())
      throw Error(source + ": parameter " + quote(name) +
                  " is listed but not stored");
    auto index = weightIndex.find(withoutPrefix(name, stripPrefix));
    if (index == weightIndex.end()) {
      if (std::string prefix = differingPrefix(*modelInfo, name);
          !prefix.empty())
        throw Error(source + ": parameter " + quote(name) +
                    " is not a weight of this model, whose names differ by "
                    "the prefix " +
                    quote(prefix) + " (give --strip-prefix " + prefix + ")");
      throw Error(source + ": parameter " + quote(name) +
                  " is not a weight of this model (a checkpoint of another "
                  "model?)");
    }
    const pccrt_tensor_info &expected = modelInfo->weights[index->second];
    if (std::string problem =
            wholeMismatch(*modelInfo, expected, *tensor->second);
        !problem.empty())
      throw Error(source + ": parameter " + quote(name) +
                  " does not fit this model: " + problem);
    updates.emplace_back(index->second, tensor->second);
  }
  for (auto [index, tensor] : updates)
    assignWeight(index, *tensor);
  return updates.size();
}

std::string Model::fingerprint() const {
  // Sorted by name: the order of the weights table does not matter to a
  // checkpoint, which binds by name. Whole shapes: a checkpoint fits the
  // model on any number of ranks.
  std::vector<std::string> entries;
  for (int32_t i = 0; i < modelInfo->num_weights; ++i) {
    const pccrt_tensor_info &w = modelInfo->weights[i];
    if (isModelState(w))
      entries.push_back(std::string(w.name) + '\0' +
                        describeType(w.dtype, wholeShape(*modelInfo, w)));
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

std::string pccrt::describeIndexOutOfRange(const pccrt_tensor_info &entry,
                                           const Tensor &tensor) {
  int64_t bound = entry.index_bound;
  if (bound <= 0 || (tensor.dtype != PCCRT_I64 && tensor.dtype != PCCRT_I32))
    return "";
  size_t width = tensor.dtype == PCCRT_I64 ? 8 : 4;
  int64_t count = int64_t(tensor.data.size() / width);
  for (int64_t e = 0; e < count; ++e) {
    int64_t value;
    if (width == 8) {
      std::memcpy(&value, tensor.data.data() + e * 8, 8);
    } else {
      int32_t narrow;
      std::memcpy(&narrow, tensor.data.data() + e * 4, 4);
      value = narrow;
    }
    if (value >= -bound && value < bound)
      continue;
    // The element's coordinates, major to minor.
    std::vector<int64_t> at(tensor.shape.size());
    int64_t rest = e;
    for (size_t d = tensor.shape.size(); d-- > 0;) {
      int64_t extent = std::max<int64_t>(tensor.shape[d], 1);
      at[d] = rest % extent;
      rest /= extent;
    }
    std::string where;
    for (size_t d = 0; d < at.size(); ++d)
      where += (d ? ", " : "") + std::to_string(at[d]);
    return "element [" + where + "] is " + std::to_string(value) +
           ", outside the " + std::to_string(bound) + " positions that node " +
           quote(entry.index_of ? entry.index_of : "?") + " reads (valid: " +
           std::to_string(-bound) + " to " + std::to_string(bound - 1) + ")";
  }
  return "";
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
    if (std::string problem = wholeMismatch(info, info.inputs[index], tensor);
        !problem.empty())
      fail(file, label + ": " + problem);
    tensor.name = info.inputs[index].name;
    bound[index] = std::move(tensor);
    isBound[index] = true;
  };

  auto endsWith = [](const std::string &file, const std::string &suffix) {
    return file.size() >= suffix.size() &&
           file.compare(file.size() - suffix.size(), suffix.size(), suffix) ==
               0;
  };
  for (const std::string &file : files) {
    if (endsWith(file, ".safetensors")) {
      anySafetensors = true;
      for (Tensor &tensor : readSafetensors(file))
        for (size_t i = 0; i < numInputs; ++i)
          if (tensor.name == info.inputs[i].name) {
            bind(i, std::move(tensor), file);
            break;
          }
      continue;
    }
    if (endsWith(file, ".onnx"))
      fail(file, "an ONNX model, not an input tensor: --input takes "
                 "TensorProto (.pb) or .safetensors files (the model is "
                 "pcc compile's)");
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
  // Nothing is created before the run succeeds: the folder, or the nearest
  // of its parents that exists, must be a folder that takes a file.
  std::filesystem::path existing(dir.empty() ? "." : dir);
  std::error_code error;
  while (!std::filesystem::exists(existing, error) &&
         existing.has_parent_path() && existing != existing.parent_path())
    existing = existing.parent_path();
  if (!std::filesystem::exists(existing, error))
    existing = ".";
  if (!std::filesystem::is_directory(existing, error))
    fail(dir, "cannot create directory: " + quote(existing.string()) +
                  " is not a folder");
  checkWritableFile((existing / "outputs.safetensors").string());
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
