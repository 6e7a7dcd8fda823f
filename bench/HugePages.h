//===- HugePages.h - Benchmark memory on transparent huge pages -----------===//
//
// The allocator of the GEMM benchmarks' operands (GemmBench.cpp, and both
// sides of bench/gemm-pairs.sh).
//
//===----------------------------------------------------------------------===//

#ifndef PCC_BENCH_HUGEPAGES_H
#define PCC_BENCH_HUGEPAGES_H

#include <cstddef>
#include <cstdlib>
#include <new>
#include <sys/mman.h>
#include <vector>

namespace pcc_bench {
/// Memory of several megabytes on transparent huge pages, as the runtime
/// holds a model's weights, workspace and prepared operands (Model.cpp):
/// with 4 KiB pages B's rows, read as they are, are a TLB miss each, and
/// the products that read them timed 10-20% slower here than in a model.
template <typename T> struct HugePages {
  using value_type = T;
  HugePages() = default;
  template <typename U> HugePages(const HugePages<U> &) {}
  T *allocate(size_t n) {
    constexpr size_t kHugePage = size_t(2) << 20;
    size_t bytes = n * sizeof(T);
    size_t alignment = bytes >= 2 * kHugePage ? kHugePage : 64;
    void *p = std::aligned_alloc(alignment, (bytes + alignment - 1) /
                                                alignment * alignment);
    if (!p)
      throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (alignment == kHugePage)
      (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return static_cast<T *>(p);
  }
  void deallocate(T *p, size_t) { std::free(p); }
  template <typename U> bool operator==(const HugePages<U> &) const {
    return true;
  }
  template <typename U> bool operator!=(const HugePages<U> &) const {
    return false;
  }
};
using Floats = std::vector<float, HugePages<float>>;
} // namespace pcc_bench

#endif // PCC_BENCH_HUGEPAGES_H
