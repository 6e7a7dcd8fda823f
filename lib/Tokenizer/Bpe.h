//===- Bpe.h - The BPE model of a tokenizer.json ----------------*- C++ -*-===//
//
// Byte-pair encoding as `tokenizers`' models::bpe::BPE does it, with the
// options models in use set: ignore_merges, byte_fallback, unk_token and
// fuse_unk. Private to lib/Tokenizer.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_LIB_TOKENIZER_BPE_H
#define PCC_LIB_TOKENIZER_BPE_H

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace pcc {
namespace tokenizer {

/// Ids of a tokenizer.json are below this bound; HF allows any u32 but no
/// model has 2^31 tokens, and the bound keeps ids valid DenseMap keys.
inline constexpr int64_t kMaxTokenId = (int64_t(1) << 31) - 1;

class BpeModel {
public:
  BpeModel();
  ~BpeModel();

  /// Reads the "model" object of a tokenizer.json; the error is one line
  /// without the file name.
  llvm::Error load(const llvm::json::Object &model);

  /// Appends the ids of `word` (one pre-tokenized piece) to `ids`.
  void tokenize(llvm::StringRef word, std::vector<int64_t> &ids) const;

  std::optional<uint32_t> tokenId(llvm::StringRef token) const;
  std::optional<llvm::StringRef> tokenText(uint32_t id) const;
  /// The number of distinct tokens, what HF's get_vocab_size() returns.
  size_t size() const { return vocab.size(); }
  /// The largest id, or -1 for an empty vocabulary.
  int64_t maxId() const { return largestId; }

private:
  /// The ids of `word` by merging its characters, without the cache.
  void mergeWord(llvm::StringRef word, std::vector<uint32_t> &ids) const;

  llvm::StringMap<uint32_t> vocab;
  llvm::DenseMap<uint32_t, llvm::StringRef> tokens;
  /// (left id << 32 | right id) -> (rank, merged id).
  llvm::DenseMap<uint64_t, std::pair<uint32_t, uint32_t>> merges;
  int64_t largestId = -1;
  std::optional<uint32_t> unkId;
  bool fuseUnk = false, byteFallback = false, ignoreMerges = false;
  /// The ids of <0x00>..<0xFF>, or -1 where absent.
  std::array<int64_t, 256> byteIds;

  /// Words seen before: merging is the costly part and text repeats.
  struct Cache;
  std::unique_ptr<Cache> cache;
};

} // namespace tokenizer
} // namespace pcc

#endif // PCC_LIB_TOKENIZER_BPE_H
