//===- Decoder.cpp - The decoder of a tokenizer.json ----------------------===//
//
// Each HF decoder maps a list of strings to a list of strings and the last
// list is concatenated. Until a Fuse or ByteLevel joins the list, every step
// works a token at a time (ByteFallback keeps a run of byte tokens, since
// HF turns the whole run into U+FFFDs when it is not UTF-8). After the
// join, steps see one string that grows as tokens come, and each holds back
// what the rest of the string could still change.
//
//===----------------------------------------------------------------------===//

#include "Decoder.h"

using namespace pcc;
using namespace pcc::tokenizer;
using llvm::json::Array;
using llvm::json::Object;
using llvm::json::Value;

namespace {

/// Reads `decoder` and appends its steps (a Sequence's, recursively).
llvm::Error appendSteps(const Value &decoder, const std::string &where,
                        std::vector<DecodeStep> &steps) {
  const Object *object = decoder.getAsObject();
  std::optional<llvm::StringRef> type =
      object ? object->getString("type") : std::nullopt;
  if (!type)
    return fail(where + " must be an object with a \"type\"");
  DecodeStep step;
  if (*type == "Sequence") {
    const Array *list = object->getArray("decoders");
    if (!list)
      return fail(where + ".decoders must be an array");
    for (size_t i = 0; i < list->size(); ++i)
      if (llvm::Error e = appendSteps(
              (*list)[i], where + ".decoders[" + std::to_string(i) + "]",
              steps))
        return e;
    return llvm::Error::success();
  }
  if (*type == "ByteLevel") {
    // Its options only concern pre-tokenization and offsets.
    step.kind = DecodeStep::Kind::ByteLevel;
  } else if (*type == "ByteFallback") {
    step.kind = DecodeStep::Kind::ByteFallback;
  } else if (*type == "Fuse") {
    step.kind = DecodeStep::Kind::Fuse;
  } else if (*type == "Metaspace") {
    step.kind = DecodeStep::Kind::Metaspace;
    step.replacement = 0x2581; // ▁
    if (const Value *r = object->get("replacement")) {
      llvm::Expected<uint32_t> c = charFromJson(r, where + ".replacement");
      if (!c)
        return c.takeError();
      step.replacement = *c;
    }
    // prepend_scheme, or the older add_prefix_space it replaced.
    step.dropsFirst = true;
    if (const Value *scheme = object->get("prepend_scheme")) {
      std::optional<llvm::StringRef> s = scheme->getAsString();
      if (!s || (*s != "first" && *s != "always" && *s != "never"))
        return fail(
            where +
            ".prepend_scheme must be \"first\", \"always\" or \"never\"");
      step.dropsFirst = *s != "never";
    } else if (const Value *add = object->get("add_prefix_space")) {
      std::optional<bool> b = add->getAsBoolean();
      if (!b)
        return fail(where + ".add_prefix_space must be a boolean");
      step.dropsFirst = *b;
    }
  } else if (*type == "Replace") {
    step.kind = DecodeStep::Kind::Replace;
    llvm::Expected<Pattern> pattern =
        patternFromJson(object->get("pattern"), where + ".pattern");
    if (!pattern)
      return pattern.takeError();
    step.pattern = std::make_shared<const Pattern>(std::move(*pattern));
    std::optional<llvm::StringRef> content = object->getString("content");
    if (!content)
      return fail(where + ".content must be a string");
    step.content = content->str();
  } else if (*type == "Strip") {
    step.kind = DecodeStep::Kind::Strip;
    llvm::Expected<uint32_t> c =
        charFromJson(object->get("content"), where + ".content");
    if (!c)
      return c.takeError();
    step.stripChar = *c;
    std::optional<int64_t> start = object->getInteger("start");
    std::optional<int64_t> stop = object->getInteger("stop");
    if (!start || !stop || *start < 0 || *stop < 0)
      return fail(where + ".start and .stop must be integers >= 0");
    step.start = size_t(*start);
    step.stop = size_t(*stop);
  } else {
    return fail("the decoder " + quote(*type) +
                " is not supported (ByteLevel, Metaspace, Replace, "
                "ByteFallback, Fuse, Strip and Sequence are)");
  }
  steps.push_back(std::move(step));
  return llvm::Error::success();
}

/// HF's ByteFallback test: "<0xHH>", HH parsed as Rust's u8::from_str_radix
/// parses it, which also takes "+H".
bool parseByteToken(llvm::StringRef token, uint8_t &byte) {
  if (token.size() != 6 || !token.starts_with("<0x") || !token.ends_with(">"))
    return false;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  int hi = hex(token[3]), lo = hex(token[4]);
  if (token[3] == '+' && lo >= 0) {
    byte = uint8_t(lo);
    return true;
  }
  if (hi < 0 || lo < 0)
    return false;
  byte = uint8_t(hi * 16 + lo);
  return true;
}

/// The bytes a ByteLevel decoder reads from `token`: each character's byte,
/// or, if one character stands for no byte, the token's own UTF-8.
std::string byteLevelBytes(llvm::StringRef token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    int b = charToByte(nextCodePoint(token, pos));
    if (b < 0)
      return token.str();
    bytes += char(b);
  }
  return bytes;
}

/// Metaspace's decoding of one token: the replacement character becomes a
/// space, or nothing in the first token when the scheme prepends one.
std::string metaspace(const DecodeStep &step, llvm::StringRef token,
                      bool first) {
  std::string out;
  for (size_t pos = 0; pos < token.size();) {
    size_t start = pos;
    uint32_t c = nextCodePoint(token, pos);
    if (c != step.replacement)
      out.append(token.data() + start, pos - start);
    else if (!(first && step.dropsFirst))
      out += ' ';
  }
  return out;
}

/// Strip over a string that arrives in pieces: drops up to `start` leading
/// and holds back up to `stop` trailing strip characters.
void stripPush(const DecodeStep &step, TextState &state, llvm::StringRef text,
               std::string &out) {
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    uint32_t c = nextCodePoint(text, pos);
    llvm::StringRef ch = text.slice(start, pos);
    if (!state.leadingDone) {
      if (state.stripped < step.start && c == step.stripChar) {
        ++state.stripped;
        continue;
      }
      state.leadingDone = true;
    }
    if (step.stop == 0) {
      out += ch;
    } else if (c == step.stripChar) {
      state.held += ch;
      if (++state.heldCount > step.stop) {
        size_t first = utf8Length(uint8_t(state.held[0]));
        out.append(state.held, 0, first);
        state.held.erase(0, first);
        --state.heldCount;
      }
    } else {
      out += state.held;
      state.held.clear();
      state.heldCount = 0;
      out += ch;
    }
  }
}

} // namespace

llvm::Expected<Decoder> Decoder::fromJson(const Value *decoder) {
  Decoder result;
  if (!decoder || decoder->kind() == Value::Null) {
    result.joinsWithSpace = true;
    return result;
  }
  if (llvm::Error e = appendSteps(*decoder, "decoder", result.steps))
    return e;
  if (result.steps.size() > kMaxSteps)
    return fail("the decoder has more than " + llvm::Twine(kMaxSteps) +
                " steps");
  result.joinStep = result.steps.size();
  for (size_t i = 0; i < result.steps.size(); ++i) {
    DecodeStep::Kind kind = result.steps[i].kind;
    if (kind == DecodeStep::Kind::Fuse || kind == DecodeStep::Kind::ByteLevel) {
      result.joinStep = i;
      break;
    }
  }
  return result;
}

DecodeStream::DecodeStream(const Decoder &decoder)
    : decoder(decoder), tokensSeen(decoder.steps.size()),
      byteRuns(decoder.steps.size()), textStates(decoder.steps.size()) {}

void DecodeStream::push(llvm::StringRef token, std::string &out) {
  if (decoder.joinsWithSpace) {
    if (any)
      out += ' ';
    out += token;
    any = true;
    return;
  }
  tokenCap = growthCap(token.size());
  pushToken(0, token.str(), out);
}

void DecodeStream::finish(std::string &out) {
  if (!decoder.joinsWithSpace)
    finishTokens(0, out);
}

void DecodeStream::pushToken(size_t step, std::string token, std::string &out) {
  if (step == decoder.steps.size()) {
    out += token; // The final join.
    return;
  }
  const DecodeStep &s = decoder.steps[step];
  if (step == decoder.joinStep) {
    if (s.kind == DecodeStep::Kind::Fuse)
      return joinText(step + 1, token, out);
    std::string text;
    utf8.push(byteLevelBytes(token), text);
    return joinText(step + 1, text, out);
  }
  switch (s.kind) {
  case DecodeStep::Kind::Replace: {
    return pushToken(
        step + 1, replaceMatches(*s.pattern, token, s.content, tokenCap), out);
  }
  case DecodeStep::Kind::Metaspace: {
    bool first = tokensSeen[step]++ == 0;
    return pushToken(step + 1, metaspace(s, token, first), out);
  }
  case DecodeStep::Kind::Strip: {
    // A token of its own: what it would hold back is its trailing strip.
    TextState state;
    std::string stripped;
    stripPush(s, state, token, stripped);
    return pushToken(step + 1, std::move(stripped), out);
  }
  case DecodeStep::Kind::ByteFallback: {
    uint8_t byte;
    if (parseByteToken(token, byte)) {
      byteRuns[step] += char(byte);
      return;
    }
    flushByteRun(step, out);
    return pushToken(step + 1, std::move(token), out);
  }
  case DecodeStep::Kind::ByteLevel:
  case DecodeStep::Kind::Fuse:
    break; // Only at joinStep.
  }
}

void DecodeStream::flushByteRun(size_t step, std::string &out) {
  std::string run = std::move(byteRuns[step]);
  byteRuns[step].clear();
  if (run.empty())
    return;
  if (toValidUtf8(run) == run)
    return pushToken(step + 1, std::move(run), out);
  // Not UTF-8 as a whole: HF gives one U+FFFD per byte.
  for (size_t i = 0; i < run.size(); ++i)
    pushToken(step + 1, kReplacementChar.str(), out);
}

void DecodeStream::finishTokens(size_t step, std::string &out) {
  if (step == decoder.steps.size())
    return;
  if (step == decoder.joinStep) {
    if (decoder.steps[step].kind == DecodeStep::Kind::ByteLevel) {
      std::string text;
      utf8.finish(text);
      joinText(step + 1, text, out);
    }
    return finishText(step + 1, out);
  }
  if (decoder.steps[step].kind == DecodeStep::Kind::ByteFallback)
    flushByteRun(step, out);
  finishTokens(step + 1, out);
}

void DecodeStream::joinText(size_t step, llvm::StringRef text,
                            std::string &out) {
  joinedBytes += text.size();
  pushText(step, text, out);
}

void DecodeStream::pushText(size_t step, llvm::StringRef text,
                            std::string &out) {
  if (step == decoder.steps.size()) {
    out += text;
    return;
  }
  if (text.empty())
    return;
  const DecodeStep &s = decoder.steps[step];
  TextState &state = textStates[step];
  switch (s.kind) {
  case DecodeStep::Kind::Fuse:
    return forwardText(step, text.str(), out);
  case DecodeStep::Kind::Metaspace:
    // After the join there is one token, the first.
    return forwardText(step, metaspace(s, text, /*first=*/true), out);
  case DecodeStep::Kind::Strip: {
    std::string passed;
    stripPush(s, state, text, passed);
    return forwardText(step, std::move(passed), out);
  }
  case DecodeStep::Kind::Replace: {
    llvm::StringRef literal = s.pattern->literalText();
    state.held += text;
    if (s.pattern->isRegex() || literal.empty())
      return; // A regex may match anywhere: replaced at the end.
    // Replace what matches, and hold back a tail that could start a match.
    std::string passed;
    llvm::StringRef held = state.held;
    for (size_t at; (at = held.find(literal)) != llvm::StringRef::npos;) {
      passed += held.take_front(at);
      passed += s.content;
      held = held.drop_front(at + literal.size());
    }
    size_t keep = std::min(held.size(), literal.size() - 1);
    while (keep > 0 && !literal.starts_with(held.take_back(keep)))
      --keep;
    passed += held.drop_back(keep);
    state.held = held.take_back(keep).str();
    return forwardText(step, std::move(passed), out);
  }
  case DecodeStep::Kind::ByteLevel:
  case DecodeStep::Kind::ByteFallback:
    // Both judge the joined string as a whole token: wait for all of it.
    state.held += text;
    return;
  }
}

void DecodeStream::forwardText(size_t step, std::string text,
                               std::string &out) {
  TextState &state = textStates[step];
  size_t cap = joinedCap();
  truncateUtf8(text, cap > state.bytesOut ? cap - state.bytesOut : 0);
  state.bytesOut += text.size();
  pushText(step + 1, text, out);
}

void DecodeStream::finishText(size_t step, std::string &out) {
  if (step == decoder.steps.size())
    return;
  const DecodeStep &s = decoder.steps[step];
  {
    // Released before the next steps finish: each may hold a whole text.
    std::string rest = std::move(textStates[step].held);
    textStates[step].held.clear();
    switch (s.kind) {
    case DecodeStep::Kind::Fuse:
    case DecodeStep::Kind::Metaspace:
    case DecodeStep::Kind::Strip: // What is held is stripped.
      break;
    case DecodeStep::Kind::Replace:
      forwardText(
          step, replaceMatches(*s.pattern, rest, s.content, joinedCap()), out);
      break;
    case DecodeStep::Kind::ByteLevel:
      forwardText(step, toValidUtf8(byteLevelBytes(rest)), out);
      break;
    case DecodeStep::Kind::ByteFallback: {
      uint8_t byte;
      if (!parseByteToken(rest, byte))
        forwardText(step, std::move(rest), out);
      else if (byte < 0x80)
        forwardText(step, std::string(1, char(byte)), out);
      else
        forwardText(step, kReplacementChar.str(), out);
      break;
    }
    }
  }
  finishText(step + 1, out);
}
