//===- Bpe.cpp - The BPE model of a tokenizer.json ------------------------===//
//
// Merging follows `tokenizers`' Word::merge_all step by step, including how
// it decides that a queued merge went stale (by the merged id, not the
// rank), so that ids match HF even for merge tables where classic BPE and
// HF's queue would disagree.
//
//===----------------------------------------------------------------------===//

#include "Bpe.h"
#include "Unicode.h"

#include "llvm/ADT/SmallString.h"

#include <cstdio>
#include <queue>

using namespace pcc;
using namespace pcc::tokenizer;
using llvm::json::Array;
using llvm::json::Object;
using llvm::json::Value;

namespace {

/// The optional boolean `key` of `model` (null or absent: false).
llvm::Error readFlag(const Object &model, llvm::StringRef key, bool &flag) {
  flag = false;
  const Value *v = model.get(key);
  if (!v || v->kind() == Value::Null)
    return llvm::Error::success();
  std::optional<bool> b = v->getAsBoolean();
  if (!b)
    return fail("model." + key + " must be a boolean");
  flag = *b;
  return llvm::Error::success();
}

/// Checks that the string option `key` is null, absent or "": the prefix
/// and suffix options of subword models, which none of the supported
/// tokenizers set.
llvm::Error requireUnset(const Object &model, llvm::StringRef key) {
  const Value *v = model.get(key);
  if (!v || v->kind() == Value::Null)
    return llvm::Error::success();
  std::optional<llvm::StringRef> s = v->getAsString();
  if (s && s->empty())
    return llvm::Error::success();
  return fail("model." + key + " " +
              (s ? quote(*s) : std::string("(not a string)")) +
              " is not supported (only null)");
}

/// A merge in the queue of Word::merge_all: the lowest rank first, then the
/// leftmost position.
struct Merge {
  uint32_t pos, rank, newId;
  bool operator<(const Merge &other) const {
    if (rank != other.rank)
      return rank > other.rank;
    return pos > other.pos;
  }
};

/// A symbol of the word being merged: a token and its neighbours.
struct Symbol {
  uint32_t id;
  int64_t prev, next;
  size_t len;
};

uint64_t pairKey(uint32_t left, uint32_t right) {
  return (uint64_t(left) << 32) | right;
}

/// Words longer than this are not cached, as in HF: they are rare and would
/// let one long input evict everything else.
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kCacheCapacity = 10000;

} // namespace

struct BpeModel::Cache {
  std::mutex mutex;
  llvm::StringMap<std::vector<uint32_t>> words;
};

BpeModel::BpeModel() : cache(std::make_unique<Cache>()) { byteIds.fill(-1); }

BpeModel::~BpeModel() = default;

llvm::Error BpeModel::load(const Object &model) {
  if (const Value *dropout = model.get("dropout")) {
    std::optional<double> p = dropout->getAsNumber();
    // HF samples merges away with probability `dropout`; 0 means none.
    if (dropout->kind() != Value::Null && !(p && *p == 0.0)) {
      char shown[32] = "(not a number)";
      if (p)
        snprintf(shown, sizeof(shown), "%g", *p);
      return fail("model.dropout " + llvm::Twine(shown) +
                  " is not supported (only null)");
    }
  }
  if (llvm::Error e = requireUnset(model, "continuing_subword_prefix"))
    return e;
  if (llvm::Error e = requireUnset(model, "end_of_word_suffix"))
    return e;
  if (llvm::Error e = readFlag(model, "fuse_unk", fuseUnk))
    return e;
  if (llvm::Error e = readFlag(model, "byte_fallback", byteFallback))
    return e;
  if (llvm::Error e = readFlag(model, "ignore_merges", ignoreMerges))
    return e;

  const Object *vocabObject = model.getObject("vocab");
  if (!vocabObject)
    return fail("model.vocab must be an object of token: id");
  for (const auto &[key, value] : *vocabObject) {
    std::optional<int64_t> id = value.getAsInteger();
    if (!id || *id < 0 || *id > kMaxTokenId)
      return fail("model.vocab[" + quote(key) +
                  "] must be an integer id in [0, " +
                  std::to_string(kMaxTokenId) + "]");
    auto [it, inserted] = vocab.try_emplace(key.str(), uint32_t(*id));
    (void)inserted;
    auto [old, fresh] = tokens.try_emplace(uint32_t(*id), it->first());
    // HF keeps one of the two in its id -> token map, whichever its hash
    // map yields last: decoding would be arbitrary, so refuse.
    if (!fresh)
      return fail("model.vocab: " + quote(old->second) + " and " + quote(key) +
                  " both have id " + std::to_string(*id));
    largestId = std::max(largestId, *id);
  }

  if (const Value *unk = model.get("unk_token");
      unk && unk->kind() != Value::Null) {
    std::optional<llvm::StringRef> name = unk->getAsString();
    if (!name)
      return fail("model.unk_token must be a string or null");
    auto it = vocab.find(*name);
    // HF fails only when some text needs the unknown token; refusing the
    // file up front keeps encode() from failing on some inputs only.
    if (it == vocab.end())
      return fail("model.unk_token " + quote(*name) +
                  " is not in the vocabulary");
    unkId = it->second;
  }

  for (unsigned b = 0; b < 256; ++b) {
    char name[8];
    snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = vocab.find(name);
    if (it != vocab.end())
      byteIds[b] = it->second;
  }

  const Value *mergesValue = model.get("merges");
  if (!mergesValue || mergesValue->kind() == Value::Null)
    return llvm::Error::success();
  const Array *mergeList = mergesValue->getAsArray();
  if (!mergeList)
    return fail("model.merges must be an array");
  uint32_t rank = 0;
  for (size_t i = 0; i < mergeList->size(); ++i) {
    const Value &merge = (*mergeList)[i];
    std::string where = "model.merges[" + std::to_string(i) + "]";
    llvm::StringRef left, right;
    if (std::optional<llvm::StringRef> line = merge.getAsString()) {
      // The legacy "a b" form, as merges.txt, whose #version header HF
      // skips.
      if (line->starts_with("#version"))
        continue;
      std::tie(left, right) = line->split(' ');
      if (line->count(' ') != 1)
        return fail(where + " " + quote(*line) +
                    " must be two tokens separated by one space");
    } else if (const Array *pair = merge.getAsArray();
               pair && pair->size() == 2 && (*pair)[0].getAsString() &&
               (*pair)[1].getAsString()) {
      left = *(*pair)[0].getAsString();
      right = *(*pair)[1].getAsString();
    } else {
      return fail(where + " must be \"a b\" or [\"a\", \"b\"]");
    }
    auto leftIt = vocab.find(left), rightIt = vocab.find(right);
    if (leftIt == vocab.end())
      return fail(where + ": " + quote(left) + " is not in the vocabulary");
    if (rightIt == vocab.end())
      return fail(where + ": " + quote(right) + " is not in the vocabulary");
    std::string merged = (left + right).str();
    auto mergedIt = vocab.find(merged);
    if (mergedIt == vocab.end())
      return fail(where + ": " + quote(merged) + " is not in the vocabulary");
    // A pair listed twice keeps its last rank, as HF's map does.
    merges[pairKey(leftIt->second, rightIt->second)] = {rank, mergedIt->second};
    ++rank;
  }
  return llvm::Error::success();
}

std::optional<uint32_t> BpeModel::tokenId(llvm::StringRef token) const {
  auto it = vocab.find(token);
  if (it == vocab.end())
    return std::nullopt;
  return it->second;
}

std::optional<llvm::StringRef> BpeModel::tokenText(uint32_t id) const {
  auto it = tokens.find(id);
  if (it == tokens.end())
    return std::nullopt;
  return it->second;
}

void BpeModel::tokenize(llvm::StringRef word, std::vector<int64_t> &ids) const {
  if (word.empty())
    return;
  if (ignoreMerges) {
    // Llama 3: a piece that is itself a token is not merged up to.
    if (std::optional<uint32_t> id = tokenId(word)) {
      ids.push_back(*id);
      return;
    }
  }
  bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache->mutex);
    auto it = cache->words.find(word);
    if (it != cache->words.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<uint32_t> merged;
  mergeWord(word, merged);
  ids.insert(ids.end(), merged.begin(), merged.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache->mutex);
    if (cache->words.size() >= kCacheCapacity)
      cache->words.clear();
    cache->words.try_emplace(word, std::move(merged));
  }
}

void BpeModel::mergeWord(llvm::StringRef word,
                         std::vector<uint32_t> &ids) const {
  // The characters of the word as symbols (BPE::merge_word).
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](uint32_t id, size_t len) {
    int64_t prev = -1;
    if (!symbols.empty()) {
      symbols.back().next = int64_t(symbols.size());
      prev = int64_t(symbols.size()) - 1;
    }
    symbols.push_back({id, prev, -1, len});
  };
  // An unknown character waiting for the next known one (fuse_unk
  // extends it): id < 0 when none.
  int64_t unkPendingId = -1;
  size_t unkPendingLen = 0;
  auto flushUnk = [&] {
    if (unkPendingId >= 0)
      add(uint32_t(unkPendingId), unkPendingLen);
    unkPendingId = -1;
  };
  for (size_t pos = 0; pos < word.size();) {
    size_t start = pos;
    pos = std::min(word.size(), start + utf8Length(word[start]));
    llvm::StringRef piece = word.slice(start, pos);
    if (std::optional<uint32_t> id = tokenId(piece)) {
      flushUnk();
      add(*id, piece.size());
      continue;
    }
    if (byteFallback &&
        llvm::all_of(piece, [&](char b) { return byteIds[uint8_t(b)] >= 0; })) {
      // HF adds the byte tokens without flushing a pending unknown token,
      // so a fused <unk> can end up after them.
      for (char b : piece)
        add(uint32_t(byteIds[uint8_t(b)]), 1);
      continue;
    }
    if (!unkId)
      continue; // HF drops the character.
    if (unkPendingId >= 0 && fuseUnk) {
      unkPendingLen += piece.size();
      continue;
    }
    flushUnk();
    unkPendingId = *unkId;
    unkPendingLen = piece.size();
  }
  flushUnk();

  // Word::merge_all.
  std::priority_queue<Merge> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    auto it = merges.find(pairKey(symbols[i].id, symbols[i + 1].id));
    if (it != merges.end())
      queue.push({uint32_t(i), it->second.first, it->second.second});
  }
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    Symbol &current = symbols[top.pos];
    if (current.len == 0 || current.next == -1)
      continue;
    size_t nextPos = size_t(current.next);
    Symbol right = symbols[nextPos];
    auto it = merges.find(pairKey(current.id, right.id));
    if (it == merges.end() || it->second.second != top.newId)
      continue;
    current.id = top.newId;
    current.len += right.len;
    current.next = right.next;
    symbols[nextPos].len = 0;
    if (right.next > -1 && size_t(right.next) < symbols.size())
      symbols[size_t(right.next)].prev = int64_t(top.pos);
    if (current.prev >= 0) {
      auto prevIt =
          merges.find(pairKey(symbols[size_t(current.prev)].id, current.id));
      if (prevIt != merges.end())
        queue.push({uint32_t(current.prev), prevIt->second.first,
                    prevIt->second.second});
    }
    if (current.next >= 0 && size_t(current.next) < symbols.size()) {
      auto nextIt =
          merges.find(pairKey(current.id, symbols[size_t(current.next)].id));
      if (nextIt != merges.end())
        queue.push({top.pos, nextIt->second.first, nextIt->second.second});
    }
  }
  for (const Symbol &s : symbols)
    if (s.len != 0)
      ids.push_back(s.id);
}
