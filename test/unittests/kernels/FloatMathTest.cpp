//===- FloatMathTest.cpp - pcc_k's float exp, tanh, erf and log -----------===//
//
// Each function against the double-precision libm function, with the bounds
// its comment in pcc_kernels.h documents (measured there over every float),
// and its special values. The sweeps step through bit patterns, so that
// every binade is sampled alike, and cover the branch points of tanh and
// erf and the neighbourhood of log's zero float by float.
//
//===----------------------------------------------------------------------===//

#include "pcc_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

/// The spacing of floats at |r|: the unit of the bounds in ulp.
double ulpAt(double r) {
  r = std::fabs(r);
  if (r < 0x1p-126)
    return 0x1p-149;
  int exponent;
  std::frexp(r, &exponent);
  return std::ldexp(1.0, exponent - 24);
}

struct Errors {
  double ulp = 0;
  float ulpArg = 0;
  /// Over results in float's normal range.
  double relative = 0;
  float relativeArg = 0;
  double absolute = 0;
  float absoluteArg = 0;
  /// Results that should be NaN or infinite and are not, or the reverse.
  int64_t mismatches = 0;
  float mismatchArg = 0;
  int64_t count = 0;

  void merge(const Errors &other) {
    if (other.ulp > ulp) {
      ulp = other.ulp;
      ulpArg = other.ulpArg;
    }
    if (other.relative > relative) {
      relative = other.relative;
      relativeArg = other.relativeArg;
    }
    if (other.absolute > absolute) {
      absolute = other.absolute;
      absoluteArg = other.absoluteArg;
    }
    if (other.mismatches && !mismatches)
      mismatchArg = other.mismatchArg;
    mismatches += other.mismatches;
    count += other.count;
  }
};

/// The errors of Fn against `ref` on the floats of magnitude `from` to `to`
/// whose bit patterns are `step` apart, negated if asked. They are computed
/// in batches by a loop like the generated code's, which the compiler may
/// vectorize.
template <float (*Fn)(float)>
Errors measure(double (*ref)(double), float from, float to, uint32_t step,
               bool negative = false) {
  constexpr size_t kBatch = 4096;
  std::vector<float> in(kBatch), out(kBatch);
  Errors errors;
  uint64_t bits = bitsOf(from), last = bitsOf(to);
  while (bits <= last) {
    size_t n = 0;
    for (; n < kBatch && bits <= last; ++n, bits += step)
      in[n] = negative ? -floatOf(uint32_t(bits)) : floatOf(uint32_t(bits));
    for (size_t i = 0; i < n; ++i)
      out[i] = Fn(in[i]);
    for (size_t i = 0; i < n; ++i) {
      float x = in[i], y = out[i];
      double exact = ref(double(x));
      float rounded = float(exact);
      ++errors.count;
      bool special = std::isnan(exact) || std::isinf(rounded);
      if (special ? !(std::isnan(exact) ? std::isnan(y) : y == rounded)
                  : !std::isfinite(y)) {
        if (!errors.mismatches++)
          errors.mismatchArg = x;
        continue;
      }
      if (special)
        continue;
      double error = std::fabs(double(y) - exact);
      if (error / ulpAt(exact) > errors.ulp) {
        errors.ulp = error / ulpAt(exact);
        errors.ulpArg = x;
      }
      if (std::fabs(exact) >= 0x1p-126 &&
          error / std::fabs(exact) > errors.relative) {
        errors.relative = error / std::fabs(exact);
        errors.relativeArg = x;
      }
      if (error > errors.absolute) {
        errors.absolute = error;
        errors.absoluteArg = x;
      }
    }
  }
  return errors;
}

/// Checks `errors` against the documented bounds (absolute < 0: none).
void expectWithin(const Errors &errors, double ulp, double relative,
                  double absolute = -1) {
  EXPECT_GT(errors.count, 0);
  EXPECT_EQ(errors.mismatches, 0)
      << "first at " << std::hexfloat << errors.mismatchArg;
  EXPECT_LE(errors.ulp, ulp) << "at " << std::hexfloat << errors.ulpArg;
  EXPECT_LE(errors.relative, relative)
      << "at " << std::hexfloat << errors.relativeArg;
  if (absolute >= 0) {
    EXPECT_LE(errors.absolute, absolute)
        << "at " << std::hexfloat << errors.absoluteArg;
  }
}

double refExp(double x) { return std::exp(x); }
double refTanh(double x) { return std::tanh(x); }
double refErf(double x) { return std::erf(x); }
double refLog(double x) { return std::log(x); }
double refSigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// Float's sign and value alike (-0 is not 0, NaN is NaN).
testing::AssertionResult same(float expected, float actual) {
  if (bitsOf(expected) == bitsOf(actual) ||
      (std::isnan(expected) && std::isnan(actual)))
    return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << std::hexfloat << actual << " instead of " << expected;
}

TEST(FloatMath, Exp) {
  Errors errors = measure<pcc_k::fexp>(refExp, 0.0f, kInf, 211);
  errors.merge(measure<pcc_k::fexp>(refExp, 0.0f, kInf, 211, true));
  expectWithin(errors, 1.01, 8.6e-8);
}

TEST(FloatMath, ExpSpecialValues) {
  EXPECT_TRUE(same(1.0f, pcc_k::fexp(0.0f)));
  EXPECT_TRUE(same(1.0f, pcc_k::fexp(-0.0f)));
  EXPECT_TRUE(same(kInf, pcc_k::fexp(kInf)));
  EXPECT_TRUE(same(0.0f, pcc_k::fexp(-kInf)));
  EXPECT_TRUE(same(kNaN, pcc_k::fexp(kNaN)));
  // The edges of overflow and of underflow, and the clamps' bounds.
  EXPECT_TRUE(std::isfinite(pcc_k::fexp(88.72f)));
  EXPECT_TRUE(same(kInf, pcc_k::fexp(88.73f)));
  EXPECT_TRUE(same(kInf, pcc_k::fexp(89.0f)));
  EXPECT_TRUE(same(0x1p-149f, pcc_k::fexp(-103.5f)));
  EXPECT_TRUE(same(0.0f, pcc_k::fexp(-104.0f)));
}

/// Fn's results on [-120, -80]: 0 below -87.33 and normal floats above
/// (a subnormal result would send the FPU down its slow path).
template <float (*Fn)(float)> void expectZeroOrNormal() {
  for (uint32_t bits = bitsOf(80.0f); bits <= bitsOf(120.0f); bits += 97) {
    float x = -floatOf(bits), y = Fn(x);
    EXPECT_TRUE(y == 0.0f || std::fpclassify(y) == FP_NORMAL)
        << std::hexfloat << x << " gives " << y;
    EXPECT_EQ(y == 0.0f, x < -87.33f) << std::hexfloat << x;
  }
}

// The softmax's exponential of shifted inputs: fexp's bounds down to
// -87.33, 0 below, and never a subnormal result.
TEST(FloatMath, ExpNonPositive) {
  expectWithin(measure<pcc_k::fexpNonPositive>(refExp, 0.0f, 87.33f, 211, true),
               1.01, 8.6e-8);
  expectZeroOrNormal<pcc_k::fexpNonPositive>();
}

TEST(FloatMath, ExpNonPositiveSpecialValues) {
  EXPECT_TRUE(same(1.0f, pcc_k::fexpNonPositive(0.0f)));
  EXPECT_TRUE(same(1.0f, pcc_k::fexpNonPositive(-0.0f)));
  EXPECT_TRUE(same(0.0f, pcc_k::fexpNonPositive(-kInf)));
  EXPECT_TRUE(same(0.0f, pcc_k::fexpNonPositive(-1e30f)));
  EXPECT_TRUE(same(kNaN, pcc_k::fexpNonPositive(kNaN)));
  EXPECT_TRUE(same(pcc_k::fexp(-87.33f), pcc_k::fexpNonPositive(-87.33f)));
  EXPECT_TRUE(same(pcc_k::fexp(-1.5f), pcc_k::fexpNonPositive(-1.5f)));
}

// Tanh-approximated GELU's factor (1 + tanh(z) = 2 sigmoid(2z)): the
// bounds down to -87.33, 0 below, never a subnormal result.
TEST(FloatMath, Sigmoid) {
  Errors errors = measure<pcc_k::fsigmoid>(refSigmoid, 0.0f, kInf, 211);
  errors.merge(measure<pcc_k::fsigmoid>(refSigmoid, 0.0f, 87.33f, 211, true));
  // Float by float where the error peaks.
  errors.merge(measure<pcc_k::fsigmoid>(refSigmoid, 16.5f, 16.7f, 1, true));
  expectWithin(errors, 2.49, 1.49e-7);
  expectZeroOrNormal<pcc_k::fsigmoid>();
}

TEST(FloatMath, SigmoidSpecialValues) {
  EXPECT_TRUE(same(0.5f, pcc_k::fsigmoid(0.0f)));
  EXPECT_TRUE(same(0.5f, pcc_k::fsigmoid(-0.0f)));
  EXPECT_TRUE(same(1.0f, pcc_k::fsigmoid(kInf)));
  EXPECT_TRUE(same(0.0f, pcc_k::fsigmoid(-kInf)));
  EXPECT_TRUE(same(kNaN, pcc_k::fsigmoid(kNaN)));
  EXPECT_TRUE(same(1.0f, pcc_k::fsigmoid(16.64f)));
  EXPECT_LT(pcc_k::fsigmoid(16.63f), 1.0f);
  for (float x = 0.0f; x < 16.64f; x += 0.001f) {
    ASSERT_LE(pcc_k::fsigmoid(x), 1.0f) << x;
    ASSERT_GE(pcc_k::fsigmoid(-x), 0.0f) << x;
  }
}

TEST(FloatMath, Tanh) {
  Errors errors = measure<pcc_k::ftanh>(refTanh, 0.0f, kInf, 211);
  errors.merge(measure<pcc_k::ftanh>(refTanh, 0.0f, kInf, 211, true));
  // Float by float around the switch from the polynomial to exp.
  errors.merge(measure<pcc_k::ftanh>(refTanh, 0.55f, 0.7f, 1));
  expectWithin(errors, 1.34, 1.43e-7, 8.0e-8);
}

TEST(FloatMath, TanhSpecialValues) {
  EXPECT_TRUE(same(0.0f, pcc_k::ftanh(0.0f)));
  EXPECT_TRUE(same(-0.0f, pcc_k::ftanh(-0.0f)));
  EXPECT_TRUE(same(1.0f, pcc_k::ftanh(kInf)));
  EXPECT_TRUE(same(-1.0f, pcc_k::ftanh(-kInf)));
  EXPECT_TRUE(same(kNaN, pcc_k::ftanh(kNaN)));
  EXPECT_TRUE(same(0x1p-149f, pcc_k::ftanh(0x1p-149f)));
  // Saturated from 9.011 on, and never past 1 below.
  for (float x = 9.011f; x < 1e30f; x *= 1.01f) {
    ASSERT_TRUE(same(1.0f, pcc_k::ftanh(x))) << x;
    ASSERT_TRUE(same(-1.0f, pcc_k::ftanh(-x))) << x;
  }
  for (float x = 0.0f; x < 9.011f; x += 0.001f)
    ASSERT_LE(pcc_k::ftanh(x), 1.0f) << x;
}

TEST(FloatMath, Erf) {
  Errors errors = measure<pcc_k::ferf>(refErf, 0.0f, kInf, 211);
  errors.merge(measure<pcc_k::ferf>(refErf, 0.0f, kInf, 211, true));
  // Float by float around the switch from the polynomial to erfc's.
  errors.merge(measure<pcc_k::ferf>(refErf, 0.8f, 0.95f, 1));
  expectWithin(errors, 1.24, 1.04e-7, 7.4e-8);
}

TEST(FloatMath, ErfSpecialValues) {
  EXPECT_TRUE(same(0.0f, pcc_k::ferf(0.0f)));
  EXPECT_TRUE(same(-0.0f, pcc_k::ferf(-0.0f)));
  EXPECT_TRUE(same(1.0f, pcc_k::ferf(kInf)));
  EXPECT_TRUE(same(-1.0f, pcc_k::ferf(-kInf)));
  EXPECT_TRUE(same(kNaN, pcc_k::ferf(kNaN)));
  // Saturated from 3.933 on, and never past 1 below.
  for (float x = 3.933f; x < 1e30f; x *= 1.01f) {
    ASSERT_TRUE(same(1.0f, pcc_k::ferf(x))) << x;
    ASSERT_TRUE(same(-1.0f, pcc_k::ferf(-x))) << x;
  }
  for (float x = 0.0f; x < 3.933f; x += 0.001f)
    ASSERT_LE(pcc_k::ferf(x), 1.0f) << x;
}

TEST(FloatMath, Log) {
  Errors errors = measure<pcc_k::flog>(refLog, 0.0f, kInf, 401);
  // Float by float around 1, where log's relative accuracy is hardest.
  errors.merge(measure<pcc_k::flog>(refLog, 0.875f, 1.125f, 1));
  expectWithin(errors, 0.91, 8.4e-8);
}

TEST(FloatMath, LogSpecialValues) {
  EXPECT_TRUE(same(0.0f, pcc_k::flog(1.0f)));
  EXPECT_TRUE(same(-kInf, pcc_k::flog(0.0f)));
  EXPECT_TRUE(same(-kInf, pcc_k::flog(-0.0f)));
  EXPECT_TRUE(same(kInf, pcc_k::flog(kInf)));
  EXPECT_TRUE(same(kNaN, pcc_k::flog(-1.0f)));
  EXPECT_TRUE(same(kNaN, pcc_k::flog(-0x1p-149f)));
  EXPECT_TRUE(same(kNaN, pcc_k::flog(-kInf)));
  EXPECT_TRUE(same(kNaN, pcc_k::flog(kNaN)));
  EXPECT_NEAR(pcc_k::flog(0x1p-149f), -149 * std::log(2.0), 1e-5);
  EXPECT_NEAR(pcc_k::flog(std::numeric_limits<float>::max()),
              std::log(double(std::numeric_limits<float>::max())), 1e-5);
}
} // namespace
