//===- StridedLayoutTest.cpp - Layouts of data movement in a buffer -------===//
//
// StridedLayout::reshape against the elements themselves: a tensor is
// modelled as the buffer offset of each of its elements in row-major order,
// transposed by moving those offsets and reshaped by keeping them. Wherever
// reshape gives a layout, it must address exactly those offsets; a dense
// tensor must always have one; and chains of random transposes and
// reshapes must compose wherever the elements are evenly spaced.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

using pcc::graph::StridedLayout;

namespace {

/// A tensor as the buffer offsets of its elements, row-major.
struct Elements {
  std::vector<int64_t> shape;
  std::vector<int64_t> offsets;
};

int64_t count(const std::vector<int64_t> &shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

/// The row-major index of linear position `i` in `shape`.
std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = i % shape[d];
    i /= shape[d];
  }
  return index;
}

Elements transpose(const Elements &in, const std::vector<int64_t> &perm) {
  Elements out;
  for (int64_t p : perm)
    out.shape.push_back(in.shape[p]);
  std::vector<int64_t> inStrides(in.shape.size(), 1);
  for (size_t d = in.shape.size(); d-- > 1;)
    inStrides[d - 1] = inStrides[d] * in.shape[d];
  for (int64_t i = 0, e = count(out.shape); i < e; ++i) {
    std::vector<int64_t> index = unravel(i, out.shape);
    int64_t source = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      source += index[d] * inStrides[perm[d]];
    out.offsets.push_back(in.offsets[source]);
  }
  return out;
}

/// Whether `layout` addresses every element of `t` where it lies.
bool addresses(const StridedLayout &layout, const Elements &t) {
  if (layout.strides.size() != t.shape.size())
    return false;
  for (int64_t i = 0, e = count(t.shape); i < e; ++i) {
    std::vector<int64_t> index = unravel(i, t.shape);
    int64_t offset = layout.offset;
    for (size_t d = 0; d < index.size(); ++d)
      offset += index[d] * layout.strides[d];
    if (offset != t.offsets[i])
      return false;
  }
  return true;
}

/// A random shape of `n` elements (n's factors in random groups, with
/// random extents of 1 between).
std::vector<int64_t> randomShape(int64_t n, std::mt19937 &rng) {
  std::vector<int64_t> factors;
  for (int64_t f = 2; n > 1;)
    if (n % f == 0) {
      factors.push_back(f);
      n /= f;
    } else {
      ++f;
    }
  std::shuffle(factors.begin(), factors.end(), rng);
  std::vector<int64_t> shape;
  for (int64_t f : factors) {
    if (shape.empty() || rng() % 2)
      shape.push_back(f);
    else
      shape.back() *= f;
    if (rng() % 5 == 0)
      shape.push_back(1);
  }
  if (shape.empty())
    shape.push_back(1);
  return shape;
}

TEST(StridedLayoutTest, DenseReshapesAlwaysCompose) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 200; ++trial) {
    int64_t n = 1 + rng() % 96;
    Elements t{randomShape(n, rng), {}};
    t.offsets.resize(n);
    std::iota(t.offsets.begin(), t.offsets.end(), 0);
    std::vector<int64_t> to = randomShape(n, rng);
    auto layout = StridedLayout::contiguous(t.shape).reshape(t.shape, to);
    ASSERT_TRUE(layout);
    EXPECT_TRUE(addresses(*layout, Elements{to, t.offsets}));
  }
}

TEST(StridedLayoutTest, ChainsOfTransposesAndReshapes) {
  std::mt19937 rng(2);
  int composed = 0, refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    int64_t n = 1 + rng() % 120;
    std::vector<int64_t> shape = randomShape(n, rng);
    Elements t{shape, std::vector<int64_t>(n)};
    std::iota(t.offsets.begin(), t.offsets.end(), 7);
    StridedLayout layout = StridedLayout::contiguous(shape);
    layout.offset = 7;
    for (int step = 0; step < 4; ++step) {
      if (rng() % 2) {
        std::vector<int64_t> perm(t.shape.size());
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        t = transpose(t, perm);
        StridedLayout next{layout.offset, {}};
        for (int64_t p : perm)
          next.strides.push_back(layout.strides[p]);
        layout = next;
      } else {
        std::vector<int64_t> to = randomShape(n, rng);
        auto next = layout.reshape(t.shape, to);
        t.shape = to;
        if (!next) {
          // Refused: then no layout may address these elements. One that
          // did would have the steps from the first element to its
          // neighbours along each dimension as strides.
          ++refused;
          StridedLayout candidate{t.offsets[0], {}};
          for (size_t d = 0; d < to.size(); ++d) {
            int64_t neighbour = 0;
            if (to[d] > 1) {
              neighbour = 1;
              for (size_t e = d + 1; e < to.size(); ++e)
                neighbour *= to[e];
            }
            candidate.strides.push_back(
                to[d] > 1 ? t.offsets[neighbour] - t.offsets[0] : 0);
          }
          ASSERT_FALSE(addresses(candidate, t)) << "trial " << trial;
          break;
        }
        layout = *next;
      }
      ++composed;
      ASSERT_TRUE(addresses(layout, t)) << "trial " << trial;
    }
  }
  EXPECT_GT(composed, 1000);
  EXPECT_GT(refused, 10);
}

TEST(StridedLayoutTest, MergingTransposedDimensionsIsRefused) {
  // [2, 3] transposed to [3, 2] (strides 1, 3) cannot be one row of 6.
  StridedLayout t{0, {1, 3}};
  EXPECT_FALSE(t.reshape({3, 2}, {6}));
  // Splitting a dimension keeps its stride at the inner end.
  auto split = t.reshape({3, 2}, {3, 1, 2});
  ASSERT_TRUE(split);
  EXPECT_EQ(split->strides[0], 1);
  EXPECT_EQ(split->strides[2], 3);
  // Extents of 1 and an offset carry over.
  StridedLayout sliced{5, {24, 1}};
  auto heads = sliced.reshape({4, 8}, {1, 4, 2, 4});
  ASSERT_TRUE(heads);
  EXPECT_EQ(heads->offset, 5);
  EXPECT_EQ(heads->strides[1], 24);
  EXPECT_EQ(heads->strides[2], 4);
  EXPECT_EQ(heads->strides[3], 1);
}

} // namespace
