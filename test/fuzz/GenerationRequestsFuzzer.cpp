//===- GenerationRequestsFuzzer.cpp - libFuzzer entry for pcc generate ----===//
//
// Feeds arbitrary bytes to pcc generate's requests parser as the contents
// of a requests file, and to its generation config's parser as a
// generation_config.json. Each must accept them or throw its one-line
// pccrt::Error; any crash or sanitizer report is a bug, and so is an
// accepted request or config that breaks the checks the parser promises. Text
// prompts go through the tokenizer.json named by $PCC_FUZZ_TOKENIZER
// (run-fuzzers.sh gives the serving tests' one), else they are refused;
// requests of messages through a ChatML template.
//
//===----------------------------------------------------------------------===//

#include "pcc/Driver/GenerationRequests.h"
#include "pcc/Tokenizer/ChatTemplate.h"
#include "pcc/Tokenizer/Tokenizer.h"

#include <cstdlib>
#include <optional>

static std::optional<pcc::Tokenizer> tokenizer;
static std::optional<pcc::ChatTemplate> chat;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  if (const char *path = std::getenv("PCC_FUZZ_TOKENIZER"))
    tokenizer.emplace(pcc::loadTokenizer(path, 384));
  // Requests of messages go through a ChatML template.
  llvm::Expected<pcc::ChatTemplate> t = pcc::ChatTemplate::parse(
      "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] "
      "}}<|im_end|>\n{% endfor %}{% if add_generation_prompt "
      "%}<|im_start|>assistant\n{% endif %}",
      "chatml");
  if (t)
    chat.emplace(std::move(*t));
  else
    llvm::consumeError(t.takeError());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  constexpr int64_t kVocabulary = 384, kMaxSeq = 64;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  try {
    std::vector<pccrt::GenerationRequest> requests =
        pcc::parseGenerationRequests(
            text, "fuzz.jsonl", pccrt::Sampling(), kVocabulary, kMaxSeq,
            tokenizer ? &*tokenizer : nullptr, chat ? &*chat : nullptr);
    for (const pccrt::GenerationRequest &r : requests) {
      if (r.prompt.empty() || int64_t(r.prompt.size()) > kMaxSeq ||
          !r.sampling.rangeError().empty() || r.arrivalStep < 0)
        std::abort();
      for (int64_t id : r.prompt)
        if (id < 0 || id >= kVocabulary)
          std::abort();
    }
  } catch (const pccrt::Error &) {
  }
  try {
    pccrt::Sampling s = pcc::parseGenerationConfig(
        text, "generation_config.json", pccrt::Sampling());
    if (!s.rangeError().empty())
      std::abort();
    for (int64_t id : s.stop)
      if (id < 0)
        std::abort();
  } catch (const pccrt::Error &) {
  }
  return 0;
}
