//===- Internal.h - Helpers shared by the runtime's sources -----*- C++ -*-===//
//
// Not installed: only the runtime's own sources include this.
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_LIB_INTERNAL_H
#define PCCRT_LIB_INTERNAL_H

#include "pccrt/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

// Tensor bytes are copied between files and generated code without swapping.
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pccrt supports little-endian hosts only"
#endif

namespace pccrt::detail {

/// The 16-bit float formats, widened exactly and narrowed to the nearest
/// (ties to even; NaN stays NaN).
float halfToFloat(uint16_t h);
float bfloatToFloat(uint16_t b);
uint16_t floatToHalf(float f);
uint16_t floatToBfloat(float f);

/// No tensor may be larger: it bounds what a corrupt header can allocate.
constexpr uint64_t kMaxTensorBytes = uint64_t(16) << 30;

/// Throws Error("<what>: <cause>").
[[noreturn]] void fail(const std::string &what, const std::string &cause);

/// \p s in single quotes with control characters escaped, so that names
/// taken from untrusted files keep error messages on one line.
std::string quote(const std::string &s);

/// Bytes taken by a tensor of \p dtype and \p shape; throws (naming \p what)
/// for an unknown dtype, a negative extent or more than kMaxTensorBytes.
uint64_t checkedByteSize(int32_t dtype, const std::vector<int64_t> &shape,
                         const std::string &what);

/// Throws (naming \p what) unless \p tensor's data has exactly the bytes
/// its dtype and shape take.
void checkDataSize(const Tensor &tensor, const std::string &what);

std::vector<uint8_t> readFile(const std::string &path);

/// The ranks of a program of \p ranks on this host: what Open MPI or MPICH
/// says, else all of them.
int32_t localRanks(int32_t ranks);
/// The threads each rank's loops and GEMMs use: OMP_NUM_THREADS when set,
/// else this host's cores shared among its ranks.
int32_t threadsPerRank(int32_t ranks);

/// The threads a run may use: at most `limit` (threadsPerRank), and no
/// more than the cores that other processes leave free, so that the
/// generated code's threads never spin for a core another process holds
/// (a thread waiting at a barrier for a descheduled one). The host's load
/// is sampled from /proc at most four times a second, between runs; without
/// /proc, or when OMP_NUM_THREADS fixes the count, it is `limit`.
class ThreadBudget {
public:
  ThreadBudget(int32_t limit, bool adapt);
  int32_t threads();

private:
  /// The host's busy time (/proc/stat's first line: user, nice, system,
  /// irq, softirq, steal) and this process's (its utime and stime), in
  /// clock ticks.
  bool sample(uint64_t &hostBusy, uint64_t &own) const;

  int32_t limit = 1, current = 1, cores = 1;
  bool adapt = false;
  uint64_t lastHostBusy = 0, lastOwn = 0;
  std::chrono::steady_clock::time_point lastTime;
};

/// A safetensors file whose header is read and checked when it is opened
/// and whose tensors are read on demand, so that a rank reads only its part
/// of each weight and nothing is held twice.
class SafetensorsFile {
public:
  /// A header entry: the tensor without its data, and where the data lies.
  struct Entry {
    Tensor tensor;
    uint64_t begin, size;
  };

  /// Throws an Error naming \p path if it cannot be read or is malformed.
  explicit SafetensorsFile(
      const std::string &path,
      std::map<std::string, std::string> *metadata = nullptr);

  const std::string &path() const { return filePath; }
  /// In the header's order.
  const std::vector<Entry> &entries() const { return list; }
  /// The entry named \p name, or null.
  const Entry *find(const std::string &name) const;
  /// Reads \p size bytes at \p offset of \p entry's data.
  void read(const Entry &entry, uint64_t offset, void *buffer,
            size_t size) const;
  Tensor readTensor(const Entry &entry) const;

private:
  void readAt(uint64_t offset, void *buffer, size_t size) const;

  std::string filePath;
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> file;
  uint64_t dataStart = 0;
  std::vector<Entry> list;
  std::unordered_map<std::string, size_t> byName;
};

/// How an entry of a model's tables lies over the ranks of its group
/// (pccrt.h), in rows: one index of the split dimension, `rowBytes` bytes.
/// A whole entry is one rank's group of one.
struct ShardLayout {
  int64_t outer = 1;     ///< product of the extents before the split one
  uint64_t rowBytes = 0; ///< bytes of one index of the split dimension
  int64_t local = 0;     ///< this rank's extent
  int64_t whole = 0;     ///< local x group size, padding included
  int64_t real = 0;      ///< the extent files hold: whole less padding
  int64_t groups = 1;
  int64_t size = 1; ///< ranks in the group
  /// The group's axes, in the mesh's order, and whether each nests the
  /// others' blocks (shard_outer_axes).
  std::vector<std::pair<int64_t, bool>> axes;

  /// The block that the rank at \p position of the group (row-major over
  /// its axes in the mesh's order) holds: row-major over the outer axes,
  /// then the others.
  int64_t blockOf(int64_t position) const {
    std::vector<int64_t> coordinate(axes.size());
    for (size_t i = axes.size(); i-- > 0;) {
      coordinate[i] = position % axes[i].first;
      position /= axes[i].first;
    }
    int64_t block = 0;
    for (bool outerFirst : {true, false})
      for (size_t i = 0; i < axes.size(); ++i)
        if (axes[i].second == outerFirst)
          block = block * axes[i].first + coordinate[i];
    return block;
  }

  /// Calls fn(o, localRow, wholeRow, realRows, rows) for each contiguous
  /// run of rows that the rank at \p position of the group holds: `rows`
  /// rows at `localRow` of outer index `o` of its part are rows
  /// `wholeRow...` of the whole tensor, of which the first `realRows` are
  /// real, the rest padding.
  template <typename F> void forEachRun(int64_t position, F fn) const {
    position = blockOf(position);
    int64_t rows = local / groups, stride = whole / groups;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t g = 0; g < groups; ++g) {
        int64_t wholeRow = g * stride + position * rows;
        int64_t realRows =
            std::max<int64_t>(0, std::min<int64_t>(rows, real - wholeRow));
        fn(o, g * rows, wholeRow, realRows, rows);
      }
  }
};

/// The layout of \p entry, whose sharding fields were validated against
/// \p info's mesh.
ShardLayout shardLayout(const pccrt_model_info &info,
                        const pccrt_tensor_info &entry);

} // namespace pccrt::detail

#endif // PCCRT_LIB_INTERNAL_H
