//===- pcc_kernels.h - Kernels called by pcc's generated CPU code ---------===//
//
// C++17, copied next to every generated model.cpp. The emitter writes
// element-wise ops, reductions and data movement as loops of their own;
// these are the kernels whose loops are not worth emitting per op. All
// shapes arrive as compile-time constants at the call sites. The packed
// GEMM engine, the same for every model, is only declared here, and
// float's fused attention only instantiated there: their code is
// pcc_kernels.cpp, compiled once per flag set and linked with the model.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_KERNELS_H
#define PCC_KERNELS_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef PCC_USE_CBLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

// The functions of pcc_kernels.cpp, which the generated code calls: hidden
// in the model's library, so that models built with other flags and loaded
// into the same process each call their own.
#if defined(__GNUC__)
#define PCC_KERNEL_API __attribute__((visibility("hidden")))
#else
#define PCC_KERNEL_API
#endif

// The functions of the program itself (the model's steps) are straight-line
// sequences of kernel calls: the C++ compiler's optimizer has nothing to win
// there, and its time grows faster than their length (a training step of a
// large model has thousands of calls). They are compiled unoptimized; the
// kernels they call are not.
#if defined(__clang__)
#define PCC_PROGRAM __attribute__((optnone))
#elif defined(__GNUC__)
#define PCC_PROGRAM __attribute__((optimize("O0")))
#else
#define PCC_PROGRAM
#endif

namespace pcc_k {

/// IEEE half precision storage; arithmetic happens in float.
struct f16 {
  uint16_t bits;
  f16() = default;
  template <typename U, typename = std::enable_if_t<std::is_arithmetic_v<U>>>
  f16(U v) : bits(fromFloat(float(v))) {}
  operator float() const { return toFloat(bits); }
  static f16 fromBits(uint16_t b) {
    f16 h;
    h.bits = b;
    return h;
  }
  // Round to nearest even, with overflow to infinity and gradual underflow.
  static uint16_t fromFloat(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
    int exp = int((x >> 23) & 0xff);
    if (exp == 0xff)
      return uint16_t(sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
    int e = exp - 127 + 15;
    if (e >= 0x1f)
      return uint16_t(sign | 0x7c00);
    if (e <= 0) {
      if (e < -10)
        return uint16_t(sign);
      mant |= 0x800000;
      int shift = 14 - e;
      uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1);
      uint32_t mid = 1u << (shift - 1);
      if (rem > mid || (rem == mid && (h & 1)))
        ++h;
      return uint16_t(sign | h);
    }
    uint32_t h = (uint32_t(e) << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
      ++h;
    return uint16_t(sign | h);
  }
  static float toFloat(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16, mant = h & 0x3ff;
    int exp = (h >> 10) & 0x1f;
    uint32_t x;
    if (exp == 0x1f) {
      x = sign | 0x7f800000 | (mant << 13);
    } else if (exp == 0) {
      if (!mant) {
        x = sign;
      } else {
        int e = -1;
        do {
          ++e;
          mant <<= 1;
        } while (!(mant & 0x400));
        x = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
      }
    } else {
      x = sign | (uint32_t(exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
};

/// bfloat16 storage (the upper half of a float); arithmetic in float.
struct bf16 {
  uint16_t bits;
  bf16() = default;
  template <typename U, typename = std::enable_if_t<std::is_arithmetic_v<U>>>
  bf16(U v) : bits(fromFloat(float(v))) {}
  operator float() const {
    uint32_t x = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
  static bf16 fromBits(uint16_t b) {
    bf16 h;
    h.bits = b;
    return h;
  }
  // Round to nearest even; NaNs stay quiet NaNs.
  static uint16_t fromFloat(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
      return uint16_t((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return uint16_t(x >> 16);
  }
};

//===----------------------------------------------------------------------===//
// Float math
//===----------------------------------------------------------------------===//
//
// libm's exp, tanh, erf and log are calls, and a call keeps GCC from
// vectorizing the loop around it. These are inline arithmetic, bit casts
// and selects, which it vectorizes (at -O2 too, for SSE2 and AVX2 alike).
// The polynomials are minimax fits made for pcc (Remez exchange in 40-digit
// arithmetic, coefficients then rounded to float). Each bound quoted is the
// largest error measured over every float against the double-precision libm
// function, with g++ 12 -O2 for x86-64-v3 (multiply-adds contracted to FMA)
// and for generic x86-64; an ulp is the spacing of floats at the exact
// result. test/unittests/kernels checks them. The code relies on IEEE
// arithmetic as written: -ffast-math's reassociation would undo fexp's
// rounding.

namespace detail {
inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

/// c0 + x (c1 + x (c2 + ...)), Horner's rule unrolled at compile time.
inline float horner(float, float c0) { return c0; }
template <typename... Rest>
inline float horner(float x, float c0, Rest... rest) {
  return c0 + x * horner(x, rest...);
}

/// c ? a : b, chosen on the bits. GCC does not if-convert a ternary between
/// float expressions (it must not evaluate them speculatively under the
/// default -ftrapping-math), and a branch in a loop stops vectorization.
inline float select(bool c, float a, float b) {
  uint32_t mask = uint32_t(0) - uint32_t(c);
  return floatOf((bitsOf(a) & mask) | (bitsOf(b) & ~mask));
}

/// exp(x) = p * 2^n for x in [-104, 89] or NaN: x = n ln2 + r with |r| <=
/// ln2 / 2, p = exp(r) by a degree-6 polynomial.
inline float expParts(float x, int32_t &n) {
  // Adding 1.5 * 2^23 rounds x / ln2 to an integer, which lands in the low
  // bits of the sum's significand.
  constexpr float kShift = 0x1.8p23f;
  float k = x * 1.44269502f + kShift;
  n = int32_t(bitsOf(k) - bitsOf(kShift));
  float kf = k - kShift;
  // ln2 in two parts (Cody-Waite): kf * 0.693359375 is exact.
  float r = x - kf * 0.693359375f;
  r = r - kf * -2.12194442e-4f;
  float q = horner(r, 0.49999994f, 0.166665211f, 0.041668389f, 0.0083687352f,
                   0.00138145592f);
  return 1.0f + (r + r * r * q);
}

/// exp(x) for x in [-104, 89] or NaN, 2^n applied as two factors so that
/// n = 128 overflows and n down to -150 underflows gradually by themselves.
inline float expInRange(float x) {
  int32_t n;
  float p = expParts(x, n);
  int32_t half = n >> 1;
  float scale0 = floatOf(uint32_t(half + 127) << 23);
  float scale1 = floatOf(uint32_t(n - half + 127) << 23);
  return p * scale0 * scale1;
}
} // namespace detail

/// exp(x), within 1.01 ulp (relative error 8.6e-8); inf past 88.72, 0
/// below -103.97, subnormal results in between, NaN for NaN.
inline float fexp(float x) {
  x = detail::select(x > 89.0f, 89.0f, x);
  x = detail::select(x < -104.0f, -104.0f, x);
  return detail::expInRange(x);
}

/// exp(x) for x <= 0 (a softmax's shifted inputs), within fexp's bound
/// from -87.33 on, and 0 below, where exp(x) is within 7e-42 of FLT_MIN or
/// under it: a subnormal product costs the FPU a slow path (fexp's made a
/// causal mask's rows half again as slow on Zen 3), and that of a lane
/// that is then discarded costs as much. NaN for NaN. 2^n is one factor:
/// n >= -126 there, and the argument never overflows.
inline float fexpNonPositive(float x) {
  // exp(kLow) = 1.1762e-38 is normal, with the polynomial's p >= 1.
  constexpr float kLow = -87.33f;
  bool under = x < kLow;
  int32_t n;
  float p = detail::expParts(detail::select(under, kLow, x), n);
  return detail::select(under, 0.0f,
                        p * detail::floatOf(uint32_t(n + 127) << 23));
}

/// The logistic sigmoid 1 / (1 + exp(-x)), within 2.49 ulp (relative error
/// 1.49e-7, both near -16.6); 0 below -87.33, where the result would be
/// subnormal (and cost the FPU its slow path), 1 from 16.64 on, NaN for
/// NaN. exp(-x) is taken with x clamped to [-87.33, 87.33], where one 2^n
/// factor covers it and it stays normal.
inline float fsigmoid(float x) {
  constexpr float kLimit = 87.33f;
  float m = detail::select(x > kLimit, kLimit, x);
  m = detail::select(m < -kLimit, -kLimit, m);
  int32_t n;
  float p = detail::expParts(-m, n);
  float e = p * detail::floatOf(uint32_t(n + 127) << 23);
  return detail::select(x < -kLimit, 0.0f, 1.0f / (1.0f + e));
}

/// tanh(x), within 1.34 ulp (relative error 1.43e-7, absolute 8.0e-8, both
/// at 0.631); odd (tanh(-0) = -0), exactly +-1 from |x| = 9.011 on (where
/// float rounds tanh to 1), NaN for NaN.
inline float ftanh(float x) {
  float a = std::fabs(x);
  // Below 0.625 an odd polynomial, accurate relative to the result near 0;
  // above it 1 - 2 / (exp(2a) + 1), where the cancellation is mild.
  float s = a * a;
  float small =
      a + a * s *
              detail::horner(s, -0.333332807f, 0.133314416f, -0.0537397154f,
                             0.020639088f, -0.00570498686f);
  float b = detail::select(a > 10.0f, 10.0f, a);
  float large = 1.0f - 2.0f / (detail::expInRange(2.0f * b) + 1.0f);
  return std::copysign(detail::select(a < 0.625f, small, large), x);
}

/// erf(x), within 1.24 ulp (relative error 1.04e-7, absolute 7.4e-8); odd,
/// exactly +-1 from |x| = 3.933 on (float rounds erf to 1 from 3.920), NaN
/// for NaN.
inline float ferf(float x) {
  float a = std::fabs(x);
  // Below 0.875 an odd polynomial, x + x * P(x^2) so that the leading
  // 2 / sqrt(pi) needs no rounding; above it 1 - exp(-x^2) * erfcx(x),
  // erfcx = exp(x^2) erfc(x) by a polynomial in x - 2 fitted for absolute
  // accuracy of erf.
  float s = a * a;
  float small =
      a + a * detail::horner(s, 0.128379151f, -0.376125515f, 0.112824552f,
                             -0.0267914627f, 0.00503218127f, -0.000620325503f);
  float b = detail::select(a > 4.0f, 4.0f, a);
  float erfcx =
      detail::horner(b - 2.0f, 0.255395353f, -0.106798209f, 0.0418107212f,
                     -0.0154183386f, 0.0054593333f, -0.00194404926f,
                     0.000465742167f, -0.000149036496f, 0.000142778648f);
  float large = 1.0f - detail::expInRange(-b * b) * erfcx;
  return std::copysign(detail::select(a < 0.875f, small, large), x);
}

/// log(x), within 0.91 ulp (relative error 8.4e-8); -inf for +-0, NaN below
/// 0 and for NaN, inf for inf; subnormal x are exact inputs like any other.
inline float flog(float x) {
  // x = 2^e m with m in [sqrt(1/2), sqrt(2)); subnormals are scaled first.
  bool tiny = x < 0x1p-126f;
  float xs = detail::select(tiny, x * 0x1p23f, x);
  float bias = detail::select(tiny, -23.0f, 0.0f);
  uint32_t u = detail::bitsOf(xs) - detail::bitsOf(0.707106769f);
  float e = float(int32_t(u) >> 23) + bias;
  float m = detail::floatOf((u & 0x7fffffu) + detail::bitsOf(0.707106769f));
  // log m = 2 atanh(f) with f = t / (2 + t), t = m - 1 exact; written as
  // t - (t^2/2 - f (t^2/2 + R)) so that the rounding of f only touches the
  // small correction. R = f^2 P(f^2), |f| <= 0.1716.
  float t = m - 1.0f;
  float f = t / (t + 2.0f);
  float s = f * f;
  float halfSquare = 0.5f * t * t;
  float rest = s * detail::horner(s, 0.666667759f, 0.399775594f, 0.298713624f);
  float logM = t - (halfSquare - f * (halfSquare + rest));
  float r = e * 0.693359375f + (logM + e * -2.12194442e-4f);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  r = detail::select(x == kInf, kInf, r);
  r = detail::select(x == 0.0f, -kInf, r);
  return detail::select(x >= 0.0f, r, std::numeric_limits<float>::quiet_NaN());
}

//===----------------------------------------------------------------------===//
// Threads
//===----------------------------------------------------------------------===//

/// The threads of a run: the generated loops (OpenMP) and the GEMMs share
/// them. The BLAS itself runs on one thread per call, so that the two never
/// keep separate pools spinning against each other; a large GEMM is split
/// among the threads here instead.
inline int &threadCount() {
  static int count = 1;
  return count;
}
inline int threads() { return threadCount(); }
/// Whether a loop of `work` iterations is worth the run's threads and is
/// not already running on one of them.
inline bool shareThreads(int64_t work) {
#ifdef _OPENMP
  return threads() > 1 && work >= 65536 && !omp_in_parallel();
#else
  (void)work;
  return false;
#endif
}
} // namespace pcc_k

#ifdef PCC_USE_CBLAS
extern "C" void openblas_set_num_threads(int) __attribute__((weak));
#endif

namespace pcc_k {
inline void setThreads(int count) {
  threadCount() = count > 0 ? count : 1;
#ifdef PCC_USE_CBLAS
  static bool single = false;
  if (!single && openblas_set_num_threads) {
    openblas_set_num_threads(1);
    single = true;
  }
#endif
}

//===----------------------------------------------------------------------===//
// GEMM: packed operands and a micro-kernel
//===----------------------------------------------------------------------===//
//
// Every float product runs pcc's own micro-kernel over packed operands
// (packed::product), where the target has the vector units for it: B is
// cut into panels of kPanelCols columns and K into blocks of kDepth rows,
// A's rows are taken kPanelRows at a time. A product whose B is a constant
// weight reads B in that layout prepared once, when the model is prepared
// (`<prefix>_model_prepare`), instead of on every call as a BLAS does: the
// prepared operand holds panel after panel, each its rows of kPanelCols
// floats (columns past N are zero). That is the order in which a thread
// reads a panel, so B streams from memory once per call. Any other product
// packs B block by block as it reads it. A is packed once per call into
// micro-panels of kPanelRows rows, which the micro-kernel reads as one
// stream, where it is transposed or many panels read it; otherwise the
// micro-kernel reads A's rows in place, a stream each.

/// Whether float products run the micro-kernel: where the target has AVX2
/// and FMA for it, or there is no BLAS. A portable build with OpenBLAS
/// (`--cpu generic`), whose kernels are chosen at run time, calls the BLAS
/// instead, and packs nothing.
#if (defined(__AVX2__) && defined(__FMA__) && defined(__GNUC__)) ||            \
    !defined(PCC_USE_CBLAS)
#define PCC_PACKED_GEMM 1
#else
#define PCC_PACKED_GEMM 0
#endif

/// Work after a product on C's rows [r0, r1) and columns [c0, c1), which
/// the product has finished, with the generated code's `args`.
using GemmEpilogueFn = void (*)(void *const *args, int64_t r0, int64_t r1,
                                int64_t c0, int64_t c1);

namespace packed {
// The micro-kernel's tile: kPanelRows rows of A against kVectors vectors of
// kLanes floats of B. With AVX-512's 32 registers, 12 x 32 keeps 24
// accumulators, B's two vectors and A's broadcast in registers; with
// AVX2's 16, 6 x 16 keeps 12. Either hides the FMA latency with more
// independent sums than two pipes need (2 x 4 cycles).
#if defined(__AVX512F__) && defined(__GNUC__)
#define PCC_GEMM_VECTORS 1
constexpr int64_t kLanes = 16, kPanelRows = 12;
#elif defined(__AVX2__) && defined(__FMA__) && defined(__GNUC__)
#define PCC_GEMM_VECTORS 1
constexpr int64_t kLanes = 8, kPanelRows = 6;
#else
#define PCC_GEMM_VECTORS 0
constexpr int64_t kLanes = 8, kPanelRows = 6;
#endif
constexpr int64_t kVectors = 2, kPanelCols = kVectors * kLanes, kDepth = 256;
/// Floats in a 64-byte cache line: the prefetch's step.
constexpr int64_t kLineFloats = 16;

/// Row-major C = alpha * op(A) * op(B) + beta * C on the micro-kernel: A
/// read in place or, transposed, packed once per call and shared by the
/// threads; B from `bp`, packed ahead by packB, or, where `bp` is null,
/// block by block from `b` by the thread that reads the block. The
/// threads take tasks, each a panel of B over a block of rows of C, as
/// they finish the last; a task's `epilogue` runs on its block of C once
/// it is final. On the run's threads where `parallel`, on the calling
/// thread otherwise. In pcc_kernels.cpp.
PCC_KERNEL_API void product(int64_t m, int64_t n, int64_t k, float alpha,
                            const float *a, int64_t lda, bool transA,
                            const float *bp, const float *b, int64_t ldb,
                            bool transB, float beta, float *c, int64_t ldc,
                            GemmEpilogueFn epilogue, void *const *epilogueArgs,
                            bool parallel);
} // namespace packed

/// The width of the blocks of C's columns on which a product runs its
/// epilogue (all but the last, narrower one): the generated epilogues take
/// a path with this width a constant, which the compiler vectorizes
/// without a remainder or checks per row (tanh-GELU's ran 1.2x faster).
constexpr int64_t kEpilogueBlockCols = packed::kPanelCols;

/// Row-major C = alpha * op(A) * op(B) + beta * C, op = optional transpose,
/// on the calling thread.
template <typename T>
inline void gemmSerial(int64_t m, int64_t n, int64_t k, T alpha, const T *a,
                       int64_t lda, bool transA, const T *b, int64_t ldb,
                       bool transB, T beta, T *c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float> && PCC_PACKED_GEMM) {
    packed::product(m, n, k, alpha, a, lda, transA, nullptr, b, ldb, transB,
                    beta, c, ldc, nullptr, nullptr, /*parallel=*/false);
    return;
  }
#ifdef PCC_USE_CBLAS
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
                ldb, beta, c, ldc);
    return;
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
                ldb, beta, c, ldc);
    return;
  }
#endif
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    // 16-bit operands (--dtype bf16): the product in float, rounded once.
    // A buffer of `rows` rows `ld` apart, the last one `cols` long.
    auto extent = [](int64_t rows, int64_t cols, int64_t ld) {
      return size_t(rows > 0 && cols > 0 ? (rows - 1) * ld + cols : 0);
    };
    std::vector<float> af(extent(transA ? k : m, transA ? m : k, lda)),
        bf(extent(transB ? n : k, transB ? k : n, ldb)), cf(size_t(m * n));
    for (size_t e = 0; e < af.size(); ++e)
      af[e] = float(a[e]);
    for (size_t e = 0; e < bf.size(); ++e)
      bf[e] = float(b[e]);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        cf[size_t(i * n + j)] = float(c[i * ldc + j]);
    gemmSerial<float>(m, n, k, float(alpha), af.data(), lda, transA, bf.data(),
                      ldb, transB, float(beta), cf.data(), n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = T(cf[size_t(i * n + j)]);
  } else {
    for (int64_t i = 0; i < m; ++i) {
      T *ci = c + i * ldc;
      for (int64_t j = 0; j < n; ++j)
        ci[j] = beta == T(0) ? T(0) : beta * ci[j];
      for (int64_t p = 0; p < k; ++p) {
        T av = alpha * (transA ? a[p * lda + i] : a[i * lda + p]);
        if (!transB) {
          const T *bp = b + p * ldb;
          for (int64_t j = 0; j < n; ++j)
            ci[j] += av * bp[j];
        } else {
          for (int64_t j = 0; j < n; ++j)
            ci[j] += av * b[j * ldb + p];
        }
      }
    }
  }
}

/// Products of fewer flops run on the calling thread.
constexpr int64_t kParallelFlops = int64_t(1) << 22;
/// ... unless their B is this many floats or more (1 MB): a product of few
/// rows (a decode step's, one token per sequence) is bound by reading B,
/// which every thread's share of the columns reads faster than one thread
/// alone (GPT-2's 768 x 2304 QKV projection, 3.5 MFLOP at one token, reads
/// 7 MB).
constexpr int64_t kParallelBFloats = int64_t(1) << 18;

/// Whether a product is worth the run's threads.
inline bool parallelProduct(int64_t m, int64_t n, int64_t k) {
  return 2 * m * n * k >= kParallelFlops || n * k >= kParallelBFloats;
}

/// Row-major C = alpha * op(A) * op(B) + beta * C on the run's threads: C
/// is cut into one block of columns (or, for narrow products, of rows) per
/// thread. Products under kParallelFlops, and calls from a thread of a
/// parallel loop, run on the calling thread.
template <typename T>
inline void gemm(int64_t m, int64_t n, int64_t k, T alpha, const T *a,
                 int64_t lda, bool transA, const T *b, int64_t ldb, bool transB,
                 T beta, T *c, int64_t ldc) {
  int parts = threads();
  if (parts <= 1 || !parallelProduct(m, n, k)) {
    gemmSerial(m, n, k, alpha, a, lda, transA, b, ldb, transB, beta, c, ldc);
    return;
  }
  if constexpr (std::is_same_v<T, float> && PCC_PACKED_GEMM) {
    packed::product(m, n, k, alpha, a, lda, transA, nullptr, b, ldb, transB,
                    beta, c, ldc, nullptr, nullptr, /*parallel=*/true);
    return;
  }
  // Column blocks keep A shared and B's panels apart; a multiple of 16
  // columns keeps the BLAS's micro-tiles whole.
  bool byColumns = n >= 32 * parts || n >= m;
  int64_t extent = byColumns ? n : m;
  int64_t block = (extent + parts - 1) / parts;
  if (byColumns)
    block = (block + 15) / 16 * 16;
#pragma omp parallel for schedule(static, 1) num_threads(parts)
  for (int part = 0; part < parts; ++part) {
    int64_t begin = part * block, end = std::min(extent, begin + block);
    if (begin >= end)
      continue;
    if (byColumns)
      gemmSerial(m, end - begin, k, alpha, a, lda, transA,
                 transB ? b + begin * ldb : b + begin, ldb, transB, beta,
                 c + begin, ldc);
    else
      gemmSerial(end - begin, n, k, alpha, transA ? a + begin : a + begin * lda,
                 lda, transA, b, ldb, transB, beta, c + begin * ldc, ldc);
  }
}

/// Floats of B (k x n) packed for gemmPackedB.
constexpr int64_t packedBElements(int64_t k, int64_t n) {
  return (n + packed::kPanelCols - 1) / packed::kPanelCols *
         packed::kPanelCols * k;
}
/// Bytes of B packed, rounded up so that the next operand stays aligned to
/// 64 bytes: the prepared operands of a program lie one after another.
/// None where products read B as it is.
constexpr uint64_t packedBBytes(int64_t k, int64_t n) {
  if (!PCC_PACKED_GEMM)
    return 0;
  return (uint64_t(packedBElements(k, n)) * sizeof(float) + 63) / 64 * 64;
}

/// Packs B (k x n, or its transpose n x k when transB, ldb apart) for
/// gemmPackedB, on the run's threads. In pcc_kernels.cpp.
PCC_KERNEL_API void packB(int64_t k, int64_t n, const float *b, int64_t ldb,
                          bool transB, float *out);
/// packB's work for the part of `out` that b's rows [row0, row1) give
/// (rows of ldb floats: B's rows, or, when transB, its columns), once they
/// hold their values: packing a weight a range of rows at a time as its
/// update writes them, while they are in the caches. A transposed B's
/// panels take 32 (kPanelCols) of b's rows: a range that starts or ends
/// inside one packs it whole, so ranges that are not multiples of 32 pack
/// their shared panels twice, the second time with every row in place.
PCC_KERNEL_API void packBRows(int64_t k, int64_t n, const float *b, int64_t ldb,
                              bool transB, float *out, int64_t row0,
                              int64_t row1);

/// Row-major C = alpha * A * op(B) + beta * C with B packed by packB (`bp`)
/// from `b` (k x n, or n x k when transB, ldb apart), on the run's threads
/// (packed::product). Where nothing is packed (PCC_PACKED_GEMM 0), `b`
/// goes to the BLAS. A thread that finishes a block of C runs `epilogue`
/// on it, if any, while it is in its cache.
inline void gemmPackedB(int64_t m, int64_t n, int64_t k, float alpha,
                        const float *a, int64_t lda, const float *bp,
                        [[maybe_unused]] const float *b,
                        [[maybe_unused]] int64_t ldb,
                        [[maybe_unused]] bool transB, float beta, float *c,
                        int64_t ldc, GemmEpilogueFn epilogue = nullptr,
                        void *const *epilogueArgs = nullptr) {
  if (m <= 0 || n <= 0)
    return;
  if (!PCC_PACKED_GEMM && k > 0) {
    gemm<float>(m, n, k, alpha, a, lda, false, b, ldb, transB, beta, c, ldc);
    if (epilogue)
      epilogue(epilogueArgs, 0, m, 0, n);
    return;
  }
  packed::product(m, n, k, alpha, a, lda, false, bp, b, ldb, transB, beta, c,
                  ldc, epilogue, epilogueArgs,
                  threads() > 1 && parallelProduct(m, n, k));
}

/// Row-major C = alpha * A * B^T + beta * C (A m x k and B n x k, lda and
/// ldb apart) computed as its transpose, C^T = alpha * B * A^T, on the
/// run's threads: B's rows are read in place as that product's A, and A's
/// rows packed as its B. For a B that a training step updates, which the
/// product as written reads packed (a copy the step makes again after each
/// update): as fast here, and no copy. C^T is made a chunk of B's rows at
/// a time in a buffer of the calling thread's; the task that finishes a
/// block of it writes the block into C transposed, then runs `epilogue`, if
/// any, on C's block. In pcc_kernels.cpp (PCC_PACKED_GEMM).
PCC_KERNEL_API void gemmTransposed(int64_t m, int64_t n, int64_t k,
                                   float alpha, const float *a, int64_t lda,
                                   const float *b, int64_t ldb, float beta,
                                   float *c, int64_t ldc,
                                   GemmEpilogueFn epilogue,
                                   void *const *epilogueArgs);

/// C = alpha * A * B^T + beta * C through gemmTransposed, or, where
/// nothing is packed (PCC_PACKED_GEMM 0), the BLAS's product and then
/// `epilogue` on the whole of C.
inline void gemmByTranspose(int64_t m, int64_t n, int64_t k, float alpha,
                            const float *a, int64_t lda, const float *b,
                            int64_t ldb, float beta, float *c, int64_t ldc,
                            GemmEpilogueFn epilogue = nullptr,
                            void *const *epilogueArgs = nullptr) {
  if (m <= 0 || n <= 0)
    return;
  if (!PCC_PACKED_GEMM || k <= 0) {
    gemm<float>(m, n, k, alpha, a, lda, false, b, ldb, true, beta, c, ldc);
    if (epilogue)
      epilogue(epilogueArgs, 0, m, 0, n);
    return;
  }
  gemmTransposed(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue,
                 epilogueArgs);
}

/// exp(v) for v <= 0 in T: fexpNonPositive for float (inline, vectorizes),
/// libm's in double otherwise.
template <typename T> inline T expNonPositive(T v) {
  if constexpr (std::is_same_v<T, float>)
    return fexpNonPositive(v);
  else
    return T(std::exp(double(v)));
}

/// The largest of n elements, NaN ignored (-inf for none): sixteen running
/// maxima (two vectors of them for float) instead of one, whose
/// compare-and-select chain would be as long as the row.
template <typename T> inline T rowMax(const T *xs, int64_t n) {
  constexpr int kWays = 16;
  T mx = -std::numeric_limits<T>::infinity();
  if constexpr (std::is_same_v<T, float>) {
    // GCC keeps sixteen scalar maxima in registers rather than two vectors
    // (it does not vectorize a select between floats): the vector types
    // say it, and the row's maximum takes a third of the time.
    typedef float Vec __attribute__((vector_size(kWays / 2 * sizeof(float))));
    Vec lo = mx - Vec{}, hi = lo;
    int64_t j = 0;
    for (; j + kWays <= n; j += kWays) {
      Vec a, b;
      std::memcpy(&a, xs + j, sizeof(Vec));
      std::memcpy(&b, xs + j + kWays / 2, sizeof(Vec));
      lo = a > lo ? a : lo;
      hi = b > hi ? b : hi;
    }
    lo = hi > lo ? hi : lo;
    for (; j < n; ++j)
      mx = xs[j] > mx ? xs[j] : mx;
    for (int l = 0; l < kWays / 2; ++l)
      mx = lo[l] > mx ? lo[l] : mx;
    return mx;
  }
  T ways[kWays];
  for (int l = 0; l < kWays; ++l)
    ways[l] = mx;
  int64_t j = 0;
  for (; j + kWays <= n; j += kWays)
    for (int l = 0; l < kWays; ++l)
      ways[l] = xs[j + l] > ways[l] ? xs[j + l] : ways[l];
  for (; j < n; ++j)
    mx = xs[j] > mx ? xs[j] : mx;
  for (int l = 0; l < kWays; ++l)
    mx = ways[l] > mx ? ways[l] : mx;
  return mx;
}

/// Sum of n values in Acc, over 16 partial sums that the compiler keeps in
/// vector registers (a single running sum would be one long dependency
/// chain, which the compiler may not reorder).
template <typename Acc, typename T, typename F>
inline Acc laneSum(const T *x, int64_t n, F term) {
  constexpr int64_t kLanes = 16;
  Acc lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      lane[l] += term(Acc(x[j + l]));
  Acc tail = 0;
  for (; j < n; ++j)
    tail += term(Acc(x[j]));
  for (int64_t width = kLanes / 2; width > 0; width /= 2)
    for (int64_t l = 0; l < width; ++l)
      lane[l] += lane[l + width];
  return lane[0] + tail;
}

/// Softmax (or log-softmax) of one row of n elements, in place when ys is
/// xs: each exponential is computed once, and the sum in double.
template <typename T>
inline void softmaxRow(const T *xs, T *ys, int64_t n, bool log) {
  T mx = rowMax(xs, n);
  if (mx == -std::numeric_limits<T>::infinity())
    mx = T(0);
  if (log) {
    // The row is read again below, and ys may be xs: the exponentials go
    // through a buffer a block at a time.
    constexpr int64_t kBlock = 512;
    T exps[kBlock];
    double sum = 0;
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      int64_t len = std::min(kBlock, n - j0);
      for (int64_t j = 0; j < len; ++j)
        exps[j] = expNonPositive<T>(T(xs[j0 + j] - mx));
      sum += laneSum<double>(exps, len, [](double v) { return v; });
    }
    T shift = T(double(mx) + std::log(sum));
    for (int64_t k = 0; k < n; ++k)
      ys[k] = T(xs[k] - shift);
    return;
  }
  for (int64_t j = 0; j < n; ++j)
    ys[j] = expNonPositive<T>(T(xs[j] - mx));
  T scale = T(1.0 / laneSum<double>(ys, n, [](double v) { return v; }));
  for (int64_t k = 0; k < n; ++k)
    ys[k] = T(ys[k] * scale);
}

/// Softmax (or log-softmax) over the middle extent of [outer, n, inner].
/// Rows (inner == 1, the usual last axis) share the run's threads.
template <typename T>
inline void softmax(const T *x, T *y, int64_t outer, int64_t n, int64_t inner,
                    bool log) {
  if (inner == 1) {
#pragma omp parallel for schedule(static)                                      \
    num_threads(threads()) if (shareThreads(outer * n))
    for (int64_t o = 0; o < outer; ++o)
      softmaxRow(x + o * n, y + o * n, n, log);
    return;
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T *xs = x + o * n * inner + i;
      T *ys = y + o * n * inner + i;
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < n; ++j)
        mx = std::max(mx, xs[j * inner]);
      if (mx == -std::numeric_limits<T>::infinity())
        mx = T(0);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(double(xs[j * inner] - mx));
      if (log) {
        T lse = T(std::log(sum));
        for (int64_t j = 0; j < n; ++j)
          ys[j * inner] = xs[j * inner] - mx - lse;
      } else {
        for (int64_t j = 0; j < n; ++j)
          ys[j * inner] = T(std::exp(double(xs[j * inner] - mx)) / sum);
      }
    }
}

/// Layer normalization of each row of [outer, n]; scale and bias have n
/// elements (bias may be null). Also writes the mean and 1/stddev per row.
/// Rows share the run's threads. A float row is reduced in float, in two
/// passes (the mean, then the squares about it) over partial sums, as
/// PyTorch's CPU kernel does; other types in double.
template <typename T>
inline void layerNorm(const T *x, const T *scale, const T *bias, T *y, T *mean,
                      T *invStd, int64_t outer, int64_t n, T eps) {
  using Acc = std::conditional_t<std::is_same_v<T, float>, float, double>;
#pragma omp parallel for schedule(static)                                      \
    num_threads(threads()) if (shareThreads(outer * n))
  for (int64_t o = 0; o < outer; ++o) {
    const T *xr = x + o * n;
    T *yr = y + o * n;
    Acc mu = laneSum<Acc>(xr, n, [](Acc v) { return v; }) / Acc(n);
    Acc var = laneSum<Acc>(xr, n, [mu](Acc v) { return (v - mu) * (v - mu); }) /
              Acc(n);
    Acc inv = Acc(1) / std::sqrt(var + Acc(eps));
    if (bias)
      for (int64_t j = 0; j < n; ++j)
        yr[j] = T((Acc(xr[j]) - mu) * inv * Acc(scale[j]) + Acc(bias[j]));
    else
      for (int64_t j = 0; j < n; ++j)
        yr[j] = T((Acc(xr[j]) - mu) * inv * Acc(scale[j]));
    mean[o] = T(mu);
    invStd[o] = T(inv);
  }
}

/// The extents of attention's operands (query [batch, heads, queries,
/// features], key [batch, groups, keys, features], value [batch, groups,
/// keys, valueFeatures]) and where their elements lie: the strides of the
/// batch, head and sequence dimensions of the query, key, value and output
/// (the feature stride is 1), and a bias's stride per dimension of
/// [batch, heads, queries, keys] (0 where it broadcasts). A `softcap` above
/// 0 caps the scaled scores before the bias: softcap * tanh(s / softcap).
/// A `window` above 0 also masks key j from query i where j <= i - window
/// (a sliding window).
struct AttentionShape {
  int64_t batch, heads, groups, queries, keys, features, valueFeatures;
  int64_t qStrides[3], kStrides[3], vStrides[3], oStrides[3], biasStrides[4];
  float scale;
  bool causal;
  float softcap = 0;
  int64_t window = 0;

  /// The first key that query `i` may see.
  int64_t firstKey(int64_t i) const {
    return window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
  }
};

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

/// Rows of an attention operand ahead of the one being copied whose lines
/// are fetched first: a sequence-first operand's rows lie a whole token's
/// heads apart (9 KB for GPT-2's fused queries, keys and values), a stride
/// the hardware's prefetchers do not follow, and copying its keys and
/// values row by row waited on memory (7% of a 1024-token attention).
constexpr int64_t kAttentionRowsAhead = 8;

/// Fetches the lines of `count` elements at `row` into the cache.
template <typename T>
inline void attentionFetchRow(const T *row, int64_t count) {
  constexpr int64_t kLineElements = 64 / sizeof(T);
  for (int64_t x = 0; x < count; x += kLineElements)
    __builtin_prefetch(row + x, 0, 3);
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
    if (c + kAttentionRowsAhead < j1)
      attentionFetchRow(k + (c + kAttentionRowsAhead) * step, d);
    float *column =
        kt + c / kAttentionKeys * d * kAttentionKeys + c % kAttentionKeys;
    for (int64_t f = 0; f < d; ++f)
      column[f * kAttentionKeys] = float(k[c * step + f]);
  }
}

/// s[r][c] = scale * q_r . k_c + bias(r, c) for the kAttentionRows rows of
/// `qb` (queries i0 on, in float, ldq apart; zero past `rows`) and keys
/// [j0, j0 + cols) of one head, their block `kt` of attentionLoadKeys;
/// -inf where the causal mask or the window hides key c from row r and
/// past `cols` (up to kAttentionKeys). The rows past `rows` are not scores.
/// Under a softcap, `slope` (if given) gets the cap's derivative, 1 - tanh^2,
/// of each score of the block. With `scaled`, the queries were copied
/// times the scale already (attentionScaleFolds).
template <typename T>
inline void attentionScores(const AttentionShape &l, const float *qb,
                            int64_t ldq, const float *kt, const T *bias,
                            int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                            float *s, float *slope = nullptr,
                            bool scaled = false) {
  attentionProduct(qb, ldq, 1, kAttentionRows, l.features, kt, kAttentionKeys,
                   kAttentionKeys / kAttentionLanes, s, kAttentionKeys,
                   /*accumulate=*/false);
  for (int64_t r = 0; r < rows; ++r) {
    float *sr = s + r * kAttentionKeys;
    if (!scaled)
      for (int64_t c = 0; c < cols; ++c)
        sr[c] *= l.scale;
    if (l.softcap > 0)
      for (int64_t c = 0; c < cols; ++c) {
        float t = std::tanh(sr[c] / l.softcap);
        sr[c] = l.softcap * t;
        if (slope)
          slope[r * kAttentionKeys + c] = 1.0f - t * t;
      }
    if (bias) {
      const T *br = bias + (i0 + r) * l.biasStrides[2] + j0 * l.biasStrides[3];
      for (int64_t c = 0; c < cols; ++c)
        sr[c] += float(br[c * l.biasStrides[3]]);
    }
    int64_t end = l.causal ? std::max<int64_t>(0, i0 + r + 1 - j0) : cols;
    for (int64_t c = std::min(end, cols); c < kAttentionKeys; ++c)
      sr[c] = -std::numeric_limits<float>::infinity();
    int64_t start = std::min(cols, l.firstKey(i0 + r) - j0);
    for (int64_t c = 0; c < start; ++c)
      sr[c] = -std::numeric_limits<float>::infinity();
  }
}
} // namespace detail

/// Whether the scale may multiply the queries as they are copied instead
/// of every block's scores: a power of two (GPT-2's 1/8 for heads of 64)
/// scales each term of the products exactly, so the scores are the same
/// bits (unless a query's product falls below FLT_MIN), and a block's
/// pass over its scores is saved.
inline bool attentionScaleFolds(float scale) {
  int exponent;
  return std::isfinite(scale) && scale >= std::numeric_limits<float>::min() &&
         std::frexp(scale, &exponent) == 0.5f;
}

/// Scaled dot-product attention without its scores (FlashAttention's
/// forward): per block of queries, the blocks of keys in turn, with a
/// running maximum and sum per row; under a causal mask the blocks above
/// the diagonal are skipped, and under a window those before it. Writes the
/// output (at its strides) and each row's log-sum-exp (-inf, and a zero output,
/// for a row whose keys are all masked). `sinks`, if given, are a logit per
/// query head in every row's softmax whose column adds nothing to the
/// output: a row's running maximum starts at its head's sink, and its sum
/// at exp(0) = 1.
template <typename T>
PCC_KERNEL_API void attention(const T *q, const T *k, const T *v, const T *bias,
                              const T *sinks, T *o, float *lse,
                              const AttentionShape &l) {
  using namespace detail;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  int64_t d = l.features, e = l.valueFeatures, ePad = attentionPadded(e);
  int64_t rowBlocks = (l.queries + kAttentionRows - 1) / kAttentionRows;
  int64_t keysPad =
      (l.keys + kAttentionKeys - 1) / kAttentionKeys * kAttentionKeys;
  int64_t tasks = l.batch * l.heads * rowBlocks;
  int64_t perGroup = l.heads / l.groups;
  [[maybe_unused]] int64_t work = tasks * kAttentionRows * l.keys * l.features;
  bool foldScale = attentionScaleFolds(l.scale);
  float qScale = foldScale ? l.scale : 1.0f;
  // A thread takes a whole head's blocks of rows at a time where the heads
  // divide evenly among the threads (every head is the same work): it
  // copies the head's keys and values once. A block at a time, the blocks
  // of one head went to both threads, which both copied its keys: GPT-2's
  // 12 heads at 128 tokens took 241 us against 212 (two threads of the
  // Emerald Rapids VM), 1% less at 1024.
  [[maybe_unused]] int64_t headChunk =
      (l.batch * l.heads) % threads() == 0 ? rowBlocks : int64_t(1);
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
#pragma omp for schedule(dynamic, headChunk)
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
        for (int64_t c = heldKeys; c < keyEnd; ++c) {
          if (c + kAttentionRowsAhead < keyEnd)
            attentionFetchRow(vh + (c + kAttentionRowsAhead) * l.vStrides[2],
                              e);
          for (int64_t x = 0; x < e; ++x)
            vb[c * ePad + x] = float(vh[c * l.vStrides[2] + x]);
        }
        heldKeys = keyEnd;
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t f = 0; f < d; ++f)
          qb[r * d + f] = float(qh[(i0 + r) * l.qStrides[2] + f]) * qScale;
      std::fill(qb.begin() + rows * d, qb.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(mx.begin(), mx.end(), sinks ? float(sinks[h]) : kNegInf);
      std::fill(sums.begin(), sums.end(), 0.0f);
      if (sinks)
        for (int64_t r = 0; r < kAttentionRows; ++r)
          sums[r * kAttentionLanes] = 1.0f;
      for (int64_t j0 = l.firstKey(i0) / kAttentionKeys * kAttentionKeys;
           j0 < keyEnd; j0 += kAttentionKeys) {
        int64_t cols = std::min(kAttentionKeys, keyEnd - j0);
        attentionScores(l, qb.data(), d, kt.data() + j0 * d, bh0, i0, rows, j0,
                        cols, s.data(), nullptr, foldScale);
        // The rows' new maxima, then the factors of their sums so far, in
        // one loop that vectorizes: an exp per row on its own sat on a
        // chain of some twenty dependent scalar instructions.
        alignas(64) float next[kAttentionRows], corrections[kAttentionRows];
        for (int64_t r = 0; r < kAttentionRows; ++r)
          next[r] = r < rows
                        ? std::max(mx[r], rowMax(s.data() + r * kAttentionKeys,
                                                 kAttentionKeys))
                        : kNegInf;
        for (int64_t r = 0; r < kAttentionRows; ++r)
          corrections[r] = expNonPositive<float>(
              detail::select(next[r] == kNegInf, 0.0f, mx[r] - next[r]));
        for (int64_t r = 0; r < kAttentionRows; ++r) {
          float *sr = s.data() + r * kAttentionKeys;
          float m = next[r], correction = corrections[r];
          if (m == kNegInf) {
            // Every key so far masked (or no row): the row adds nothing.
            std::fill(sr, sr + kAttentionKeys, 0.0f);
            continue;
          }
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
        T *orow = o + b * l.oStrides[0] + h * l.oStrides[1] +
                  (i0 + r) * l.oStrides[2];
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
PCC_KERNEL_API void attentionGrad(const T *q, const T *k, const T *v,
                                  const T *bias, const T *o, const float *lse,
                                  const T *dout, T *dq, T *dk, T *dv,
                                  const AttentionShape &l) {
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
  // They and the threads' parts of dq lie in one block of zeros, which the
  // calling thread keeps between calls where it is at most kKeptFloats:
  // the block of each call, on fresh pages, cost a fault and a clear per
  // page (8% of a 128-token backward of GPT-2's attention).
  int64_t qfSize = heads * rowsPad * dPad, dfSize = heads * rowsPad * ePad,
          dqSize = heads * rowsPad * dPad;
  int64_t scratchSize =
      qfSize + dfSize + heads * rowsPad + (parallel ? threads() : 1) * dqSize;
  constexpr int64_t kKeptFloats = int64_t(4) << 20;
  static thread_local std::vector<float> kept;
  std::vector<float> own;
  std::vector<float> &scratch = scratchSize <= kKeptFloats ? kept : own;
  scratch.assign(size_t(scratchSize), 0.0f);
  float *qf = scratch.data(), *df = qf + qfSize, *delta = df + dfSize,
        *dqParts = delta + heads * rowsPad;
#pragma omp parallel num_threads(threads()) if (parallel)
  {
#pragma omp for schedule(static)
    for (int64_t row = 0; row < heads * l.queries; ++row) {
      int64_t bh = row / l.queries, i = row % l.queries;
      int64_t b = bh / l.heads, h = bh % l.heads;
      const T *qr =
          q + b * l.qStrides[0] + h * l.qStrides[1] + i * l.qStrides[2];
      int64_t at = b * l.oStrides[0] + h * l.oStrides[1] + i * l.oStrides[2];
      float *qfr = qf + (bh * rowsPad + i) * dPad;
      float *dfr = df + (bh * rowsPad + i) * ePad;
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
        dvb(kAttentionKeys * ePad),
        slope(l.softcap > 0 ? kAttentionRows * kAttentionKeys : 0);
#ifdef _OPENMP
    int64_t part = omp_get_thread_num(), parts = omp_get_num_threads();
#else
    int64_t part = 0, parts = 1;
#endif
    float *dqMine = dqParts + part * dqSize;
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
        // The rows that see the block: from its first key under a causal
        // mask, up to its last key's window under a sliding one.
        int64_t firstRow = l.causal ? j0 : 0;
        int64_t rowEnd = l.window > 0
                             ? std::min(l.queries, j0 + cols + l.window - 1)
                             : l.queries;
        for (int64_t i0 = firstRow / kAttentionRows * kAttentionRows;
             i0 < rowEnd; i0 += kAttentionRows) {
          int64_t rows = std::min(kAttentionRows, l.queries - i0);
          const float *qb = qf + (bh * rowsPad + i0) * dPad;
          const float *db = df + (bh * rowsPad + i0) * ePad;
          const float *deltaRows = delta + bh * rowsPad + i0;
          // P, and dS = P * (dP - delta) with dP = dout . v^T; zero past
          // the block's rows and keys.
          attentionScores(l, qb, dPad, kt.data(), bh0, i0, rows, j0, cols,
                          p.data(), slope.empty() ? nullptr : slope.data());
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
            // Through the cap, to the scaled product's scores (p is 0 past
            // the block's keys).
            if (!slope.empty())
              for (int64_t c = 0; c < cols; ++c)
                dsr[c] *= slope[r * kAttentionKeys + c];
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
      const float *part0 = dqParts + (bh * rowsPad + i) * dPad;
      for (int64_t f = 0; f < d; ++f) {
        float sum = 0;
        for (int64_t t = 0; t < parts; ++t)
          sum += part0[t * dqSize + f];
        dq[row * d + f] = T(sum * l.scale);
      }
    }
  }
}

/// float's attention, what nearly every model calls, is compiled once, in
/// pcc_kernels.cpp (cached per flag set): instantiated in every model's
/// code, the two took half of its compile. Other element types (bf16 under
/// --dtype bf16, f16 and double models) are instantiated where used, which
/// keeps the kernels' object quick to build (each type takes about 3 s).
extern template void attention<float>(const float *, const float *,
                                      const float *, const float *,
                                      const float *, float *, float *,
                                      const AttentionShape &);
extern template void attentionGrad<float>(const float *, const float *,
                                          const float *, const float *,
                                          const float *, const float *,
                                          const float *, float *, float *,
                                          float *, const AttentionShape &);

/// Gather along the middle extent of data [outer, k, inner] at `count`
/// indices. Returns 1 when an index is out of range.
template <typename T, typename I>
inline int gather(const T *data, const I *idx, T *out, int64_t outer, int64_t k,
                  int64_t inner, int64_t count) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      int64_t i = int64_t(idx[j]);
      if (i < 0)
        i += k;
      if (i < 0 || i >= k)
        return 1;
      std::memcpy(out + (o * count + j) * inner, data + (o * k + i) * inner,
                  sizeof(T) * inner);
    }
  return 0;
}

/// Walks the positions of an index tensor of shape `idxShape` and calls
/// `f(e, off)` with the linear position `e` and the offset into a tensor of
/// shape `dataShape` whose coordinate along `axis` is `idx[e]` (negative
/// counts from the end). Returns 1 when an index is out of range.
template <typename I, typename F>
inline int forEachIndexedElement(const I *idx, int rank,
                                 const int64_t *dataShape,
                                 const int64_t *idxShape, int axis, F f) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d)
    total *= idxShape[d];
  int64_t coord[16] = {0};
  for (int64_t e = 0; e < total; ++e) {
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) {
      int64_t c = coord[d];
      if (d == axis) {
        c = int64_t(idx[e]);
        if (c < 0)
          c += dataShape[d];
        if (c < 0 || c >= dataShape[d])
          return 1;
      }
      off = off * dataShape[d] + c;
    }
    f(e, off);
    for (int d = rank - 1; d >= 0; --d) {
      if (++coord[d] < idxShape[d])
        break;
      coord[d] = 0;
    }
  }
  return 0;
}

/// GatherElements: out has the indices' shape; the coordinate along `axis`
/// comes from the index. Returns 1 when an index is out of range.
template <typename T, typename I>
inline int gatherElements(const T *data, const I *idx, T *out, int rank,
                          const int64_t *dataShape, const int64_t *idxShape,
                          int axis) {
  return forEachIndexedElement(
      idx, rank, dataShape, idxShape, axis,
      [&](int64_t e, int64_t off) { out[e] = data[off]; });
}

/// The adjoint of gatherElements: out = 0 (unless `accumulate`: out holds
/// a partial sum, added to), then out[... idx[e] ...] += updates[e] with
/// the index replacing the coordinate along `axis`.
template <typename T, typename I>
inline int scatterElementsAdd(const T *updates, const I *idx, T *out, int rank,
                              const int64_t *outShape, const int64_t *idxShape,
                              int axis, bool accumulate = false) {
  int64_t outTotal = 1;
  for (int d = 0; d < rank; ++d)
    outTotal *= outShape[d];
  if (!accumulate)
    for (int64_t e = 0; e < outTotal; ++e)
      out[e] = T(0);
  return forEachIndexedElement(
      idx, rank, outShape, idxShape, axis,
      [&](int64_t e, int64_t off) { out[off] = T(out[off] + updates[e]); });
}

/// The adjoint of gather: out [outer, k, inner] = 0 (unless `accumulate`:
/// out holds a partial sum, added to), then adds each of the `count` update
/// slices at its index. Returns 1 on an index out of range.
template <typename T, typename I>
inline int scatterAdd(const T *updates, const I *idx, T *out, int64_t outer,
                      int64_t k, int64_t inner, int64_t count,
                      bool accumulate = false) {
  if (!accumulate)
    for (int64_t e = 0; e < outer * k * inner; ++e)
      out[e] = T(0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      int64_t i = int64_t(idx[j]);
      if (i < 0)
        i += k;
      if (i < 0 || i >= k)
        return 1;
      T *dst = out + (o * k + i) * inner;
      const T *src = updates + (o * count + j) * inner;
      for (int64_t t = 0; t < inner; ++t)
        dst[t] = T(dst[t] + src[t]);
    }
  return 0;
}

/// Keeps the upper (col - row >= k) or lower (col - row <= k) triangle of
/// each [rows, cols] matrix.
template <typename T>
inline void trilu(const T *x, T *y, int64_t batch, int64_t rows, int64_t cols,
                  bool upper, int64_t k) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        int64_t i = (b * rows + r) * cols + c;
        bool keep = upper ? c - r >= k : c - r <= k;
        y[i] = keep ? x[i] : T(0);
      }
}

/// Whether `a` (at index `ia`) goes before `b` (at `ib`) among the k kept
/// by TopK: the larger first (the smaller, unless `largest`), a NaN above
/// every number, and of equal elements the lower index.
template <typename T>
inline bool topKBefore(T a, int64_t ia, T b, int64_t ib, bool largest) {
  bool aNaN = a != a, bNaN = b != b;
  if (aNaN || bNaN)
    return aNaN && bNaN ? ia < ib : aNaN == largest;
  if (a != b)
    return largest ? b < a : a < b;
  return ia < ib;
}

/// TopK along the middle dimension of [outer, n, inner]: the k best of each
/// row in order into values and indices, both [outer, k, inner]. An
/// insertion into the sorted k kept so far, for the small k of a router.
template <typename T>
inline void topK(const T *x, T *values, int64_t *indices, int64_t outer,
                 int64_t n, int64_t inner, int64_t k, bool largest) {
  std::vector<int64_t> kept(size_t(k > 0 ? k : 1));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      const T *row = x + o * n * inner + c;
      int64_t count = 0;
      for (int64_t i = 0; i < n && k > 0; ++i) {
        T v = row[i * inner];
        if (count == k &&
            !topKBefore(v, i, row[kept[k - 1] * inner], kept[k - 1], largest))
          continue;
        int64_t at = count < k ? count++ : k - 1;
        while (at > 0 && topKBefore(v, i, row[kept[at - 1] * inner],
                                    kept[at - 1], largest)) {
          kept[at] = kept[at - 1];
          --at;
        }
        kept[at] = i;
      }
      for (int64_t j = 0; j < k; ++j) {
        int64_t e = (o * k + j) * inner + c;
        indices[e] = kept[j];
        values[e] = row[kept[j] * inner];
      }
    }
}

/// Running sums along the middle dimension of [outer, n, inner], in reverse
/// order if asked; an exclusive sum leaves each element out of its own.
template <typename T>
inline void cumSum(const T *x, T *y, int64_t outer, int64_t n, int64_t inner,
                   bool exclusive, bool reverse) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      T acc = T(0);
      for (int64_t step = 0; step < n; ++step) {
        int64_t i = reverse ? n - 1 - step : step;
        int64_t e = (o * n + i) * inner + k;
        T v = x[e];
        if (exclusive) {
          y[e] = acc;
          acc = T(acc + v);
        } else {
          acc = T(acc + v);
          y[e] = acc;
        }
      }
    }
}

/// The extents of a paged KV cache's ops (graph.cache_write and
/// graph.paged_attention): a step of `tokens` tokens, whose queries are
/// [1, heads, tokens, features] and whose keys and values [1, groups,
/// tokens, features or valueFeatures]; caches of `blocks` blocks of
/// `blockSize` positions, [blocks, groups, blockSize, features]; a block
/// table of `blocksPerSequence` blocks for each of `sequences` rows.
struct PagedShape {
  int64_t tokens, heads, groups, features, valueFeatures;
  int64_t blocks, blockSize, sequences, blocksPerSequence;
  float scale;
  float softcap = 0;  ///< as AttentionShape's
  int64_t window = 0; ///< above 0: the keys from positions[n] - window + 1

  /// The first position that a query at position `last` may see.
  int64_t firstKey(int64_t last) const {
    return window > 0 ? std::max<int64_t>(0, last - window + 1) : 0;
  }
};

namespace detail {
/// The cache block holding position `p` of the sequence in row `slot` of
/// the block table, or -1 where an index is out of range.
inline int64_t pagedBlock(const int64_t *table, const PagedShape &l,
                          int64_t slot, int64_t p) {
  if (slot < 0 || slot >= l.sequences || p < 0 ||
      p / l.blockSize >= l.blocksPerSequence)
    return -1;
  int64_t block = table[slot * l.blocksPerSequence + p / l.blockSize];
  return block >= 0 && block < l.blocks ? block : -1;
}
} // namespace detail

/// Writes each token's rows [1, groups, tokens, width] into the cache at
/// its sequence's position (a negative slot: a padding token, skipped).
/// Returns 1, writing nothing, where an index is out of range.
template <typename T>
inline int cacheWrite(T *cache, const T *rows, const int64_t *slots,
                      const int64_t *positions, const int64_t *table,
                      const PagedShape &l, int64_t width) {
  for (int64_t n = 0; n < l.tokens; ++n)
    if (slots[n] >= 0 &&
        detail::pagedBlock(table, l, slots[n], positions[n]) < 0)
      return 1;
  for (int64_t n = 0; n < l.tokens; ++n) {
    if (slots[n] < 0)
      continue;
    int64_t block = detail::pagedBlock(table, l, slots[n], positions[n]);
    int64_t offset = positions[n] % l.blockSize;
    for (int64_t g = 0; g < l.groups; ++g)
      std::memcpy(cache + ((block * l.groups + g) * l.blockSize + offset) *
                              width,
                  rows + (g * l.tokens + n) * width, width * sizeof(T));
  }
  return 0;
}

/// Causal attention of each token over its sequence's cached keys and
/// values at positions 0 .. positions[n] (the window's, under one), a
/// block of positions at a time with a running maximum and sum; query head
/// h reads key/value head h / (heads / groups). `slopes`, if given, adds
/// ALiBi's slopes[h] * (p - positions[n]) to the score of position p;
/// `sinks`, if given, a logit per query head to each softmax (attention's
/// sinks). A padding token (negative slot) gets zeros. Returns 1 where an
/// index is out of range.
template <typename T>
inline int pagedAttention(const T *q, const T *keys, const T *values,
                          const int64_t *slots, const int64_t *positions,
                          const int64_t *table, T *o, const PagedShape &l,
                          const T *slopes = nullptr, const T *sinks = nullptr) {
  using detail::pagedBlock;
  for (int64_t n = 0; n < l.tokens; ++n)
    if (slots[n] >= 0)
      for (int64_t p = 0; p <= positions[n]; p += l.blockSize)
        if (pagedBlock(table, l, slots[n], p) < 0)
          return 1;
  int64_t d = l.features, e = l.valueFeatures, perGroup = l.heads / l.groups;
  int64_t work = 0;
  for (int64_t n = 0; n < l.tokens; ++n)
    work += slots[n] >= 0 ? (positions[n] + 1) * l.heads * (d + e) : 0;
#pragma omp parallel num_threads(threads()) if (shareThreads(work))
  {
    std::vector<float> qf(d), acc(e), scores(l.blockSize);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < l.tokens * l.heads; ++task) {
      int64_t n = task / l.heads, h = task % l.heads, g = h / perGroup;
      T *out = o + (h * l.tokens + n) * e;
      if (slots[n] < 0) {
        std::fill(out, out + e, T(0.0f));
        continue;
      }
      const T *qr = q + (h * l.tokens + n) * d;
      for (int64_t f = 0; f < d; ++f)
        qf[f] = float(qr[f]) * l.scale;
      std::fill(acc.begin(), acc.end(), 0.0f);
      // A sink is a column of every block: the running sum starts with it.
      float mx =
          sinks ? float(sinks[h]) : -std::numeric_limits<float>::infinity();
      float sum = sinks ? 1.0f : 0.0f;
      int64_t last = positions[n];
      int64_t first = l.firstKey(last);
      // From the first key's block on, the keys of each block to the last.
      for (int64_t p0 = first; p0 <= last;
           p0 = (p0 / l.blockSize + 1) * l.blockSize) {
        int64_t block = pagedBlock(table, l, slots[n], p0);
        int64_t offset = p0 % l.blockSize;
        int64_t count = std::min(l.blockSize - offset, last + 1 - p0);
        const T *kb =
            keys + ((block * l.groups + g) * l.blockSize + offset) * d;
        const T *vb =
            values + ((block * l.groups + g) * l.blockSize + offset) * e;
        float blockMax = mx;
        for (int64_t j = 0; j < count; ++j) {
          const T *kr = kb + j * d;
          float dot = 0;
          for (int64_t f = 0; f < d; ++f)
            dot += qf[f] * float(kr[f]);
          if (l.softcap > 0)
            dot = l.softcap * std::tanh(dot / l.softcap);
          if (slopes)
            dot += float(slopes[h]) * float(p0 + j - last);
          scores[j] = dot;
          blockMax = std::max(blockMax, dot);
        }
        float correction = std::exp(mx - blockMax);
        sum *= correction;
        for (int64_t x = 0; x < e; ++x)
          acc[x] *= correction;
        mx = blockMax;
        for (int64_t j = 0; j < count; ++j) {
          float w = std::exp(scores[j] - mx);
          sum += w;
          const T *vr = vb + j * e;
          for (int64_t x = 0; x < e; ++x)
            acc[x] += w * float(vr[x]);
        }
      }
      for (int64_t x = 0; x < e; ++x)
        out[x] = T(acc[x] / sum);
    }
  }
  return 0;
}

template <typename T> inline T ipow(T base, T exp) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(base, exp);
  } else {
    T r = 1;
    for (T i = 0; i < exp; ++i)
      r *= base;
    return r;
  }
}

} // namespace pcc_k

// Limits of the 16-bit float types, for reductions' initial values.
template <> struct std::numeric_limits<pcc_k::f16> {
  static constexpr bool is_specialized = true;
  static pcc_k::f16 infinity() { return pcc_k::f16::fromBits(0x7c00); }
  static pcc_k::f16 quiet_NaN() { return pcc_k::f16::fromBits(0x7e00); }
  static pcc_k::f16 lowest() { return pcc_k::f16::fromBits(0xfbff); }
  static pcc_k::f16 max() { return pcc_k::f16::fromBits(0x7bff); }
};
template <> struct std::numeric_limits<pcc_k::bf16> {
  static constexpr bool is_specialized = true;
  static pcc_k::bf16 infinity() { return pcc_k::bf16::fromBits(0x7f80); }
  static pcc_k::bf16 quiet_NaN() { return pcc_k::bf16::fromBits(0x7fc0); }
  static pcc_k::bf16 lowest() { return pcc_k::bf16::fromBits(0xff7f); }
  static pcc_k::bf16 max() { return pcc_k::bf16::fromBits(0x7f7f); }
};

#endif // PCC_KERNELS_H
