//===- Avx2Main.cpp - The packed GEMM's tests as an AVX2 build runs them --===//
//
// PCCPackedGemmAvx2Tests builds the kernels for AVX2 and FMA without
// AVX-512, as pcc builds generated code for such a processor: 6-row panels
// of 8-lane vectors, whose packing and micro-kernels the host's AVX-512
// build never runs. On a processor without AVX2 the test is skipped (exit
// 77, ctest's SKIP_RETURN_CODE).
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char **argv) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::puts("PCCPackedGemmAvx2Tests: this processor has no AVX2 and FMA");
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
