//===- Generate.h - Continuous batching over a generation build -*- C++ -*-===//
//
// Serves requests with a build of `pcc compile --generate`: its entries
// `prefill` and `decode` each take a step's tokens (ids, positions, the
// block-table rows of their sequences), the block table, and the indices
// of the tokens whose logits they return, and keep every sequence's keys
// and values in a paged cache (PCCRT_FLAG_CACHE weights).
//
// The Generator schedules as vLLM and TensorRT-LLM do (continuous, or
// in-flight, batching): a request takes a free row of the block table as
// soon as there is one, its prompt is prefilled in chunks within the
// prefill step's token budget, mixed with the decode tokens of the running
// sequences, a finished request leaves at once, and cache blocks are taken
// as sequences grow. When blocks run out, the newest running request is
// preempted: its blocks are freed and it is computed again, prompt and
// tokens so far, once blocks are free. A request's tokens depend only on
// it and its seed, never on what else runs.
//
// Full blocks are kept by their content (vLLM's automatic prefix caching):
// a block whose positions are all computed is registered under a hash of
// every token up to its end, and a request admitted later whose tokens
// begin with the same blocks takes them instead of computing them again
// (all but its last token: its logits are needed). A block that no
// sequence holds stays cached until a block is needed and none is free;
// then the least recently released one is taken. Every key and value
// depends only on the tokens up to it, and pcc's kernels compute a row
// the same way whatever else is batched, so a request's tokens are the
// same with or without the cache.
//
// On a mesh of several ranks, every rank runs the same Generator on the
// same requests and makes the same decisions: the ranks that hold the
// logits gather them whole and sample, and over a pipeline send the tokens
// to the other stages. A pipeline of P stages runs its sequences in P
// groups, each of up to the decode step's tokens, one step behind the
// next: while the last stage computes one group's step, the first
// computes the next group's (vLLM's virtual engines). A group's next step
// starts once its tokens are known.
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_GENERATE_H
#define PCCRT_GENERATE_H

#include "pccrt/Runtime.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pccrt {

/// How a request's next tokens are chosen.
struct Sampling {
  /// Tokens to generate at most.
  int64_t maxNewTokens = 16;
  /// Tokens to generate at least: until there are as many, the stop
  /// tokens cannot be chosen (transformers' min_new_tokens, vLLM's
  /// min_tokens).
  int64_t minNewTokens = 0;
  /// 0: greedy (the first of the largest logits); otherwise the logits
  /// are divided by it and a token is drawn.
  double temperature = 0;
  /// Draw among the k most likely tokens (0: all).
  int64_t topK = 0;
  /// Draw among the most likely tokens whose probabilities sum to p.
  double topP = 1;
  /// The draws of a request: a function of the seed and the token's index.
  uint64_t seed = 0;
  /// transformers' and vLLM's repetition penalty: before a token is
  /// chosen, the logit of every token of the prompt or generated so far is
  /// divided by it where positive and multiplied by it where negative (1:
  /// none).
  double repetitionPenalty = 1;
  /// OpenAI's penalties, as vLLM applies them: the logit of every token
  /// generated so far less presencePenalty, and less frequencyPenalty for
  /// each time it was generated (0: none).
  double presencePenalty = 0;
  double frequencyPenalty = 0;
  /// Tokens that end the request (kept as its last token).
  std::vector<int64_t> stop;
  /// The log-probabilities to return with each token (of the model's
  /// distribution, before penalties, temperature and truncation): -1 none, 0
  /// the chosen token's, k > 0 also the k most likely tokens' (at most
  /// kMaxLogprobs).
  int64_t logprobs = -1;

  /// Whether the penalties or minNewTokens change the logits of the
  /// request's token number \p index (0 for its first new token).
  bool changesLogits(int64_t index) const {
    return repetitionPenalty != 1 || presencePenalty != 0 ||
           frequencyPenalty != 0 || (index < minNewTokens && !stop.empty());
  }
  /// What is out of range, named by the keys of a request (temperature,
  /// top_k, top_p, repetition_penalty, presence_penalty,
  /// frequency_penalty, max_new_tokens, min_new_tokens); empty if nothing
  /// is.
  std::string rangeError() const;
};

/// The most alternatives a token's log-probabilities list.
constexpr int64_t kMaxLogprobs = 20;

/// A token id and its log-probability.
struct TokenLogprob {
  int64_t token = -1;
  double logprob = 0;
};

struct GenerationRequest {
  std::vector<int64_t> prompt;
  Sampling sampling;
  /// The scheduler step before which the request does not arrive (0: it
  /// is there from the start): a request joining while others decode.
  int64_t arrivalStep = 0;
};

struct GenerationResult {
  std::vector<int64_t> tokens; ///< the generated tokens, not the prompt
  std::string finishReason;    ///< "length", "stop" or "abort"
  /// With Sampling::logprobs >= 0: per token, its log-probability, then
  /// the most likely tokens' (Sampling::logprobs of them).
  std::vector<std::vector<TokenLogprob>> logprobs;
  double firstTokenSeconds = 0; ///< from its arrival to its first token
  double lastTokenSeconds = 0;  ///< from its arrival to its last token
  int64_t preemptions = 0;
  /// Prompt tokens whose keys and values were found in the prefix cache
  /// when the request was admitted (vLLM's num_cached_tokens).
  int64_t cachedTokens = 0;
};

/// What a generation build's entries say of it.
struct GenerationShape {
  int64_t maxBatch = 0;          ///< rows of the block table, prefill logits
  int64_t prefillTokens = 0;     ///< the prefill step's tokens
  int64_t decodeTokens = 0;      ///< the decode step's tokens and logits
  int64_t blocksPerSequence = 0; ///< columns of the block table
  int64_t blockSize = 0;         ///< positions per cache block
  int64_t numBlocks = 0;         ///< blocks of the cache
  int64_t vocabulary = 0;
  /// Checks that \p model is a generation build and reads its shape;
  /// throws an Error naming \p what otherwise.
  static GenerationShape of(const Model &model, const std::string &what);
};

/// What one scheduler step made for a request: a token, and, with its
/// last token, why it ended.
struct GenerationEvent {
  int64_t request = -1; ///< its id, from submit()
  int64_t token = -1;   ///< -1 for a request that was cancelled
  /// Empty while it runs, then "length", "stop" or "abort" (cancelled).
  std::string finishReason;
  /// As GenerationResult::logprobs, for this token.
  std::vector<TokenLogprob> logprobs;
  /// With the request's first token: GenerationResult::cachedTokens.
  int64_t cachedTokens = 0;
};

class Generator {
public:
  /// Serves requests with \p model, a generation build, whose longest
  /// sequence (prompt and tokens) is \p maxSequence positions.
  Generator(Model &model, int64_t maxSequence);
  ~Generator();

  const GenerationShape &shape() const { return shapeOf; }

  /// Queues a request and returns its id (0, 1, ... in submission order);
  /// it joins the running ones at the next step(). On a mesh, rank 0's
  /// requests are every rank's: step() hands them to the others, and what
  /// other ranks submit is ignored (their ids are -1). Throws an Error for
  /// a prompt that is empty or longer than the longest sequence.
  int64_t submit(GenerationRequest request);

  /// Ends request \p id at the next step(), waiting or running: its last
  /// event has no token and finish reason "abort", and its blocks are
  /// free for the others. Like submit(), rank 0's cancellations are every
  /// rank's; an id that is unknown or finished is ignored.
  void cancel(int64_t id);

  /// Runs one scheduler step and returns the tokens it made, in the order
  /// of the requests' admission, each finished request's last event
  /// carrying its finish reason. Collective on a mesh: every rank takes
  /// the step, and over a pipeline the stages take it one group apart.
  std::vector<GenerationEvent> step();

  /// Requests waiting for a place in a step, those running (prefilling
  /// or decoding), the KV cache's blocks in use, and those that no
  /// sequence holds but the prefix cache keeps, as of the last step.
  struct Load {
    int64_t waiting = 0, running = 0, usedBlocks = 0, cachedBlocks = 0;
  };
  Load load() const;

  /// Whether submitted requests are still waiting or running (the same on
  /// every rank after each step()).
  bool busy() const;

  /// The result of request \p id once finished (its tokens so far before).
  const GenerationResult &result(int64_t id) const;

  /// Generates for every request; returns the results in request order.
  /// A request's arrivalStep is the step before which it is submitted.
  /// Collective on a mesh.
  std::vector<GenerationResult>
  generate(const std::vector<GenerationRequest> &requests);

  /// The token \p sampling picks from \p logits for the request's token
  /// number \p index (0 for its first new token).
  static int64_t sample(const float *logits, int64_t vocabulary,
                        const Sampling &sampling, int64_t index);

  /// Applies \p sampling's penalties and minimum to \p logits for a
  /// request whose tokens so far are \p tokens, its prompt the first
  /// \p promptLength (the repetition penalty reads them all, presence and
  /// frequency only the generated ones; below minNewTokens generated, the
  /// stop tokens' logits become -infinity), as transformers' logits
  /// processors do before the choice.
  static void processLogits(float *logits, int64_t vocabulary,
                            const Sampling &sampling,
                            const std::vector<int64_t> &tokens,
                            int64_t promptLength);

  /// The log-probabilities of \p token and of the \p top most likely
  /// tokens (ties by id) under the softmax of \p logits.
  static std::vector<TokenLogprob> logprobsOf(const float *logits,
                                              int64_t vocabulary,
                                              int64_t token, int64_t top);

private:
  struct Scheduler;
  Model &model;
  GenerationShape shapeOf;
  int64_t maxSequence;
  int32_t prefillEntry = -1, decodeEntry = -1;
  std::unique_ptr<Scheduler> scheduler;
};

} // namespace pccrt

#endif // PCCRT_GENERATE_H
