//===- GemmPairs.h - Two versions of the packed GEMM in one process -------===//
//
// bench/gemm-pairs.sh compiles GemmPairsSide.cpp twice, once with each
// version of pcc_kernels.cpp, each in a namespace of its own, and links
// both with GemmBench.cpp built with PCC_GEMM_PAIRS, which calls them in
// turns through these two functions.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_BENCH_GEMMPAIRS_H
#define PCC_BENCH_GEMMPAIRS_H

#include "HugePages.h"

#include <cstdint>

namespace gemm_pairs {
/// A product C = op(A) op(B), as pcc-bench-gemm's shapes give it.
struct Product {
  int64_t m, n, k;
  const float *a;
  int64_t lda;
  bool transA;
  const float *b;
  int64_t ldb;
  bool transB;
  bool prepared;
  float *c;
  int threads;
  float beta = 0.0f;
  /// Copies of a prepared B that each side keeps (over 256 MB where the
  /// shape is `cold`, so that every call reads its B from memory), and the
  /// one this call reads.
  int64_t copies = 1, copy = 0;
};

/// Runs `product` on the base version (the git revision) or the new one
/// (the working tree); a prepared B is packed into `packed` on the first
/// call, in `product.copies` copies.
void runBase(const Product &product, pcc_bench::Floats &packed);
void runNew(const Product &product, pcc_bench::Floats &packed);
} // namespace gemm_pairs

#endif // PCC_BENCH_GEMMPAIRS_H
