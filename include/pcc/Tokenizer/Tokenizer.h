//===- Tokenizer.h - Hugging Face tokenizer.json in C++ ---------*- C++ -*-===//
//
// Reads a Hugging Face `tokenizer.json` and encodes and decodes text exactly
// as the `tokenizers` library does, for the pipelines of the BPE model
// families in use (GPT-2, Llama 2/3, Mistral, Qwen2); anything else in a
// file is refused at load time in one line naming it, never approximated.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TOKENIZER_TOKENIZER_H
#define PCC_TOKENIZER_TOKENIZER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pcc {
namespace tokenizer {
class DecodeStream;
} // namespace tokenizer

/// A tokenizer read from a tokenizer.json. Supported: the BPE model (vocab,
/// merges as "a b" or ["a", "b"], ignore_merges, byte_fallback, unk_token,
/// fuse_unk); normalizers NFC, NFD, NFKC, NFKD, Lowercase, Prepend,
/// Replace, Strip and Sequence; pre-tokenizers ByteLevel, Split, Metaspace,
/// Digits and Sequence; decoders ByteLevel, Metaspace, Replace,
/// ByteFallback, Fuse, Strip and Sequence; added tokens with all their
/// options. The post-processor, truncation and padding are ignored: ids are
/// those of HF's encode(text, add_special_tokens=False).
///
/// The file is untrusted input, so what it can make the tokenizer do is
/// bounded, past anything real files need: at most 256 MiB, nested at most
/// 128 deep, 64 steps per normalizer, pre-tokenizer or decoder, added
/// tokens of at most 1 KiB, regexes of at most 1 MiB once their \p{...} are
/// spelled out, a regex search stops after about a second, and text may
/// grow at most 16-fold (plus 4 KiB) through the steps, beyond which it is
/// cut. Encoding and decoding are const and may run concurrently.
class Tokenizer {
public:
  /// Reads the tokenizer.json at `path`. The error is one line naming the
  /// file and what is wrong or unsupported, e.g.
  ///   tok.json: the model "WordPiece" is not supported (BPE is)
  static llvm::Expected<Tokenizer> fromFile(llvm::StringRef path);
  /// The same for the contents `text` of a file called `name`.
  static llvm::Expected<Tokenizer> fromJson(llvm::StringRef text,
                                            llvm::StringRef name);

  Tokenizer(Tokenizer &&) noexcept;
  Tokenizer &operator=(Tokenizer &&) noexcept;
  ~Tokenizer();

  /// The ids of `text`, bytes that should be UTF-8: each ill-formed part
  /// becomes U+FFFD first (as Python's errors="replace"). Added and special
  /// tokens in the text are split off first, as HF does; no BOS or other
  /// post-processing is added.
  std::vector<int64_t> encode(llvm::StringRef text) const;

  /// The text of `ids`, special tokens included (HF's decode with
  /// skip_special_tokens=False); invalid UTF-8 that byte tokens spell
  /// becomes U+FFFD as in HF. An id outside the vocabulary is an error
  /// (HF would silently drop it).
  llvm::Expected<std::string> decode(llvm::ArrayRef<int64_t> ids) const;

  /// The id of the token `token` (an added token or one of the model).
  std::optional<int64_t> tokenId(llvm::StringRef token) const;
  /// The string of token `id`, if it has one.
  std::optional<llvm::StringRef> tokenText(int64_t id) const;
  /// Whether `id` is an added token marked special (e.g. "<|endoftext|>").
  bool isSpecialToken(int64_t id) const;
  /// The largest id of the model and the added tokens, plus one.
  int64_t vocabularySize() const;
  /// The name the tokenizer was read under (its path).
  llvm::StringRef name() const;

private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
  friend class Detokenizer;
};

/// Decodes ids one at a time as they are generated. push() returns the text
/// that the new id completes, and holds back whatever a later id could
/// still change: an incomplete UTF-8 sequence, a run of byte-fallback
/// tokens (HF turns the whole run into U+FFFDs if it is not UTF-8), trailing
/// characters a Strip decoder removes at the end. The concatenation of all
/// push() results and finish() equals tokenizer.decode(ids).
///
/// The tokenizer must outlive the detokenizer.
class Detokenizer {
public:
  explicit Detokenizer(const Tokenizer &tokenizer);
  Detokenizer(Detokenizer &&) noexcept;
  Detokenizer &operator=(Detokenizer &&) noexcept;
  ~Detokenizer();

  /// The newly completed text; an error, and no change, for an id outside
  /// the vocabulary.
  llvm::Expected<std::string> push(int64_t id);
  /// The text held back, once no more ids will come. The detokenizer then
  /// starts over as if new.
  std::string finish();

private:
  const Tokenizer *tokenizer;
  std::unique_ptr<tokenizer::DecodeStream> stream;
};

} // namespace pcc

#endif // PCC_TOKENIZER_TOKENIZER_H
