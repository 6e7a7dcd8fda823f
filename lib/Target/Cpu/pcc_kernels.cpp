//===- pcc_kernels.cpp - The CPU kernels compiled once per flag set -------===//
//
// The packed GEMM engine behind pcc_kernels.h's products, and float's
// fused attention, copied next to every generated model.cpp. It is the same for
// every model: pcc compiles it once per compiler, flag set and processor and
// keeps the object in its cache (see buildSharedLibrary), so that a model's
// build compiles only the model's own code. Its functions are hidden in the
// model's library.
//
//===----------------------------------------------------------------------===//

#include "pcc_kernels.h"

#include <cstdlib>
#include <new>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pcc_k {
namespace packed {

/// Offset of panel p's block of K-rows starting at k0, in floats: panel
/// after panel, each its K-rows one after another.
static int64_t blockOffset(int64_t k, int64_t p, int64_t k0) {
  return (p * k + k0) * kPanelCols;
}

/// What a micro-kernel fetches ahead, a cache line every 2^skip iterations
/// q: with j = q >> skip, the line at base + j * rowStride (a run: a
/// prepared B's next block, rowStride a line; B's rows, a line of each) or,
/// where `Runs`, at base + (j >> 4) * rowStride + (j & 15) lines (runs of
/// 16 lines rowStride apart: a transposed B's rows over K). The micro-kernel
/// takes the walk as a template argument: the runs' two more operations an
/// iteration made the products of a prepared B 2-9% slower.
struct Ahead {
  const float *base;
  int64_t rowStride;
  int skip = 0;
  template <bool Runs> const float *at(int64_t q) const {
    int64_t j = q >> skip;
    if constexpr (Runs)
      return base + (j >> 4) * rowStride + (j & 15) * kLineFloats;
    return base + j * rowStride;
  }
};

#if PCC_GEMM_VECTORS
/// Stores the 16 floats `v` at `out`, or, where `Stream` (and `out` is
/// 64-byte aligned), past the caches: packB's operands are read by the
/// products of the next run, and a weight gradient's C by the optimizer at
/// the end of the step, long after the caches would have let them go, and
/// a store that is not streamed first reads the line it writes.
template <bool Stream, typename V> static void store16(float *out, V v) {
#if defined(__AVX512F__)
  if constexpr (Stream) {
    _mm512_stream_ps(out, (__m512)v);
    return;
  }
#endif
  std::memcpy(out, &v, sizeof(V));
}
#endif

/// C[rows x kPanelCols] (=|+=) alpha * tile, of which C's first `cols`
/// columns are written: the end of a micro-kernel whose panel passes N.
static void storeTile(int rows, const float *tile, float *c, int64_t ldc,
                      float alpha, float beta, bool first, int64_t cols) {
  for (int i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float &ci = c[i * ldc + j];
      float old = first ? (beta != 0.0f ? beta * ci : 0.0f) : ci;
      ci = old + alpha * tile[i * kPanelCols + j];
    }
}

/// C[rows x kPanelCols] (=|+=) alpha * A * Bblock over `depth`, B packed,
/// A's element (i, q) at a[i * rowStride + q * depthStride] (rows of A as
/// they are, or a packed micro-panel); C's first `cols` columns are
/// written. `first` says whether C is scaled by beta (its first K-block)
/// or accumulated into.
/// Not inlined: inlined into product's loops, its instances and their
/// branches were copied for each outcome of the loops' tests, which
/// tripled the compile time (of every model library, when the kernels
/// were in the header) for no speed.
template <int Rows, bool Runs>
__attribute__((noinline)) static void
microKernel(int64_t depth, const float *a, int64_t rowStride,
            int64_t depthStride, const float *b, float *c, int64_t ldc,
            float alpha, float beta, bool first, int64_t cols, Ahead ahead,
            bool stream) {
  constexpr int64_t C = kPanelCols;
  alignas(64) float tile[Rows][C];
#if PCC_GEMM_VECTORS
  constexpr int64_t V = kVectors;
  // The compiler's vector types, not <immintrin.h>, whose parsing alone
  // costs the generated library a second of compile time; a * b + c
  // contracts to an FMA (GCC's default for C++, clang's within an
  // expression). The accumulators are only ever indexed by constants (the
  // loops unroll), so they stay in registers: no copy on the stack to
  // clear before the loop or to spill after it.
  typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
  Vec acc[Rows][V];
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      acc[i][v] = Vec{};
      // Four iterations a trip: the loop's own instructions (the counter, the
      // pointers, the branch) then cost the front end a quarter as much, which
      // on an AVX2 Zen 3 makes the products about 4% faster.
#pragma GCC unroll 4
  for (int64_t q = 0; q < depth; ++q) {
    Vec bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      // Unaligned: a block packed per call lies where a vector put it.
      std::memcpy(&bv[v], b + v * kLanes, sizeof(Vec));
      // B's vectors in registers: with few rows GCC folds their loads into
      // each FMA instead, and a load of B for every FMA makes the loop
      // wait on the load ports (6 cycles instead of 4 with AVX2's 4 rows).
      __asm__("" : "+v"(bv[v]));
    }
    // A line every 2^skip iterations of what the next calls read: B's
    // next block on its way from memory into L2 while this one is read
    // from L1.
    __builtin_prefetch(ahead.at<Runs>(q), 0, 1);
#pragma GCC unroll 16
    for (int i = 0; i < Rows; ++i) {
      // A broadcast (x - 0 is x, -0 included); the row offsets stay in
      // registers.
      Vec av = a[i * rowStride] - Vec{};
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[i][v] = av * bv[v] + acc[i][v];
    }
    a += depthStride;
    b += C;
  }
  if (cols == C) {
    Vec va = alpha - Vec{};
    bool read = !first || beta != 0.0f;
    Vec vs = (first ? beta : 1.0f) - Vec{};
#pragma GCC unroll 16
    for (int i = 0; i < Rows; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        // C's rows are not aligned: memcpy moves them unaligned.
        float *ci = c + i * ldc + v * kLanes;
        Vec r = va * acc[i][v];
        if (read) {
          Vec old;
          std::memcpy(&old, ci, sizeof(Vec));
          r = vs * old + r;
        }
        stream ? store16<true>(ci, r) : store16<false>(ci, r);
      }
    return;
  }
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      *reinterpret_cast<Vec *>(tile[i] + v * kLanes) = acc[i][v];
#else
  for (int i = 0; i < Rows; ++i)
    for (int64_t j = 0; j < C; ++j)
      tile[i][j] = 0.0f;
  for (int64_t q = 0; q < depth; ++q, a += depthStride, b += C)
    for (int i = 0; i < Rows; ++i)
      for (int64_t j = 0; j < C; ++j)
        tile[i][j] += a[i * rowStride] * b[j];
#endif
  storeTile(Rows, &tile[0][0], c, ldc, alpha, beta, first, cols);
}

/// The micro-kernel for a panel of `rows` rows, Rows at most, fetching
/// ahead in runs of 16 lines where `runs`.
template <int Rows = kPanelRows>
static void microKernelRows(int64_t rows, int64_t depth, const float *a,
                            int64_t rowStride, int64_t depthStride,
                            const float *b, float *c, int64_t ldc, float alpha,
                            float beta, bool first, int64_t cols, Ahead ahead,
                            bool runs, bool stream = false) {
  if constexpr (Rows > 1)
    if (rows < Rows)
      return microKernelRows<Rows - 1>(rows, depth, a, rowStride, depthStride,
                                       b, c, ldc, alpha, beta, first, cols,
                                       ahead, runs, stream);
  if (runs)
    microKernel<Rows, true>(depth, a, rowStride, depthStride, b, c, ldc, alpha,
                            beta, first, cols, ahead, stream);
  else
    microKernel<Rows, false>(depth, a, rowStride, depthStride, b, c, ldc, alpha,
                             beta, first, cols, ahead, stream);
}

/// The first row of A's micro-panel r of `panels` over m rows (m for r =
/// panels, the end of the last). Panels are kPanelRows high, except that a
/// remainder of at most half a panel shares the last two panels with the
/// rows before it (128 rows in panels of 6: 20 of 6, then 4 and 4): a
/// panel of few rows keeps too few accumulators to hide the FMA latency.
static int64_t panelStart(int64_t r, int64_t panels, int64_t m) {
  if (r >= panels)
    return m;
  int64_t rest = m - (panels - 1) * kPanelRows;
  if (panels < 2 || rest > kPanelRows / 2 || r < panels - 1)
    return r * kPanelRows;
  return (panels - 2) * kPanelRows + (kPanelRows + rest) / 2;
}

#if PCC_GEMM_VECTORS
typedef float Vec16 __attribute__((vector_size(16 * sizeof(float))));

/// Transposes the 16 x 16 floats of r in registers: four rounds of
/// shuffles, each of which interleaves pairs of rows at twice the last
/// round's width.
static inline void transpose16(Vec16 (&r)[16]) {
  Vec16 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 16, 2, 18, 4, 20, 6, 22,
                                   8, 24, 10, 26, 12, 28, 14, 30);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 1, 17, 3, 19, 5, 21, 7,
                                       23, 9, 25, 11, 27, 13, 29, 15, 31);
  }
  for (int i = 0; i < 16; i += 4)
    for (int h = 0; h < 2; ++h) {
      r[i + h] =
          __builtin_shufflevector(t[i + h], t[i + h + 2], 0, 1, 16, 17, 4, 5,
                                  20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
      r[i + h + 2] =
          __builtin_shufflevector(t[i + h], t[i + h + 2], 2, 3, 18, 19, 6, 7,
                                  22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    }
  for (int i = 0; i < 16; i += 8)
    for (int h = 0; h < 4; ++h) {
      t[i + h] =
          __builtin_shufflevector(r[i + h], r[i + h + 4], 0, 1, 2, 3, 16, 17,
                                  18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
      t[i + h + 4] =
          __builtin_shufflevector(r[i + h], r[i + h + 4], 4, 5, 6, 7, 20, 21,
                                  22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    }
  for (int h = 0; h < 8; ++h) {
    r[h] = __builtin_shufflevector(t[h], t[h + 8], 0, 1, 2, 3, 4, 5, 6, 7, 16,
                                   17, 18, 19, 20, 21, 22, 23);
    r[h + 8] = __builtin_shufflevector(t[h], t[h + 8], 8, 9, 10, 11, 12, 13, 14,
                                       15, 24, 25, 26, 27, 28, 29, 30, 31);
  }
}

typedef float Vec8 __attribute__((vector_size(8 * sizeof(float))));

/// Transposes the 8 x 8 floats of r in registers: pairs of rows
/// interleaved, then pairs of those within each 128-bit half, then the
/// halves swapped. AVX2 has no shuffle of 16 floats: the compiler made one
/// scalar load and store per float of transpose16's, and packing GPT-2's
/// 50257 x 256 tied head transposed took 30 ms on the Zen 3.
static inline void transpose8(Vec8 (&r)[8]) {
  Vec8 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] =
        __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {
      u[i + 2 * h] = __builtin_shufflevector(t[i + h], t[i + h + 2], 0, 1, 8,
                                             9, 4, 5, 12, 13);
      u[i + 2 * h + 1] = __builtin_shufflevector(t[i + h], t[i + h + 2], 2, 3,
                                                 10, 11, 6, 7, 14, 15);
    }
  for (int q = 0; q < 4; ++q) {
    r[q] = __builtin_shufflevector(u[q], u[q + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[q + 4] =
        __builtin_shufflevector(u[q], u[q + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

/// Writes the transpose of 16 x 16 floats, row i at in + i * ld, as 16 rows
/// of 16 at out, kPanelCols apart (store16): with AVX2, as four 8 x 8
/// blocks (transpose8).
template <bool Stream = false>
static void transpose16(const float *in, int64_t ld, float *out) {
  if constexpr (kLanes == 8) {
    for (int i0 = 0; i0 < 16; i0 += 8)
      for (int q0 = 0; q0 < 16; q0 += 8) {
        Vec8 r[8];
        for (int i = 0; i < 8; ++i)
          std::memcpy(&r[i], in + (i0 + i) * ld + q0, sizeof(Vec8));
        transpose8(r);
        for (int q = 0; q < 8; ++q)
          std::memcpy(out + (q0 + q) * kPanelCols + i0, &r[q], sizeof(Vec8));
      }
    return;
  }
  Vec16 r[16];
  for (int i = 0; i < 16; ++i)
    std::memcpy(&r[i], in + i * ld, sizeof(Vec16));
  transpose16(r);
  for (int q = 0; q < 16; ++q)
    store16<Stream>(out + q * kPanelCols, r[q]);
}
#endif

/// Packs columns [col0, col0 + kPanelCols) of op(B)'s rows [k0, k0 +
/// depth) into `o`, a row of kPanelCols floats per row of K, zero past
/// column n. op(B) is B (k x n, ldb apart) or, when transB, B's transpose,
/// whose columns are B's rows: those are transposed 16 x 16 in registers
/// where the panel is whole, and otherwise in tiles of 8 rows of K, each
/// column's 8 floats read along its row. (Copied a float at a time into
/// scattered places of `o`, the copy took half as long as the product of
/// 128 rows it fed.)
static void packBPanel(const float *b, int64_t ldb, bool transB, int64_t n,
                       int64_t col0, int64_t k0, int64_t depth, float *o) {
  int64_t cols = std::min(kPanelCols, n - col0);
  if (transB) {
    int64_t q0 = 0;
#if PCC_GEMM_VECTORS
    if (cols == kPanelCols && kPanelCols % 16 == 0)
      for (; q0 + 16 <= depth; q0 += 16)
        for (int64_t j = 0; j < kPanelCols; j += 16)
          transpose16(b + (col0 + j) * ldb + k0 + q0, ldb,
                      o + q0 * kPanelCols + j);
#endif
    constexpr int64_t kTile = 8;
    for (; q0 < depth; q0 += kTile) {
      int64_t tile = std::min(kTile, depth - q0);
      for (int64_t j = 0; j < cols; ++j) {
        const float *row = b + (col0 + j) * ldb + k0 + q0;
        for (int64_t q = 0; q < tile; ++q)
          o[(q0 + q) * kPanelCols + j] = row[q];
      }
      for (int64_t q = 0; q < tile; ++q)
        for (int64_t j = cols; j < kPanelCols; ++j)
          o[(q0 + q) * kPanelCols + j] = 0.0f;
    }
    return;
  }
  for (int64_t q = 0; q < depth; ++q, o += kPanelCols) {
    for (int64_t j = 0; j < cols; ++j)
      o[j] = b[(k0 + q) * ldb + col0 + j];
    for (int64_t j = cols; j < kPanelCols; ++j)
      o[j] = 0.0f;
  }
}

/// Packs op(A)'s rows [first, first + rows) over K [k0, k0 + depth) into a
/// micro-panel `o`, kPanelRows floats per row of K (the micro-kernel for
/// `rows` rows reads no others). op(A) is A (m x k, lda apart) or, when
/// transA, A's transpose (A k x m), whose row i is A's column i, which the
/// micro-kernel could only read a line per element.
static void packAPanel(const float *a, int64_t lda, bool transA, int64_t first,
                       int64_t rows, int64_t k0, int64_t depth, float *o) {
  if (transA) {
    // A whole panel's rows are contiguous in each row of A: one copy of a
    // known size each (a weight gradient's A, the activations; with a copy
    // of `rows` floats at a time the packing took 38% of a product of 50257
    // rows from 124 positions, its micro-kernel 43%).
    if (rows == kPanelRows) {
      for (int64_t q = 0; q < depth; ++q)
        std::memcpy(o + q * kPanelRows, a + (k0 + q) * lda + first,
                    kPanelRows * sizeof(float));
      return;
    }
    for (int64_t q = 0; q < depth; ++q)
      for (int64_t i = 0; i < rows; ++i)
        o[q * kPanelRows + i] = a[(k0 + q) * lda + first + i];
    return;
  }
  int64_t q0 = 0;
#if PCC_GEMM_VECTORS
  // With AVX-512, a whole panel's rows 16 columns of K at a time,
  // transposed in registers as 16 x 16 (the rows past the panel's zero):
  // each column's kPanelRows floats stored as a whole vector in turn, past
  // them what the next columns' stores overwrite, while the vector ends
  // inside these 16 columns (a vector further on would write into the next
  // micro-panel, which another thread may have packed already), and as
  // kPanelRows floats after. (A float at a time, 128 x 3072 took 125 us, 2%
  // of the product; with AVX2's 6 rows and 8 lanes this took twice as long
  // as a float at a time.)
  if constexpr (kLanes == 16 && kPanelRows <= 16)
    if (rows == kPanelRows)
      for (; q0 + 16 <= depth; q0 += 16) {
        Vec16 r[16];
        for (int i = 0; i < 16; ++i) {
          r[i] = Vec16{};
          if (i < kPanelRows)
            std::memcpy(&r[i], a + (first + i) * lda + k0 + q0, sizeof(Vec16));
        }
        transpose16(r);
        float *out = o + q0 * kPanelRows;
        // The columns whose vector ends inside the 16.
        constexpr int kWhole = int(16 - (16 + kPanelRows - 1) / kPanelRows + 1);
        for (int q = 0; q < kWhole; ++q)
          std::memcpy(out + q * kPanelRows, &r[q], sizeof(Vec16));
        for (int q = kWhole; q < 16; ++q)
          std::memcpy(out + q * kPanelRows, &r[q], kPanelRows * sizeof(float));
      }
#endif
  for (int64_t i = 0; i < rows; ++i) {
    const float *row = a + (first + i) * lda + k0;
    for (int64_t q = q0; q < depth; ++q)
      o[q * kPanelRows + i] = row[q];
  }
}

/// Panels of B over which an untransposed A is worth packing: the
/// micro-kernel then reads a micro-panel as one stream instead of one per
/// row, which pays for the copy only where many panels read it. With AVX2
/// on a Zen 3: 2-5% faster products at 48 panels and more (a product of 8
/// panels ran 8% slower packed, one of 4, 20%). With AVX-512 on a Zen 4
/// (bench/gemm-pairs.sh, two threads): the LM head's 1571 panels over 128
/// rows 6-7% faster, products of 40-96 panels 1-4%, GPT-2 124M's forward
/// 1-3% (its logits the same bits); a product of 24 panels gained nothing
/// (the copy cost what the reads saved), and the Zen 5 where the AVX-512
/// kernel was first tuned lost 5-10% of a forward with every A packed.
constexpr int64_t kPackAPanels = 32;

/// Whether a micro-panel's rows of an untransposed A, `lda` floats apart,
/// crowd one set of the L1 cache (64-byte lines in 64 sets, a 4 KB period
/// on every x86 core pcc targets; 8 or 12 ways): more than six of them in
/// one set evict each other and B's block while the micro-kernel reads them
/// side by side. A row of 1024, 2048, 3072 or 4096 floats puts all twelve
/// rows of AVX-512's panels in one set: products of hidden sizes that are
/// multiples of 1024, and every MLP's down projection at 4 x 768, ran
/// 10-30% slower in place than packed on a Zen 4 (bench/RESULTS.md,
/// forty-second session). Six rows a set (1536 floats, or AVX2's panels)
/// read as fast in place; three (768, 1280) faster.
static bool rowsCrowdL1Set(int64_t lda) {
  constexpr int64_t kSets = 64, kMostRowsPerSet = 6;
  int64_t rows[kSets] = {};
  for (int64_t i = 0; i < kPanelRows; ++i)
    if (++rows[(i * lda / kLineFloats) % kSets] > kMostRowsPerSet)
      return true;
  return false;
}

/// Whether op(A) is packed, a slice of K at a time, before the panels of
/// B read it: always when transposed; otherwise where enough panels read
/// it (kPackAPanels), or where its rows crowd a set of L1 and at least
/// kPackCrowdedPanels read it (a product of 4 panels, 128 x 4096 rows,
/// ran 17% slower packed).
constexpr int64_t kPackCrowdedPanels = 8;
static bool packsA(bool transA, int64_t panels, int64_t lda) {
  return transA || panels >= kPackAPanels ||
         (panels >= kPackCrowdedPanels && rowsCrowdL1Set(lda));
}

/// Row panels one task covers: its blocks of B are packed (or read) once
/// for all of them. A task that packs B's blocks itself covers 32 panels,
/// over which each packing is spread. One that reads a prepared B covers
/// blocks of at most 192 rows (16 of AVX-512's panels, 32 of AVX2's): 384
/// rows of A over a slice of K filled a Zen 4's 1 MB L2 and cut K=768 in
/// two slices, and the forward's products at 1024 tokens ran 4-6% slower
/// than in blocks of 192 rows, on one thread and two. (With B packed per
/// task, blocks of 192 rows made the weight gradients 4-7% slower.)
static int64_t blockPanels(bool preparedB) {
  constexpr int64_t kBlockPanels = 32, kPreparedBlockRows = 192;
  return preparedB ? std::min(kBlockPanels, kPreparedBlockRows / kPanelRows)
                   : kBlockPanels;
}

/// Floats of A's rows that one task reads over a slice of K (1 MB): half
/// of a core's L2 on the processors pcc was tuned on, the rest for B's
/// blocks and C.
constexpr int64_t kCachedAFloats = int64_t(1) << 18;

/// The most floats of A packed at once: A is packed a slice of K at a time
/// (sliceDepth), and a product whose rows over one slice hold more runs
/// its rows in slices of this many (a weight gradient's A, the vocabulary
/// by the tokens, would otherwise take a copy as large as the logits,
/// outside the memory the compiler planned).
constexpr int64_t kPackedAFloats = int64_t(4) << 20;

/// The depth of K over which every task of a product of `m` rows runs
/// before the next (whole K-blocks): a block of A's rows over it stays in
/// L2 while every panel of B reads it, where over the whole of K it would
/// be read from memory once per panel (the LM head's input gradient, K the
/// vocabulary, ran at 79 GFLOP/s instead of 112).
static int64_t sliceDepth(int64_t m, bool preparedB) {
  int64_t blockRows = std::min(m, blockPanels(preparedB) * kPanelRows);
  return std::max<int64_t>(kDepth,
                           kCachedAFloats / blockRows / kDepth * kDepth);
}

/// Floats of 64-byte aligned memory that only grows: a thread's copy of a
/// B packed whole (packsBWhole), kept between calls as the packed A is.
class AlignedFloats {
public:
  ~AlignedFloats() { std::free(floats); }
  void reserve(int64_t count) {
    if (count <= capacity)
      return;
    std::free(floats);
    floats = nullptr;
    capacity = 0;
    size_t bytes = (size_t(count) * sizeof(float) + 63) / 64 * 64;
    floats = static_cast<float *>(std::aligned_alloc(64, bytes));
    if (!floats)
      throw std::bad_alloc();
    capacity = count;
  }
  float *data() const { return floats; }

private:
  float *floats = nullptr;
  int64_t capacity = 0;
};

/// The most floats of a B packed whole, as of a packed A (kPackedAFloats):
/// memory outside what the compiler plans.
constexpr int64_t kWholeBFloats = int64_t(4) << 20;

/// Whether a product of B as it is packs B whole before its tasks, as
/// packB prepares a weight, rather than a block per task: a weight
/// gradient's B, the output gradient (tokens x features, untransposed),
/// packed a block of 256 rows of K by 32 columns at a time, read two
/// lines from each of 256 rows 12 KB apart, which left its products
/// 5-12% slower (one thread and two, bench/gemm-pairs.sh) than B packed
/// whole first, row after row, then read as a prepared operand. Where
/// few rows read B (fewer than 96, as for the prepared weights), packing
/// all of it costs more than it saves.
static bool packsBWhole(int64_t m, int64_t n, int64_t k) {
  return m >= 96 && packedBElements(k, n) <= kWholeBFloats;
}

/// C's floats from which a weight gradient's C is stored past the caches
/// (2 MB, twice a core's L2 on the processors pcc was tuned on).
constexpr int64_t kStreamedCFloats = int64_t(1) << 19;

/// Whether the micro-kernels store C past the caches (_mm512_stream_ps): a
/// weight gradient's C (A transposed, the activations), written once (one
/// K-block, beta 0, no epilogue) and first read by the optimizer at the
/// end of the step, long after the caches let it go; a store that is not
/// streamed first reads the line it writes from memory.
static bool streamsC(int64_t m, int64_t n, int64_t k, bool transA, float beta,
                     const float *c, int64_t ldc, GemmEpilogueFn epilogue) {
#if defined(__AVX512F__) && PCC_GEMM_VECTORS
  return transA && k <= kDepth && beta == 0.0f && !epilogue &&
         m * n >= kStreamedCFloats && ldc % kLineFloats == 0 &&
         reinterpret_cast<uintptr_t>(c) % 64 == 0;
#else
  (void)m, (void)n, (void)k, (void)transA, (void)beta, (void)c, (void)ldc,
      (void)epilogue;
  return false;
#endif
}

/// Orders this thread's streamed stores before what follows the product.
static void fenceStreams([[maybe_unused]] bool streamed) {
#if defined(__AVX512F__)
  if (streamed)
    _mm_sfence();
#endif
}

static void packOperand(int64_t k, int64_t n, const float *b, int64_t ldb,
                        bool transB, float *out, bool stream, bool parallel,
                        int64_t row0 = 0,
                        int64_t row1 = std::numeric_limits<int64_t>::max());

/// The product of rows `rowBase`.. of C (`m` of them, `c` and `a` already
/// at that row): the epilogue is told rows of the whole C.
static void productRows(int64_t m, int64_t n, int64_t k, float alpha,
                        const float *a, int64_t lda, bool transA,
                        const float *bp, const float *b, int64_t ldb,
                        bool transB, float beta, float *c, int64_t ldc,
                        GemmEpilogueFn epilogue, void *const *epilogueArgs,
                        bool parallel, int64_t rowBase);

void product(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
             int64_t lda, bool transA, const float *bp, const float *b,
             int64_t ldb, bool transB, float beta, float *c, int64_t ldc,
             GemmEpilogueFn epilogue, void *const *epilogueArgs,
             bool parallel) {
  int64_t panels = (n + kPanelCols - 1) / kPanelCols;
  if (!bp && packsBWhole(m, n, k)) {
    static thread_local AlignedFloats whole;
    whole.reserve(packedBElements(k, n));
    // Not streamed: the tasks read it right away.
    packOperand(k, n, b, ldb, transB, whole.data(), /*stream=*/false, parallel);
    bp = whole.data();
  }
  bool packA = packsA(transA, panels, lda);
  // Whole tasks' rows per slice; each row's sums run as they would whole.
  // A long K needs none (the LM head's input gradient: 256 rows over the
  // vocabulary): it is packed a slice of K at a time, and its rows in
  // slices would each pack B again.
  int64_t unit = kPanelRows * blockPanels(bp);
  int64_t depth = std::max<int64_t>(1, std::min(k, sliceDepth(m, bp)));
  int64_t slice = std::max<int64_t>(unit, kPackedAFloats / depth / unit * unit);
  if (!packA || m <= slice) {
    productRows(m, n, k, alpha, a, lda, transA, bp, b, ldb, transB, beta, c,
                ldc, epilogue, epilogueArgs, parallel, 0);
    return;
  }
  for (int64_t first = 0; first < m; first += slice)
    productRows(std::min(slice, m - first), n, k, alpha,
                transA ? a + first : a + first * lda, lda, transA, bp, b, ldb,
                transB, beta, c + first * ldc, ldc, epilogue, epilogueArgs,
                parallel, first);
}

static void productRows(int64_t m, int64_t n, int64_t k, float alpha,
                        const float *a, int64_t lda, bool transA,
                        const float *bp, const float *b, int64_t ldb,
                        bool transB, float beta, float *c, int64_t ldc,
                        GemmEpilogueFn epilogue, void *const *epilogueArgs,
                        bool parallel, int64_t rowBase) {
  if (m <= 0 || n <= 0)
    return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    if (epilogue)
      epilogue(epilogueArgs, rowBase, rowBase + m, 0, n);
    return;
  }
  int64_t rowPanels = (m + kPanelRows - 1) / kPanelRows;
  int64_t panels = (n + kPanelCols - 1) / kPanelCols;
  // Products of a long K run in slices of K (sliceDepth), each over every
  // task before the next.
  int64_t depthPerSlice = sliceDepth(m, bp);
  // A transposed, or read by many panels, is packed once per call, a slice
  // of K at a time, per K-block its micro-panels one after another;
  // otherwise it is read in place, a row a stream.
  bool packA = packsA(transA, panels, lda);
  static thread_local std::vector<float> aPacked;
  if (packA)
    aPacked.resize(size_t(rowPanels * kPanelRows * std::min(k, depthPerSlice)));
  float *ap = aPacked.data();
  bool streamC = streamsC(m, n, k, transA, beta, c, ldc, epilogue);
  int64_t panelsPerBlock = blockPanels(bp);
  int64_t rowBlocks = (rowPanels + panelsPerBlock - 1) / panelsPerBlock;
  int64_t tasks = panels * rowBlocks;
  // Packs A's row panels index, index + count, ... (all of them for one
  // thread) over the slice of K-rows [kBegin, kEnd).
  auto packRowPanels = [&](int64_t index, int64_t count, int64_t kBegin,
                           int64_t kEnd) {
    for (int64_t r = index; r < rowPanels; r += count)
      for (int64_t k0 = kBegin; k0 < kEnd; k0 += kDepth) {
        int64_t depth = std::min(kDepth, kEnd - k0);
        int64_t first = panelStart(r, rowPanels, m);
        packAPanel(a, lda, transA, first,
                   panelStart(r + 1, rowPanels, m) - first, k0, depth,
                   ap + rowPanels * kPanelRows * (k0 - kBegin) +
                       r * depth * kPanelRows);
      }
  };
  // A panel of B over a block of rows of C and K-rows [kBegin, kEnd), then,
  // after K's last slice, its epilogue.
  auto runTask = [&](int64_t task, int64_t kBegin, int64_t kEnd) {
    // A block of B packed by this thread (no prepared operand).
    static thread_local std::vector<float> bBlock;
    if (!bp)
      bBlock.resize(size_t(kDepth * kPanelCols));
    // Block after block of rows, every panel of B over one before the
    // next, so that the block of A's rows stays in L2 while the panels read
    // it: panel after panel, each over every block, read each block from
    // L3 or memory again when A's rows outgrow L2 (1024 tokens: 3 blocks of
    // 384 rows, 2.4 MB over a slice of K; 4-14% slower on one thread of
    // the Intel VM, 1-17% on two).
    int64_t block = task / panels, p = task % panels;
    int64_t r0 = block * panelsPerBlock,
            r1 = std::min(rowPanels, r0 + panelsPerBlock);
    int64_t cols = std::min(kPanelCols, n - p * kPanelCols);
    // The row panels that fetch B's next blocks (below), and the
    // iterations, 2^skip, over which each fetches a line.
    int64_t sharers = 1;
    while (sharers * 2 <= std::min<int64_t>(8, r1 - r0))
      sharers *= 2;
    int skip = 0;
    while ((int64_t(2) << skip) < sharers)
      ++skip;
    for (int64_t k0 = kBegin; k0 < kEnd; k0 += kDepth) {
      int64_t depth = std::min(kDepth, kEnd - k0);
      const float *bb = bp ? bp + blockOffset(k, p, k0) : bBlock.data();
      if (!bp)
        packBPanel(b, ldb, transB, n, p * kPanelCols, k0, depth, bBlock.data());
      // B's next block on its way into L2 while this one is read. A
      // prepared B's follows this one in memory: up to eight row panels
      // fetch it, a share each, a line every 2^skip iterations (the
      // processor's own prefetcher follows the run too), and the others
      // touch their own block. Fetched by the first two panels alone, half
      // each at a line an iteration, the block's 512 lines were asked for
      // in the first fifth of a 128-row block's time, and the products of
      // 128 rows of a weight read from memory ran 4-5% slower (the
      // forward's, GPT-2 124M at 1 x 128, 6%). B as it is, packed block by
      // block, is fetched from its rows
      // (without, the packing waited on memory for a third of a product of
      // 128 rows), lines 9 KB apart that only these fetches bring in: each
      // holds one of the core's few line-fill buffers until its line
      // arrives, and 512 of them over two micro-kernel calls kept the
      // micro-kernel's own reads of A waiting (with no fetch at all, B read
      // from L3 as it was packed cost a 128-row product 30% more). So up to
      // eight row panels share them, a line every 2^skip iterations each.
      int64_t kNext = k0 + depth;
      int64_t col0 = p * kPanelCols;
      // Row panel `index`'s share, 1 / sharers of the lines: of a prepared
      // B's next block, a run of them; of B as it is, of the two columns of
      // lines of a row panel of untransposed B's rows, or of 16 lines of K
      // of a transposed B's 32 rows.
      auto aheadOf = [&](int64_t index) -> Ahead {
        if (bp)
          return {bb + depth * kPanelCols +
                      index * (depth >> skip) * kLineFloats,
                  kLineFloats, skip};
        // After the slice's last block, the next panel's first: the task
        // that most likely follows on this thread.
        int64_t rowNext = kNext, colNext = col0;
        if (kNext >= kEnd) {
          if (p + 1 >= panels)
            return {bb, kLineFloats};
          rowNext = kBegin;
          colNext = col0 + kPanelCols;
        }
        // Each share is kDepth >> skip lines: of a transposed B's 32 rows
        // (16 lines of K each), kDepth >> skip >> 4 of them; of B's rows
        // (two lines each), one line of kDepth >> skip rows.
        int64_t lines = kDepth >> skip;
        if (transB)
          return {b + std::min(n - 1, colNext + index * lines / 16) * ldb +
                      rowNext,
                  ldb, skip};
        return {b + (rowNext + (index >> 1) * lines) * ldb + colNext +
                    (index & 1) * kLineFloats,
                ldb, skip};
      };
      for (int64_t r = r0; r < r1; ++r) {
        int64_t first = panelStart(r, rowPanels, m);
        int64_t end = panelStart(r + 1, rowPanels, m);
        bool fetches = r - r0 < sharers;
        Ahead ahead = fetches ? aheadOf(r - r0) : Ahead{bb, kLineFloats};
        bool runs = fetches && !bp && transB;
        if (packA)
          microKernelRows(end - first, depth,
                          ap + rowPanels * kPanelRows * (k0 - kBegin) +
                              r * depth * kPanelRows,
                          1, kPanelRows, bb, c + first * ldc + p * kPanelCols,
                          ldc, alpha, beta, k0 == 0, cols, ahead, runs,
                          streamC);
        else
          microKernelRows(end - first, depth, a + first * lda + k0, lda, 1, bb,
                          c + first * ldc + p * kPanelCols, ldc, alpha, beta,
                          k0 == 0, cols, ahead, runs, streamC);
      }
    }
    if (epilogue && kEnd == k)
      epilogue(epilogueArgs, rowBase + panelStart(r0, rowPanels, m),
               rowBase + panelStart(r1, rowPanels, m), p * kPanelCols,
               p * kPanelCols + cols);
  };
  // On the calling thread without a parallel region: even one that the
  // `if` clause keeps to one thread costs OpenMP 1-2 us to open, a tenth of
  // an attention head's product.
  if (!parallel || threads() <= 1) {
    for (int64_t k0 = 0; k0 < k; k0 += depthPerSlice) {
      int64_t kEnd = std::min(k, k0 + depthPerSlice);
      if (packA)
        packRowPanels(0, 1, k0, kEnd);
      for (int64_t task = 0; task < tasks; ++task)
        runTask(task, k0, kEnd);
    }
    fenceStreams(streamC);
    return;
  }
#pragma omp parallel num_threads(threads())
  {
#ifdef _OPENMP
    int index = omp_get_thread_num(), count = omp_get_num_threads();
#else
    int index = 0, count = 1;
#endif
    // Tasks go to the threads in chunks as they finish the last, each a
    // share of the tasks left (OpenMP's guided schedule): two threads of a
    // virtual machine need not run at the same speed (AVX2's 576 tasks of a
    // weight gradient ran 14% slower in quarters), and the chunks shrink
    // towards the end, where a thread that finishes first waits for the
    // other's last chunk. In chunks of a fixed eighth of a thread's share
    // (6 tasks of the 96 of a 128 x 3072 x 768 product) that wait cost
    // 1-2%: GPT-2 124M's forward at 1 x 128 on the Emerald Rapids VM ran
    // 117.3 ms against 115.5 guided, its AdamW step 485.0 against 477.5,
    // in turns. Over one slice of K a chunk is a run of neighbouring
    // panels, the next of which the last K-block's fetch ahead brings in,
    // and it holds at least three: in chunks of one task (24 panels of 32
    // columns at N = 768) each thread fetched blocks the other would read,
    // and the products of N = 768 ran 10-15% slower with AVX-512 on a Zen 4
    // than in chunks of three. Over several slices that fetch brings the
    // panel's next slice, and each slice ends at a barrier that waits for
    // the slower thread's last chunk (the LM head's input gradient, K the
    // vocabulary, ran 8% slower in chunks of three).
    [[maybe_unused]] int64_t minChunk = k > depthPerSlice ? 1 : 3;
    // A slice's tasks add to the C that the last slice's made, and read the
    // A that the threads packed for it: the threads wait for each other
    // between slices and after packing, but not after the last slice (the
    // region's end waits).
    for (int64_t k0 = 0; k0 < k; k0 += depthPerSlice) {
      int64_t kEnd = std::min(k, k0 + depthPerSlice);
      if (packA) {
        packRowPanels(index, count, k0, kEnd);
#pragma omp barrier
      }
#pragma omp for schedule(guided, minChunk) nowait
      for (int64_t task = 0; task < tasks; ++task)
        runTask(task, k0, kEnd);
      if (kEnd < k) {
#pragma omp barrier
      }
    }
    fenceStreams(streamC);
  }
}
/// Packs op(B)'s rows [k0, k0 + depth) of panel p into `o`, as packBPanel,
/// with streamed stores (store16) where the panel is whole.
static void packPreparedBlock(const float *b, int64_t ldb, bool transB,
                              int64_t n, int64_t p, int64_t k0, int64_t depth,
                              float *o, bool stream) {
  int64_t col0 = p * kPanelCols;
#if defined(__AVX512F__) && PCC_GEMM_VECTORS
  typedef float V __attribute__((vector_size(16 * sizeof(float))));
  if (col0 + kPanelCols <= n && reinterpret_cast<uintptr_t>(o) % 64 == 0) {
    int64_t q0 = 0;
    if (transB)
      for (; q0 + 16 <= depth; q0 += 16)
        for (int64_t j = 0; j < kPanelCols; j += 16)
          stream ? transpose16<true>(b + (col0 + j) * ldb + k0 + q0, ldb,
                                     o + q0 * kPanelCols + j)
                 : transpose16<false>(b + (col0 + j) * ldb + k0 + q0, ldb,
                                      o + q0 * kPanelCols + j);
    else
      for (; q0 < depth; ++q0)
        for (int64_t j = 0; j < kPanelCols; j += 16) {
          V v;
          std::memcpy(&v, b + (k0 + q0) * ldb + col0 + j, sizeof(V));
          stream ? store16<true>(o + q0 * kPanelCols + j, v)
                 : store16<false>(o + q0 * kPanelCols + j, v);
        }
    if (q0 < depth)
      packBPanel(b, ldb, transB, n, col0, k0 + q0, depth - q0,
                 o + q0 * kPanelCols);
    return;
  }
#endif
  packBPanel(b, ldb, transB, n, col0, k0, depth, o);
}
} // namespace packed

namespace packed {
/// packB's work, its stores streamed where `stream`, on the run's threads
/// where `parallel`, for the part of the operand that b's rows [row0, row1)
/// give (rows of ldb floats: op(B)'s rows, or its columns when transB).
/// Transposed, a panel's columns are 32 of b's rows, which a range that
/// starts or ends inside a panel packs whole.
static void packOperand(int64_t k, int64_t n, const float *b, int64_t ldb,
                        bool transB, float *out, bool stream, bool parallel,
                        int64_t row0, int64_t row1) {
  if (!PCC_PACKED_GEMM || k <= 0 || n <= 0)
    return;
  row0 = std::max<int64_t>(row0, 0);
  row1 = std::min(row1, transB ? n : k);
  if (row0 >= row1)
    return;
  // Transposed, a panel's columns are B's rows, side by side in memory: a
  // thread packs a panel at a time, reading them in one run. Otherwise a
  // few of B's rows at a time, each read whole into every panel: panel by
  // panel, B's rows were read a pair of lines at a time, a row apart, from
  // memory (50257 x 768 at 8.6 GB/s on two threads of the Intel VM,
  // against 28 GB/s so).
  constexpr int64_t kRows = 32;
  int64_t panels = packedBElements(k, n) / (k * kPanelCols);
  int64_t firstPanel = row0 / kPanelCols;
  int64_t tasks =
      transB
          ? std::min(panels, (row1 + kPanelCols - 1) / kPanelCols) - firstPanel
          : (row1 - row0 + kRows - 1) / kRows;
#pragma omp parallel num_threads(threads()) if (parallel && threads() > 1)
  {
#pragma omp for schedule(static) nowait
    for (int64_t task = 0; task < tasks; ++task) {
      if (transB) {
        int64_t p = firstPanel + task;
        for (int64_t k0 = 0; k0 < k; k0 += kDepth)
          packPreparedBlock(b, ldb, transB, n, p, k0, std::min(kDepth, k - k0),
                            out + blockOffset(k, p, k0), stream);
        continue;
      }
      int64_t k0 = row0 + task * kRows;
      for (int64_t p = 0; p < panels; ++p)
        packPreparedBlock(b, ldb, transB, n, p, k0, std::min(kRows, row1 - k0),
                          out + blockOffset(k, p, k0), stream);
    }
    // This thread's streamed stores reach memory before the region ends
    // (and the products that read them start).
    fenceStreams(stream);
  }
}
} // namespace packed

namespace packed {
#if PCC_GEMM_VECTORS
static inline void transposeRegisters(Vec16 (&r)[16]) { transpose16(r); }
static inline void transposeRegisters(Vec8 (&r)[8]) { transpose8(r); }
#endif

/// out[j * ldo + i] = in[i * ldi + j] (+ beta * out[j * ldo + i] where beta
/// is not 0) for `rows` rows i and `cols` columns j of `in`: 16 x 16 tiles
/// (AVX2's as 8 x 8) transposed in registers, the edges a float at a time.
static void transposeInto(const float *in, int64_t ldi, int64_t rows,
                          int64_t cols, float *out, int64_t ldo, float beta) {
  int64_t i0 = 0;
#if PCC_GEMM_VECTORS
  constexpr int64_t T = kLanes;
  typedef float Vec __attribute__((vector_size(T * sizeof(float))));
  for (; i0 + T <= rows; i0 += T)
    for (int64_t j0 = 0; j0 + T <= cols; j0 += T) {
      Vec r[T];
      for (int64_t i = 0; i < T; ++i)
        std::memcpy(&r[i], in + (i0 + i) * ldi + j0, sizeof(Vec));
      transposeRegisters(r);
      for (int64_t j = 0; j < T; ++j) {
        float *o = out + (j0 + j) * ldo + i0;
        if (beta != 0.0f) {
          Vec old;
          std::memcpy(&old, o, sizeof(Vec));
          r[j] = (beta - Vec{}) * old + r[j];
        }
        std::memcpy(o, &r[j], sizeof(Vec));
      }
    }
  // The rows below the last whole tile, over all columns; then the
  // columns right of the tiles, over the rows above.
  int64_t tiledCols = rows >= T ? cols / T * T : 0;
#else
  int64_t tiledCols = 0;
#endif
  auto edge = [&](int64_t iBegin, int64_t iEnd, int64_t jBegin, int64_t jEnd) {
    for (int64_t j = jBegin; j < jEnd; ++j)
      for (int64_t i = iBegin; i < iEnd; ++i) {
        float v = in[i * ldi + j];
        float &o = out[j * ldo + i];
        o = beta != 0.0f ? v + beta * o : v;
      }
  };
  edge(i0, rows, 0, cols);
  edge(0, i0, tiledCols, cols);
}

/// What gemmTransposed's epilogue needs: the C^T of a chunk of B's rows
/// (C's columns [first, ...)), `ldt` apart, and C with its own epilogue.
struct TransposedC {
  const float *t;
  int64_t ldt, first;
  float *c;
  int64_t ldc;
  float beta;
  GemmEpilogueFn epilogue;
  void *const *epilogueArgs;
};

/// Writes a finished block of C^T, rows [r0, r1) (C's columns, from the
/// chunk's first) by columns [c0, c1) (C's rows), into C transposed, then
/// runs C's epilogue on that block while it is in the cache.
static void storeTransposed(void *const *args, int64_t r0, int64_t r1,
                            int64_t c0, int64_t c1) {
  const TransposedC &t = *static_cast<const TransposedC *>(args[0]);
  transposeInto(t.t + r0 * t.ldt + c0, t.ldt, r1 - r0, c1 - c0,
                t.c + c0 * t.ldc + t.first + r0, t.ldc, t.beta);
  if (t.epilogue)
    t.epilogue(t.epilogueArgs, c0, c1, t.first + r0, t.first + r1);
}

/// The most floats of C^T that gemmTransposed makes at once (4 MB): a
/// chunk of B's rows at a time, as the packed A is bounded (memory outside
/// what the compiler plans).
constexpr int64_t kTransposedCFloats = int64_t(1) << 20;
} // namespace packed

void gemmTransposed(int64_t m, int64_t n, int64_t k, float alpha,
                    const float *a, int64_t lda, const float *b, int64_t ldb,
                    float beta, float *c, int64_t ldc, GemmEpilogueFn epilogue,
                    void *const *epilogueArgs) {
  using namespace packed;
  if (m <= 0 || n <= 0)
    return;
  // Chunks of whole blocks of B's rows, as many as kTransposedCFloats hold.
  int64_t unit = kPanelRows * blockPanels(/*preparedB=*/true);
  int64_t chunk = std::min(
      n, std::max(unit, kTransposedCFloats / std::max<int64_t>(m, 1) / unit *
                            unit));
  static thread_local AlignedFloats t;
  t.reserve(chunk * m);
  bool parallel = threads() > 1 && parallelProduct(n, m, k);
  for (int64_t first = 0; first < n; first += chunk) {
    int64_t rows = std::min(chunk, n - first);
    TransposedC args{t.data(), m, first, c, ldc, beta, epilogue, epilogueArgs};
    void *const pointers[] = {&args};
    product(rows, m, k, alpha, b + first * ldb, ldb, /*transA=*/false,
            /*bp=*/nullptr, a, lda, /*transB=*/true, /*beta=*/0.0f, t.data(),
            m, storeTransposed, pointers, parallel);
  }
}

void packB(int64_t k, int64_t n, const float *b, int64_t ldb, bool transB,
           float *out) {
  packed::packOperand(k, n, b, ldb, transB, out, /*stream=*/true,
                      /*parallel=*/true);
}

void packBRows(int64_t k, int64_t n, const float *b, int64_t ldb, bool transB,
               float *out, int64_t row0, int64_t row1) {
  packed::packOperand(k, n, b, ldb, transB, out, /*stream=*/true,
                      /*parallel=*/true, row0, row1);
}

// The attention of float models, declared `extern template` in the header
// so that no model's code instantiates it.
template void attention<float>(const float *, const float *, const float *,
                               const float *, const float *, float *, float *,
                               const AttentionShape &);
template void attentionGrad<float>(const float *, const float *, const float *,
                                   const float *, const float *, const float *,
                                   const float *, float *, float *, float *,
                                   const AttentionShape &);
} // namespace pcc_k
