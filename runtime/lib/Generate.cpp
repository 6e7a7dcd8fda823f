//===- Generate.cpp - Continuous batching over a generation build ---------===//

#include "pccrt/Generate.h"

#include "pccrt/Comm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <list>
#include <numeric>
#include <set>
#include <unordered_map>

using namespace pccrt;

namespace {

const char *const kInputs[] = {"tokens", "positions", "slots", "block_tables",
                               "logit_indices"};

/// The entry `name` of \p model with the generation steps' interface, or
/// an Error.
int32_t findStep(const Model &model, const std::string &name,
                 const std::string &what) {
  int32_t index = model.findEntry(name);
  if (index < 0)
    throw Error(what + ": not a generation build (no '" + name +
                "' step; compile with pcc compile --generate)");
  const pccrt_entry_info &entry = model.entry(index);
  if (entry.num_inputs != 5 || entry.num_outputs != 1)
    throw Error(what + ": the '" + name +
                "' step does not have a generation step's interface");
  for (int32_t i = 0; i < 5; ++i)
    if (std::strcmp(entry.inputs[i].name, kInputs[i]) != 0 ||
        entry.inputs[i].dtype != PCCRT_I64)
      throw Error(what + ": the '" + name + "' step's input " +
                  std::to_string(i) + " is not '" + kInputs[i] + "' (I64)");
  return index;
}

/// A request while it runs.
struct Sequence {
  int64_t request = 0;
  std::vector<int64_t> tokens; ///< prompt, then the generated tokens
  int64_t promptLength = 0;
  int64_t computed = 0; ///< tokens whose keys and values are cached
  int64_t slot = -1;    ///< its row of the block table
  std::vector<int64_t> blocks;
  /// Its first blocks that the prefix cache holds (taken from it or
  /// registered), and their hashes; whether it registers the next ones
  /// (not once a block of the same tokens was registered before its own).
  int64_t registered = 0;
  std::vector<uint64_t> hashes;
  bool caching = true;
  bool admitted = false;
  std::chrono::steady_clock::time_point arrived;
};

/// The prefix cache's key of a full block: a hash of every token up to its
/// end, from the previous block's key and the block's own tokens.
constexpr uint64_t kFirstBlockKey = 0x243f6a8885a308d3ull;
uint64_t chainHash(uint64_t key, const int64_t *tokens, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    uint64_t x = key ^ (uint64_t(tokens[i]) + 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    key = x ^ (x >> 31);
  }
  return key;
}

} // namespace

GenerationShape GenerationShape::of(const Model &model,
                                    const std::string &what) {
  int32_t prefill = findStep(model, "prefill", what);
  int32_t decode = findStep(model, "decode", what);
  const pccrt_model_info &info = model.info();
  const pccrt_entry_info &p = model.entry(prefill), &d = model.entry(decode);
  GenerationShape shape;
  shape.prefillTokens = p.inputs[0].shape[1];
  shape.decodeTokens = d.inputs[0].shape[1];
  shape.maxBatch = p.inputs[3].shape[0];
  shape.blocksPerSequence = p.inputs[3].shape[1];
  shape.vocabulary = wholeShape(info, p.outputs[0]).back();
  for (int32_t i = 0; i < info.num_weights; ++i) {
    const pccrt_tensor_info &w = info.weights[i];
    if (!(w.flags & PCCRT_FLAG_CACHE) || w.rank != 4)
      continue;
    shape.numBlocks = w.shape[0];
    shape.blockSize = w.shape[2];
  }
  if (!shape.numBlocks || d.inputs[3].shape[0] != shape.maxBatch ||
      p.inputs[4].shape[0] != shape.maxBatch ||
      d.inputs[4].shape[0] != shape.decodeTokens ||
      shape.decodeTokens > shape.prefillTokens)
    throw Error(what + ": the generation steps do not fit one another");
  return shape;
}

Generator::Generator(Model &model, int64_t maxSequence)
    : model(model), shapeOf(GenerationShape::of(model, "model")),
      maxSequence(maxSequence) {
  prefillEntry = model.findEntry("prefill");
  decodeEntry = model.findEntry("decode");
  if (maxSequence < 1 ||
      maxSequence > shapeOf.blocksPerSequence * shapeOf.blockSize)
    throw Error("a longest sequence of " + std::to_string(maxSequence) +
                " does not fit the build's block table");
  scheduler = std::make_unique<Scheduler>(*this);
}

Generator::~Generator() = default;

namespace {
/// A scheduler step of one group of sequences, from its run to its tokens.
struct Step {
  struct Part {
    size_t sequence; ///< in its group's running sequences
    int64_t from, count;
  };
  std::vector<Part> parts;
  /// Per logit row: the running sequence it is for.
  std::vector<size_t> rowOf;
  /// Per logit row, once sampled (or received), kRecordWords words: its
  /// token, the count of log-probabilities that follow (-1: none), then
  /// (token, log-probability bits) pairs.
  std::vector<int64_t> tokens;
  /// The sends of the tokens to the other stages, in flight.
  std::vector<int32_t> sends;
  bool inFlight = false;
};

/// Sequences that run their steps together. A pipeline has one group per
/// stage, each a step behind the next, so that its stages work on
/// different groups at once (vLLM's virtual engines); other builds have
/// one.
struct Group {
  std::vector<Sequence> running; // in order of admission
  Step step;
};

/// Tags of what the generator sends beside the generated code's
/// activations: a pipeline's last stage's sampled tokens, and rank 0's new
/// requests.
constexpr int32_t kTokensTag = 7001;
constexpr int32_t kRequestsTag = 7002;

/// A logit row's words in Step::tokens.
constexpr int64_t kRecordWords = 2 + 2 * kMaxLogprobs;

int64_t bitsOf(double x) {
  int64_t w;
  std::memcpy(&w, &x, sizeof w);
  return w;
}

double realOf(int64_t w) {
  double x;
  std::memcpy(&x, &w, sizeof x);
  return x;
}

/// A request as int64 words: prompt length, prompt, max and min new
/// tokens, temperature and top-p (as their bits), top-k, seed, logprobs, the
/// repetition, presence and frequency penalties (as their bits), stop
/// count, stops.
void appendRequest(std::vector<int64_t> &words, const GenerationRequest &r) {
  const Sampling &s = r.sampling;
  words.push_back(int64_t(r.prompt.size()));
  words.insert(words.end(), r.prompt.begin(), r.prompt.end());
  words.insert(words.end(),
               {s.maxNewTokens, s.minNewTokens, bitsOf(s.temperature),
                bitsOf(s.topP), s.topK, int64_t(s.seed), s.logprobs,
                bitsOf(s.repetitionPenalty), bitsOf(s.presencePenalty),
                bitsOf(s.frequencyPenalty), int64_t(s.stop.size())});
  words.insert(words.end(), s.stop.begin(), s.stop.end());
}

std::vector<GenerationRequest> readRequests(const std::vector<int64_t> &words,
                                            size_t end) {
  std::vector<GenerationRequest> requests;
  for (size_t at = 0; at < end;) {
    GenerationRequest r;
    int64_t n = words[at++];
    r.prompt.assign(words.begin() + at, words.begin() + at + n);
    at += size_t(n);
    Sampling &s = r.sampling;
    s.maxNewTokens = words[at++];
    s.minNewTokens = words[at++];
    s.temperature = realOf(words[at++]);
    s.topP = realOf(words[at++]);
    s.topK = words[at++];
    s.seed = uint64_t(words[at++]);
    s.logprobs = words[at++];
    s.repetitionPenalty = realOf(words[at++]);
    s.presencePenalty = realOf(words[at++]);
    s.frequencyPenalty = realOf(words[at++]);
    int64_t stops = words[at++];
    s.stop.assign(words.begin() + at, words.begin() + at + stops);
    at += size_t(stops);
    requests.push_back(std::move(r));
  }
  return requests;
}
} // namespace

/// The continuous-batching scheduler: requests, their sequences, the free
/// rows of the block table and the free blocks, and the groups' steps.
struct Generator::Scheduler {
  using Clock = std::chrono::steady_clock;
  explicit Scheduler(Generator &g);

  Generator &generator;
  Model &model;
  const GenerationShape &shape;
  std::vector<GenerationRequest> requests;
  std::vector<GenerationResult> results;
  std::vector<Clock::time_point> arrivals;
  /// Rank 0's requests and cancellations not yet handed to the other
  /// ranks.
  std::vector<GenerationRequest> submitted;
  std::vector<int64_t> cancelling;
  /// Running requests to end at their group's next step.
  std::set<int64_t> cancelled;
  std::deque<Sequence> waiting;
  std::vector<int64_t> freeSlots, freeBlocks, blockTable;
  /// The prefix cache: per block, how many sequences hold it and, once
  /// registered, its key and its own tokens (checked on a match); the
  /// registered blocks by key; those no sequence holds, least recently
  /// released first, which a new block may take.
  struct BlockState {
    int64_t holders = 0;
    bool cached = false;
    uint64_t key = 0;
    std::vector<int64_t> tokens;
    std::list<int64_t>::iterator unheld;
  };
  std::vector<BlockState> blockStates;
  std::unordered_map<uint64_t, int64_t> cachedBlocks;
  std::list<int64_t> unheldCached;
  std::vector<Group> groups;
  int64_t tick = 0, perGroup = 0, running = 0;
  /// Whether this rank samples (its stage holds the logits), and which
  /// stage does.
  bool sampler = true;
  int64_t samplerStage = 0;
  Communicator *comm = nullptr;
  uint32_t stageAxes = 0, otherAxes = 0;
  /// Rank 0's sends of the requests to the other stages, in flight, and
  /// what they send.
  std::vector<int32_t> requestSends;
  std::vector<int64_t> requestHeader, requestWords;
  std::vector<Tensor> inputs, outputs;

  void release(Sequence &q);
  /// A block for a sequence: a free one, else the cached block released
  /// longest ago (leaving the cache); -1 if every block is held.
  int64_t takeBlock();
  /// A sequence lets go of \p block: free, or cached and unheld.
  void dropBlock(int64_t block);
  /// At admission: the cached blocks that begin \p q's tokens become its
  /// first blocks, computed (all but its last token at most).
  void takeCachedPrefix(Sequence &q);
  /// Registers \p q's blocks that are now full and computed.
  void registerComputed(Sequence &q);
  /// Hands rank 0's new requests and cancellations to every rank, queues
  /// the requests and ends the cancelled ones that wait.
  void shareRequests(std::vector<GenerationEvent> &events);
  /// Ends a request now: its result, its event, its place in the count.
  void finish(int64_t request, const std::string &reason,
              std::vector<GenerationEvent> &events);
  /// The tokens of a group's step in flight: its sequences take them, and
  /// those that are finished leave.
  void complete(Group &group, std::vector<GenerationEvent> &events);
  /// Plans, runs and (on the sampling stage) samples the step of `group`.
  void run(Group &group, std::vector<GenerationEvent> &events);
};

Generator::Scheduler::Scheduler(Generator &g)
    : generator(g), model(g.model), shape(g.shapeOf) {
  for (int64_t i = shape.maxBatch - 1; i >= 0; --i)
    freeSlots.push_back(i);
  for (int64_t i = shape.numBlocks - 1; i >= 0; --i)
    freeBlocks.push_back(i);
  blockStates.resize(size_t(shape.numBlocks));
  blockTable.assign(size_t(shape.maxBatch * shape.blocksPerSequence), 0);
  // A pipeline runs one group per stage; the stage that holds the logits
  // samples the tokens and sends them to the others, so that every rank
  // makes the same decisions.
  int64_t numGroups = model.numStages();
  groups.resize(size_t(numGroups));
  perGroup = numGroups > 1 ? shape.decodeTokens : shape.maxBatch;
  comm = model.communicator();
  sampler = model.holdsOutput(g.prefillEntry, 0);
  if (comm && comm->numRanks() > 1) {
    otherAxes = comm->allAxes();
    if (numGroups > 1) {
      stageAxes = uint32_t(1) << model.info().stage_axis;
      otherAxes &= ~stageAxes;
    }
  }
  for (uint64_t held = model.entry(g.prefillEntry).outputs[0].holders;
       numGroups > 1 && held && !(held & 1); held >>= 1)
    ++samplerStage;
}

void Generator::Scheduler::release(Sequence &q) {
  for (auto it = q.blocks.rbegin(); it != q.blocks.rend(); ++it)
    dropBlock(*it);
  q.blocks.clear();
  q.hashes.clear();
  q.registered = 0;
  q.caching = true;
  freeSlots.push_back(q.slot);
  q.slot = -1;
}

int64_t Generator::Scheduler::takeBlock() {
  int64_t block = -1;
  if (!freeBlocks.empty()) {
    block = freeBlocks.back();
    freeBlocks.pop_back();
  } else if (!unheldCached.empty()) {
    block = unheldCached.front();
    unheldCached.pop_front();
    BlockState &state = blockStates[size_t(block)];
    cachedBlocks.erase(state.key);
    state.cached = false;
    state.tokens.clear();
  } else {
    return -1;
  }
  blockStates[size_t(block)].holders = 1;
  return block;
}

void Generator::Scheduler::dropBlock(int64_t block) {
  BlockState &state = blockStates[size_t(block)];
  if (--state.holders > 0)
    return;
  if (state.cached)
    state.unheld = unheldCached.insert(unheldCached.end(), block);
  else
    freeBlocks.push_back(block);
}

void Generator::Scheduler::takeCachedPrefix(Sequence &q) {
  int64_t size = shape.blockSize;
  uint64_t key = kFirstBlockKey;
  for (int64_t b = 0; (b + 1) * size < int64_t(q.tokens.size()); ++b) {
    const int64_t *tokens = q.tokens.data() + b * size;
    key = chainHash(key, tokens, size);
    auto it = cachedBlocks.find(key);
    if (it == cachedBlocks.end())
      break;
    BlockState &state = blockStates[size_t(it->second)];
    if (!std::equal(state.tokens.begin(), state.tokens.end(), tokens))
      break;
    if (state.holders++ == 0)
      unheldCached.erase(state.unheld);
    q.blocks.push_back(it->second);
    q.hashes.push_back(key);
  }
  q.registered = int64_t(q.blocks.size());
  q.computed = q.registered * size;
  if (!q.admitted)
    results[size_t(q.request)].cachedTokens = q.computed;
  q.admitted = true;
}

void Generator::Scheduler::registerComputed(Sequence &q) {
  int64_t size = shape.blockSize;
  while (q.caching && q.registered < int64_t(q.blocks.size()) &&
         (q.registered + 1) * size <= q.computed) {
    const int64_t *tokens = q.tokens.data() + q.registered * size;
    uint64_t key = chainHash(q.registered ? q.hashes.back() : kFirstBlockKey,
                             tokens, size);
    int64_t block = q.blocks[size_t(q.registered)];
    if (!cachedBlocks.emplace(key, block).second) {
      // Another block holds these tokens: this one and the next stay the
      // sequence's own.
      q.caching = false;
      break;
    }
    BlockState &state = blockStates[size_t(block)];
    state.cached = true;
    state.key = key;
    state.tokens.assign(tokens, tokens + size);
    q.hashes.push_back(key);
    ++q.registered;
  }
}

void Generator::Scheduler::finish(int64_t request, const std::string &reason,
                                  std::vector<GenerationEvent> &events) {
  results[size_t(request)].finishReason = reason;
  GenerationEvent event;
  event.request = request;
  event.finishReason = reason;
  events.push_back(std::move(event));
  cancelled.erase(request);
  --running;
}

void Generator::Scheduler::shareRequests(std::vector<GenerationEvent> &events) {
  std::vector<GenerationRequest> arrived = std::move(submitted);
  submitted.clear();
  std::vector<int64_t> cancels = std::move(cancelling);
  cancelling.clear();
  if (comm && comm->numRanks() > 1) {
    // Rank 0's words reach its stage's ranks through a sum (the others
    // add nothing), and the other stages' through sends, which do not wait
    // for them: the stages stay a group apart.
    for (int32_t request : requestSends)
      comm->waitSend(request);
    requestSends.clear();
    bool stage0 = model.stage() == 0;
    // The requests' words, then the cancelled ids.
    std::vector<int64_t> words;
    if (comm->rank() == 0) {
      for (const GenerationRequest &r : arrived)
        appendRequest(words, r);
      words.insert(words.end(), cancels.begin(), cancels.end());
    }
    std::vector<int64_t> header{int64_t(words.size()),
                                int64_t(cancels.size())};
    if (comm->rank() != 0)
      header[1] = 0;
    if (stage0 && otherAxes && comm->groupSize(otherAxes) > 1) {
      comm->allReduce(otherAxes, header.data(), 2, PCCRT_I64, PCCRT_REDUCE_SUM);
      words.resize(size_t(header[0]), 0);
      if (header[0])
        comm->allReduce(otherAxes, words.data(), header[0], PCCRT_I64,
                        PCCRT_REDUCE_SUM);
    }
    if (stageAxes) {
      if (stage0) {
        requestHeader = header;
        requestWords = words;
        for (int64_t s = 1; s < int64_t(groups.size()); ++s) {
          requestSends.push_back(comm->startSend(stageAxes, int32_t(s),
                                                 kRequestsTag,
                                                 requestHeader.data(), 2,
                                                 PCCRT_I64));
          if (header[0])
            requestSends.push_back(comm->startSend(
                stageAxes, int32_t(s), kRequestsTag, requestWords.data(),
                header[0], PCCRT_I64));
        }
      } else {
        comm->recv(stageAxes, 0, kRequestsTag, header.data(), 2, PCCRT_I64);
        words.assign(size_t(header[0]), 0);
        if (header[0])
          comm->recv(stageAxes, 0, kRequestsTag, words.data(), header[0],
                     PCCRT_I64);
      }
    }
    size_t end = size_t(header[0] - header[1]);
    arrived = readRequests(words, end);
    cancels.assign(words.begin() + std::ptrdiff_t(end), words.end());
  }
  for (GenerationRequest &r : arrived) {
    Sequence q;
    q.request = int64_t(requests.size());
    q.tokens = r.prompt;
    q.promptLength = int64_t(q.tokens.size());
    q.arrived = Clock::now();
    requests.push_back(std::move(r));
    results.emplace_back();
    waiting.push_back(std::move(q));
  }
  // A waiting request ends now; a running one at its group's next step,
  // once its step in flight is done.
  for (int64_t id : cancels) {
    if (id < 0 || id >= int64_t(results.size()) ||
        !results[size_t(id)].finishReason.empty())
      continue;
    auto it = std::find_if(waiting.begin(), waiting.end(),
                           [&](const Sequence &q) { return q.request == id; });
    if (it != waiting.end()) {
      waiting.erase(it);
      finish(id, "abort", events);
    } else {
      cancelled.insert(id);
    }
  }
}

void Generator::Scheduler::complete(Group &group,
                                    std::vector<GenerationEvent> &events) {
  Step &step = group.step;
  if (!step.inFlight)
    return;
  step.inFlight = false;
  if (!sampler && !step.tokens.empty())
    comm->recv(stageAxes, int32_t(samplerStage), kTokensTag,
               step.tokens.data(), int64_t(step.tokens.size()), PCCRT_I64);
  for (int32_t request : step.sends)
    comm->waitSend(request);
  step.sends.clear();
  std::vector<Sequence> &seqs = group.running;
  for (const Step::Part &part : step.parts) {
    Sequence &q = seqs[part.sequence];
    q.computed = part.from + part.count;
    registerComputed(q);
  }
  auto now = Clock::now();
  std::vector<bool> finished(seqs.size(), false);
  for (size_t k = 0; k < step.rowOf.size(); ++k) {
    Sequence &q = seqs[step.rowOf[k]];
    const Sampling &sampling = requests[size_t(q.request)].sampling;
    GenerationResult &result = results[size_t(q.request)];
    int64_t index = int64_t(q.tokens.size()) - q.promptLength;
    const int64_t *record = &step.tokens[k * size_t(kRecordWords)];
    int64_t next = record[0];
    q.tokens.push_back(next);
    result.tokens.push_back(next);
    GenerationEvent event{
        q.request, next, "", {}, index == 0 ? result.cachedTokens : 0};
    for (int64_t i = 0; i < record[1]; ++i)
      event.logprobs.push_back({record[2 + 2 * i], realOf(record[3 + 2 * i])});
    if (record[1] >= 0)
      result.logprobs.push_back(event.logprobs);
    double since = std::chrono::duration<double>(now - q.arrived).count();
    if (index == 0)
      result.firstTokenSeconds = since;
    result.lastTokenSeconds = since;
    bool stop = std::find(sampling.stop.begin(), sampling.stop.end(), next) !=
                sampling.stop.end();
    if (stop || index + 1 >= sampling.maxNewTokens ||
        int64_t(q.tokens.size()) > generator.maxSequence) {
      result.finishReason = event.finishReason = stop ? "stop" : "length";
      finished[step.rowOf[k]] = true;
    }
    events.push_back(std::move(event));
  }
  std::vector<Sequence> still;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (!finished[i] && !cancelled.count(seqs[i].request)) {
      still.push_back(std::move(seqs[i]));
      continue;
    }
    release(seqs[i]);
    if (finished[i]) {
      cancelled.erase(seqs[i].request);
      --running;
    } else {
      finish(seqs[i].request, "abort", events);
    }
  }
  seqs = std::move(still);
}

void Generator::Scheduler::run(Group &group,
                               std::vector<GenerationEvent> &events) {
  const GenerationShape &s = shape;
  std::vector<Sequence> &seqs = group.running;
  while (!waiting.empty() && !freeSlots.empty() &&
         int64_t(seqs.size()) < perGroup) {
    Sequence q = std::move(waiting.front());
    waiting.pop_front();
    q.slot = freeSlots.back();
    freeSlots.pop_back();
    takeCachedPrefix(q);
    seqs.push_back(std::move(q));
  }
  if (seqs.empty())
    return; // nothing for this group yet

  // The step: every decoding sequence's token first, then the prompts'
  // chunks, oldest first, within the step's budget. A token needs its
  // position's block; when none is free, the group's newest sequence gives
  // its blocks back and waits to be computed again (its tokens so far
  // kept: it resumes from them).
  Step &step = group.step;
  bool prefill = false;
  for (;;) {
    step.parts.clear();
    prefill = false;
    for (const Sequence &q : seqs)
      prefill |= int64_t(q.tokens.size()) - q.computed > 1;
    int64_t budget = prefill ? s.prefillTokens : s.decodeTokens;
    for (int pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < seqs.size() && budget > 0; ++i) {
        Sequence &q = seqs[i];
        int64_t left = int64_t(q.tokens.size()) - q.computed;
        if ((pass == 0) != (left == 1))
          continue;
        int64_t count = std::min(left, budget);
        step.parts.push_back({i, q.computed, count});
        budget -= count;
      }
    bool short_ = false;
    for (const Step::Part &part : step.parts) {
      Sequence &q = seqs[part.sequence];
      int64_t needed = (part.from + part.count - 1) / s.blockSize + 1;
      while (int64_t(q.blocks.size()) < needed) {
        int64_t block = takeBlock();
        if (block < 0)
          break;
        q.blocks.push_back(block);
      }
      short_ |= int64_t(q.blocks.size()) < needed;
    }
    if (!short_)
      break;
    bool othersRun = std::any_of(groups.begin(), groups.end(),
                                 [&](const Group &g) {
                                   return &g != &group && !g.running.empty();
                                 });
    if (seqs.size() == 1 && !othersRun)
      throw Error("the KV cache's " + std::to_string(s.numBlocks) +
                  " blocks of " + std::to_string(s.blockSize) +
                  " positions cannot hold one sequence of " +
                  std::to_string(seqs.front().tokens.size()) +
                  " tokens (pcc compile --kv-blocks)");
    Sequence victim = std::move(seqs.back());
    seqs.pop_back();
    release(victim);
    victim.computed = 0;
    ++results[size_t(victim.request)].preemptions;
    waiting.push_front(std::move(victim));
    if (seqs.empty())
      break; // the other groups' blocks come back first
  }
  if (seqs.empty()) {
    step.parts.clear();
    return;
  }

  // The inputs: padding tokens have slot -1.
  int32_t entry = prefill ? generator.prefillEntry : generator.decodeEntry;
  int64_t n = prefill ? s.prefillTokens : s.decodeTokens;
  int64_t rows = prefill ? s.maxBatch : s.decodeTokens;
  Tensor tokens{"tokens", PCCRT_I64, {1, n}, std::vector<uint8_t>(n * 8)};
  Tensor positions{"positions", PCCRT_I64, {n}, std::vector<uint8_t>(n * 8)};
  Tensor slots{"slots", PCCRT_I64, {n}, std::vector<uint8_t>(n * 8)};
  Tensor logitIndices{"logit_indices", PCCRT_I64, {rows},
                      std::vector<uint8_t>(rows * 8)};
  auto *tok = reinterpret_cast<int64_t *>(tokens.data.data());
  auto *pos = reinterpret_cast<int64_t *>(positions.data.data());
  auto *slot = reinterpret_cast<int64_t *>(slots.data.data());
  auto *rowIndex = reinterpret_cast<int64_t *>(logitIndices.data.data());
  std::fill(slot, slot + n, -1);
  std::fill(blockTable.begin(), blockTable.end(), 0);
  for (const Sequence &q : seqs)
    for (size_t b = 0; b < q.blocks.size(); ++b)
      blockTable[size_t(q.slot * s.blocksPerSequence) + b] = q.blocks[b];
  step.rowOf.clear();
  int64_t t = 0;
  for (const Step::Part &part : step.parts) {
    const Sequence &q = seqs[part.sequence];
    for (int64_t j = 0; j < part.count; ++j, ++t) {
      tok[t] = q.tokens[size_t(part.from + j)];
      pos[t] = part.from + j;
      slot[t] = q.slot;
    }
    if (part.from + part.count == int64_t(q.tokens.size())) {
      rowIndex[step.rowOf.size()] = t - 1;
      step.rowOf.push_back(part.sequence);
    }
  }
  Tensor table{"block_tables", PCCRT_I64,
               {s.maxBatch, s.blocksPerSequence},
               std::vector<uint8_t>(blockTable.size() * 8)};
  std::memcpy(table.data.data(), blockTable.data(), table.data.size());
  inputs = {std::move(tokens), std::move(positions), std::move(slots),
            std::move(table), std::move(logitIndices)};
  model.run(entry, inputs, outputs);
  step.inFlight = true;
  step.tokens.assign(step.rowOf.size() * size_t(kRecordWords), 0);
  if (!sampler)
    return; // the tokens come when the group's next step is due
  Tensor logits = model.gatherHeldOutput(entry, outputs, 0);
  std::vector<float> processed;
  for (size_t k = 0; k < step.rowOf.size(); ++k) {
    const Sequence &q = seqs[step.rowOf[k]];
    const Sampling &sampling = requests[size_t(q.request)].sampling;
    const float *row = reinterpret_cast<const float *>(logits.data.data()) +
                       int64_t(k) * s.vocabulary;
    int64_t *record = &step.tokens[k * size_t(kRecordWords)];
    int64_t index = int64_t(q.tokens.size()) - q.promptLength;
    const float *chosenFrom = row;
    if (sampling.changesLogits(index)) {
      processed.assign(row, row + s.vocabulary);
      Generator::processLogits(processed.data(), s.vocabulary, sampling,
                               q.tokens, q.promptLength);
      chosenFrom = processed.data();
    }
    record[0] = Generator::sample(chosenFrom, s.vocabulary, sampling, index);
    record[1] = -1;
    if (sampling.logprobs < 0)
      continue;
    std::vector<TokenLogprob> lp =
        Generator::logprobsOf(row, s.vocabulary, record[0],
                              std::min(sampling.logprobs, kMaxLogprobs));
    record[1] = int64_t(lp.size());
    for (size_t i = 0; i < lp.size(); ++i) {
      record[2 + 2 * i] = lp[i].token;
      record[3 + 2 * i] = bitsOf(lp[i].logprob);
    }
  }
  if (groups.size() > 1 && !step.tokens.empty())
    for (int64_t other = 0; other < int64_t(groups.size()); ++other)
      if (other != samplerStage)
        step.sends.push_back(comm->startSend(
            stageAxes, int32_t(other), kTokensTag, step.tokens.data(),
            int64_t(step.tokens.size()), PCCRT_I64));
  if (groups.size() == 1)
    complete(group, events);
}

/// Throws for a prompt that is empty or longer than \p maxSequence.
static void checkPrompt(const std::vector<int64_t> &prompt,
                        int64_t maxSequence) {
  if (prompt.empty() || int64_t(prompt.size()) > maxSequence)
    throw Error("a prompt of " + std::to_string(prompt.size()) +
                " tokens: prompts take 1 to " + std::to_string(maxSequence));
}

int64_t Generator::submit(GenerationRequest request) {
  checkPrompt(request.prompt, maxSequence);
  Communicator *comm = model.communicator();
  if (comm && comm->rank() != 0)
    return -1;
  Scheduler &s = *scheduler;
  int64_t id = int64_t(s.requests.size() + s.submitted.size());
  s.submitted.push_back(std::move(request));
  ++s.running;
  return id;
}

std::vector<GenerationEvent> Generator::step() {
  Scheduler &s = *scheduler;
  std::vector<GenerationEvent> events;
  // Requests submitted on rank 0 count as running there already.
  int64_t before = int64_t(s.requests.size());
  s.shareRequests(events);
  Communicator *comm = model.communicator();
  if (comm && comm->rank() != 0)
    s.running += int64_t(s.requests.size()) - before;
  Group &group = s.groups[size_t(s.tick % int64_t(s.groups.size()))];
  ++s.tick;
  s.complete(group, events);
  s.run(group, events);
  return events;
}

void Generator::cancel(int64_t id) {
  Communicator *comm = model.communicator();
  if (comm && comm->rank() != 0)
    return;
  scheduler->cancelling.push_back(id);
}

Generator::Load Generator::load() const {
  const Scheduler &s = *scheduler;
  Load load;
  load.waiting = int64_t(s.waiting.size() + s.submitted.size());
  for (const Group &group : s.groups)
    load.running += int64_t(group.running.size());
  load.cachedBlocks = int64_t(s.unheldCached.size());
  load.usedBlocks =
      shapeOf.numBlocks - int64_t(s.freeBlocks.size()) - load.cachedBlocks;
  return load;
}

bool Generator::busy() const { return scheduler->running > 0; }

const GenerationResult &Generator::result(int64_t id) const {
  if (id < 0 || id >= int64_t(scheduler->results.size()))
    throw Error("no request " + std::to_string(id));
  return scheduler->results[size_t(id)];
}

std::vector<GenerationResult>
Generator::generate(const std::vector<GenerationRequest> &requests) {
  // Every prompt before any runs.
  for (const GenerationRequest &r : requests)
    checkPrompt(r.prompt, maxSequence);
  // Requests by arrival, then by order; each is submitted before the step
  // it arrives at.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].arrivalStep < requests[b].arrivalStep;
  });
  int64_t first = int64_t(scheduler->requests.size() +
                          scheduler->submitted.size());
  std::vector<int64_t> ids(requests.size());
  size_t next = 0;
  int64_t steps = 0;
  // Every rank knows the requests: each counts them running until the
  // step that hands rank 0's to it.
  while (next < order.size() || busy()) {
    while (next < order.size() &&
           requests[order[next]].arrivalStep <= steps) {
      submit(requests[order[next]]);
      ids[order[next]] = first++;
      ++next;
    }
    step();
    ++steps;
  }
  std::vector<GenerationResult> results;
  for (int64_t id : ids)
    results.push_back(result(id));
  return results;
}
