//===- SharedMemoryGroup.cpp - Collectives through a host's memory --------===//

#include "SharedMemoryGroup.h"

#include "pccrt/Runtime.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <ctime>
#include <thread>
#include <utility>
#include <vector>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

using namespace pccrt;
using namespace pccrt::detail;

/// The barrier's words, each on its own cache line, in the segment's first
/// page: the members that have arrived, the barrier's count of openings
/// (which waiters sleep on), and how many of them sleep.
struct SharedMemoryGroup::Control {
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;
  alignas(64) std::atomic<uint32_t> sleepers;
};

namespace {
constexpr size_t kControlBytes = 4096;
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the barrier's words are shared between processes");

/// Sleeps while `*word` holds `expected` (or for at most a millisecond:
/// the loop around it moves the rank's transfers on and tests again).
void sleepWhile(std::atomic<uint32_t> *word, uint32_t expected) {
#ifdef __linux__
  // Not FUTEX_PRIVATE_FLAG: the word is in a mapping other processes
  // share.
  timespec timeout{0, 1000 * 1000};
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT, expected,
          &timeout, nullptr, 0);
#else
  (void)word, (void)expected;
  std::this_thread::yield();
#endif
}

void wakeAll(std::atomic<uint32_t> *word) {
#ifdef __linux__
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE, INT_MAX,
          nullptr, nullptr, 0);
#else
  (void)word;
#endif
}

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// `out` = sources[0] op sources[1] op ..., element by element, in that
/// order (so every member that combines a segment gets the same bits), and
/// the same into `copy` where it is given, in the last pass: `copy` may be
/// one of the sources (a member's own data), which each element of that
/// pass reads before it writes it.
template <typename T, typename Op>
void combine(T *__restrict out, T *copy, const unsigned char *const *sources,
             int count, int64_t n, Op op) {
  auto source = [&](int s) { return reinterpret_cast<const T *>(sources[s]); };
  const T *first = source(0);
  for (int s = 1; s < count; ++s) {
    const T *next = source(s);
    if (s + 1 < count || !copy) {
      for (int64_t i = 0; i < n; ++i)
        out[i] = op(s == 1 ? first[i] : out[i], next[i]);
      continue;
    }
    for (int64_t i = 0; i < n; ++i) {
      T v = op(s == 1 ? first[i] : out[i], next[i]);
      out[i] = v;
      copy[i] = v;
    }
  }
}

template <typename T>
void combineAs(int32_t reduction, void *out, void *copy,
               const unsigned char *const *sources, int count, int64_t n) {
  T *o = static_cast<T *>(out);
  T *c = static_cast<T *>(copy);
  switch (reduction) {
  case PCCRT_REDUCE_SUM:
  case PCCRT_REDUCE_MEAN:
    return combine<T>(o, c, sources, count, n,
                      [](T a, T b) { return T(a + b); });
  case PCCRT_REDUCE_MAX:
    return combine<T>(o, c, sources, count, n,
                      [](T a, T b) { return std::max(a, b); });
  default:
    return combine<T>(o, c, sources, count, n,
                      [](T a, T b) { return std::min(a, b); });
  }
}

void combineAny(int32_t dtype, int32_t reduction, void *out, void *copy,
                const unsigned char *const *sources, int count, int64_t n) {
  switch (dtype) {
  case PCCRT_F32:
    return combineAs<float>(reduction, out, copy, sources, count, n);
  case PCCRT_F64:
    return combineAs<double>(reduction, out, copy, sources, count, n);
  case PCCRT_I32:
    return combineAs<int32_t>(reduction, out, copy, sources, count, n);
  case PCCRT_I64:
    return combineAs<int64_t>(reduction, out, copy, sources, count, n);
  case PCCRT_U32:
    return combineAs<uint32_t>(reduction, out, copy, sources, count, n);
  default:
    return combineAs<uint64_t>(reduction, out, copy, sources, count, n);
  }
}
} // namespace

size_t SharedMemoryGroup::segmentBytes(int members) {
  return kControlBytes + 2 * size_t(members) * kSlotBytes;
}

SharedMemoryGroup::SharedMemoryGroup(void *segment, int position, int members,
                                     int spins, std::function<void()> progress)
    : control(static_cast<Control *>(segment)),
      slots(static_cast<unsigned char *>(segment) + kControlBytes),
      position(position), members(members), spins(spins),
      progress(std::move(progress)), sources(size_t(members)) {
  static_assert(sizeof(Control) <= kControlBytes);
}

bool SharedMemoryGroup::reduces(int32_t dtype, int32_t reduction) {
  bool type = dtype == PCCRT_F32 || dtype == PCCRT_F64 || dtype == PCCRT_I32 ||
              dtype == PCCRT_I64 || dtype == PCCRT_U32 || dtype == PCCRT_U64;
  bool kind = reduction == PCCRT_REDUCE_SUM || reduction == PCCRT_REDUCE_MEAN ||
              reduction == PCCRT_REDUCE_MAX || reduction == PCCRT_REDUCE_MIN;
  return type && kind;
}

unsigned char *SharedMemoryGroup::slot(int member) const {
  return slots + (size_t(set) * size_t(members) + size_t(member)) * kSlotBytes;
}

void SharedMemoryGroup::barrier() {
  uint32_t generation = control->generation.load(std::memory_order_acquire);
  if (control->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 ==
      uint32_t(members)) {
    // The last to arrive opens the barrier; a member that passes it
    // arrives at the next only after this reset.
    control->arrived.store(0, std::memory_order_relaxed);
    control->generation.store(generation + 1, std::memory_order_seq_cst);
    if (control->sleepers.load(std::memory_order_seq_cst) != 0)
      wakeAll(&control->generation);
    return;
  }
  for (int i = 0; i < spins; ++i) {
    if (control->generation.load(std::memory_order_acquire) != generation)
      return;
    if (progress && i % 1024 == 1023)
      progress();
    relax();
  }
  // Counted before the test, so the opener either sees this sleeper or
  // this test sees its opening.
  control->sleepers.fetch_add(1, std::memory_order_seq_cst);
  while (control->generation.load(std::memory_order_seq_cst) == generation) {
    if (progress)
      progress();
    sleepWhile(&control->generation, generation);
  }
  control->sleepers.fetch_sub(1, std::memory_order_relaxed);
}

void SharedMemoryGroup::allReduce(void *data, int64_t count, int32_t dtype,
                                  int32_t reduction) {
  size_t size = dtypeSize(dtype);
  int64_t chunk = int64_t(kSlotBytes / size);
  // Segments are whole cache lines, so that no two members write one.
  int64_t line = std::max<int64_t>(1, int64_t(64 / size));
  auto *bytes = static_cast<unsigned char *>(data);
  for (int64_t first = 0; first < count; first += chunk) {
    int64_t n = std::min(chunk, count - first);
    int64_t share = ((n + members - 1) / members + line - 1) / line * line;
    auto begin = [&](int member) {
      return std::min<int64_t>(n, int64_t(member) * share);
    };
    unsigned char *x = bytes + first * int64_t(size);
    unsigned char *mine = slot(position);
    // The others' segments of this chunk, for them to combine.
    for (int m = 0; m < members; ++m)
      if (m != position)
        std::memcpy(mine + begin(m) * size, x + begin(m) * size,
                    size_t(begin(m + 1) - begin(m)) * size);
    barrier();
    // This member's segment: every member's part, in member order, into
    // this member's slot (where no member wrote it) and into `data`.
    int64_t from = begin(position), to = begin(position + 1);
    if (to > from) {
      for (int m = 0; m < members; ++m)
        sources[size_t(m)] =
            (m == position ? x : slot(m)) + from * int64_t(size);
      combineAny(dtype, reduction, mine + from * size, x + from * size,
                 sources.data(), members, to - from);
    }
    barrier();
    for (int m = 0; m < members; ++m)
      if (m != position)
        std::memcpy(x + begin(m) * size, slot(m) + begin(m) * size,
                    size_t(begin(m + 1) - begin(m)) * size);
    nextSet();
  }
}

void SharedMemoryGroup::reduceScatter(const void *in, void *out, int64_t count,
                                      int32_t dtype, int32_t reduction) {
  size_t size = dtypeSize(dtype);
  // Each member's slot holds a chunk of every block.
  int64_t chunk =
      std::max<int64_t>(1, int64_t(kSlotBytes / size / size_t(members)));
  auto *input = static_cast<const unsigned char *>(in);
  auto *output = static_cast<unsigned char *>(out);
  for (int64_t first = 0; first < count; first += chunk) {
    int64_t n = std::min(chunk, count - first);
    unsigned char *mine = slot(position);
    auto block = [&](int member) {
      return input + (int64_t(member) * count + first) * int64_t(size);
    };
    for (int m = 0; m < members; ++m)
      if (m != position)
        std::memcpy(mine + m * n * int64_t(size), block(m), size_t(n) * size);
    barrier();
    for (int m = 0; m < members; ++m)
      sources[size_t(m)] = m == position
                               ? block(position)
                               : slot(m) + position * n * int64_t(size);
    combineAny(dtype, reduction, output + first * int64_t(size), nullptr,
               sources.data(), members, n);
    nextSet();
  }
}

void SharedMemoryGroup::allGather(const void *in, void *out, int64_t count,
                                  size_t elementBytes) {
  int64_t chunk = int64_t(kSlotBytes / elementBytes);
  auto *input = static_cast<const unsigned char *>(in);
  auto *output = static_cast<unsigned char *>(out);
  int64_t width = int64_t(elementBytes);
  for (int64_t first = 0; first < count; first += chunk) {
    int64_t n = std::min(chunk, count - first);
    std::memcpy(slot(position), input + first * width, size_t(n * width));
    barrier();
    for (int m = 0; m < members; ++m) {
      unsigned char *to = output + (int64_t(m) * count + first) * width;
      const unsigned char *from =
          m == position ? input + first * width : slot(m);
      if (to != from)
        std::memcpy(to, from, size_t(n * width));
    }
    nextSet();
  }
}
