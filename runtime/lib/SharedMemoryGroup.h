//===- SharedMemoryGroup.h - Collectives through a host's memory -*- C++
//-*-===//
//
// Collectives among the ranks of a group that all run on one host, through
// a mapping they share: each rank copies its data into its own slots, waits
// at a barrier, and reads the others' slots. A reduction is cut into
// chunks of a slot; within a chunk each rank sums one segment, the others'
// inputs in rank order, so every rank gets the same bits, and copies the
// other segments from their owners. It is what NCCL's and the MPI
// libraries' shared-memory transports do within a node; Open MPI's
// all-reduce of large buffers ran at a quarter of this speed on a 2-core
// virtual machine (bench/RESULTS.md, thirty-sixth session).
//
// The group owns no memory of its own: its creator (the MPI communicator)
// maps the segment, which every member must map before any collective,
// and zeroes it. Slots come in two sets, used by turns, so that one barrier
// a chunk suffices: a rank writes a set again only after the barrier of
// the chunk in between, which the others reach once they have read it.
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_LIB_SHAREDMEMORYGROUP_H
#define PCCRT_LIB_SHAREDMEMORYGROUP_H

#include "pccrt/Comm.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace pccrt::detail {

class SharedMemoryGroup {
public:
  /// Bytes of one slot: a chunk of a rank's data (1 MiB ran fastest on
  /// the 2-core VM, against 4 and 16 MiB, which leave the cache).
  static constexpr size_t kSlotBytes = size_t(1) << 20;

  /// Bytes of the shared segment of a group of `members` ranks.
  static size_t segmentBytes(int members);

  /// The group over `segment` (segmentBytes(members) bytes, zeroed before
  /// any member uses it), as seen by member `position`. A member waiting at
  /// a barrier polls `spins` times before it sleeps: some thousands where
  /// every member has a core of its own, none where they share cores.
  /// While it waits it calls `progress` now and then, as a blocking MPI
  /// collective moves the rank's other transfers on while it waits (a
  /// send that another member's receive needs before it can join).
  SharedMemoryGroup(void *segment, int position, int members, int spins,
                    std::function<void()> progress);

  /// Whether the group reduces `dtype` with `reduction` (the float and
  /// 32- or 64-bit integer types; sum, mean, max and min); others go to the
  /// communicator's own path. A mean is a sum here, as MPI's.
  static bool reduces(int32_t dtype, int32_t reduction);

  /// Whether collective `op` of `bytes` (a member's data) is faster here
  /// than through Open MPI, which copies between the processes directly
  /// where each chunk here goes through the slots. Measured by
  /// bench/comm.sh on the 2-core VM, here against Open MPI: all-reduces of
  /// 384 KB 0.15 against 0.11 ms, of 1.5 MB 0.35 against 0.34, of 25 MB
  /// 5.4 against 11.1; all-gathers of 384 KB 0.29 against 0.10, of 25 MB
  /// 11.7 against 12.9; reduce-scatters (of which Open MPI's are slow) of
  /// every size faster, 384 KB in 0.05 against 0.31 ms.
  static bool pays(CommOp op, uint64_t bytes) {
    return op == CommOp::ReduceScatter || bytes >= 4 * kSlotBytes;
  }

  /// `count` elements reduced in place over the group.
  void allReduce(void *data, int64_t count, int32_t dtype, int32_t reduction);
  /// Block `position` (of `count` elements) of the reduction of every
  /// member's `in` (members blocks) into `out`.
  void reduceScatter(const void *in, void *out, int64_t count, int32_t dtype,
                     int32_t reduction);
  /// Every member's `count` elements of `in`, in member order, into `out`.
  void allGather(const void *in, void *out, int64_t count, size_t elementBytes);

private:
  /// Returns once every member has called it as often.
  void barrier();
  /// Member `member`'s slot in the set the next chunk uses.
  unsigned char *slot(int member) const;
  /// Flips the set the next chunk uses.
  void nextSet() { set ^= 1; }

  struct Control;
  Control *control;
  unsigned char *slots;
  int position, members, spins;
  std::function<void()> progress;
  int set = 0;
  /// The inputs of a segment's combination, one per member.
  std::vector<const unsigned char *> sources;
};

} // namespace pccrt::detail

#endif // PCCRT_LIB_SHAREDMEMORYGROUP_H
