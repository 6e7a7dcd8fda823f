//===- ChatTemplate.h - Hugging Face chat templates in C++ ------*- C++ -*-===//
//
// A model's chat template (tokenizer_config.json's "chat_template") turns a
// conversation into the text the model was trained on. Templates are
// Jinja2; this is the part of Jinja2 that chat templates use, rendered as
// transformers' apply_chat_template renders them (trim_blocks and
// lstrip_blocks on, loop controls, raise_exception, strftime_now, a tojson
// that keeps non-ASCII text). Anything outside it (macros, includes, call
// blocks, unknown filters, tests or methods) is an error naming the
// template's line, never approximated.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TOKENIZER_CHATTEMPLATE_H
#define PCC_TOKENIZER_CHATTEMPLATE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <string>

namespace pcc {
namespace chat {
struct Node;
} // namespace chat

class ChatTemplate {
public:
  /// Parses the template `source`; errors name `name` and the line.
  static llvm::Expected<ChatTemplate> parse(llvm::StringRef source,
                                            llvm::StringRef name);
  /// The template of a tokenizer_config.json (its "chat_template": a
  /// string, or a list of {"name", "template"} whose "default" is taken),
  /// with its bos_token and eos_token (strings or {"content": ...}).
  static llvm::Expected<ChatTemplate> fromTokenizerConfig(llvm::StringRef path);

  /// The template of the file `path`: a tokenizer_config.json (*.json) as
  /// fromTokenizerConfig reads it, else a Jinja file.
  static llvm::Expected<ChatTemplate> fromFile(llvm::StringRef path);

  ChatTemplate(ChatTemplate &&) noexcept;
  ChatTemplate &operator=(ChatTemplate &&) noexcept;
  ~ChatTemplate();

  /// The text of `variables` (an object: "messages", a list of {"role",
  /// "content", ...}; "add_generation_prompt"; and any others) rendered;
  /// bos_token and eos_token are the tokenizer config's unless given.
  /// Numbers and objects of the JSON are Python's ints, floats and dicts
  /// (a dict's keys in sorted order).
  llvm::Expected<std::string> render(const llvm::json::Object &variables) const;

  llvm::StringRef name() const { return templateName; }

private:
  ChatTemplate() = default;
  std::string templateName, bosToken, eosToken;
  std::shared_ptr<const chat::Node> root;
};

} // namespace pcc

#endif // PCC_TOKENIZER_CHATTEMPLATE_H
