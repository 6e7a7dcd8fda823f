//===- pcc_kernels.cpp - The CPU kernels compiled once per flag set -------===//
//
// The packed GEMM engine behind pcc_kernels.h's products and the fused
// attention kernels, copied next to every generated model.cpp. It is the same
// for every model: pcc compiles it once per compiler, flag set and processor
// and keeps the object in its cache (see buildSharedLibrary), so that a model's
// build compiles only the model's own code. Its functions are hidden in the
// model's library.
//
//===----------------------------------------------------------------------===//

#include "pcc_kernels.h"

namespace pcc_k {
namespace packed {

/// Offset of panel p's block of K-rows starting at k0, in floats: panel
/// after panel, each its K-rows one after another.
static int64_t blockOffset(int64_t k, int64_t p, int64_t k0) {
  return (p * k + k0) * kPanelCols;
}

/// What a micro-kernel fetches ahead, a cache line an iteration q: the
/// line at base + (q >> shift) * rowStride + (q & (2^shift - 1)) lines,
/// that is, runs of 2^shift lines `rowStride` floats apart. A prepared B's
/// next block is one run (shift 0, rowStride a line); B as it is, its next
/// block's rows, a line (or, transposed, 16 lines) each.
struct Ahead {
  const float *base;
  int64_t rowStride;
  int shift;
  const float *at(int64_t q) const {
    return base + (q >> shift) * rowStride +
           (q & ((int64_t(1) << shift) - 1)) * kLineFloats;
  }
};

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
template <int Rows>
__attribute__((noinline)) static void
microKernel(int64_t depth, const float *a, int64_t rowStride,
            int64_t depthStride, const float *b, float *c, int64_t ldc,
            float alpha, float beta, bool first, int64_t cols, Ahead ahead) {
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
    // One line an iteration of what the next calls read: B's next block
    // on its way from memory into L2 while this one is read from L1.
    __builtin_prefetch(ahead.at(q), 0, 1);
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
        std::memcpy(ci, &r, sizeof(Vec));
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

/// The micro-kernel for a panel of `rows` rows, Rows at most.
template <int Rows = kPanelRows>
static void microKernelRows(int64_t rows, int64_t depth, const float *a,
                            int64_t rowStride, int64_t depthStride,
                            const float *b, float *c, int64_t ldc, float alpha,
                            float beta, bool first, int64_t cols, Ahead ahead) {
  if constexpr (Rows > 1)
    if (rows < Rows)
      return microKernelRows<Rows - 1>(rows, depth, a, rowStride, depthStride,
                                       b, c, ldc, alpha, beta, first, cols,
                                       ahead);
  microKernel<Rows>(depth, a, rowStride, depthStride, b, c, ldc, alpha, beta,
                    first, cols, ahead);
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
/// Writes the transpose of 16 x 16 floats, row i at in + i * ld, as 16 rows
/// of 16 at out, kPanelCols apart: four rounds of shuffles, each of which
/// interleaves pairs of rows at twice the last round's width.
static void transpose16(const float *in, int64_t ld, float *out) {
  typedef float V __attribute__((vector_size(16 * sizeof(float))));
  V r[16], t[16];
  for (int i = 0; i < 16; ++i)
    std::memcpy(&r[i], in + i * ld, sizeof(V));
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
  for (int q = 0; q < 16; ++q)
    std::memcpy(out + q * kPanelCols, &r[q], sizeof(V));
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
    for (int64_t q = 0; q < depth; ++q)
      for (int64_t i = 0; i < rows; ++i)
        o[q * kPanelRows + i] = a[(k0 + q) * lda + first + i];
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    const float *row = a + (first + i) * lda + k0;
    for (int64_t q = 0; q < depth; ++q)
      o[q * kPanelRows + i] = row[q];
  }
}

/// Panels of B over which an untransposed A is worth packing: with AVX2
/// the micro-kernel reads a packed micro-panel as one stream instead of
/// six (2-5% faster products at 48 panels and more on a Zen 3), which pays
/// for the copy only where many panels read it (a product of 8 panels ran
/// 8% slower packed, one of 4, 20%). With AVX-512 A is read in place: on
/// the Zen 5 where its kernel was tuned, packing A cost 5-10% of a forward.
#if defined(__AVX512F__)
constexpr int64_t kPackAPanels = std::numeric_limits<int64_t>::max();
#else
constexpr int64_t kPackAPanels = 32;
#endif

/// Row panels one task covers: its blocks of B are packed (or read) once
/// for all of them.
constexpr int64_t kBlockPanels = 32;

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
static int64_t sliceDepth(int64_t m) {
  int64_t blockRows = std::min(m, kBlockPanels * kPanelRows);
  return std::max<int64_t>(kDepth,
                           kCachedAFloats / blockRows / kDepth * kDepth);
}

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
  bool packA = transA || panels >= kPackAPanels;
  // Whole tasks' rows per slice; each row's sums run as they would whole.
  // A long K needs none (the LM head's input gradient: 256 rows over the
  // vocabulary): it is packed a slice of K at a time, and its rows in
  // slices would each pack B again.
  int64_t unit = kPanelRows * kBlockPanels;
  int64_t depth = std::max<int64_t>(1, std::min(k, sliceDepth(m)));
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
  int64_t depthPerSlice = sliceDepth(m);
  // A transposed, or read by many panels, is packed once per call, a slice
  // of K at a time, per K-block its micro-panels one after another;
  // otherwise it is read in place, a row a stream.
  bool packA = transA || panels >= kPackAPanels;
  static thread_local std::vector<float> aPacked;
  if (packA)
    aPacked.resize(size_t(rowPanels * kPanelRows * std::min(k, depthPerSlice)));
  float *ap = aPacked.data();
  int64_t rowBlocks = (rowPanels + kBlockPanels - 1) / kBlockPanels;
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
    int64_t r0 = block * kBlockPanels,
            r1 = std::min(rowPanels, r0 + kBlockPanels);
    int64_t cols = std::min(kPanelCols, n - p * kPanelCols);
    for (int64_t k0 = kBegin; k0 < kEnd; k0 += kDepth) {
      int64_t depth = std::min(kDepth, kEnd - k0);
      const float *bb = bp ? bp + blockOffset(k, p, k0) : bBlock.data();
      if (!bp)
        packBPanel(b, ldb, transB, n, p * kPanelCols, k0, depth, bBlock.data());
      // The first two row panels fetch the next block of this task, half
      // each (a line an iteration), the others touch their own block. A
      // prepared B's follows this one. B as it is, packed block by block,
      // is read from its rows: without the fetch ahead, the packing waited
      // on memory for a third of a product of 128 rows.
      int64_t kNext = k0 + depth;
      int64_t col0 = p * kPanelCols;
      auto aheadOf = [&](int64_t half) -> Ahead {
        if (bp)
          return {bb + depth * kPanelCols + half * depth * kLineFloats,
                  kLineFloats, 0};
        if (kNext >= kEnd)
          return {bb, kLineFloats, 0};
        if (transB) // 16 of op(B)'s columns, 16 lines of K each
          return {b + (col0 + half * kPanelCols / 2) * ldb + kNext, ldb, 4};
        return {b + kNext * ldb + col0 + half * kLineFloats, ldb, 0};
      };
      for (int64_t r = r0; r < r1; ++r) {
        int64_t first = panelStart(r, rowPanels, m);
        int64_t end = panelStart(r + 1, rowPanels, m);
        Ahead ahead = r - r0 < 2 ? aheadOf(r - r0) : Ahead{bb, kLineFloats, 0};
        if (packA)
          microKernelRows(end - first, depth,
                          ap + rowPanels * kPanelRows * (k0 - kBegin) +
                              r * depth * kPanelRows,
                          1, kPanelRows, bb, c + first * ldc + p * kPanelCols,
                          ldc, alpha, beta, k0 == 0, cols, ahead);
        else
          microKernelRows(end - first, depth, a + first * lda + k0, lda, 1, bb,
                          c + first * ldc + p * kPanelCols, ldc, alpha, beta,
                          k0 == 0, cols, ahead);
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
    return;
  }
#pragma omp parallel num_threads(threads())
  {
#ifdef _OPENMP
    int index = omp_get_thread_num(), count = omp_get_num_threads();
#else
    int index = 0, count = 1;
#endif
    // Tasks go to the threads in chunks as they finish the last: two
    // threads of a virtual machine need not run at the same speed.
    [[maybe_unused]] int64_t chunk = std::max<int64_t>(1, tasks / (8 * count));
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
#pragma omp for schedule(dynamic, chunk) nowait
      for (int64_t task = 0; task < tasks; ++task)
        runTask(task, k0, kEnd);
      if (kEnd < k) {
#pragma omp barrier
      }
    }
  }
}
} // namespace packed

void packB(int64_t k, int64_t n, const float *b, int64_t ldb, bool transB,
           float *out) {
  using namespace packed;
  if (!PCC_PACKED_GEMM || k <= 0 || n <= 0)
    return;
  int64_t panels = packedBElements(k, n) / (k * kPanelCols);
#pragma omp parallel for schedule(static)                                      \
    num_threads(threads()) if (threads() > 1)
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t k0 = 0; k0 < k; k0 += kDepth)
      packBPanel(b, ldb, transB, n, p * kPanelCols, k0,
                 std::min(kDepth, k - k0), out + blockOffset(k, p, k0));
}

namespace detail {
/// The blocks of attention's kernels: 32 queries by 64 keys, whose scores,
/// the keys and the values of a block stay in cache.
constexpr int64_t kAttentionRows = 32, kAttentionKeys = 64;

/// Attention's products run on vectors of the target's width, GCC's
/// vector extensions, which lower to what the target has: plain loops,
/// which the compiler vectorizes along a row of sums, load and store those
/// sums for every few terms (the earlier kernels ran at a third of the
/// GEMMs' speed). A tile of kAttentionTileRows rows by
/// kAttentionTileVectors vectors of sums stays in registers instead: with
/// AVX-512's 32 registers, 4 x 4 sums beside four vectors of a row of B;
/// with AVX's 16, 4 x 3 beside three (4 x 2 ran 5% slower); with SSE's 16,
/// 4 x 2. Vectors wider than the registers, which GCC splits, spill: a
/// build for generic x86-64 ran seven times slower with AVX's width.
#if defined(__AVX512F__)
constexpr int64_t kAttentionLanes = 16;
constexpr int kAttentionTileVectors = 4;
#elif defined(__AVX__)
constexpr int64_t kAttentionLanes = 8;
constexpr int kAttentionTileVectors = 3;
#else
constexpr int64_t kAttentionLanes = 4;
constexpr int kAttentionTileVectors = 2;
#endif
constexpr int kAttentionTileRows = 4;
typedef float AttentionVec
    __attribute__((vector_size(kAttentionLanes * sizeof(float))));
static_assert(kAttentionRows % kAttentionTileRows == 0 &&
                  kAttentionKeys % kAttentionTileRows == 0 &&
                  kAttentionKeys % kAttentionLanes == 0,
              "attention's blocks are whole tiles");

/// n rounded up to whole vectors: the row length of the float copies of
/// attention's operands, whose rows the products read as vectors (the
/// padding is zero).
inline int64_t attentionPadded(int64_t n) {
  return (n + kAttentionLanes - 1) / kAttentionLanes * kAttentionLanes;
}

/// The terms of a product summed in registers before the sum is added to
/// the output: one chain of all of a block's terms (64 with a head of 64
/// features) left the results half again as far from the exact ones as
/// the earlier kernels' parts of four did; parts of 16 keep them as close
/// (parts of 32 did not), for a load, an add and a store of each sum per
/// 16 FMAs.
constexpr int64_t kAttentionChain = 16;

/// c[i][x] (+)= sum_k a[i * aRow + k * aStep] * b[k * ldb + x] for R rows
/// of c and V vectors of b's rows: each element of `a` is broadcast against
/// a row of b. The sums start from c where `accumulate`, from 0 otherwise.
template <int R, int V>
inline void attentionTile(const float *a, int64_t aRow, int64_t aStep,
                          int64_t n, const float *b, int64_t ldb, float *c,
                          int64_t ldc, bool accumulate) {
  for (int64_t k0 = 0; k0 < n || (k0 == 0 && !accumulate);
       k0 += kAttentionChain) {
    // Only ever indexed by constants (the loops unroll), the sums stay in
    // registers.
    AttentionVec acc[R][V];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int x = 0; x < V; ++x)
        acc[i][x] = AttentionVec{};
    int64_t k1 = std::min(n, k0 + kAttentionChain);
#pragma GCC unroll 4
    for (int64_t k = k0; k < k1; ++k) {
      AttentionVec bk[V];
#pragma GCC unroll 4
      for (int x = 0; x < V; ++x) {
        AttentionVec bx;
        std::memcpy(&bx, b + k * ldb + x * kAttentionLanes,
                    sizeof(AttentionVec));
#if PCC_GEMM_VECTORS
        // In registers: GCC folds the loads into each FMA instead, and a
        // load of b for every FMA makes the loop wait on the load ports
        // (as in packed::microKernel).
        __asm__("" : "+v"(bx));
#endif
        bk[x] = bx;
      }
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        // A broadcast (x - 0 is x, -0 included).
        AttentionVec ak = a[i * aRow + k * aStep] - AttentionVec{};
#pragma GCC unroll 4
        for (int x = 0; x < V; ++x)
          acc[i][x] = ak * bk[x] + acc[i][x];
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int x = 0; x < V; ++x) {
        float *ci = c + i * ldc + x * kAttentionLanes;
        if (k0 > 0 || accumulate) {
          AttentionVec sum;
          std::memcpy(&sum, ci, sizeof(AttentionVec));
          acc[i][x] += sum;
        }
        std::memcpy(ci, &acc[i][x], sizeof(AttentionVec));
      }
  }
}

/// attentionTile for the last `left` (< kAttentionTileVectors) vectors of
/// a row.
template <int V>
inline void attentionTileTail(int64_t left, const float *a, int64_t aRow,
                              int64_t aStep, int64_t n, const float *b,
                              int64_t ldb, float *c, int64_t ldc,
                              bool accumulate) {
  if constexpr (V > 0) {
    if (left == V)
      attentionTile<kAttentionTileRows, V>(a, aRow, aStep, n, b, ldb, c, ldc,
                                           accumulate);
    else
      attentionTileTail<V - 1>(left, a, aRow, aStep, n, b, ldb, c, ldc,
                               accumulate);
  }
}

/// c (+)= a b for `rows` (a multiple of kAttentionTileRows) rows of c,
/// ldc apart, each `vectors` vectors long: a is rows x n, its elements
/// aRow and aStep apart (a transposed operand is read in place), b n rows
/// ldb apart.
inline void attentionProduct(const float *a, int64_t aRow, int64_t aStep,
                             int64_t rows, int64_t n, const float *b,
                             int64_t ldb, int64_t vectors, float *c,
                             int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < rows; i += kAttentionTileRows) {
    const float *ai = a + i * aRow;
    float *ci = c + i * ldc;
    int64_t x = 0;
    for (; x + kAttentionTileVectors <= vectors; x += kAttentionTileVectors)
      attentionTile<kAttentionTileRows, kAttentionTileVectors>(
          ai, aRow, aStep, n, b + x * kAttentionLanes, ldb,
          ci + x * kAttentionLanes, ldc, accumulate);
    attentionTileTail<kAttentionTileVectors - 1>(
        vectors - x, ai, aRow, aStep, n, b + x * kAttentionLanes, ldb,
        ci + x * kAttentionLanes, ldc, accumulate);
  }
}

/// Keys [j0, j1) of one key/value head in float, as the products read
/// them: transposed, block by block of kAttentionKeys keys (key c, feature
/// f at kt[c / kAttentionKeys * d * kAttentionKeys + f * kAttentionKeys +
/// c % kAttentionKeys]), so that a block's rows lie together and not a
/// row of all keys apart (at 1024 keys, a page: the lines of a block would
/// all fall in a few sets of the cache and evict each other); and, where
/// kb is not null, as rows kb[c][f] dPad apart.
template <typename T>
inline void attentionLoadKeys(const AttentionShape &l, const T *k, int64_t j0,
                              int64_t j1, float *kt, float *kb, int64_t dPad) {
  int64_t d = l.features, step = l.kStrides[2];
  if (kb)
    for (int64_t c = j0; c < j1; ++c)
      for (int64_t f = 0; f < d; ++f)
        kb[c * dPad + f] = float(k[c * step + f]);
  for (int64_t c = j0; c < j1; ++c) {
    float *column =
        kt + c / kAttentionKeys * d * kAttentionKeys + c % kAttentionKeys;
    for (int64_t f = 0; f < d; ++f)
      column[f * kAttentionKeys] = float(k[c * step + f]);
  }
}

/// s[r][c] = scale * q_r . k_c + bias(r, c) for the kAttentionRows rows of
/// `qb` (queries i0 on, in float, ldq apart; zero past `rows`) and keys
/// [j0, j0 + cols) of one head, their block `kt` of attentionLoadKeys;
/// -inf where the causal mask hides key c from row r and past `cols` (up
/// to kAttentionKeys). The rows past `rows` are not scores.
template <typename T>
inline void attentionScores(const AttentionShape &l, const float *qb,
                            int64_t ldq, const float *kt, const T *bias,
                            int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                            float *s) {
  attentionProduct(qb, ldq, 1, kAttentionRows, l.features, kt, kAttentionKeys,
                   kAttentionKeys / kAttentionLanes, s, kAttentionKeys,
                   /*accumulate=*/false);
  for (int64_t r = 0; r < rows; ++r) {
    float *sr = s + r * kAttentionKeys;
    for (int64_t c = 0; c < cols; ++c)
      sr[c] *= l.scale;
    if (bias) {
      const T *br = bias + (i0 + r) * l.biasStrides[2] + j0 * l.biasStrides[3];
      for (int64_t c = 0; c < cols; ++c)
        sr[c] += float(br[c * l.biasStrides[3]]);
    }
    int64_t end = l.causal ? std::max<int64_t>(0, i0 + r + 1 - j0) : cols;
    for (int64_t c = std::min(end, cols); c < kAttentionKeys; ++c)
      sr[c] = -std::numeric_limits<float>::infinity();
  }
}
} // namespace detail

/// Scaled dot-product attention without its scores (FlashAttention's
/// forward): per block of queries, the blocks of keys in turn, with a
/// running maximum and sum per row; under a causal mask the blocks above
/// the diagonal are skipped. Writes the output (dense) and each row's
/// log-sum-exp (-inf, and a zero output, for a row whose keys are all
/// masked).
template <typename T>
void attention(const T *q, const T *k, const T *v, const T *bias, T *o,
               float *lse, const AttentionShape &l) {
  using namespace detail;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  int64_t d = l.features, e = l.valueFeatures, ePad = attentionPadded(e);
  int64_t rowBlocks = (l.queries + kAttentionRows - 1) / kAttentionRows;
  int64_t keysPad =
      (l.keys + kAttentionKeys - 1) / kAttentionKeys * kAttentionKeys;
  int64_t tasks = l.batch * l.heads * rowBlocks;
  int64_t perGroup = l.heads / l.groups;
  int64_t work = tasks * kAttentionRows * l.keys * l.features;
#pragma omp parallel num_threads(threads()) if (shareThreads(work))
  {
    // The keys (transposed) and values of the key/value head of the
    // thread's last task, in float, as far as its tasks have needed them:
    // the tasks of a head follow each other, and a thread takes many of
    // them, which read the same keys.
    std::vector<float> kt(d * keysPad), vb(keysPad * ePad);
    int64_t held = -1, heldKeys = 0;
    // Per row: its running maximum, and its running sum as a vector of
    // partial sums, added up once the row is done (adding up each block's
    // share of a row took a tenth of the time).
    std::vector<float> qb(kAttentionRows * d),
        s(kAttentionRows * kAttentionKeys), acc(kAttentionRows * ePad),
        mx(kAttentionRows), sums(kAttentionRows * kAttentionLanes);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      // A head's last block of rows first: under a causal mask it has the
      // most keys, and the short ones even out the threads' ends.
      int64_t ib = rowBlocks - 1 - task % rowBlocks, bh = task / rowBlocks;
      int64_t b = bh / l.heads, h = bh % l.heads, g = h / perGroup;
      int64_t i0 = ib * kAttentionRows;
      int64_t rows = std::min(kAttentionRows, l.queries - i0);
      const T *qh = q + b * l.qStrides[0] + h * l.qStrides[1];
      const T *bh0 =
          bias ? bias + b * l.biasStrides[0] + h * l.biasStrides[1] : nullptr;
      int64_t keyEnd = l.causal ? std::min(l.keys, i0 + rows) : l.keys;
      if (held != b * l.groups + g) {
        held = b * l.groups + g;
        heldKeys = 0;
      }
      if (heldKeys < keyEnd) {
        const T *vh = v + b * l.vStrides[0] + g * l.vStrides[1];
        attentionLoadKeys(l, k + b * l.kStrides[0] + g * l.kStrides[1],
                          heldKeys, keyEnd, kt.data(), nullptr, 0);
        for (int64_t c = heldKeys; c < keyEnd; ++c)
          for (int64_t x = 0; x < e; ++x)
            vb[c * ePad + x] = float(vh[c * l.vStrides[2] + x]);
        heldKeys = keyEnd;
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t f = 0; f < d; ++f)
          qb[r * d + f] = float(qh[(i0 + r) * l.qStrides[2] + f]);
      std::fill(qb.begin() + rows * d, qb.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(mx.begin(), mx.end(), kNegInf);
      std::fill(sums.begin(), sums.end(), 0.0f);
      for (int64_t j0 = 0; j0 < keyEnd; j0 += kAttentionKeys) {
        int64_t cols = std::min(kAttentionKeys, keyEnd - j0);
        attentionScores(l, qb.data(), d, kt.data() + j0 * d, bh0, i0, rows, j0,
                        cols, s.data());
        for (int64_t r = 0; r < kAttentionRows; ++r) {
          float *sr = s.data() + r * kAttentionKeys;
          float m =
              r < rows ? std::max(mx[r], rowMax(sr, kAttentionKeys)) : kNegInf;
          if (m == kNegInf) {
            // Every key so far masked (or no row): the row adds nothing.
            std::fill(sr, sr + kAttentionKeys, 0.0f);
            continue;
          }
          float correction = expNonPositive<float>(mx[r] - m);
          for (int64_t c = 0; c < kAttentionKeys; ++c)
            sr[c] = expNonPositive<float>(sr[c] - m);
          AttentionVec part, block;
          std::memcpy(&part, &sums[r * kAttentionLanes], sizeof(part));
          part *= correction;
          for (int64_t c = 0; c < kAttentionKeys; c += kAttentionLanes) {
            std::memcpy(&block, sr + c, sizeof(block));
            part += block;
          }
          std::memcpy(&sums[r * kAttentionLanes], &part, sizeof(part));
          mx[r] = m;
          float *ar = acc.data() + r * ePad;
          for (int64_t x = 0; x < e; ++x)
            ar[x] *= correction;
        }
        attentionProduct(s.data(), kAttentionKeys, 1, kAttentionRows, cols,
                         vb.data() + j0 * ePad, ePad, ePad / kAttentionLanes,
                         acc.data(), ePad, /*accumulate=*/true);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T *orow = o + ((b * l.heads + h) * l.queries + i0 + r) * e;
        float sum = 0;
        for (int64_t c = 0; c < kAttentionLanes; ++c)
          sum += sums[r * kAttentionLanes + c];
        float inv = sum > 0 ? 1.0f / sum : 0.0f;
        for (int64_t x = 0; x < e; ++x)
          orow[x] = T(acc[r * ePad + x] * inv);
        lse[(b * l.heads + h) * l.queries + i0 + r] =
            sum > 0 ? mx[r] + std::log(sum) : kNegInf;
      }
    }
  }
}

/// The gradients of attention's query, key and value (FlashAttention's
/// backward): the probabilities of each block are recomputed from the
/// saved log-sum-exp. Each block of keys makes its key and value gradients
/// (over every query head of its group) and adds its part of the query
/// gradients to its thread's copy of them; the copies are then summed in
/// thread order, so a run is reproducible at a given thread count. The
/// gradients are dense, in their operands' shapes.
template <typename T>
void attentionGrad(const T *q, const T *k, const T *v, const T *bias,
                   const T *o, const float *lse, const T *dout, T *dq, T *dk,
                   T *dv, const AttentionShape &l) {
  using namespace detail;
  int64_t d = l.features, e = l.valueFeatures;
  int64_t dPad = attentionPadded(d), ePad = attentionPadded(e);
  int64_t perGroup = l.heads / l.groups;
  int64_t rowBlocks = (l.queries + kAttentionRows - 1) / kAttentionRows;
  int64_t rowsPad = rowBlocks * kAttentionRows;
  int64_t keyBlocks = (l.keys + kAttentionKeys - 1) / kAttentionKeys;
  int64_t heads = l.batch * l.heads;
  int64_t work = heads * l.queries * l.keys * d;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr int64_t kKeyVectors = kAttentionKeys / kAttentionLanes;
  bool parallel = shareThreads(work);
  // Every block of keys reads the rows of q and dout of every head of its
  // group: they are made float once, a head's rows rowsPad apart (zero past
  // the queries), and with them delta = rowsum(dout * o).
  std::vector<float> qf(heads * rowsPad * dPad), df(heads * rowsPad * ePad),
      delta(heads * rowsPad);
  int64_t dqSize = heads * rowsPad * dPad;
  std::vector<float> dqParts((parallel ? threads() : 1) * dqSize, 0.0f);
#pragma omp parallel num_threads(threads()) if (parallel)
  {
#pragma omp for schedule(static)
    for (int64_t row = 0; row < heads * l.queries; ++row) {
      int64_t bh = row / l.queries, i = row % l.queries;
      int64_t b = bh / l.heads, h = bh % l.heads;
      const T *qr =
          q + b * l.qStrides[0] + h * l.qStrides[1] + i * l.qStrides[2];
      int64_t at = b * l.oStrides[0] + h * l.oStrides[1] + i * l.oStrides[2];
      float *qfr = qf.data() + (bh * rowsPad + i) * dPad;
      float *dfr = df.data() + (bh * rowsPad + i) * ePad;
      for (int64_t f = 0; f < d; ++f)
        qfr[f] = float(qr[f]);
      float sum = 0;
      for (int64_t x = 0; x < e; ++x) {
        dfr[x] = float(dout[at + x]);
        sum += dfr[x] * float(o[at + x]);
      }
      delta[bh * rowsPad + i] = sum;
    }
    // The block's keys transposed (kt) and as rows (kb), its values
    // transposed (vt); P and dS of a block of rows, then the block's key
    // and value gradients.
    std::vector<float> kt(d * kAttentionKeys), kb(kAttentionKeys * dPad),
        vt(e * kAttentionKeys), p(kAttentionRows * kAttentionKeys),
        ds(kAttentionRows * kAttentionKeys), dkb(kAttentionKeys * dPad),
        dvb(kAttentionKeys * ePad);
#ifdef _OPENMP
    int64_t part = omp_get_thread_num(), parts = omp_get_num_threads();
#else
    int64_t part = 0, parts = 1;
#endif
    float *dqMine = dqParts.data() + part * dqSize;
    // Per batch entry, key/value head and block of keys, round robin (the
    // causal mask leaves later blocks less to do), every other head's
    // blocks from the last: otherwise, with an even number of blocks and
    // two threads, one thread would take every head's longest block.
#pragma omp for schedule(static, 1)
    for (int64_t task = 0; task < l.batch * l.groups * keyBlocks; ++task) {
      int64_t bg = task / keyBlocks, jb = task % keyBlocks;
      if (bg % 2)
        jb = keyBlocks - 1 - jb;
      int64_t b = bg / l.groups, g = bg % l.groups;
      int64_t j0 = jb * kAttentionKeys;
      int64_t cols = std::min(kAttentionKeys, l.keys - j0);
      // A short last block's columns past `cols` are zero: what an earlier
      // block left there would enter dP, and dS as 0 * inf were it not
      // finite.
      if (cols < kAttentionKeys) {
        std::fill(kt.begin(), kt.end(), 0.0f);
        std::fill(vt.begin(), vt.end(), 0.0f);
      }
      const T *kh = k + b * l.kStrides[0] + g * l.kStrides[1];
      const T *vh = v + b * l.vStrides[0] + g * l.vStrides[1];
      attentionLoadKeys(l, kh + j0 * l.kStrides[2], 0, cols, kt.data(),
                        kb.data(), dPad);
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t x = 0; x < e; ++x)
          vt[x * kAttentionKeys + c] = float(vh[(j0 + c) * l.vStrides[2] + x]);
      std::fill(dkb.begin(), dkb.end(), 0.0f);
      std::fill(dvb.begin(), dvb.end(), 0.0f);
      for (int64_t h = g * perGroup; h < (g + 1) * perGroup; ++h) {
        int64_t bh = b * l.heads + h;
        const T *bh0 =
            bias ? bias + b * l.biasStrides[0] + h * l.biasStrides[1] : nullptr;
        const float *lseRow = lse + bh * l.queries;
        int64_t firstRow = l.causal ? j0 : 0;
        for (int64_t i0 = firstRow / kAttentionRows * kAttentionRows;
             i0 < l.queries; i0 += kAttentionRows) {
          int64_t rows = std::min(kAttentionRows, l.queries - i0);
          const float *qb = qf.data() + (bh * rowsPad + i0) * dPad;
          const float *db = df.data() + (bh * rowsPad + i0) * ePad;
          const float *deltaRows = delta.data() + bh * rowsPad + i0;
          // P, and dS = P * (dP - delta) with dP = dout . v^T; zero past
          // the block's rows and keys.
          attentionScores(l, qb, dPad, kt.data(), bh0, i0, rows, j0, cols,
                          p.data());
          attentionProduct(db, ePad, 1, kAttentionRows, e, vt.data(),
                           kAttentionKeys, kKeyVectors, ds.data(),
                           kAttentionKeys, /*accumulate=*/false);
          for (int64_t r = 0; r < kAttentionRows; ++r) {
            float m = r < rows ? lseRow[i0 + r] : kNegInf;
            float *pr = p.data() + r * kAttentionKeys;
            float *dsr = ds.data() + r * kAttentionKeys;
            if (m == kNegInf) {
              std::fill(pr, pr + kAttentionKeys, 0.0f);
              std::fill(dsr, dsr + kAttentionKeys, 0.0f);
              continue;
            }
            // min(0, x) as a select, which vectorizes (std::min's branch
            // does not).
            for (int64_t c = 0; c < kAttentionKeys; ++c) {
              float x = pr[c] - m;
              pr[c] = expNonPositive<float>(select(x < 0.0f, x, 0.0f));
            }
            for (int64_t c = 0; c < kAttentionKeys; ++c)
              dsr[c] = pr[c] * (dsr[c] - deltaRows[r]);
          }
          // dv_c += sum_r p_rc dout_r, dk_c += sum_r ds_rc q_r (scaled
          // when written): P and dS read transposed, in place.
          attentionProduct(p.data(), 1, kAttentionKeys, kAttentionKeys, rows,
                           db, ePad, ePad / kAttentionLanes, dvb.data(), ePad,
                           /*accumulate=*/true);
          attentionProduct(ds.data(), 1, kAttentionKeys, kAttentionKeys, rows,
                           qb, dPad, dPad / kAttentionLanes, dkb.data(), dPad,
                           /*accumulate=*/true);
          // dq_r += sum_c ds_rc k_c (scaled when the parts are summed).
          attentionProduct(ds.data(), kAttentionKeys, 1, kAttentionRows, cols,
                           kb.data(), dPad, dPad / kAttentionLanes,
                           dqMine + (bh * rowsPad + i0) * dPad, dPad,
                           /*accumulate=*/true);
        }
      }
      for (int64_t c = 0; c < cols; ++c) {
        T *dkr = dk + ((b * l.groups + g) * l.keys + j0 + c) * d;
        T *dvr = dv + ((b * l.groups + g) * l.keys + j0 + c) * e;
        for (int64_t f = 0; f < d; ++f)
          dkr[f] = T(dkb[c * dPad + f] * l.scale);
        for (int64_t x = 0; x < e; ++x)
          dvr[x] = T(dvb[c * ePad + x]);
      }
    }
#pragma omp for schedule(static)
    for (int64_t row = 0; row < heads * l.queries; ++row) {
      int64_t bh = row / l.queries, i = row % l.queries;
      const float *part0 = dqParts.data() + (bh * rowsPad + i) * dPad;
      for (int64_t f = 0; f < d; ++f) {
        float sum = 0;
        for (int64_t t = 0; t < parts; ++t)
          sum += part0[t * dqSize + f];
        dq[row * d + f] = T(sum * l.scale);
      }
    }
  }
}

// The instances the generated code calls: attention in each element type
// the CPU target emits.
#define PCC_ATTENTION_INSTANCES(T)                                             \
  template void attention<T>(const T *, const T *, const T *, const T *, T *,  \
                             float *, const AttentionShape &);                 \
  template void attentionGrad<T>(const T *, const T *, const T *, const T *,   \
                                 const T *, const float *, const T *, T *,     \
                                 T *, T *, const AttentionShape &);
PCC_ATTENTION_INSTANCES(float)
PCC_ATTENTION_INSTANCES(double)
PCC_ATTENTION_INSTANCES(f16)
PCC_ATTENTION_INSTANCES(bf16)
#undef PCC_ATTENTION_INSTANCES
} // namespace pcc_k
