//===- GemmPairsSide.cpp - One version of the packed GEMM -----------------===//
//
// Compiled once per version by bench/gemm-pairs.sh: PCC_GEMM_KERNELS names
// that version's pcc_kernels.cpp, which is compiled here in the namespace
// PCC_GEMM_NAMESPACE (its header with it, from the same folder), and
// PCC_GEMM_RUN is gemm_pairs::runBase or runNew.
//
//===----------------------------------------------------------------------===//

#include "GemmPairs.h"

#define pcc_k PCC_GEMM_NAMESPACE
#include PCC_GEMM_KERNELS

#include <algorithm>

void gemm_pairs::PCC_GEMM_RUN(const Product &p, pcc_bench::Floats &packed) {
  PCC_GEMM_NAMESPACE::setThreads(p.threads);
  size_t elements = size_t(PCC_GEMM_NAMESPACE::packedBElements(p.k, p.n));
  if (p.prepared && packed.empty()) {
    packed.resize(elements * size_t(p.copies));
    PCC_GEMM_NAMESPACE::packB(p.k, p.n, p.b, p.ldb, p.transB, packed.data());
    for (int64_t i = 1; i < p.copies; ++i)
      std::copy(packed.begin(), packed.begin() + elements,
                packed.begin() + i * elements);
  }
  bool parallel =
      p.threads > 1 && PCC_GEMM_NAMESPACE::parallelProduct(p.m, p.n, p.k);
  PCC_GEMM_NAMESPACE::packed::product(p.m, p.n, p.k, 1.0f, p.a, p.lda, p.transA,
                                      p.prepared ? packed.data() + size_t(p.copy) * elements
                                                 : nullptr, p.b,
                                      p.ldb, p.transB, p.beta, p.c, p.n, nullptr,
                                      nullptr, parallel);
}
