//===- Sampling.cpp - How a generated token is chosen ---------------------===//
//
// The logits processors (penalties, a minimum of new tokens) and the
// choice itself (greedy, or a draw under temperature, top-k and top-p that
// is a function of the request's seed and the token's index alone), and
// the log-probabilities returned with a token. They read nothing but
// their arguments: the scheduler (Generate.cpp) calls them, and the
// requests parsers check a Sampling with rangeError.
//
//===----------------------------------------------------------------------===//

#include "pccrt/Generate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

using namespace pccrt;

namespace {

/// A counter-based generator: the draw of a request's token is a function
/// of its seed and the token's index alone (SplitMix64).
double uniform(uint64_t seed, int64_t index) {
  uint64_t x = seed + 0x9e3779b97f4a7c15ull * uint64_t(index + 1);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return double(x >> 11) * 0x1.0p-53;
}

} // namespace

std::string Sampling::rangeError() const {
  auto text = [](double x) {
    std::ostringstream os;
    os << x;
    return os.str();
  };
  if (maxNewTokens < 1)
    return "max_new_tokens must be at least 1, not " +
           std::to_string(maxNewTokens);
  if (minNewTokens < 0)
    return "min_new_tokens must be at least 0, not " +
           std::to_string(minNewTokens);
  if (!(temperature >= 0))
    return "temperature must be at least 0, not " + text(temperature);
  if (topK < 0)
    return "top_k must be at least 0, not " + std::to_string(topK);
  if (!(topP > 0 && topP <= 1))
    return "top_p must be in (0, 1], not " + text(topP);
  if (!(repetitionPenalty > 0))
    return "repetition_penalty must be above 0, not " + text(repetitionPenalty);
  if (!(presencePenalty >= -2 && presencePenalty <= 2))
    return "presence_penalty must be in [-2, 2], not " + text(presencePenalty);
  if (!(frequencyPenalty >= -2 && frequencyPenalty <= 2))
    return "frequency_penalty must be in [-2, 2], not " +
           text(frequencyPenalty);
  return "";
}

void Generator::processLogits(float *logits, int64_t vocabulary,
                              const Sampling &sampling,
                              const std::vector<int64_t> &tokens,
                              int64_t promptLength) {
  // Each token's count among the generated ones, and whether the prompt
  // holds it; every id once, as transformers gathers and scatters them.
  std::unordered_map<int64_t, int64_t> generated;
  std::unordered_set<int64_t> seen;
  for (size_t i = 0; i < tokens.size(); ++i) {
    int64_t t = tokens[i];
    if (t < 0 || t >= vocabulary)
      continue;
    seen.insert(t);
    if (int64_t(i) >= promptLength)
      ++generated[t];
  }
  // In float, as transformers computes on float32 logits.
  if (sampling.repetitionPenalty != 1) {
    float penalty = float(sampling.repetitionPenalty);
    for (int64_t t : seen)
      logits[t] = logits[t] < 0 ? logits[t] * penalty : logits[t] / penalty;
  }
  if (sampling.presencePenalty != 0 || sampling.frequencyPenalty != 0)
    for (auto [t, count] : generated)
      logits[t] -= float(sampling.frequencyPenalty) * float(count) +
                   float(sampling.presencePenalty);
  if (int64_t(tokens.size()) - promptLength < sampling.minNewTokens)
    for (int64_t t : sampling.stop)
      if (t >= 0 && t < vocabulary)
        logits[t] = -std::numeric_limits<float>::infinity();
}

int64_t Generator::sample(const float *logits, int64_t vocabulary,
                          const Sampling &sampling, int64_t index) {
  if (sampling.temperature <= 0)
    return std::max_element(logits, logits + vocabulary) - logits;
  // The candidates, most likely first (ties by id), cut to top-k.
  std::vector<int64_t> order(static_cast<size_t>(vocabulary));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  if (sampling.topK > 0 && sampling.topK < vocabulary)
    order.resize(size_t(sampling.topK));
  std::vector<double> p(order.size());
  double top = logits[order.front()] / sampling.temperature, sum = 0;
  for (size_t i = 0; i < order.size(); ++i)
    sum += p[i] = std::exp(logits[order[i]] / sampling.temperature - top);
  // Top-p: the fewest candidates whose probabilities reach p.
  size_t keep = order.size();
  if (sampling.topP < 1) {
    double mass = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      mass += p[i] / sum;
      if (mass >= sampling.topP) {
        keep = i + 1;
        break;
      }
    }
    sum = std::accumulate(p.begin(), p.begin() + keep, 0.0);
  }
  double u = uniform(sampling.seed, index) * sum;
  for (size_t i = 0; i < keep; ++i) {
    u -= p[i];
    if (u < 0)
      return order[i];
  }
  return order[keep - 1];
}

std::vector<TokenLogprob> Generator::logprobsOf(const float *logits,
                                                int64_t vocabulary,
                                                int64_t token, int64_t top) {
  float largest = *std::max_element(logits, logits + vocabulary);
  double sum = 0;
  for (int64_t i = 0; i < vocabulary; ++i)
    sum += std::exp(double(logits[i]) - largest);
  double logSum = std::log(sum) + largest;
  std::vector<TokenLogprob> out{{token, double(logits[token]) - logSum}};
  if (top <= 0)
    return out;
  std::vector<int64_t> order(static_cast<size_t>(vocabulary));
  std::iota(order.begin(), order.end(), 0);
  top = std::min(top, vocabulary);
  std::partial_sort(order.begin(), order.begin() + top, order.end(),
                    [&](int64_t a, int64_t b) {
                      return logits[a] > logits[b] ||
                             (logits[a] == logits[b] && a < b);
                    });
  for (int64_t i = 0; i < top; ++i)
    out.push_back(
        {order[size_t(i)], double(logits[order[size_t(i)]]) - logSum});
  return out;
}
