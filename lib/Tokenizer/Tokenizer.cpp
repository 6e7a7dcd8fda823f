//===- Tokenizer.cpp - Hugging Face tokenizer.json in C++ -----------------===//
//
// Encoding runs HF's TokenizerImpl::encode_single_sequence: split off the
// added tokens that match the raw text, normalize each remaining piece,
// split off the added tokens that match normalized text, pre-tokenize, and
// run the model on each word. Every step keeps HF's quirks (a Prepend
// normalizer prepends to each piece between added tokens; a Metaspace
// "first" scheme prepends only to the piece at the start of the text),
// since ids, not plausibility, are what must match.
//
//===----------------------------------------------------------------------===//

#include "pcc/Tokenizer/Tokenizer.h"

#include "Bpe.h"
#include "Decoder.h"
#include "Unicode.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <bitset>
#include <map>

using namespace pcc;
using namespace pcc::tokenizer;
using llvm::json::Array;
using llvm::json::Object;
using llvm::json::Value;

namespace {

/// Real tokenizer.json files reach tens of MB (Gemma's is 33 MB); parsing
/// costs about ten times the size in memory, so this bounds what a file can
/// make us allocate.
constexpr uint64_t kMaxJsonBytes = uint64_t(256) << 20;
/// LLVM's JSON parser recurses per level; real files nest about 6 deep.
constexpr unsigned kMaxJsonDepth = 128;
/// Finding added tokens in a text costs up to its length times the longest
/// token; real ones are at most tens of bytes.
constexpr size_t kMaxAddedTokenBytes = 1024;

/// The deepest nesting of arrays and objects in `text`, counted before the
/// (recursive) parser sees it.
unsigned jsonDepth(llvm::StringRef text) {
  unsigned depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

/// The optional boolean `key` of `object`, `fallback` when null or absent.
llvm::Error readBool(const Object &object, llvm::StringRef key,
                     const std::string &where, bool fallback, bool &flag) {
  flag = fallback;
  const Value *v = object.get(key);
  if (!v || v->kind() == Value::Null)
    return llvm::Error::success();
  std::optional<bool> b = v->getAsBoolean();
  if (!b)
    return fail(where + "." + key + " must be a boolean");
  flag = *b;
  return llvm::Error::success();
}

/// The "type" of the component `value` at `where`.
llvm::Expected<llvm::StringRef> typeOf(const Value &value,
                                       const std::string &where) {
  const Object *object = value.getAsObject();
  std::optional<llvm::StringRef> type =
      object ? object->getString("type") : std::nullopt;
  if (!type)
    return fail(where + " must be an object with a \"type\"");
  return *type;
}

//===----------------------------------------------------------------------===//
// Normalizers
//===----------------------------------------------------------------------===//

struct NormalizeStep {
  enum class Kind { Form, Lowercase, Prepend, Replace, Strip };
  Kind kind;
  NormalForm form = NormalForm::NFC;
  /// Prepend's prefix, Replace's content.
  std::string text;
  std::shared_ptr<const Pattern> pattern;
  bool left = false, right = false;
};

llvm::Error appendNormalizer(const Value &value, const std::string &where,
                             std::vector<NormalizeStep> &steps) {
  llvm::Expected<llvm::StringRef> type = typeOf(value, where);
  if (!type)
    return type.takeError();
  const Object &object = *value.getAsObject();
  NormalizeStep step;
  if (*type == "Sequence") {
    const Array *list = object.getArray("normalizers");
    if (!list)
      return fail(where + ".normalizers must be an array");
    for (size_t i = 0; i < list->size(); ++i)
      if (llvm::Error e = appendNormalizer(
              (*list)[i], where + ".normalizers[" + std::to_string(i) + "]",
              steps))
        return e;
    return llvm::Error::success();
  }
  if (*type == "NFC" || *type == "NFD" || *type == "NFKC" || *type == "NFKD") {
    step.kind = NormalizeStep::Kind::Form;
    step.form = *type == "NFC"    ? NormalForm::NFC
                : *type == "NFD"  ? NormalForm::NFD
                : *type == "NFKC" ? NormalForm::NFKC
                                  : NormalForm::NFKD;
  } else if (*type == "Lowercase") {
    step.kind = NormalizeStep::Kind::Lowercase;
  } else if (*type == "Prepend") {
    step.kind = NormalizeStep::Kind::Prepend;
    std::optional<llvm::StringRef> prepend = object.getString("prepend");
    if (!prepend)
      return fail(where + ".prepend must be a string");
    step.text = prepend->str();
  } else if (*type == "Replace") {
    step.kind = NormalizeStep::Kind::Replace;
    llvm::Expected<Pattern> pattern =
        patternFromJson(object.get("pattern"), where + ".pattern");
    if (!pattern)
      return pattern.takeError();
    step.pattern = std::make_shared<const Pattern>(std::move(*pattern));
    std::optional<llvm::StringRef> content = object.getString("content");
    if (!content)
      return fail(where + ".content must be a string");
    step.text = content->str();
  } else if (*type == "Strip") {
    step.kind = NormalizeStep::Kind::Strip;
    if (llvm::Error e = readBool(object, "strip_left", where, true, step.left))
      return e;
    if (llvm::Error e =
            readBool(object, "strip_right", where, true, step.right))
      return e;
  } else {
    return fail("the normalizer " + quote(*type) +
                " is not supported (NFC, NFD, NFKC, NFKD, Lowercase, "
                "Prepend, Replace, Strip and Sequence are)");
  }
  steps.push_back(std::move(step));
  return llvm::Error::success();
}

/// Trims White_Space (Rust's char::is_whitespace) from the ends of `text`.
std::string stripWhiteSpace(llvm::StringRef text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  if (left)
    for (size_t pos = 0; pos < end;) {
      size_t start = pos;
      if (!isWhiteSpace(nextCodePoint(text, pos))) {
        begin = start;
        break;
      }
      begin = pos;
    }
  if (right)
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (uint8_t(text[start]) & 0xC0) == 0x80)
        --start;
      size_t pos = start;
      if (!isWhiteSpace(nextCodePoint(text, pos)))
        break;
      end = start;
    }
  return text.slice(begin, end).str();
}

std::string normalizeText(llvm::ArrayRef<NormalizeStep> steps,
                          std::string text) {
  size_t cap = growthCap(text.size());
  for (const NormalizeStep &step : steps) {
    switch (step.kind) {
    case NormalizeStep::Kind::Form:
      text = normalize(text, step.form);
      break;
    case NormalizeStep::Kind::Lowercase:
      text = lowercase(text);
      break;
    case NormalizeStep::Kind::Prepend:
      if (!text.empty())
        text = step.text + text;
      break;
    case NormalizeStep::Kind::Replace:
      text = replaceMatches(*step.pattern, text, step.text, cap);
      break;
    case NormalizeStep::Kind::Strip:
      text = stripWhiteSpace(text, step.left, step.right);
      break;
    }
    truncateUtf8(text, cap);
  }
  return text;
}

//===----------------------------------------------------------------------===//
// Pre-tokenizers
//===----------------------------------------------------------------------===//

/// What a Split does with the matches: tokenizers'
/// SplitDelimiterBehavior.
enum class Behavior {
  Removed,
  Isolated,
  MergedWithPrevious,
  MergedWithNext,
  Contiguous
};

enum class PrependScheme { Always, First, Never };

struct PreTokenizeStep {
  enum class Kind { ByteLevel, Split, Metaspace, Digits };
  Kind kind;
  /// ByteLevel.
  bool addPrefixSpace = true, useRegex = true;
  /// Split.
  std::shared_ptr<const Pattern> pattern;
  Behavior behavior = Behavior::Isolated;
  bool invert = false;
  /// Metaspace.
  uint32_t replacement = 0x2581;
  PrependScheme prepend = PrependScheme::Always;
  bool split = true;
  /// Digits.
  bool individualDigits = false;
};

/// A piece of text on its way to the model; `atStart` if it begins at the
/// start of the input (HF: offsets_original().0 == 0), which Metaspace's
/// "first" scheme asks.
struct Piece {
  std::string text;
  bool atStart;
};

/// GPT-2's pre-tokenization regex, which ByteLevel(use_regex) runs.
const Pattern &gpt2Pattern() {
  static const Pattern pattern = llvm::cantFail(
      Pattern::regex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+)"
                     R"(| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"));
  return pattern;
}

llvm::Error appendPreTokenizer(const Value &value, const std::string &where,
                               std::vector<PreTokenizeStep> &steps) {
  llvm::Expected<llvm::StringRef> type = typeOf(value, where);
  if (!type)
    return type.takeError();
  const Object &object = *value.getAsObject();
  PreTokenizeStep step;
  if (*type == "Sequence") {
    const Array *list = object.getArray("pretokenizers");
    if (!list)
      return fail(where + ".pretokenizers must be an array");
    for (size_t i = 0; i < list->size(); ++i)
      if (llvm::Error e = appendPreTokenizer(
              (*list)[i], where + ".pretokenizers[" + std::to_string(i) + "]",
              steps))
        return e;
    return llvm::Error::success();
  }
  if (*type == "ByteLevel") {
    step.kind = PreTokenizeStep::Kind::ByteLevel;
    if (llvm::Error e = readBool(object, "add_prefix_space", where, true,
                                 step.addPrefixSpace))
      return e;
    if (llvm::Error e =
            readBool(object, "use_regex", where, true, step.useRegex))
      return e;
  } else if (*type == "Split") {
    step.kind = PreTokenizeStep::Kind::Split;
    llvm::Expected<Pattern> pattern =
        patternFromJson(object.get("pattern"), where + ".pattern");
    if (!pattern)
      return pattern.takeError();
    step.pattern = std::make_shared<const Pattern>(std::move(*pattern));
    std::optional<llvm::StringRef> behavior = object.getString("behavior");
    static const std::pair<llvm::StringLiteral, Behavior> behaviors[] = {
        {"Removed", Behavior::Removed},
        {"Isolated", Behavior::Isolated},
        {"MergedWithPrevious", Behavior::MergedWithPrevious},
        {"MergedWithNext", Behavior::MergedWithNext},
        {"Contiguous", Behavior::Contiguous}};
    auto it = llvm::find_if(behaviors, [&](const auto &b) {
      return behavior && *behavior == b.first;
    });
    if (it == std::end(behaviors))
      return fail(where + ".behavior must be one of Removed, Isolated, "
                          "MergedWithPrevious, MergedWithNext, Contiguous");
    step.behavior = it->second;
    if (llvm::Error e = readBool(object, "invert", where, false, step.invert))
      return e;
  } else if (*type == "Metaspace") {
    step.kind = PreTokenizeStep::Kind::Metaspace;
    if (const Value *r = object.get("replacement")) {
      llvm::Expected<uint32_t> c = charFromJson(r, where + ".replacement");
      if (!c)
        return c.takeError();
      step.replacement = *c;
    }
    if (const Value *scheme = object.get("prepend_scheme")) {
      std::optional<llvm::StringRef> s = scheme->getAsString();
      if (s && *s == "always")
        step.prepend = PrependScheme::Always;
      else if (s && *s == "first")
        step.prepend = PrependScheme::First;
      else if (s && *s == "never")
        step.prepend = PrependScheme::Never;
      else
        return fail(
            where +
            ".prepend_scheme must be \"first\", \"always\" or \"never\"");
    } else if (object.get("add_prefix_space")) {
      // The older form of the option.
      bool add;
      if (llvm::Error e =
              readBool(object, "add_prefix_space", where, true, add))
        return e;
      step.prepend = add ? PrependScheme::Always : PrependScheme::Never;
    }
    if (llvm::Error e = readBool(object, "split", where, true, step.split))
      return e;
  } else if (*type == "Digits") {
    step.kind = PreTokenizeStep::Kind::Digits;
    if (llvm::Error e = readBool(object, "individual_digits", where, false,
                                 step.individualDigits))
      return e;
  } else {
    return fail("the pre_tokenizer " + quote(*type) +
                " is not supported (ByteLevel, Split, Metaspace, Digits and "
                "Sequence are)");
  }
  steps.push_back(std::move(step));
  return llvm::Error::success();
}

/// NormalizedString::split: `piece` cut along `spans` as `behavior` says,
/// empty parts dropped.
void splitPiece(const Piece &piece, std::vector<Span> spans, Behavior behavior,
                bool invert, std::vector<Piece> &out) {
  if (invert)
    for (Span &span : spans)
      span.isMatch = !span.isMatch;
  struct Cut {
    size_t start, end;
    bool remove;
  };
  std::vector<Cut> cuts;
  cuts.reserve(spans.size());
  bool previous = false;
  switch (behavior) {
  case Behavior::Isolated:
  case Behavior::Removed:
    for (const Span &span : spans)
      cuts.push_back({span.start, span.end,
                      behavior == Behavior::Removed && span.isMatch});
    break;
  case Behavior::Contiguous:
    for (const Span &span : spans) {
      if (span.isMatch == previous && !cuts.empty())
        cuts.back().end = span.end;
      else
        cuts.push_back({span.start, span.end, false});
      previous = span.isMatch;
    }
    break;
  case Behavior::MergedWithPrevious:
    for (const Span &span : spans) {
      if (span.isMatch && !previous && !cuts.empty())
        cuts.back().end = span.end;
      else
        cuts.push_back({span.start, span.end, false});
      previous = span.isMatch;
    }
    break;
  case Behavior::MergedWithNext:
    for (const Span &span : llvm::reverse(spans)) {
      if (span.isMatch && !previous && !cuts.empty())
        cuts.back().start = span.start;
      else
        cuts.push_back({span.start, span.end, false});
      previous = span.isMatch;
    }
    std::reverse(cuts.begin(), cuts.end());
    break;
  }
  for (const Cut &cut : cuts)
    if (!cut.remove && cut.end > cut.start)
      out.push_back({piece.text.substr(cut.start, cut.end - cut.start),
                     piece.atStart && cut.start == 0});
}

std::vector<Piece> preTokenize(llvm::ArrayRef<PreTokenizeStep> steps,
                               Piece input) {
  size_t cap = growthCap(input.text.size());
  std::vector<Piece> pieces;
  pieces.push_back(std::move(input));
  for (const PreTokenizeStep &step : steps) {
    std::vector<Piece> next;
    next.reserve(pieces.size());
    for (Piece &piece : pieces) {
      switch (step.kind) {
      case PreTokenizeStep::Kind::ByteLevel: {
        if (step.addPrefixSpace &&
            !llvm::StringRef(piece.text).starts_with(" "))
          piece.text.insert(0, " ");
        if (step.useRegex)
          splitPiece(piece, findSpans(gpt2Pattern(), piece.text),
                     Behavior::Isolated, false, next);
        else
          next.push_back(std::move(piece));
        break;
      }
      case PreTokenizeStep::Kind::Split:
        splitPiece(piece, findSpans(*step.pattern, piece.text), step.behavior,
                   step.invert, next);
        break;
      case PreTokenizeStep::Kind::Metaspace: {
        std::string replacement;
        appendUtf8(replacement, step.replacement);
        std::string text;
        text.reserve(piece.text.size() + replacement.size());
        for (char c : piece.text) {
          if (c == ' ')
            text += replacement;
          else
            text += c;
        }
        bool startsWithReplacement =
            llvm::StringRef(text).starts_with(replacement);
        if (!startsWithReplacement &&
            (step.prepend == PrependScheme::Always ||
             (step.prepend == PrependScheme::First && piece.atStart)))
          text.insert(0, replacement);
        Piece replaced{std::move(text), piece.atStart};
        if (step.split)
          splitPiece(
              replaced,
              findSpansOf(replaced.text,
                          [&](uint32_t c) { return c == step.replacement; }),
              Behavior::MergedWithNext, false, next);
        else if (!replaced.text.empty())
          next.push_back(std::move(replaced));
        break;
      }
      case PreTokenizeStep::Kind::Digits:
        splitPiece(piece, findSpansOf(piece.text, isNumeric),
                   step.individualDigits ? Behavior::Isolated
                                         : Behavior::Contiguous,
                   false, next);
        break;
      }
    }
    if (step.kind == PreTokenizeStep::Kind::ByteLevel) {
      // ByteLevel then maps the bytes of every piece to its alphabet.
      for (Piece &piece : next) {
        std::string mapped;
        mapped.reserve(piece.text.size() * 2);
        for (char c : piece.text)
          appendUtf8(mapped, byteToChar(uint8_t(c)));
        piece.text = std::move(mapped);
      }
    }
    // Bound the growth of the pieces (each ByteLevel may double them).
    size_t total = 0;
    for (size_t i = 0; i < next.size(); ++i) {
      if (total + next[i].text.size() <= cap) {
        total += next[i].text.size();
        continue;
      }
      truncateUtf8(next[i].text, cap - total);
      next.resize(next[i].text.empty() ? i : i + 1);
      break;
    }
    pieces = std::move(next);
  }
  return pieces;
}

//===----------------------------------------------------------------------===//
// Added tokens
//===----------------------------------------------------------------------===//

struct AddedToken {
  std::string content;
  bool singleWord = false, lstrip = false, rstrip = false, normalized = true,
       special = false;

  auto key() const {
    return std::tie(content, singleWord, lstrip, rstrip, normalized, special);
  }
  bool operator<(const AddedToken &other) const { return key() < other.key(); }
};

/// The added tokens to look for in some text, found leftmost-longest as
/// HF's Aho-Corasick automaton (MatchKind::LeftmostLongest) finds them.
class TokenTrie {
public:
  void insert(llvm::StringRef pattern, uint32_t index) {
    if (pattern.empty())
      return; // Matches nothing HF keeps: its splits would be empty.
    uint32_t node = 0;
    for (char c : pattern) {
      auto &children = nodes[node].children;
      auto it = llvm::find_if(children, [&](const auto &child) {
        return child.first == uint8_t(c);
      });
      if (it != children.end()) {
        node = it->second;
        continue;
      }
      children.push_back({uint8_t(c), uint32_t(nodes.size())});
      node = uint32_t(nodes.size());
      nodes.emplace_back();
    }
    if (nodes[node].pattern < 0)
      nodes[node].pattern = index; // The first of equal patterns wins.
    firstBytes.set(uint8_t(pattern[0]));
  }

  /// The leftmost longest match at or after `from`: (start, end, index).
  std::optional<std::tuple<size_t, size_t, uint32_t>> find(llvm::StringRef text,
                                                           size_t from) const {
    for (size_t start = from; start < text.size(); ++start) {
      if (!firstBytes.test(uint8_t(text[start])))
        continue;
      uint32_t node = 0;
      std::optional<std::pair<size_t, uint32_t>> best;
      for (size_t pos = start; pos < text.size(); ++pos) {
        const auto &children = nodes[node].children;
        auto it = llvm::find_if(children, [&](const auto &child) {
          return child.first == uint8_t(text[pos]);
        });
        if (it == children.end())
          break;
        node = it->second;
        if (nodes[node].pattern >= 0)
          best = {pos + 1, uint32_t(nodes[node].pattern)};
      }
      if (best)
        return std::make_tuple(start, best->first, best->second);
    }
    return std::nullopt;
  }

private:
  struct Node {
    llvm::SmallVector<std::pair<uint8_t, uint32_t>, 2> children;
    int64_t pattern = -1;
  };
  std::vector<Node> nodes = std::vector<Node>(1);
  std::bitset<256> firstBytes;
};

/// A trie and the token id of each of its patterns.
struct MatchingSet {
  TokenTrie trie;
  std::vector<int64_t> ids;
};

/// A part of the text: an added token (its id) or text for the model.
struct Segment {
  size_t start, end;
  int64_t addedId;
};

/// The start of the code point before byte `pos` (> 0) of valid UTF-8.
size_t previousBoundary(llvm::StringRef text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && (uint8_t(text[start]) & 0xC0) == 0x80)
    --start;
  return start;
}

/// The code point that ends `text` (not empty), valid UTF-8.
uint32_t lastCodePoint(llvm::StringRef text) {
  size_t start = previousBoundary(text, text.size());
  return nextCodePoint(text, start);
}

} // namespace

//===----------------------------------------------------------------------===//
// Tokenizer
//===----------------------------------------------------------------------===//

struct Tokenizer::Impl {
  std::string name;
  std::vector<NormalizeStep> normalizer;
  std::vector<PreTokenizeStep> preTokenizer;
  BpeModel model;
  Decoder decoder;

  /// HF's AddedVocabulary.
  llvm::StringMap<int64_t> addedIds;
  std::map<int64_t, AddedToken> addedTokens;
  std::map<AddedToken, unsigned> addedTokenCounts;
  std::vector<AddedToken> classicTokens, specialTokens;
  llvm::StringSet<> specialContents;
  MatchingSet rawSet, normalizedSet;
  /// The text of a `normalized` added token as decoding sees it: its
  /// content normalized, as HF (since 0.23) returns it from id_to_token so
  /// that, say, a byte-level normalizer's output is what the decoder
  /// inverts.
  std::map<int64_t, std::string> normalizedContents;
  int64_t largestAddedId = -1;

  llvm::Error load(const Object &root);
  void addToken(const AddedToken &token);
  llvm::Error buildMatchingSets();
  std::vector<Segment> findAddedTokens(llvm::StringRef text,
                                       const MatchingSet &set) const;
  std::optional<int64_t> tokenId(llvm::StringRef token) const;
};

llvm::Error Tokenizer::Impl::load(const Object &root) {
  if (const Value *version = root.get("version")) {
    std::optional<llvm::StringRef> v = version->getAsString();
    if (!v || *v != "1.0")
      return fail("version must be \"1.0\"");
  }

  const Value *modelValue = root.get("model");
  const Object *modelObject = modelValue ? modelValue->getAsObject() : nullptr;
  if (!modelObject)
    return fail("model must be an object");
  std::optional<llvm::StringRef> type = modelObject->getString("type");
  if (!type && !modelObject->get("merges"))
    return fail("the model has no \"type\" and no merges (BPE is supported)");
  if (type && *type != "BPE")
    return fail("the model " + quote(*type) + " is not supported (BPE is)");
  if (llvm::Error e = model.load(*modelObject))
    return e;

  if (const Value *n = root.get("normalizer"); n && n->kind() != Value::Null)
    if (llvm::Error e = appendNormalizer(*n, "normalizer", normalizer))
      return e;
  if (const Value *p = root.get("pre_tokenizer"); p && p->kind() != Value::Null)
    if (llvm::Error e = appendPreTokenizer(*p, "pre_tokenizer", preTokenizer))
      return e;
  if (normalizer.size() > kMaxSteps || preTokenizer.size() > kMaxSteps)
    return fail("the normalizer or pre_tokenizer has more than " +
                llvm::Twine(kMaxSteps) + " steps");
  llvm::Expected<Decoder> d = Decoder::fromJson(root.get("decoder"));
  if (!d)
    return d.takeError();
  decoder = std::move(*d);

  const Value *added = root.get("added_tokens");
  if (!added || added->kind() == Value::Null)
    return llvm::Error::success();
  const Array *list = added->getAsArray();
  if (!list)
    return fail("added_tokens must be an array");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string where = "added_tokens[" + std::to_string(i) + "]";
    const Object *object = (*list)[i].getAsObject();
    if (!object)
      return fail(where + " must be an object");
    // HF reads the id but assigns its own (see addToken); it must still be
    // a u32.
    std::optional<int64_t> id = object->getInteger("id");
    if (!id || *id < 0 || *id > int64_t(UINT32_MAX))
      return fail(where + ".id must be an integer in [0, 4294967295]");
    std::optional<llvm::StringRef> content = object->getString("content");
    if (!content)
      return fail(where + ".content must be a string");
    if (content->size() > kMaxAddedTokenBytes)
      return fail(where + ".content is longer than " +
                  llvm::Twine(kMaxAddedTokenBytes) + " bytes (not supported)");
    AddedToken token;
    token.content = content->str();
    if (llvm::Error e =
            readBool(*object, "special", where, false, token.special))
      return e;
    if (llvm::Error e =
            readBool(*object, "single_word", where, false, token.singleWord))
      return e;
    if (llvm::Error e = readBool(*object, "lstrip", where, false, token.lstrip))
      return e;
    if (llvm::Error e = readBool(*object, "rstrip", where, false, token.rstrip))
      return e;
    if (llvm::Error e = readBool(*object, "normalized", where, !token.special,
                                 token.normalized))
      return e;
    addToken(token);
  }
  return buildMatchingSets();
}

std::optional<int64_t> Tokenizer::Impl::tokenId(llvm::StringRef token) const {
  auto it = addedIds.find(token);
  if (it != addedIds.end())
    return it->second;
  if (std::optional<uint32_t> id = model.tokenId(token))
    return *id;
  return std::nullopt;
}

void Tokenizer::Impl::addToken(const AddedToken &token) {
  // AddedVocabulary::add_tokens, one token at a time as HF's deserializer
  // calls it. The id in the file is only checked by HF (with a warning):
  // a token of the model keeps its id, a new one gets the next free id
  // after the model's (the number of its tokens) or the added ones.
  if (token.special && !token.content.empty() &&
      specialContents.insert(token.content).second)
    specialTokens.push_back(token);
  if (token.content.empty() || addedTokenCounts.count(token))
    return;
  int64_t id;
  if (std::optional<int64_t> known = tokenId(token.content)) {
    id = *known;
  } else {
    int64_t modelSize = int64_t(model.size());
    if (largestAddedId < 0)
      id = modelSize;
    else if (largestAddedId >= modelSize || modelSize == 0)
      id = largestAddedId + 1;
    else
      id = modelSize;
  }
  addedIds[token.content] = id;
  largestAddedId = std::max(largestAddedId, id);
  auto [it, fresh] = addedTokens.try_emplace(id, token);
  if (!fresh) {
    if (--addedTokenCounts[it->second] == 0)
      addedTokenCounts.erase(it->second);
    it->second = token;
  }
  ++addedTokenCounts[token];
  if (!specialContents.contains(token.content))
    classicTokens.push_back(token);
}

llvm::Error Tokenizer::Impl::buildMatchingSets() {
  // refresh_added_tokens: special tokens then the others, each with its
  // current id, matched on the raw text unless marked `normalized`.
  for (const std::vector<AddedToken> *list : {&specialTokens, &classicTokens})
    for (const AddedToken &token : *list) {
      std::optional<int64_t> id = tokenId(token.content);
      if (!id)
        continue; // Cannot happen: add_tokens gave each one an id.
      MatchingSet &set = token.normalized ? normalizedSet : rawSet;
      std::string pattern = token.normalized
                                ? normalizeText(normalizer, token.content)
                                : token.content;
      if (pattern.size() > kMaxAddedTokenBytes)
        return fail("the added token " + quote(token.content) +
                    " is longer than " + llvm::Twine(kMaxAddedTokenBytes) +
                    " bytes once normalized (not supported)");
      set.trie.insert(pattern, uint32_t(set.ids.size()));
      set.ids.push_back(*id);
      if (token.normalized)
        normalizedContents[*id] = std::move(pattern);
    }
  return llvm::Error::success();
}

std::vector<Segment>
Tokenizer::Impl::findAddedTokens(llvm::StringRef text,
                                 const MatchingSet &set) const {
  // AddedVocabulary::find_matches.
  std::vector<Segment> segments;
  size_t startOffset = 0;
  for (size_t from = 0;;) {
    auto match = set.trie.find(text, from);
    if (!match)
      break;
    auto [start, stop, index] = *match;
    from = stop;
    int64_t id = set.ids[index];
    auto found = addedTokens.find(id);
    if (found == addedTokens.end())
      continue; // Cannot happen: every matched token was added.
    const AddedToken &token = found->second;
    if (token.singleWord) {
      bool startSpace =
          start == 0 || !isWordChar(lastCodePoint(text.take_front(start)));
      size_t after = stop;
      bool stopSpace =
          stop == text.size() || !isWordChar(nextCodePoint(text, after));
      if (!startSpace || !stopSpace)
        continue;
    }
    if (token.lstrip) {
      // `\s*$` on the text before: where its trailing white space starts,
      // but not before the end of the previous match.
      size_t newStart = start;
      while (newStart > 0) {
        size_t prev = previousBoundary(text, newStart), pos = prev;
        if (!isWhiteSpace(nextCodePoint(text, pos)))
          break;
        newStart = prev;
      }
      start = std::max(newStart, startOffset);
    }
    if (token.rstrip) {
      // `^\s*` on the text after.
      for (size_t pos = stop; pos < text.size();) {
        if (!isWhiteSpace(nextCodePoint(text, pos)))
          break;
        stop = pos;
      }
    }
    if (startOffset < start)
      segments.push_back({startOffset, start, -1});
    segments.push_back({start, stop, id});
    startOffset = stop;
  }
  if (startOffset < text.size())
    segments.push_back({startOffset, text.size(), -1});
  return segments;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer &&) noexcept = default;
Tokenizer &Tokenizer::operator=(Tokenizer &&) noexcept = default;
Tokenizer::~Tokenizer() = default;

llvm::Expected<Tokenizer> Tokenizer::fromFile(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return fail(path + ": cannot read: " + ec.message());
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return fail(path + ": not a regular file");
  if (status.getSize() > kMaxJsonBytes)
    return fail(path + ": larger than " + std::to_string(kMaxJsonBytes >> 20) +
                " MiB");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail(path + ": cannot read: " + buffer.getError().message());
  return fromJson((*buffer)->getBuffer(), path);
}

llvm::Expected<Tokenizer> Tokenizer::fromJson(llvm::StringRef text,
                                              llvm::StringRef name) {
  auto named = [&](llvm::Error error) {
    return fail(name + ": " + llvm::toString(std::move(error)));
  };
  if (text.size() > kMaxJsonBytes)
    return fail(name + ": larger than " + std::to_string(kMaxJsonBytes >> 20) +
                " MiB");
  if (jsonDepth(text) > kMaxJsonDepth)
    return fail(name + ": JSON nested deeper than " +
                std::to_string(kMaxJsonDepth) + " levels");
  llvm::Expected<Value> root = llvm::json::parse(text);
  if (!root)
    return fail(name + ": not valid JSON: " + llvm::toString(root.takeError()));
  const Object *object = root->getAsObject();
  if (!object)
    return fail(name + ": not a JSON object");
  auto impl = std::make_unique<Impl>();
  impl->name = name.str();
  if (llvm::Error e = impl->load(*object))
    return named(std::move(e));
  return Tokenizer(std::move(impl));
}

std::vector<int64_t> Tokenizer::encode(llvm::StringRef bytes) const {
  std::string text = toValidUtf8(bytes);
  std::vector<int64_t> ids;
  auto runModel = [&](Piece piece) {
    for (const Piece &word : preTokenize(impl->preTokenizer, std::move(piece)))
      impl->model.tokenize(word.text, ids);
  };
  for (const Segment &raw : impl->findAddedTokens(text, impl->rawSet)) {
    if (raw.end <= raw.start)
      continue; // HF drops empty splits, even an added token's.
    if (raw.addedId >= 0) {
      ids.push_back(raw.addedId);
      continue;
    }
    std::string normalized = normalizeText(
        impl->normalizer, text.substr(raw.start, raw.end - raw.start));
    for (const Segment &segment :
         impl->findAddedTokens(normalized, impl->normalizedSet)) {
      if (segment.end <= segment.start)
        continue;
      if (segment.addedId >= 0)
        ids.push_back(segment.addedId);
      else
        runModel({normalized.substr(segment.start, segment.end - segment.start),
                  raw.start == 0 && segment.start == 0});
    }
  }
  return ids;
}

std::optional<llvm::StringRef> Tokenizer::tokenText(int64_t id) const {
  auto normalized = impl->normalizedContents.find(id);
  if (normalized != impl->normalizedContents.end())
    return llvm::StringRef(normalized->second);
  auto it = impl->addedTokens.find(id);
  if (it != impl->addedTokens.end())
    return llvm::StringRef(it->second.content);
  if (id < 0 || id > kMaxTokenId)
    return std::nullopt;
  return impl->model.tokenText(uint32_t(id));
}

llvm::Expected<std::string>
Tokenizer::decode(llvm::ArrayRef<int64_t> ids) const {
  std::vector<llvm::StringRef> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    std::optional<llvm::StringRef> token = tokenText(id);
    if (!token)
      return fail(impl->name + ": token id " + std::to_string(id) +
                  " is not in the vocabulary");
    tokens.push_back(*token);
  }
  std::string out;
  DecodeStream stream(impl->decoder);
  for (llvm::StringRef token : tokens)
    stream.push(token, out);
  stream.finish(out);
  return out;
}

std::optional<int64_t> Tokenizer::tokenId(llvm::StringRef token) const {
  return impl->tokenId(token);
}

bool Tokenizer::isSpecialToken(int64_t id) const {
  auto it = impl->addedTokens.find(id);
  return it != impl->addedTokens.end() &&
         impl->specialContents.contains(it->second.content);
}

int64_t Tokenizer::vocabularySize() const {
  return std::max(impl->model.maxId(), impl->largestAddedId) + 1;
}

llvm::StringRef Tokenizer::name() const { return impl->name; }

//===----------------------------------------------------------------------===//
// Detokenizer
//===----------------------------------------------------------------------===//

Detokenizer::Detokenizer(const Tokenizer &tokenizer)
    : tokenizer(&tokenizer),
      stream(std::make_unique<DecodeStream>(tokenizer.impl->decoder)) {}
Detokenizer::Detokenizer(Detokenizer &&) noexcept = default;
Detokenizer &Detokenizer::operator=(Detokenizer &&) noexcept = default;
Detokenizer::~Detokenizer() = default;

llvm::Expected<std::string> Detokenizer::push(int64_t id) {
  std::optional<llvm::StringRef> token = tokenizer->tokenText(id);
  if (!token)
    return fail(tokenizer->name() + ": token id " + std::to_string(id) +
                " is not in the vocabulary");
  std::string out;
  stream->push(*token, out);
  return out;
}

std::string Detokenizer::finish() {
  std::string out;
  stream->finish(out);
  stream = std::make_unique<DecodeStream>(tokenizer->impl->decoder);
  return out;
}
