//===- tokenizer-check.cpp - pcc's tokenizer on lines of stdin ------------===//
//
// The C++ side of check_tokenizer.py:
//   tokenizer-check TOKENIZER.json encode   raw byte lines -> [ids] a line
//   tokenizer-check TOKENIZER.json encode-hex   the same for lines of hex
//       digits, two a byte, for texts that hold \n
//   tokenizer-check TOKENIZER.json decode   [ids] lines -> "text" a line
//   tokenizer-check TOKENIZER.json stream   [ids] lines -> "text" a line,
//       decoded by a Detokenizer fed one id at a time; a result that differs
//       from decode() is an error
//   tokenizer-check TEMPLATE chat   lines of JSON objects (a chat
//       template's variables: messages, add_generation_prompt, ...) ->
//       "text" a line, or {"error": "message"} where rendering fails;
//       TEMPLATE is a Jinja file, or a tokenizer_config.json (*.json) whose
//       chat_template, bos_token and eos_token it takes
// Lines are separated by \n only. Any error is one line on stderr, exit 1.
//
//===----------------------------------------------------------------------===//

#include "pcc/Tokenizer/ChatTemplate.h"
#include "pcc/Tokenizer/Tokenizer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace {

[[noreturn]] void die(const llvm::Twine &message) {
  llvm::outs().flush();
  llvm::errs() << "tokenizer-check: " << message << "\n";
  std::exit(1);
}

std::vector<int64_t> parseIds(llvm::StringRef line, size_t lineNo) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(line);
  if (!value)
    die("line " + llvm::Twine(lineNo) + ": " +
        llvm::toString(value.takeError()));
  const llvm::json::Array *array = value->getAsArray();
  if (!array)
    die("line " + llvm::Twine(lineNo) + ": not a JSON array of ids");
  std::vector<int64_t> ids;
  for (const llvm::json::Value &v : *array) {
    std::optional<int64_t> id = v.getAsInteger();
    if (!id)
      die("line " + llvm::Twine(lineNo) + ": not a JSON array of ids");
    ids.push_back(*id);
  }
  return ids;
}

int renderChats(llvm::StringRef path) {
  llvm::Expected<pcc::ChatTemplate> chat = pcc::ChatTemplate::fromFile(path);
  if (!chat)
    die(llvm::toString(chat.takeError()));
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> input =
      llvm::MemoryBuffer::getSTDIN();
  if (!input)
    die("cannot read stdin: " + input.getError().message());
  llvm::StringRef rest = (*input)->getBuffer();
  for (size_t lineNo = 1; !rest.empty(); ++lineNo) {
    auto [line, next] = rest.split('\n');
    rest = next;
    llvm::Expected<llvm::json::Value> variables = llvm::json::parse(line);
    if (!variables || !variables->getAsObject())
      die("line " + llvm::Twine(lineNo) + ": not a JSON object");
    llvm::Expected<std::string> text = chat->render(*variables->getAsObject());
    if (text)
      llvm::outs() << llvm::json::Value(std::move(*text)) << "\n";
    else
      llvm::outs() << llvm::json::Value(llvm::json::Object{
                          {"error", llvm::toString(text.takeError())}})
                   << "\n";
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3)
    die("usage: tokenizer-check TOKENIZER.json encode|decode|stream < lines\n"
        "       tokenizer-check TEMPLATE chat < variables");
  llvm::StringRef mode = argv[2];
  if (mode == "chat")
    return renderChats(argv[1]);
  if (mode != "encode" && mode != "encode-hex" && mode != "decode" &&
      mode != "stream")
    die("unknown mode '" + mode + "' (encode, encode-hex, decode or stream)");
  llvm::Expected<pcc::Tokenizer> tokenizer = pcc::Tokenizer::fromFile(argv[1]);
  if (!tokenizer)
    die(llvm::toString(tokenizer.takeError()));
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> input =
      llvm::MemoryBuffer::getSTDIN();
  if (!input)
    die("cannot read stdin: " + input.getError().message());

  llvm::StringRef rest = (*input)->getBuffer();
  llvm::raw_ostream &out = llvm::outs();
  for (size_t lineNo = 1; !rest.empty(); ++lineNo) {
    auto [line, next] = rest.split('\n');
    rest = next;
    if (mode.starts_with("encode")) {
      std::string bytes;
      if (mode == "encode-hex" && !llvm::tryGetFromHex(line, bytes))
        die("line " + llvm::Twine(lineNo) + ": not hex digits");
      out << "[";
      llvm::ListSeparator comma(",");
      for (int64_t id : tokenizer->encode(mode == "encode" ? line : bytes))
        out << comma << id;
      out << "]\n";
      continue;
    }
    std::vector<int64_t> ids = parseIds(line, lineNo);
    llvm::Expected<std::string> text = tokenizer->decode(ids);
    if (!text)
      die("line " + llvm::Twine(lineNo) + ": " +
          llvm::toString(text.takeError()));
    if (mode == "stream") {
      pcc::Detokenizer detokenizer(*tokenizer);
      std::string streamed;
      for (int64_t id : ids) {
        llvm::Expected<std::string> piece = detokenizer.push(id);
        if (!piece)
          die("line " + llvm::Twine(lineNo) + ": " +
              llvm::toString(piece.takeError()));
        streamed += *piece;
      }
      streamed += detokenizer.finish();
      if (streamed != *text)
        die("line " + llvm::Twine(lineNo) +
            ": the detokenizer's text differs from decode()'s: " +
            llvm::json::Value(streamed).getAsString()->str());
      text = std::move(streamed);
    }
    out << llvm::json::Value(std::move(*text)) << "\n";
  }
  return 0;
}
