//===- PackedGemmTest.cpp - pcc_k's GEMM over packed operands -------------===//
//
// pcc_k's float products against a plain triple loop in double: gemmPackedB
// (B prepared by packB) and gemm (both operands packed per call, either
// transposed), over shapes that end inside a micro-panel, a panel group, a
// K-block and a block of rows, with alpha and beta as the emitter passes
// them, and with an epilogue, which must see each element of C once,
// finished. Built twice: portably (the plain C++ micro-kernel, one thread)
// and for the host with OpenMP (the AVX-512 or AVX2 micro-kernel where the
// host has it, two threads).
//
//===----------------------------------------------------------------------===//

#include "pcc_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

struct Shape {
  int64_t m, n, k;
};

/// An epilogue that copies C's finished elements into `out` (n apart) as
/// 2 * c + 1 and counts its visits of each.
struct Epilogue {
  const float *c;
  int64_t ldc, n;
  std::vector<float> out;
  std::vector<int> visits;

  static void run(void *const *args, int64_t r0, int64_t r1, int64_t c0,
                  int64_t c1) {
    auto *self = static_cast<Epilogue *>(args[0]);
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = c0; j < c1; ++j) {
        self->out[size_t(i * self->n + j)] = 2 * self->c[i * self->ldc + j] + 1;
        ++self->visits[size_t(i * self->n + j)];
      }
  }
};

/// Checks C = alpha * op(A) * op(B) + beta * C: through gemmPackedB where
/// B is `prepared` (A not transposed), through gemm otherwise. Where
/// `alignedC`, C's rows are whole cache lines apart and start on one, as a
/// workspace's buffers do (a weight gradient's C large enough is then
/// stored past the caches).
void checkProduct(Shape s, bool transA, bool transB, float alpha, float beta,
                  bool prepared, bool withEpilogue = false,
                  bool alignedC = false, bool byTranspose = false) {
  std::mt19937 gen(unsigned(s.m * 7919 + s.n * 131 + s.k));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Leading dimensions larger than the extents, as views of wider buffers.
  int64_t lda = (transA ? s.m : s.k) + 3, ldb = (transB ? s.k : s.n) + 5,
          ldc = alignedC ? (s.n + 15) / 16 * 16 + 16 : s.n + 2;
  std::vector<float> a(size_t((transA ? s.k : s.m) * lda)),
      b(size_t((transB ? s.n : s.k) * ldb)), cBuffer(size_t(s.m * ldc + 16));
  float *cStart = cBuffer.data();
  while (alignedC && reinterpret_cast<uintptr_t>(cStart) % 64)
    ++cStart;
  std::vector<float> c(size_t(s.m * ldc));
  for (float &v : a)
    v = dist(gen);
  for (float &v : b)
    v = dist(gen);
  for (float &v : c)
    v = dist(gen);
  std::vector<float> packedB(size_t(pcc_k::packedBElements(s.k, s.n)) + 16);
  // The runtime's prepared buffer is 64-byte aligned; so is this one.
  float *bp = packedB.data();
  while (reinterpret_cast<uintptr_t>(bp) % 64)
    ++bp;
  ASSERT_LE(bp + pcc_k::packedBElements(s.k, s.n),
            packedB.data() + packedB.size());
  pcc_k::packB(s.k, s.n, b.data(), ldb, transB, bp);
  std::vector<float> expected = c;
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = 0;
      for (int64_t q = 0; q < s.k; ++q)
        sum +=
            double(transA ? a[size_t(q * lda + i)] : a[size_t(i * lda + q)]) *
            double(transB ? b[size_t(j * ldb + q)] : b[size_t(q * ldb + j)]);
      float &e = expected[size_t(i * ldc + j)];
      e = float(alpha * sum + (beta == 0.0f ? 0.0 : double(beta) * e));
    }
  Epilogue epilogue{c.data(), ldc, s.n, std::vector<float>(size_t(s.m * s.n)),
                    std::vector<int>(size_t(s.m * s.n))};
  void *const epilogueArgs[] = {&epilogue};
  std::copy(c.begin(), c.end(), cStart);
  epilogue.c = cStart;
  if (byTranspose)
    pcc_k::gemmByTranspose(s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb,
                           beta, cStart, ldc,
                           withEpilogue ? &Epilogue::run : nullptr,
                           epilogueArgs);
  else if (prepared)
    pcc_k::gemmPackedB(s.m, s.n, s.k, alpha, a.data(), lda, bp, b.data(), ldb,
                       transB, beta, cStart, ldc,
                       withEpilogue ? &Epilogue::run : nullptr, epilogueArgs);
  else
    pcc_k::gemm<float>(s.m, s.n, s.k, alpha, a.data(), lda, transA, b.data(),
                       ldb, transB, beta, cStart, ldc);
  std::copy(cStart, cStart + c.size(), c.begin());
  double tolerance = 1e-5 * (1 + std::sqrt(double(s.k)));
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      size_t at = size_t(i * ldc + j);
      // Columns past n are another tensor's: left as they were.
      EXPECT_NEAR(c[at], expected[at], tolerance)
          << "m " << s.m << " n " << s.n << " k " << s.k << " transA " << transA
          << " transB " << transB << " prepared " << prepared << " at " << i
          << "," << j;
      if (!withEpilogue || j >= s.n)
        continue;
      size_t e = size_t(i * s.n + j);
      EXPECT_EQ(epilogue.visits[e], 1) << "at " << i << "," << j;
      EXPECT_NEAR(epilogue.out[e], 2 * expected[at] + 1, 2 * tolerance)
          << "m " << s.m << " n " << s.n << " k " << s.k << " at " << i << ","
          << j;
    }
}

TEST(PackedGemm, MatchesReference) {
  for (int threads : {1, 2}) {
    pcc_k::setThreads(threads);
    for (Shape s :
         {Shape{1, 1, 1}, Shape{5, 17, 3}, Shape{6, 16, 256}, Shape{7, 65, 257},
          Shape{13, 130, 600}, Shape{128, 96, 64}, Shape{64, 200, 513},
          Shape{3, 1000, 20}, Shape{19, 33, 40}, Shape{20, 17, 9},
          Shape{21, 50, 7}, Shape{12, 32, 31}, Shape{14, 40, 33},
          Shape{18, 70, 300}, Shape{25, 33, 17}, Shape{31, 64, 64},
          // Enough panels of B that A is packed (kPackAPanels: 32 panels,
          // of AVX2's 16 columns or AVX-512's 32), over one block of rows
          // and several.
          Shape{13, 530, 600}, Shape{23, 777, 70}, Shape{13, 1100, 600},
          Shape{200, 1030, 300},
          // Rows 1024 floats apart (k + 3): a panel's rows in one set of
          // L1, A packed with AVX-512 for the 10 panels of B.
          Shape{30, 300, 1021},
          // More rows than a task's block over a prepared B (192).
          Shape{200, 70, 300}})
      for (bool transB : {false, true}) {
        checkProduct(s, false, transB, 1.0f, 0.0f, true);
        checkProduct(s, false, transB, 1.0f, 1.0f, true);
        checkProduct(s, false, transB, 0.125f, 0.5f, true);
      }
  }
  pcc_k::setThreads(1);
}

// Products of operands that are not prepared (activations, gradients),
// either of them transposed, some large enough to be split among the
// threads into groups of columns and blocks of rows.
TEST(PackedGemm, UnpreparedMatchesReference) {
  for (int threads : {1, 2}) {
    pcc_k::setThreads(threads);
    for (Shape s :
         {Shape{1, 1, 1}, Shape{5, 17, 3}, Shape{7, 65, 257},
          Shape{13, 130, 600}, Shape{128, 96, 64}, Shape{31, 64, 64},
          Shape{400, 70, 40}, Shape{300, 33, 300}, Shape{5, 17, 0},
          Shape{13, 530, 600},
          // Whole panels of a transposed B, transposed 16 x 16,
          // and a depth that leaves a rest of fewer than 16.
          Shape{20, 64, 300}, Shape{33, 96, 700},
          // A long K, run in slices that every task finishes
          // before the next, A packed a slice at a time
          // (transposed, or read by enough panels of B), and
          // rows enough over a slice to be run in slices too.
          Shape{400, 70, 1300}, Shape{40, 530, 1400}, Shape{3100, 20, 1300},
          Shape{40, 1030, 1400},
          // Rows 1024 floats apart (rowsCrowdL1Set).
          Shape{30, 300, 1021},
          // Rows enough to pack B whole first (packsBWhole; so do
          // 128 x 96, 400 x 70 and 300 x 33 above), panels partial.
          Shape{96, 530, 257}})
      for (bool transA : {false, true})
        for (bool transB : {false, true}) {
          checkProduct(s, transA, transB, 1.0f, 0.0f, false);
          checkProduct(s, transA, transB, 0.125f, 0.5f, false);
        }
  }
  pcc_k::setThreads(1);
}

// Weight gradients (A transposed, one block of K) whose C fills 2 MB or
// more: stored past the caches where C is aligned (whole panels, and a
// last panel of 16 columns), and where it is not.
TEST(PackedGemm, LargeWeightGradientMatchesReference) {
  for (int threads : {1, 2}) {
    pcc_k::setThreads(threads);
    for (Shape s : {Shape{800, 672, 40}, Shape{770, 688, 256}})
      for (bool alignedC : {true, false}) {
        checkProduct(s, true, false, 1.0f, 0.0f, false, false, alignedC);
        checkProduct(s, true, true, 0.5f, 0.0f, false, false, alignedC);
      }
    // Not streamed: accumulated into C, or over several blocks of K.
    checkProduct(Shape{800, 672, 40}, true, false, 1.0f, 1.0f, false, false,
                 true);
    checkProduct(Shape{800, 672, 300}, true, false, 1.0f, 0.0f, false, false,
                 true);
  }
  pcc_k::setThreads(1);
}

TEST(PackedGemm, EpilogueSeesEachFinishedElementOnce) {
  for (int threads : {1, 2}) {
    pcc_k::setThreads(threads);
    for (Shape s : {Shape{1, 1, 1}, Shape{7, 65, 257}, Shape{128, 200, 513},
                    Shape{3, 1000, 20}, Shape{5, 17, 0}, Shape{400, 70, 40},
                    Shape{400, 70, 1300}})
      for (bool transB : {false, true})
        checkProduct(s, false, transB, 1.0f, 1.0f, true,
                     /*withEpilogue=*/true);
  }
  pcc_k::setThreads(1);
}

/// C = A * B^T run as its transpose (a trained weight's product, B read in
/// place): C's blocks written back transposed, at C's leading dimension,
/// beta's old C kept or not, and the epilogue once per element; a C^T
/// larger than one chunk (128 x 9000) too.
TEST(PackedGemm, ByTransposeMatchesReference) {
  for (int threads : {1, 2}) {
    pcc_k::setThreads(threads);
    for (Shape s : {Shape{1, 1, 1}, Shape{7, 65, 257}, Shape{128, 200, 513},
                    Shape{96, 768, 40}, Shape{50, 17, 0}, Shape{300, 70, 1300},
                    Shape{128, 9000, 40}})
      for (float beta : {0.0f, 1.0f})
        for (bool withEpilogue : {false, true})
          checkProduct(s, false, true, 0.5f, beta, false, withEpilogue,
                       /*alignedC=*/false, /*byTranspose=*/true);
  }
  pcc_k::setThreads(1);
}

TEST(PackedGemm, EmptyDepthScalesC) {
  std::vector<float> c = {1, 2, 3, 4};
  pcc_k::gemmPackedB(2, 2, 0, 1.0f, nullptr, 1, nullptr, nullptr, 2, false,
                     0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1, 1.5f, 2}));
  pcc_k::gemmPackedB(2, 2, 0, 1.0f, nullptr, 1, nullptr, nullptr, 2, false,
                     0.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
}

/// An operand packed a range of b's rows at a time, each range's rows
/// written just before it is packed (as an update that packs a weight
/// chunk by chunk does), equals the operand packed whole: for ranges of 32
/// rows and of 40 and 17, which start and end inside a transposed B's
/// panels.
TEST(PackedGemm, PackedByRowsMatchesWhole) {
  for (Shape s : {Shape{1, 70, 300}, Shape{1, 64, 256}, Shape{1, 33, 530},
                  Shape{1, 257, 96}})
    for (bool transB : {false, true})
      for (int64_t range : {32, 40, 17}) {
        int64_t ldb = (transB ? s.k : s.n) + 5, rows = transB ? s.n : s.k;
        std::vector<float> b(size_t(rows * ldb));
        for (size_t i = 0; i < b.size(); ++i)
          b[i] = float(i % 1009) * 0.5f - 7.0f;
        size_t elements = size_t(pcc_k::packedBElements(s.k, s.n));
        std::vector<float> wholeBuffer(elements + 16),
            byRowsBuffer(elements + 16, -1.0f);
        auto aligned = [](std::vector<float> &v) {
          float *p = v.data();
          while (reinterpret_cast<uintptr_t>(p) % 64)
            ++p;
          return p;
        };
        float *whole = aligned(wholeBuffer), *byRows = aligned(byRowsBuffer);
        pcc_k::packB(s.k, s.n, b.data(), ldb, transB, whole);
        // The rows not yet reached hold other values, as a weight's rows
        // do before its update reaches them.
        std::vector<float> updated(b.size(), 99.0f);
        for (int64_t r0 = 0; r0 < rows; r0 += range) {
          int64_t r1 = std::min(rows, r0 + range);
          std::copy(b.begin() + r0 * ldb, b.begin() + r1 * ldb,
                    updated.begin() + r0 * ldb);
          pcc_k::packBRows(s.k, s.n, updated.data(), ldb, transB, byRows, r0,
                           r1);
        }
        for (size_t i = 0; i < elements; ++i)
          ASSERT_EQ(byRows[i], whole[i])
              << "n " << s.n << " k " << s.k << " transB " << transB
              << " range " << range << " at " << i;
      }
}

} // namespace
