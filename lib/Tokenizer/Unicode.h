//===- Unicode.h - UTF-8, character classes and regexes ---------*- C++ -*-===//
//
// The text primitives the tokenizer is built from, each matching what
// Hugging Face `tokenizers` (Rust) does: lossy UTF-8 as from_utf8_lossy,
// the character classes of Rust's char and regex crates, normalization
// forms, and Oniguruma's find_iter run on ICU regexes. Private to
// lib/Tokenizer.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_LIB_TOKENIZER_UNICODE_H
#define PCC_LIB_TOKENIZER_UNICODE_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <unicode/uversion.h>

U_NAMESPACE_BEGIN
class RegexPattern;
U_NAMESPACE_END

namespace pcc {
namespace tokenizer {

/// A one-line error of the reader (callers prefix the file's name).
inline llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(message);
}

/// U+FFFD, what invalid UTF-8 becomes.
inline constexpr llvm::StringLiteral kReplacementChar = "\xEF\xBF\xBD";

/// `bytes` as valid UTF-8: each maximal subpart of an ill-formed sequence
/// becomes one U+FFFD, as Python's errors="replace" and Rust's
/// String::from_utf8_lossy do.
std::string toValidUtf8(llvm::StringRef bytes);

/// Decodes `bytes` to UTF-8 a piece at a time, holding back an incomplete
/// sequence at the end until the bytes that complete it (or finish()).
/// The concatenated outputs equal toValidUtf8 of all bytes.
class Utf8Stream {
public:
  /// Appends the text completed by `bytes` to `out`.
  void push(llvm::StringRef bytes, std::string &out);
  /// Appends U+FFFD if an incomplete sequence is held back.
  void finish(std::string &out);

private:
  std::string pending;
};

/// How much normalizers, pre-tokenizers or decoders may grow a piece of
/// text. Real text stays far below (NFKD grows UTF-8 at most 11-fold, and
/// that for a few characters only; byte-level mapping at most 2-fold), but
/// a Replace of an empty match, or steps that each double the text, would
/// exhaust memory, in HF as here. Past the cap the text is cut.
inline size_t growthCap(size_t size) { return 16 * size + 4096; }
/// The most steps a normalizer, pre-tokenizer or decoder may have (their
/// Sequences flattened): real ones have a handful, and decoding recurses
/// once per step.
inline constexpr size_t kMaxSteps = 64;
/// Cuts valid UTF-8 `text` to at most `size` bytes, at a character start.
void truncateUtf8(std::string &text, size_t size);

/// The code point at `pos` of valid UTF-8 `s`; advances `pos` past it.
uint32_t nextCodePoint(llvm::StringRef s, size_t &pos);
/// The number of bytes of the UTF-8 sequence that starts with `lead`.
size_t utf8Length(uint8_t lead);
/// Appends the UTF-8 encoding of code point `c`.
void appendUtf8(std::string &out, uint32_t c);

/// GPT-2's bytes_to_unicode: the printable character standing for byte `b`
/// in byte-level tokens.
uint32_t byteToChar(uint8_t b);
/// Its inverse: the byte of character `c`, or -1 if `c` stands for none.
int charToByte(uint32_t c);

/// `text` in double quotes for a one-line message: control characters,
/// quotes and backslashes escaped as in JSON, at most `limit` bytes of it.
std::string quote(llvm::StringRef text, size_t limit = 48);

namespace gc {
/// Unicode general categories, in the order of UnicodeTables.inc.
// clang-format off
enum Category : uint8_t {
  Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe, Pi, Pf, Po,
  Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Co, Cs, Cn
};
// clang-format on
} // namespace gc

/// The general category of `c` in the Unicode version of HF `tokenizers`
/// (from UnicodeTables.inc, not from ICU, whose version may be older).
gc::Category generalCategory(uint32_t c);

/// Rust's char::is_whitespace and regex `\s`: White_Space.
bool isWhiteSpace(uint32_t c);
/// Rust regex's Unicode `\w`: Alphabetic, marks, Nd, Pc and Join_Control.
bool isWordChar(uint32_t c);
/// Rust's char::is_numeric: general categories Nd, Nl and No (of Rust's
/// Unicode version, from UnicodeTables.inc).
bool isNumeric(uint32_t c);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
/// `text` (valid UTF-8) in normalization form `form`, as HF's normalizers
/// (whose tables are Unicode 9.0) produce it.
std::string normalize(llvm::StringRef text, NormalForm form);
/// Each code point of `text` replaced by its full lowercase mapping, one
/// code point at a time (no final-sigma context), as HF's Lowercase.
std::string lowercase(llvm::StringRef text);

/// A pattern of Split, Replace and the ByteLevel regex: either a literal
/// string or an Oniguruma-syntax regex run by ICU. Matching follows
/// Oniguruma's find_iter, which `tokenizers` uses: leftmost matches from
/// where the previous one ended, and an empty match right at the end of the
/// previous match is skipped by advancing one character.
class Pattern {
public:
  /// A pattern matching `text` literally.
  static Pattern literal(llvm::StringRef text);
  /// `regex` in Oniguruma's syntax, rewritten for ICU; an error (one line)
  /// if ICU cannot compile it.
  static llvm::Expected<Pattern> regex(llvm::StringRef regex);

  /// Calls `visit(start, end)` with the byte range of each match in valid
  /// UTF-8 `text`, in order, until it returns false.
  void forEachMatch(llvm::StringRef text,
                    llvm::function_ref<bool(size_t, size_t)> visit) const;

  /// The literal text of a literal pattern; empty for a regex.
  llvm::StringRef literalText() const {
    return isLiteral ? llvm::StringRef(text) : llvm::StringRef();
  }
  bool isRegex() const { return !isLiteral; }

private:
  bool isLiteral = true;
  std::string text;
  std::shared_ptr<const icu::RegexPattern> compiled;
};

/// Reads a pattern of a tokenizer.json, {"String": s} or {"Regex": r};
/// `where` names it in the one-line error.
llvm::Expected<Pattern> patternFromJson(const llvm::json::Value *value,
                                        llvm::StringRef where);
/// Reads a string of exactly one character (Rust's `char` fields).
llvm::Expected<uint32_t> charFromJson(const llvm::json::Value *value,
                                      llvm::StringRef where);

/// A piece of text and whether it splits (is a match of the pattern).
struct Span {
  size_t start, end;
  bool isMatch;
};

/// `text` cut at the matches of `pattern` into spans covering all of it:
/// tokenizers' Pattern::find_matches. Empty text gives one empty span.
std::vector<Span> findSpans(const Pattern &pattern, llvm::StringRef text);

/// `text` with every match of `pattern` replaced by `content`, as HF's
/// Replace normalizer and decoder do (an empty match inserts `content`),
/// cut to at most `limit` bytes.
std::string replaceMatches(const Pattern &pattern, llvm::StringRef text,
                           llvm::StringRef content, size_t limit);

/// findSpans for a predicate on code points (a `char` pattern in Rust).
template <typename Pred>
std::vector<Span> findSpansOf(llvm::StringRef text, Pred pred) {
  if (text.empty())
    return {{0, 0, false}};
  std::vector<Span> spans;
  size_t last = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    uint32_t c = nextCodePoint(text, pos);
    if (!pred(c))
      continue;
    if (last < start)
      spans.push_back({last, start, false});
    spans.push_back({start, pos, true});
    last = pos;
  }
  if (last < text.size())
    spans.push_back({last, text.size(), false});
  return spans;
}

} // namespace tokenizer
} // namespace pcc

#endif // PCC_LIB_TOKENIZER_UNICODE_H
