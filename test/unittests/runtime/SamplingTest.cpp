//===- SamplingTest.cpp - pccrt::Generator's choice of tokens --------------===//
//
// Greedy picks the first of the largest logits; a draw is a function of the
// request's seed and the token's index alone, stays among the top-k and
// within the top-p mass, and follows the softmax of logits / temperature.
//
//===----------------------------------------------------------------------===//

#include "pccrt/Generate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

using pccrt::Generator;
using pccrt::Sampling;

namespace {
const std::vector<float> kLogits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
int64_t pick(const Sampling &s, int64_t index) {
  return Generator::sample(kLogits.data(), int64_t(kLogits.size()), s, index);
}
} // namespace

TEST(Sampling, GreedyTakesTheFirstLargest) {
  Sampling s;
  EXPECT_EQ(pick(s, 0), 1);
  EXPECT_EQ(pick(s, 7), 1);
}

TEST(Sampling, DrawsAreAFunctionOfSeedAndIndex) {
  Sampling s;
  s.temperature = 1.0;
  s.seed = 42;
  std::vector<int64_t> first, again;
  for (int64_t i = 0; i < 64; ++i) {
    first.push_back(pick(s, i));
    again.push_back(pick(s, i));
  }
  EXPECT_EQ(first, again);
  s.seed = 43;
  std::vector<int64_t> other;
  for (int64_t i = 0; i < 64; ++i)
    other.push_back(pick(s, i));
  EXPECT_NE(first, other);
}

TEST(Sampling, TopKAndTopPKeepTheLikeliest) {
  Sampling s;
  s.temperature = 1.0;
  s.topK = 2; // ids 1 and 3 (equal logits)
  for (int64_t i = 0; i < 200; ++i) {
    int64_t t = pick(s, i);
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
  s.topK = 0;
  s.topP = 0.1; // the single most likely token holds more than 0.1
  for (int64_t i = 0; i < 200; ++i)
    EXPECT_EQ(pick(s, i), 1);
}

TEST(Sampling, FollowsTheSoftmax) {
  Sampling s;
  s.temperature = 0.7;
  std::map<int64_t, int> counts;
  const int draws = 20000;
  for (int64_t i = 0; i < draws; ++i)
    ++counts[pick(s, i)];
  double z = 0;
  for (float l : kLogits)
    z += std::exp(l / 0.7);
  for (size_t t = 0; t < kLogits.size(); ++t) {
    double expected = std::exp(kLogits[t] / 0.7) / z;
    EXPECT_NEAR(double(counts[int64_t(t)]) / draws, expected, 0.015) << t;
  }
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  Sampling s;
  s.repetitionPenalty = 2.0;
  std::vector<float> logits = kLogits;
  // Prompt {1, 2}, then 2 generated again: each id is penalized once.
  Generator::processLogits(logits.data(), int64_t(logits.size()), s, {1, 2, 2},
                           /*promptLength=*/2);
  EXPECT_EQ(logits[1], 1.0f);
  EXPECT_EQ(logits[2], -2.0f);
  EXPECT_EQ(logits[0], kLogits[0]);
  EXPECT_EQ(logits[3], kLogits[3]);
  // Greedy now takes id 3, the other largest logit.
  EXPECT_EQ(Generator::sample(logits.data(), int64_t(logits.size()), s, 0), 3);
}

TEST(Sampling, PresenceAndFrequencyReadOnlyTheGeneratedTokens) {
  Sampling s;
  s.presencePenalty = 0.5;
  s.frequencyPenalty = 0.25;
  std::vector<float> logits = kLogits;
  // Id 4 is in the prompt only; 1 was generated twice, 5 once.
  Generator::processLogits(logits.data(), int64_t(logits.size()), s,
                           {4, 1, 5, 1},
                           /*promptLength=*/1);
  EXPECT_EQ(logits[4], kLogits[4]);
  EXPECT_FLOAT_EQ(logits[1], 2.0f - 0.5f - 2 * 0.25f);
  EXPECT_FLOAT_EQ(logits[5], 0.0f - 0.5f - 0.25f);
  EXPECT_EQ(logits[3], kLogits[3]);
  EXPECT_TRUE(s.changesLogits(0));
  EXPECT_FALSE(Sampling().changesLogits(0));
}

TEST(Sampling, RangeErrorNamesTheKey) {
  Sampling s;
  EXPECT_EQ(s.rangeError(), "");
  s.topP = 1.5;
  EXPECT_EQ(s.rangeError(), "top_p must be in (0, 1], not 1.5");
  s.topP = 1;
  s.repetitionPenalty = 0;
  EXPECT_EQ(s.rangeError(), "repetition_penalty must be above 0, not 0");
  s.repetitionPenalty = 1;
  s.frequencyPenalty = -3;
  EXPECT_EQ(s.rangeError(), "frequency_penalty must be in [-2, 2], not -3");
}

TEST(Sampling, MinNewTokensHoldsBackTheStopTokens) {
  Sampling s;
  s.stop = {1, 3};
  s.minNewTokens = 2;
  EXPECT_TRUE(s.changesLogits(1));
  EXPECT_FALSE(s.changesLogits(2));
  std::vector<float> logits = kLogits;
  // One token generated: both stops are out of reach, greedy takes id 4.
  Generator::processLogits(logits.data(), int64_t(logits.size()), s, {0, 5},
                           /*promptLength=*/1);
  EXPECT_EQ(Generator::sample(logits.data(), int64_t(logits.size()), s, 1), 4);
  // Two generated: the logits stay.
  logits = kLogits;
  Generator::processLogits(logits.data(), int64_t(logits.size()), s, {0, 5, 4},
                           /*promptLength=*/1);
  EXPECT_EQ(logits, kLogits);
}
