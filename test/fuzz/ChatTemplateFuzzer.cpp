//===- ChatTemplateFuzzer.cpp - libFuzzer entry for chat templates --------===//
//
// Feeds arbitrary bytes to pcc's chat template parser as a template (a
// tokenizer_config.json's chat_template is untrusted text) and renders
// what parses on a short conversation. Both must return a text or their
// one-line error; any crash, sanitizer report, hang or unbounded growth
// (past the renderer's step and output limits) is a bug.
//
//===----------------------------------------------------------------------===//

#include "pcc/Tokenizer/ChatTemplate.h"

#include "llvm/Support/JSON.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<pcc::ChatTemplate> chat =
      pcc::ChatTemplate::parse(text, "fuzz.jinja");
  if (!chat) {
    llvm::consumeError(chat.takeError());
    return 0;
  }
  static const llvm::json::Object variables{
      {"messages",
       llvm::json::Array{
           llvm::json::Object{{"role", "system"}, {"content", "Be brief."}},
           llvm::json::Object{{"role", "user"}, {"content", "Hi \xC3\xBC"}},
           llvm::json::Object{{"role", "assistant"}, {"content", "Hello"}}}},
      {"add_generation_prompt", true},
      {"tools", llvm::json::Array{llvm::json::Object{{"name", "f"}}}}};
  llvm::Expected<std::string> out = chat->render(variables);
  if (!out)
    llvm::consumeError(out.takeError());
  return 0;
}
