//===- TokenizerFuzzer.cpp - libFuzzer entry for pcc's tokenizer ----------===//
//
// Feeds arbitrary bytes to pcc's tokenizer as the contents of a
// tokenizer.json. Loading must succeed or give a one-line error; a loaded
// tokenizer must encode (a fixed text, and the input bytes themselves) and
// decode without crashing, and keep the promises of its API: encoded ids
// are in the vocabulary, and the streaming Detokenizer's text equals
// decode()'s. Anything else is a bug.
//
//===----------------------------------------------------------------------===//

#include "pcc/Tokenizer/Tokenizer.h"

#include <cstdlib>

namespace {

/// Text touching every stage: added-token look-alikes, contractions in
/// both cases, digits, runs of white space of several kinds, accents in
/// both normal forms, CJK, emoji with ZWJ, and bytes that are not UTF-8.
constexpr char kText[] =
    "Hello world, don't STOP I'LL 12345 <|endoftext|><s></s> <mask>x "
    "\t\v\f\r\xC2\x85\xC2\xA0\xE3\x80\x80  caf\xC3\xA9 cafe\xCC\x81 "
    "\xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 "
    "\xE2\x96\x81\xE2\x96\x81x <0x41> \xFF\xC3(\xE2\x82 end  ";

void check(bool condition) {
  if (!condition)
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef json(reinterpret_cast<const char *>(data), size);
  llvm::Expected<pcc::Tokenizer> tokenizer =
      pcc::Tokenizer::fromJson(json, "fuzz.json");
  if (!tokenizer) {
    std::string message = llvm::toString(tokenizer.takeError());
    check(message.find('\n') == std::string::npos);
    return 0;
  }
  int64_t vocabulary = tokenizer->vocabularySize();
  std::vector<int64_t> ids = tokenizer->encode(kText);
  // The input itself is text too: arbitrary bytes, mostly not UTF-8.
  std::vector<int64_t> ofInput = tokenizer->encode(json);
  for (const std::vector<int64_t> *list : {&ids, &ofInput})
    for (int64_t id : *list)
      check(id >= 0 && id < vocabulary && tokenizer->tokenText(id));

  // The encoded ids, then the first ids of the vocabulary, its last ones
  // and ids outside it.
  std::vector<int64_t> more;
  for (int64_t id = 0; id < std::min<int64_t>(vocabulary, 300); ++id)
    if (tokenizer->tokenText(id))
      more.push_back(id);
  for (int64_t id = std::max<int64_t>(0, vocabulary - 20); id < vocabulary;
       ++id)
    if (tokenizer->tokenText(id))
      more.push_back(id);
  for (const std::vector<int64_t> &list : {ids, ofInput, more}) {
    llvm::Expected<std::string> text = tokenizer->decode(list);
    check(bool(text));
    pcc::Detokenizer detokenizer(*tokenizer);
    std::string streamed;
    for (int64_t id : list) {
      llvm::Expected<std::string> piece = detokenizer.push(id);
      check(bool(piece));
      streamed += *piece;
    }
    streamed += detokenizer.finish();
    check(streamed == *text);
  }
  for (int64_t bad : {int64_t(-1), vocabulary, int64_t(1) << 40}) {
    llvm::Expected<std::string> text = tokenizer->decode({bad});
    check(!text);
    llvm::consumeError(text.takeError());
  }
  return 0;
}
