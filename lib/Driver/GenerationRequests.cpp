//===- GenerationRequests.cpp - pcc generate's requests -------------------===//
//
// One JSON object a line, bytes from the user: every field is checked
// before anything runs, and each problem is one line naming the file, the
// line and, for a token, its position.
//
//===----------------------------------------------------------------------===//

#include "pcc/Driver/GenerationRequests.h"
#include "pcc/Tokenizer/ChatTemplate.h"
#include "pcc/Tokenizer/Tokenizer.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <sstream>

using namespace pcc;

namespace {

/// A one-line error naming the requests file, its line and what is wrong.
[[noreturn]] void failAt(const std::string &file, size_t line,
                         const std::string &message) {
  throw pccrt::Error(file + ":" + std::to_string(line) + ": " + message);
}

/// The integer at `value`, or an error at the line.
int64_t integerAt(const llvm::json::Value &value, const std::string &file,
                  size_t line, const std::string &what) {
  std::optional<int64_t> n = value.getAsInteger();
  if (!n)
    failAt(file, line, what + " must be an integer");
  return *n;
}

double numberAt(const llvm::json::Value &value, const std::string &file,
                size_t line, const std::string &what) {
  std::optional<double> n = value.getAsNumber();
  if (!n)
    failAt(file, line, what + " must be a number");
  return *n;
}

} // namespace

std::vector<pccrt::GenerationRequest> pcc::parseGenerationRequests(
    llvm::StringRef text, const std::string &file,
    const pccrt::Sampling &defaults, int64_t vocabulary, int64_t maxSeq,
    const Tokenizer *tokenizer, const ChatTemplate *chat) {
  std::vector<pccrt::GenerationRequest> requests;
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  for (auto [index, lineText] : llvm::enumerate(lines)) {
    size_t line = index + 1;
    if (lineText.trim().empty())
      continue;
    llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(lineText);
    if (!parsed)
      failAt(file, line,
             "not JSON: " + llvm::toString(parsed.takeError()));
    const llvm::json::Object *object = parsed->getAsObject();
    if (!object)
      failAt(file, line, "a request must be a JSON object");
    pccrt::GenerationRequest request;
    request.sampling = defaults;
    // Appends a prompt token, the model's vocabulary checked; `where` begins
    // the message that names it ("prompt position 3: ").
    auto appendToken = [&](int64_t token, const std::string &where) {
      if (token < 0 || token >= vocabulary)
        failAt(file, line,
               where + "token id " + std::to_string(token) +
                   " is outside the vocabulary of " +
                   std::to_string(vocabulary));
      request.prompt.push_back(token);
    };
    for (const auto &[key, value] : *object) {
      std::string k = key.str();
      if (k == "prompt") {
        std::optional<llvm::StringRef> text = value.getAsString();
        if (text && !tokenizer)
          failAt(file, line,
                 "a text prompt needs a tokenizer (--tokenizer "
                 "tokenizer.json)");
        const llvm::json::Array *ids = value.getAsArray();
        if (!ids && !text)
          failAt(file, line,
                 "\"prompt\" must be text or an array of token ids");
        llvm::json::Array fromText;
        if (text) {
          for (int64_t id : tokenizer->encode(*text))
            fromText.push_back(id);
          ids = &fromText;
        }
        for (auto [position, id] : llvm::enumerate(*ids)) {
          std::optional<int64_t> token = id.getAsInteger();
          if (!token)
            failAt(file, line,
                   "prompt position " + std::to_string(position) +
                       ": a token id must be an integer");
          appendToken(*token,
                      "prompt position " + std::to_string(position) + ": ");
        }
      } else if (k == "messages") {
        if (!tokenizer || !chat)
          failAt(file, line,
                 "\"messages\" need a tokenizer and a chat template "
                 "(--tokenizer, and --chat-template or a "
                 "tokenizer_config.json with one beside the tokenizer)");
        const llvm::json::Array *messages = value.getAsArray();
        if (!messages || messages->empty())
          failAt(file, line, "\"messages\" must be a list of messages");
        llvm::json::Object variables;
        variables["messages"] = llvm::json::Array(*messages);
        variables["add_generation_prompt"] = true;
        llvm::Expected<std::string> text = chat->render(variables);
        if (!text)
          failAt(file, line,
                 "the chat template: " + llvm::toString(text.takeError()));
        for (int64_t id : tokenizer->encode(*text))
          appendToken(id, "the chat's ");
      } else if (k == "max_new_tokens") {
        request.sampling.maxNewTokens = integerAt(value, file, line, k);
      } else if (k == "min_new_tokens") {
        request.sampling.minNewTokens = integerAt(value, file, line, k);
      } else if (k == "temperature") {
        request.sampling.temperature = numberAt(value, file, line, k);
      } else if (k == "top_k") {
        request.sampling.topK = integerAt(value, file, line, k);
      } else if (k == "top_p") {
        request.sampling.topP = numberAt(value, file, line, k);
      } else if (k == "repetition_penalty") {
        request.sampling.repetitionPenalty = numberAt(value, file, line, k);
      } else if (k == "presence_penalty") {
        request.sampling.presencePenalty = numberAt(value, file, line, k);
      } else if (k == "frequency_penalty") {
        request.sampling.frequencyPenalty = numberAt(value, file, line, k);
      } else if (k == "seed") {
        request.sampling.seed = uint64_t(integerAt(value, file, line, k));
      } else if (k == "stop") {
        const llvm::json::Array *ids = value.getAsArray();
        if (!ids)
          failAt(file, line, "\"stop\" must be an array of token ids");
        request.sampling.stop.clear();
        for (const llvm::json::Value &id : *ids)
          request.sampling.stop.push_back(integerAt(id, file, line, k));
      } else if (k == "arrival_step") {
        request.arrivalStep = integerAt(value, file, line, k);
      } else {
        failAt(file, line, "unknown key \"" + k + "\"");
      }
    }
    if (!object->get("prompt") == !object->get("messages"))
      failAt(file, line, "a request has a \"prompt\" or \"messages\"");
    if (request.prompt.empty())
      failAt(file, line, "the prompt is empty");
    if (int64_t(request.prompt.size()) > maxSeq)
      failAt(file, line,
             "the prompt has " + std::to_string(request.prompt.size()) +
                 " tokens, more than the build's --max-seq " +
                 std::to_string(maxSeq));
    std::string range = request.sampling.rangeError();
    if (!range.empty())
      failAt(file, line, range);
    if (request.arrivalStep < 0)
      failAt(file, line,
             "arrival_step must be at least 0, not " +
                 std::to_string(request.arrivalStep));
    requests.push_back(std::move(request));
  }
  if (requests.empty())
    throw pccrt::Error(file + ": no requests");
  return requests;
}

pccrt::Sampling pcc::readGenerationConfig(const std::string &path,
                                          pccrt::Sampling sampling) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    throw pccrt::Error(path +
                       ": cannot read it: " + buffer.getError().message());
  return parseGenerationConfig((*buffer)->getBuffer(), path,
                               std::move(sampling));
}

pccrt::Sampling pcc::parseGenerationConfig(llvm::StringRef text,
                                           const std::string &path,
                                           pccrt::Sampling sampling) {
  auto fail = [&](const std::string &message) -> pccrt::Error {
    return pccrt::Error(path + ": " + message);
  };
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    throw fail("not JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *config = parsed->getAsObject();
  if (!config)
    throw fail("a generation config must be a JSON object");
  // A key that is absent or null keeps its default.
  auto get = [&](llvm::StringRef key) -> const llvm::json::Value * {
    const llvm::json::Value *v = config->get(key);
    return v && v->kind() != llvm::json::Value::Null ? v : nullptr;
  };
  auto number = [&](llvm::StringRef key, double fallback) {
    const llvm::json::Value *v = get(key);
    if (!v)
      return fallback;
    std::optional<double> n = v->getAsNumber();
    if (!n)
      throw fail(key.str() + " must be a number");
    return *n;
  };
  auto integer = [&](llvm::StringRef key, int64_t fallback) {
    const llvm::json::Value *v = get(key);
    if (!v)
      return fallback;
    std::optional<int64_t> n = v->getAsInteger();
    if (!n)
      throw fail(key.str() + " must be an integer");
    return *n;
  };

  // What changes transformers' choice of tokens and pcc cannot do: refused
  // rather than ignored, unless the value is the one that changes nothing.
  for (auto [key, neutral] :
       {std::pair<llvm::StringRef, double>{"num_beams", 1},
        {"num_beam_groups", 1},
        {"no_repeat_ngram_size", 0},
        {"encoder_no_repeat_ngram_size", 0},
        {"min_length", 0},
        {"typical_p", 1},
        {"epsilon_cutoff", 0},
        {"eta_cutoff", 0},
        {"diversity_penalty", 0},
        {"encoder_repetition_penalty", 1},
        {"penalty_alpha", 0},
        {"min_p", 0},
        {"guidance_scale", 1}})
    if (double value = number(key, neutral); value != neutral) {
      std::ostringstream text;
      text << value;
      throw fail(key.str() + " " + text.str() + " is not supported");
    }
  for (llvm::StringRef key :
       {"bad_words_ids", "suppress_tokens", "begin_suppress_tokens",
        "forced_bos_token_id", "forced_eos_token_id", "sequence_bias",
        "exponential_decay_length_penalty", "forced_decoder_ids"})
    if (const llvm::json::Value *v = get(key)) {
      const llvm::json::Array *list = v->getAsArray();
      if (!list || !list->empty())
        throw fail(key.str() + " is not supported");
    }

  bool sample = false;
  if (const llvm::json::Value *v = get("do_sample")) {
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      throw fail("do_sample must be true or false");
    sample = *b;
  }
  // transformers' defaults: greedy unless do_sample; then temperature 1,
  // top-k 50 and top-p 1 unless set.
  sampling.temperature = sample ? number("temperature", 1) : 0;
  sampling.topK = sample ? integer("top_k", 50) : 0;
  sampling.topP = sample ? number("top_p", 1) : 1;
  sampling.repetitionPenalty =
      number("repetition_penalty", sampling.repetitionPenalty);
  sampling.maxNewTokens = integer("max_new_tokens", sampling.maxNewTokens);
  sampling.minNewTokens = integer("min_new_tokens", sampling.minNewTokens);
  // The end-of-sequence ids (one, or a list) end a request.
  if (const llvm::json::Value *v = get("eos_token_id")) {
    std::vector<const llvm::json::Value *> ids;
    if (const llvm::json::Array *list = v->getAsArray())
      for (const llvm::json::Value &id : *list)
        ids.push_back(&id);
    else
      ids.push_back(v);
    for (const llvm::json::Value *id : ids) {
      std::optional<int64_t> n = id->getAsInteger();
      if (!n || *n < 0)
        throw fail("eos_token_id must be a token id or a list of them");
      if (!llvm::is_contained(sampling.stop, *n))
        sampling.stop.push_back(*n);
    }
  }
  if (std::string range = sampling.rangeError(); !range.empty())
    throw fail(range);
  return sampling;
}

std::optional<ChatTemplate>
pcc::loadChatTemplate(const std::string &path,
                      const std::string &tokenizerPath) {
  std::string source = path;
  if (source.empty()) {
    if (tokenizerPath.empty())
      return std::nullopt;
    llvm::SmallString<256> config(llvm::sys::path::parent_path(tokenizerPath));
    llvm::sys::path::append(config, "tokenizer_config.json");
    // A config without a template: no chat, not an error.
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        llvm::MemoryBuffer::getFile(config, /*IsText=*/true);
    if (!buffer)
      return std::nullopt;
    llvm::Expected<llvm::json::Value> parsed =
        llvm::json::parse((*buffer)->getBuffer());
    if (!parsed) {
      llvm::consumeError(parsed.takeError());
      return std::nullopt;
    }
    const llvm::json::Object *o = parsed->getAsObject();
    if (!o || !o->get("chat_template"))
      return std::nullopt;
    source = config.str().str();
  }
  llvm::Expected<ChatTemplate> chat = ChatTemplate::fromFile(source);
  if (!chat)
    throw pccrt::Error(llvm::toString(chat.takeError()));
  return std::move(*chat);
}

Tokenizer pcc::loadTokenizer(const std::string &path, int64_t vocabulary) {
  llvm::Expected<Tokenizer> tokenizer = Tokenizer::fromFile(path);
  if (!tokenizer)
    throw pccrt::Error(llvm::toString(tokenizer.takeError()));
  if (tokenizer->vocabularySize() > vocabulary)
    throw pccrt::Error(path + ": " +
                       std::to_string(tokenizer->vocabularySize()) +
                       " tokens, more than the model's vocabulary of " +
                       std::to_string(vocabulary));
  return std::move(*tokenizer);
}
