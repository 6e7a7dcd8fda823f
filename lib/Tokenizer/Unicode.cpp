//===- Unicode.cpp - UTF-8, character classes and regexes -----------------===//
//
// ICU provides the Unicode data (properties, normalization, regexes); this
// file adapts it to the semantics of the Rust crates `tokenizers` is built
// on, which is where a byte-exact tokenizer would otherwise drift.
//
//===----------------------------------------------------------------------===//

#include "Unicode.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf16.h>

using namespace pcc;
using namespace pcc::tokenizer;

//===----------------------------------------------------------------------===//
// UTF-8
//===----------------------------------------------------------------------===//

namespace {

enum class SequenceKind { Valid, Invalid, Truncated };

/// Classifies the UTF-8 sequence at `p` (n > 0 bytes available) and sets
/// `len` to its length: a valid character, the maximal subpart of an
/// ill-formed one (one U+FFFD), or a well-formed prefix cut by the end of
/// the bytes. The ranges are those of Unicode's Table 3-7.
SequenceKind scanSequence(const uint8_t *p, size_t n, size_t &len) {
  uint8_t b = p[0];
  if (b < 0x80) {
    len = 1;
    return SequenceKind::Valid;
  }
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b == 0xE0) {
    need = 2;
    lo = 0xA0;
  } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    need = 2;
  } else if (b == 0xED) {
    need = 2;
    hi = 0x9F;
  } else if (b == 0xF0) {
    need = 3;
    lo = 0x90;
  } else if (b >= 0xF1 && b <= 0xF3) {
    need = 3;
  } else if (b == 0xF4) {
    need = 3;
    hi = 0x8F;
  } else {
    len = 1;
    return SequenceKind::Invalid;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (k >= n) {
      len = k;
      return SequenceKind::Truncated;
    }
    if (p[k] < lo || p[k] > hi) {
      len = k;
      return SequenceKind::Invalid;
    }
    lo = 0x80;
    hi = 0xBF;
  }
  len = need + 1;
  return SequenceKind::Valid;
}

} // namespace

std::string tokenizer::toValidUtf8(llvm::StringRef bytes) {
  std::string out;
  out.reserve(bytes.size());
  Utf8Stream stream;
  stream.push(bytes, out);
  stream.finish(out);
  return out;
}

void Utf8Stream::push(llvm::StringRef bytes, std::string &out) {
  // Only the (at most 3) held-back bytes are copied; the rest is scanned
  // in place.
  llvm::StringRef data = bytes;
  std::string joined;
  if (!pending.empty()) {
    joined = pending + bytes.str();
    data = joined;
    pending.clear();
  }
  const uint8_t *p = reinterpret_cast<const uint8_t *>(data.data());
  size_t n = data.size(), i = 0, validStart = 0;
  while (i < n) {
    size_t len;
    SequenceKind kind = scanSequence(p + i, n - i, len);
    if (kind == SequenceKind::Valid) {
      i += len;
      continue;
    }
    out.append(data.data() + validStart, i - validStart);
    if (kind == SequenceKind::Truncated) {
      pending.assign(data.data() + i, n - i);
      return;
    }
    out += kReplacementChar;
    i += len;
    validStart = i;
  }
  out.append(data.data() + validStart, n - validStart);
}

void Utf8Stream::finish(std::string &out) {
  // A well-formed prefix cut short is one maximal subpart.
  if (!pending.empty())
    out += kReplacementChar;
  pending.clear();
}

void tokenizer::truncateUtf8(std::string &text, size_t size) {
  if (text.size() <= size)
    return;
  while (size > 0 && (uint8_t(text[size]) & 0xC0) == 0x80)
    --size;
  text.resize(size);
}

size_t tokenizer::utf8Length(uint8_t lead) {
  if (lead < 0x80)
    return 1;
  if (lead < 0xE0)
    return 2;
  if (lead < 0xF0)
    return 3;
  return 4;
}

uint32_t tokenizer::nextCodePoint(llvm::StringRef s, size_t &pos) {
  const uint8_t *p = reinterpret_cast<const uint8_t *>(s.data()) + pos;
  size_t len = std::min(utf8Length(p[0]), s.size() - pos);
  uint32_t c;
  switch (len) {
  case 1:
    c = p[0];
    break;
  case 2:
    c = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    break;
  case 3:
    c = ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    break;
  default:
    c = ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) |
        ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
    break;
  }
  pos += len;
  return c;
}

void tokenizer::appendUtf8(std::string &out, uint32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

namespace {

/// Printable Latin-1 bytes stand for themselves; the other 68 bytes, in
/// order, for U+0100 onwards.
bool isPrintableByte(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
         (b >= 0xAE && b <= 0xFF);
}

struct ByteTables {
  uint32_t toChar[256];
  int16_t toByte[0x100 + 68];
  ByteTables() {
    std::fill(std::begin(toByte), std::end(toByte), int16_t(-1));
    unsigned next = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      toChar[b] = isPrintableByte(b) ? b : next++;
      toByte[toChar[b]] = int16_t(b);
    }
  }
};

const ByteTables &byteTables() {
  static const ByteTables tables;
  return tables;
}

} // namespace

uint32_t tokenizer::byteToChar(uint8_t b) { return byteTables().toChar[b]; }

int tokenizer::charToByte(uint32_t c) {
  return c < std::size(byteTables().toByte) ? byteTables().toByte[c] : -1;
}

std::string tokenizer::quote(llvm::StringRef text, size_t limit) {
  std::string valid = toValidUtf8(text);
  std::string out = "\"";
  for (size_t pos = 0; pos < valid.size();) {
    if (pos >= limit) {
      out += "...";
      break;
    }
    size_t start = pos;
    uint32_t c = nextCodePoint(valid, pos);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7F || c == 0x85 || c == 0x2028 ||
               c == 0x2029) {
      // Whatever could break the line or the terminal is shown escaped.
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04X", unsigned(c));
      out += buf;
    } else {
      out.append(valid, start, pos - start);
    }
  }
  return out + "\"";
}

//===----------------------------------------------------------------------===//
// Character classes and case
//===----------------------------------------------------------------------===//

namespace {

using namespace gc;

struct CategoryRun {
  uint32_t first, last;
  Category category;
};

struct CodePointRange {
  uint32_t first, last;
};

struct LowercaseMapping {
  uint32_t from;
  uint32_t to[3];
};

#include "UnicodeTables.inc"

} // namespace

gc::Category tokenizer::generalCategory(uint32_t c) {
  const CategoryRun *run = std::upper_bound(
      std::begin(kCategoryRuns), std::end(kCategoryRuns), c,
      [](uint32_t c, const CategoryRun &run) { return c < run.first; });
  if (run == std::begin(kCategoryRuns) || (run - 1)->last < c)
    return Cn;
  return (run - 1)->category;
}

bool tokenizer::isWhiteSpace(uint32_t c) {
  return u_hasBinaryProperty(UChar32(c), UCHAR_WHITE_SPACE);
}

bool tokenizer::isWordChar(uint32_t c) {
  if (c < 0x80)
    return llvm::isAlnum(char(c)) || c == '_';
  // Alphabetic is letters, Nl and Other_Alphabetic (mostly marks, which
  // count anyway): ICU for the latter, the tables for what is newer.
  switch (generalCategory(c)) {
  case Lu:
  case Ll:
  case Lt:
  case Lm:
  case Lo:
  case Nl:
  case Mn:
  case Mc:
  case Me:
  case Nd:
  case Pc:
    return true;
  default:
    return u_hasBinaryProperty(UChar32(c), UCHAR_ALPHABETIC) ||
           u_hasBinaryProperty(UChar32(c), UCHAR_JOIN_CONTROL);
  }
}

bool tokenizer::isNumeric(uint32_t c) {
  const CodePointRange *range = std::upper_bound(
      std::begin(kNumericRanges), std::end(kNumericRanges), c,
      [](uint32_t c, const CodePointRange &range) { return c < range.first; });
  return range != std::begin(kNumericRanges) && c <= (range - 1)->last;
}

namespace {

icu::UnicodeString toUnicodeString(llvm::StringRef utf8) {
  return icu::UnicodeString::fromUTF8(
      icu::StringPiece(utf8.data(), int32_t(utf8.size())));
}

std::string toUtf8(const icu::UnicodeString &s) {
  std::string out;
  s.toUTF8String(out);
  return out;
}

} // namespace

/// Whether HF's normalization tables (Unicode 9.0) know `c`. Those it does
/// not are, to HF, starters without decomposition that compose with
/// nothing, which is the same as cutting the text there.
static bool isNormalizationInert(uint32_t c) {
  if (c < 0x100)
    return false; // Latin-1 is as old as Unicode ...
  UVersionInfo age;
  u_charAge(UChar32(c), age);
  // ... and unassigned characters are inert to ICU as well.
  return age[0] > 9;
}

std::string tokenizer::normalize(llvm::StringRef text, NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2 *normalizer = nullptr;
  switch (form) {
  case NormalForm::NFC:
    normalizer = icu::Normalizer2::getNFCInstance(status);
    break;
  case NormalForm::NFD:
    normalizer = icu::Normalizer2::getNFDInstance(status);
    break;
  case NormalForm::NFKC:
    normalizer = icu::Normalizer2::getNFKCInstance(status);
    break;
  case NormalForm::NFKD:
    normalizer = icu::Normalizer2::getNFKDInstance(status);
    break;
  }
  if (U_FAILURE(status) || !normalizer)
    return text.str();
  // ASCII is invariant under every form; most text takes this path.
  if (llvm::all_of(text, [](char c) { return uint8_t(c) < 0x80; }))
    return text.str();
  std::string out;
  out.reserve(text.size());
  auto flush = [&](llvm::StringRef piece) {
    if (piece.empty())
      return;
    status = U_ZERO_ERROR;
    icu::UnicodeString result =
        normalizer->normalize(toUnicodeString(piece), status);
    if (U_FAILURE(status))
      out += piece;
    else
      out += toUtf8(result);
  };
  size_t pieceStart = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    if (!isNormalizationInert(nextCodePoint(text, pos)))
      continue;
    flush(text.slice(pieceStart, start));
    out += text.slice(start, pos);
    pieceStart = pos;
  }
  flush(text.drop_front(pieceStart));
  return out;
}

std::string tokenizer::lowercase(llvm::StringRef text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    uint32_t c = nextCodePoint(text, pos);
    if (c < 0x80) {
      out += llvm::toLower(char(c));
      continue;
    }
    const LowercaseMapping *m = std::lower_bound(
        std::begin(kLowercaseMappings), std::end(kLowercaseMappings), c,
        [](const LowercaseMapping &m, uint32_t c) { return m.from < c; });
    if (m == std::end(kLowercaseMappings) || m->from != c) {
      out.append(text.data() + start, pos - start);
      continue;
    }
    for (uint32_t to : m->to)
      if (to)
        appendUtf8(out, to);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

namespace {

/// The general categories (a mask of 1 << gc::Category) that the property
/// `name` of a `\p{name}` stands for, or 0 if it is no general category.
uint32_t categoryMask(llvm::StringRef name) {
  // Oniguruma ignores case, spaces, hyphens and underscores in names.
  std::string key;
  for (char c : name)
    if (c != ' ' && c != '-' && c != '_')
      key += llvm::toLower(c);
  auto bits = [](std::initializer_list<Category> categories) {
    uint32_t mask = 0;
    for (Category c : categories)
      mask |= 1u << c;
    return mask;
  };
  static const std::pair<llvm::StringLiteral, uint32_t> names[] = {
      {"l", bits({Lu, Ll, Lt, Lm, Lo})},
      {"letter", bits({Lu, Ll, Lt, Lm, Lo})},
      {"lc", bits({Lu, Ll, Lt})},
      {"l&", bits({Lu, Ll, Lt})},
      {"casedletter", bits({Lu, Ll, Lt})},
      {"lu", bits({Lu})},
      {"uppercaseletter", bits({Lu})},
      {"ll", bits({Ll})},
      {"lowercaseletter", bits({Ll})},
      {"lt", bits({Lt})},
      {"titlecaseletter", bits({Lt})},
      {"lm", bits({Lm})},
      {"modifierletter", bits({Lm})},
      {"lo", bits({Lo})},
      {"otherletter", bits({Lo})},
      {"m", bits({Mn, Mc, Me})},
      {"mark", bits({Mn, Mc, Me})},
      {"combiningmark", bits({Mn, Mc, Me})},
      {"mn", bits({Mn})},
      {"nonspacingmark", bits({Mn})},
      {"mc", bits({Mc})},
      {"spacingmark", bits({Mc})},
      {"me", bits({Me})},
      {"enclosingmark", bits({Me})},
      {"n", bits({Nd, Nl, No})},
      {"number", bits({Nd, Nl, No})},
      {"nd", bits({Nd})},
      {"decimalnumber", bits({Nd})},
      {"nl", bits({Nl})},
      {"letternumber", bits({Nl})},
      {"no", bits({No})},
      {"othernumber", bits({No})},
      {"p", bits({Pc, Pd, Ps, Pe, Pi, Pf, Po})},
      {"punctuation", bits({Pc, Pd, Ps, Pe, Pi, Pf, Po})},
      {"pc", bits({Pc})},
      {"connectorpunctuation", bits({Pc})},
      {"pd", bits({Pd})},
      {"dashpunctuation", bits({Pd})},
      {"ps", bits({Ps})},
      {"openpunctuation", bits({Ps})},
      {"pe", bits({Pe})},
      {"closepunctuation", bits({Pe})},
      {"pi", bits({Pi})},
      {"initialpunctuation", bits({Pi})},
      {"pf", bits({Pf})},
      {"finalpunctuation", bits({Pf})},
      {"po", bits({Po})},
      {"otherpunctuation", bits({Po})},
      {"s", bits({Sm, Sc, Sk, So})},
      {"symbol", bits({Sm, Sc, Sk, So})},
      {"sm", bits({Sm})},
      {"mathsymbol", bits({Sm})},
      {"sc", bits({Sc})},
      {"currencysymbol", bits({Sc})},
      {"sk", bits({Sk})},
      {"modifiersymbol", bits({Sk})},
      {"so", bits({So})},
      {"othersymbol", bits({So})},
      {"z", bits({Zs, Zl, Zp})},
      {"separator", bits({Zs, Zl, Zp})},
      {"zs", bits({Zs})},
      {"spaceseparator", bits({Zs})},
      {"zl", bits({Zl})},
      {"lineseparator", bits({Zl})},
      {"zp", bits({Zp})},
      {"paragraphseparator", bits({Zp})},
      {"c", bits({Cc, Cf, Cs, Co, Cn})},
      {"other", bits({Cc, Cf, Cs, Co, Cn})},
      {"cc", bits({Cc})},
      {"control", bits({Cc})},
      {"cf", bits({Cf})},
      {"format", bits({Cf})},
      {"cs", bits({Cs})},
      {"surrogate", bits({Cs})},
      {"co", bits({Co})},
      {"privateuse", bits({Co})},
      {"cn", bits({Cn})},
      {"unassigned", bits({Cn})},
  };
  for (const auto &[n, mask] : names)
    if (key == n)
      return mask;
  return 0;
}

/// A bracket expression for the code points of the categories in `mask`,
/// or for all others if `negate`, from UnicodeTables.inc.
std::string categoryClass(uint32_t mask, bool negate) {
  std::string out = negate ? "[^" : "[";
  size_t emptyLength = out.size();
  auto emit = [&](uint32_t first, uint32_t last) {
    char buf[40];
    snprintf(buf, sizeof(buf), "\\x{%X}-\\x{%X}", unsigned(first),
             unsigned(last));
    out += buf;
  };
  int64_t first = -1, last = -1;
  for (const CategoryRun &run : kCategoryRuns) {
    if (!(mask & (1u << run.category)))
      continue;
    if (first >= 0 && run.first == uint32_t(last) + 1) {
      last = run.last;
      continue;
    }
    if (first >= 0)
      emit(uint32_t(first), uint32_t(last));
    first = run.first;
    last = run.last;
  }
  if (first >= 0)
    emit(uint32_t(first), uint32_t(last));
  if (out.size() == emptyLength) // No code point: ICU has no empty class.
    return negate ? "[\\x{0}-\\x{10FFFF}]" : "[^\\x{0}-\\x{10FFFF}]";
  return out + "]";
}

/// Oniguruma's syntax as ICU reads it. The differences that matter for
/// tokenizer patterns are in the escapes: Oniguruma's `\s` is White_Space,
/// while ICU's is [\t\n\f\r\p{Z}], which lacks \v and U+0085;
/// Oniguruma's `\h` is a hex digit, ICU's a horizontal space; and general
/// categories (\p{L}, \d) are spelled out from UnicodeTables.inc, since
/// ICU's Unicode version may lag the one of `tokenizers`.
std::string rewriteForIcu(llvm::StringRef regex) {
  std::string out;
  out.reserve(regex.size() + 16);
  for (size_t i = 0; i < regex.size(); ++i) {
    char c = regex[i];
    if (c != '\\' || i + 1 == regex.size()) {
      out += c;
      continue;
    }
    char next = regex[++i];
    switch (next) {
    case 's':
      out += "\\p{White_Space}";
      break;
    case 'S':
      out += "\\P{White_Space}";
      break;
    case 'h':
      out += "[0-9a-fA-F]";
      break;
    case 'H':
      out += "[^0-9a-fA-F]";
      break;
    case 'd':
    case 'D':
      out += categoryClass(1u << Nd, next == 'D');
      break;
    case 'p':
    case 'P': {
      size_t close = regex.find('}', i + 1);
      if (i + 1 < regex.size() && regex[i + 1] == '{' &&
          close != llvm::StringRef::npos) {
        llvm::StringRef name = regex.slice(i + 2, close);
        bool negate = next == 'P';
        if (name.consume_front("^"))
          negate = !negate;
        if (uint32_t mask = categoryMask(name)) {
          out += categoryClass(mask, negate);
          i = close;
          break;
        }
      }
      out += c;
      out += next;
      break;
    }
    default:
      out += c;
      out += next;
      break;
    }
  }
  return out;
}

/// How long one ICU find may backtrack, in its steps (each on the order of
/// a millisecond): a pathological pattern from an untrusted tokenizer.json
/// must not hang encoding. Past it the rest of the text counts as unmatched.
constexpr int32_t kRegexTimeLimit = 1000;

/// The largest regex handed to ICU, after rewriting: Llama 3's is 80 KB.
constexpr size_t kMaxRegexBytes = size_t(1) << 20;

} // namespace

Pattern Pattern::literal(llvm::StringRef text) {
  Pattern p;
  p.isLiteral = true;
  p.text = text.str();
  return p;
}

llvm::Expected<Pattern> Pattern::regex(llvm::StringRef regex) {
  std::string rewritten = rewriteForIcu(regex);
  // Each \\p{L} spells out hundreds of ranges; bound what a file can make
  // ICU compile.
  if (rewritten.size() > kMaxRegexBytes)
    return llvm::createStringError("the regex is too large");
  UErrorCode status = U_ZERO_ERROR;
  UParseError parseError;
  // Oniguruma's `^`/`$` match at line boundaries and its lines end at \n
  // only, and so do ICU's with these flags.
  std::unique_ptr<icu::RegexPattern> compiled(icu::RegexPattern::compile(
      toUnicodeString(rewritten), UREGEX_MULTILINE | UREGEX_UNIX_LINES,
      parseError, status));
  if (U_FAILURE(status) || !compiled)
    return llvm::createStringError(
        "the regex cannot be compiled (" + std::string(u_errorName(status)) +
        " at offset " + std::to_string(parseError.offset) + ")");
  Pattern p;
  p.isLiteral = false;
  p.text = regex.str();
  p.compiled = std::move(compiled);
  return p;
}

void Pattern::forEachMatch(
    llvm::StringRef input,
    llvm::function_ref<bool(size_t, size_t)> visit) const {
  // Oniguruma's find_iter: search from the end of the previous match; an
  // empty match where the previous match ended is dropped by stepping over
  // one character.
  if (isLiteral) {
    size_t lastEnd = 0, lastMatchEnd = llvm::StringRef::npos;
    while (lastEnd <= input.size()) {
      size_t start = input.find(text, lastEnd);
      if (start == llvm::StringRef::npos)
        break;
      size_t end = start + text.size();
      if (start == end && lastMatchEnd == end) {
        lastEnd += lastEnd < input.size() ? utf8Length(input[lastEnd]) : 1;
        continue;
      }
      lastEnd = lastMatchEnd = end;
      if (!visit(start, end))
        return;
    }
    return;
  }

  // ICU matches UTF-16; map its offsets back to bytes of `input`.
  icu::UnicodeString u;
  std::vector<uint32_t> toByte;
  toByte.reserve(input.size() + 1);
  for (size_t pos = 0; pos < input.size();) {
    size_t start = pos;
    uint32_t c = nextCodePoint(input, pos);
    u.append(UChar32(c));
    toByte.push_back(uint32_t(start));
    if (c >= 0x10000)
      toByte.push_back(uint32_t(start));
  }
  toByte.push_back(uint32_t(input.size()));
  int64_t length = u.length();

  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(compiled->matcher(u, status));
  if (U_FAILURE(status) || !matcher)
    return;
  matcher->setTimeLimit(kRegexTimeLimit, status);
  int64_t lastEnd = 0, lastMatchEnd = -1;
  while (lastEnd <= length) {
    status = U_ZERO_ERROR;
    if (!matcher->find(lastEnd, status) || U_FAILURE(status))
      break;
    int64_t start = matcher->start64(status), end = matcher->end64(status);
    if (U_FAILURE(status))
      break;
    if (start == end && lastMatchEnd == end) {
      lastEnd +=
          lastEnd < length ? U16_LENGTH(u.char32At(int32_t(lastEnd))) : 1;
      continue;
    }
    lastEnd = lastMatchEnd = end;
    if (!visit(toByte[start], toByte[end]))
      return;
  }
}

std::vector<Span> tokenizer::findSpans(const Pattern &pattern,
                                       llvm::StringRef text) {
  if (text.empty())
    return {{0, 0, false}};
  std::vector<Span> spans;
  size_t prev = 0;
  pattern.forEachMatch(text, [&](size_t start, size_t end) {
    if (prev != start)
      spans.push_back({prev, start, false});
    spans.push_back({start, end, true});
    prev = end;
    return true;
  });
  if (prev != text.size())
    spans.push_back({prev, text.size(), false});
  return spans;
}

std::string tokenizer::replaceMatches(const Pattern &pattern,
                                      llvm::StringRef text,
                                      llvm::StringRef content, size_t limit) {
  std::string out;
  size_t prev = 0;
  pattern.forEachMatch(text, [&](size_t start, size_t end) {
    out.append(text.data() + prev, start - prev);
    out += content;
    prev = end;
    // An empty match before every character can multiply the text.
    return out.size() <= limit;
  });
  if (out.size() <= limit)
    out += text.drop_front(prev);
  truncateUtf8(out, limit);
  return out;
}

llvm::Expected<Pattern>
tokenizer::patternFromJson(const llvm::json::Value *value,
                           llvm::StringRef where) {
  const llvm::json::Object *object = value ? value->getAsObject() : nullptr;
  if (object && object->size() == 1) {
    if (std::optional<llvm::StringRef> s = object->getString("String"))
      return Pattern::literal(*s);
    if (std::optional<llvm::StringRef> r = object->getString("Regex")) {
      llvm::Expected<Pattern> p = Pattern::regex(*r);
      if (!p)
        return llvm::createStringError(where + " " + quote(*r) + ": " +
                                       llvm::toString(p.takeError()));
      return p;
    }
  }
  return llvm::createStringError(
      where + R"( must be {"String": ...} or {"Regex": ...})");
}

llvm::Expected<uint32_t> tokenizer::charFromJson(const llvm::json::Value *value,
                                                 llvm::StringRef where) {
  std::optional<llvm::StringRef> s =
      value ? value->getAsString() : std::nullopt;
  size_t pos = 0;
  if (s && !s->empty()) {
    uint32_t c = nextCodePoint(*s, pos);
    if (pos == s->size())
      return c;
  }
  return llvm::createStringError(where + " must be a string of one character");
}
