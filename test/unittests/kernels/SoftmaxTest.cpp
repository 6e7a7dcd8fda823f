//===- SoftmaxTest.cpp - pcc_k's softmax rows -----------------------------===//
//
// pcc_k::softmaxRow against the definition in double: rows of lengths that
// end inside its sixteen running maxima and sixteen partial sums, rows
// masked to -inf after a point (attention's causal mask), rows done in
// place, and log-softmax rows longer than the block its exponentials go
// through; pcc_k::rowMax on NaN and on rows of -inf. Built into both
// kernel test binaries, so the vectorized build of the host runs it too.
//
//===----------------------------------------------------------------------===//

#include "pcc_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// softmax(xs) or log-softmax(xs) in double.
std::vector<double> reference(const std::vector<float> &xs, bool log) {
  double mx = -INFINITY;
  for (float x : xs)
    mx = std::max(mx, double(x));
  double sum = 0;
  for (float x : xs)
    sum += std::exp(double(x) - mx);
  std::vector<double> ys;
  for (float x : xs)
    ys.push_back(log ? double(x) - mx - std::log(sum)
                     : std::exp(double(x) - mx) / sum);
  return ys;
}

void expectMatches(const std::vector<float> &xs, bool log) {
  std::vector<double> want = reference(xs, log);
  std::vector<float> got(xs.size());
  pcc_k::softmaxRow(xs.data(), got.data(), int64_t(xs.size()), log);
  for (size_t j = 0; j < xs.size(); ++j) {
    SCOPED_TRACE("n = " + std::to_string(xs.size()) +
                 ", log = " + std::to_string(log) +
                 ", j = " + std::to_string(j));
    if (std::isinf(want[j])) {
      EXPECT_EQ(got[j], float(want[j]));
      continue;
    }
    // log-softmax subtracts in float: x - (max + log(sum)) is exact to
    // the rounding of its operands, which can be far larger than it.
    double scale = std::max(1.0, std::abs(want[j]));
    if (log)
      scale = std::max(scale, std::abs(want[j]) + std::abs(double(xs[j])));
    EXPECT_NEAR(got[j], want[j], 4e-7 * scale);
  }
}

TEST(Softmax, MatchesDefinition) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int64_t n : {1, 2, 7, 8, 15, 16, 17, 31, 128, 129, 511, 512, 513,
                    1500, 50257})
    for (bool log : {false, true}) {
      std::vector<float> xs(static_cast<size_t>(n));
      for (float &x : xs)
        x = normal(rng);
      expectMatches(xs, log);
    }
}

TEST(Softmax, CausallyMaskedRows) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int64_t n : {16, 100, 128})
    for (int64_t visible = 1; visible <= n; visible += 13)
      for (bool log : {false, true}) {
        std::vector<float> xs(size_t(n), -kInf);
        for (int64_t j = 0; j < visible; ++j)
          xs[size_t(j)] = normal(rng);
        expectMatches(xs, log);
      }
}

TEST(Softmax, InPlace) {
  std::vector<float> xs(300);
  for (size_t j = 0; j < xs.size(); ++j)
    xs[j] = float(j % 37) * 0.25f - 3.0f;
  for (bool log : {false, true}) {
    std::vector<double> want = reference(xs, log);
    std::vector<float> ys = xs;
    pcc_k::softmaxRow(ys.data(), ys.data(), int64_t(ys.size()), log);
    for (size_t j = 0; j < ys.size(); ++j)
      EXPECT_NEAR(ys[j], want[j], 4e-7 * std::max(1.0, std::abs(want[j])));
  }
}

// The running maxima keep the scalar loop's meaning: NaN never wins a
// comparison, so it is not the maximum wherever it stands; a row of -inf
// has -inf as its maximum.
TEST(Softmax, RowMaxIgnoresNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {5, 16, 40}) {
    std::vector<float> xs(size_t(n), 1.0f);
    xs[0] = nan;
    xs[size_t(n - 1)] = nan;
    xs[size_t(n / 2)] = 5.0f;
    EXPECT_EQ(pcc_k::rowMax(xs.data(), n), 5.0f) << "n = " << n;
    std::vector<float> masked(size_t(n), -kInf);
    EXPECT_EQ(pcc_k::rowMax(masked.data(), n), -kInf) << "n = " << n;
  }
}

} // namespace
