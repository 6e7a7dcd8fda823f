//===- Decoder.h - The decoder of a tokenizer.json --------------*- C++ -*-===//
//
// HF's decoders turn the list of token strings into text in one go; pcc
// runs the same chain as a stream, a token at a time, so that decode() and
// the streaming Detokenizer are one code path and agree by construction.
// Private to lib/Tokenizer.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_LIB_TOKENIZER_DECODER_H
#define PCC_LIB_TOKENIZER_DECODER_H

#include "Unicode.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <string>
#include <vector>

namespace pcc {
namespace tokenizer {

/// One decoder of the chain (a Sequence is flattened into its steps).
struct DecodeStep {
  enum class Kind { ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip };
  Kind kind;
  /// Metaspace: the replacement character and whether the first token
  /// drops it (prepend_scheme "first" or "always").
  uint32_t replacement = 0;
  bool dropsFirst = false;
  /// Replace.
  std::shared_ptr<const Pattern> pattern;
  std::string content;
  /// Strip: up to `start` leading and `stop` trailing `stripChar`.
  uint32_t stripChar = 0;
  size_t start = 0, stop = 0;
};

/// A decoder chain read from a tokenizer.json.
class Decoder {
public:
  /// Reads the "decoder" value (null or absent: HF joins tokens with " ");
  /// the error is one line without the file name.
  static llvm::Expected<Decoder> fromJson(const llvm::json::Value *decoder);

private:
  friend class DecodeStream;
  bool joinsWithSpace = false;
  std::vector<DecodeStep> steps;
  /// The first step that joins the tokens into one string (Fuse or
  /// ByteLevel), or steps.size(). Steps after it see one growing string.
  size_t joinStep = 0;
};

/// The state of a step that sees one growing string: what it holds back,
/// and for Strip how many characters it has stripped or holds.
struct TextState {
  std::string held;
  size_t stripped = 0, heldCount = 0;
  bool leadingDone = false;
  /// Bytes passed on, to cap the growth (see growthCap).
  size_t bytesOut = 0;
};

/// Decoding in progress: fed token strings, it appends to `out` all text
/// that no later token can change, and holds back the rest (a run of
/// byte-fallback tokens, an incomplete UTF-8 sequence, trailing characters a
/// Strip may remove) until the token that settles it or finish().
class DecodeStream {
public:
  explicit DecodeStream(const Decoder &decoder);

  void push(llvm::StringRef token, std::string &out);
  void finish(std::string &out);

private:
  void pushToken(size_t step, std::string token, std::string &out);
  void finishTokens(size_t step, std::string &out);
  void flushByteRun(size_t step, std::string &out);
  void joinText(size_t step, llvm::StringRef text, std::string &out);
  void pushText(size_t step, llvm::StringRef text, std::string &out);
  /// Passes `text`, the output of text step `step`, to the next one.
  void forwardText(size_t step, std::string text, std::string &out);
  void finishText(size_t step, std::string &out);

  const Decoder &decoder;
  /// Per step: tokens it has been given (Metaspace's first-token rule), the
  /// bytes of a pending run (ByteFallback), the state after the join.
  std::vector<size_t> tokensSeen;
  std::vector<std::string> byteRuns;
  std::vector<TextState> textStates;
  Utf8Stream utf8;
  bool any = false;
  /// What a step may grow the token it was given to, and the text after
  /// the join to: relative to the token pushed and to all the joined text,
  /// not to a step's input, so that a chain of steps cannot compound it.
  size_t tokenCap = 0;
  size_t joinedBytes = 0;
  /// No decoder after a join lengthens text (they strip, replace ▁ by a
  /// space, turn bytes into characters), so the whole text may grow less
  /// than a token: it can be megabytes.
  size_t joinedCap() const { return 4 * joinedBytes + 4096; }
};

} // namespace tokenizer
} // namespace pcc

#endif // PCC_LIB_TOKENIZER_DECODER_H
