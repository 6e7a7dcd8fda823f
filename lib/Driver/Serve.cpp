//===- Serve.cpp - The `pcc serve` command --------------------------------===//
//
// The OpenAI completions API over a generation build, as `vllm serve` and
// `trtllm-serve` offer it. Every rank loads the build once (a
// pccrt::Session); rank 0 answers HTTP (cpp-httplib) on a pool of threads
// and leads the ranks from its main thread, the engine loop: it hands the
// requests that came in to the continuous-batching Generator, takes one
// step, and gives each request's handler its new tokens, which the handler
// turns into text (through the tokenizer), checks against its stop strings
// and answers with, whole or streamed as Server-Sent Events.
//
// SIGINT and SIGTERM set a flag (in whichever thread takes them, with
// SA_RESTART, so that no wait is cut short) that the engine loop reads
// between steps: it then refuses new requests, lets the running ones
// finish for a few seconds, answers the rest with an error and ends the
// session on every rank. The other ranks ignore both: rank 0 ends them.
//
//===----------------------------------------------------------------------===//

#include "pcc/Driver/Driver.h"
#include "pcc/Driver/GenerationRequests.h"
#include "pcc/Tokenizer/ChatTemplate.h"
#include "pcc/Tokenizer/Tokenizer.h"

#include "pccrt/Comm.h"
#include "pccrt/Session.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <sys/socket.h>

using namespace pcc;
namespace json = llvm::json;

namespace {

using Clock = std::chrono::steady_clock;

/// Set by SIGINT or SIGTERM on rank 0.
std::atomic<bool> stopRequested{false};
extern "C" void requestStop(int) { stopRequested = true; }

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// A request the API refuses: its HTTP status and OpenAI error object.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;
};

const char *errorType(int status) {
  switch (status) {
  case 400:
    return "invalid_request_error";
  case 401:
    return "authentication_error";
  case 404:
    return "not_found_error";
  case 503:
    return "service_unavailable_error";
  default:
    return "server_error";
  }
}

std::string errorBody(const ApiError &e) {
  json::Object error{{"message", e.message},
                     {"type", errorType(e.status)},
                     {"code", e.status}};
  error["param"] = e.param.empty() ? json::Value(nullptr) : json::Value(e.param);
  std::string body;
  llvm::raw_string_ostream(body) << json::Value(json::Object{
      {"error", std::move(error)}});
  return body;
}

/// A Prometheus histogram of seconds.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  double sum = 0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> b)
      : bounds(std::move(b)), counts(bounds.size(), 0) {}
  void observe(double x) {
    for (size_t i = 0; i < bounds.size(); ++i)
      counts[i] += x <= bounds[i];
    sum += x;
    ++count;
  }
  void print(llvm::raw_ostream &os, llvm::StringRef name,
             llvm::StringRef help) const {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name
       << " histogram\n";
    for (size_t i = 0; i < bounds.size(); ++i)
      os << name << "_bucket{le=\"" << llvm::formatv("{0}", bounds[i])
         << "\"} " << counts[i] << "\n";
    os << name << "_bucket{le=\"+Inf\"} " << count << "\n"
       << name << "_sum " << llvm::formatv("{0:F6}", sum) << "\n"
       << name << "_count " << count << "\n";
  }
};

/// One prompt of a request, shared by its HTTP handler and the engine.
/// The engine writes under Engine::mutex; the handler reads under it.
struct Job {
  pccrt::GenerationRequest request;
  Clock::time_point arrived = Clock::now();
  /// Set by the engine.
  int64_t id = -1;
  std::vector<pccrt::GenerationEvent> events; ///< not yet taken
  bool done = false;
  std::string error; ///< why it ended without finishing, if it did
  Clock::time_point lastToken;
  bool hadToken = false;
};

/// What /metrics reports, written by the engine loop under its mutex.
struct Metrics {
  std::map<std::string, uint64_t> finished; ///< by finish reason
  std::map<int, uint64_t> refused;          ///< by HTTP status
  uint64_t promptTokens = 0, generationTokens = 0, cachedTokens = 0;
  pccrt::Generator::Load load;
  Histogram ttft{{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                  0.75, 1, 2.5, 5, 7.5, 10}};
  Histogram itl{{0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04,
                 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}};
  Histogram e2e{{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60}};
};

/// The engine: the queue between the HTTP handlers and the session, and
/// the loop that leads the ranks.
class Engine {
public:
  Engine(pccrt::Session &session, const ServeOptions &options)
      : session(session), generator(*session.generator()), options(options) {}

  /// Queues a request's prompts; a 503 once --max-queue requests wait or
  /// while the server shuts down.
  std::optional<ApiError> submit(const std::vector<std::shared_ptr<Job>> &jobs) {
    std::lock_guard<std::mutex> lock(mutex);
    if (stopping)
      return ApiError{503, "the server is shutting down", ""};
    int64_t waiting = int64_t(pending.size()) + metrics.load.waiting;
    if (waiting + int64_t(jobs.size()) > options.maxQueue)
      return ApiError{503,
                      std::to_string(waiting) +
                          " requests wait already (--max-queue " +
                          std::to_string(options.maxQueue) + "); retry later",
                      ""};
    for (const std::shared_ptr<Job> &job : jobs) {
      pending.push_back(job);
      metrics.promptTokens += job->request.prompt.size();
    }
    wake.notify_one();
    return std::nullopt;
  }

  /// Ends a job that the handler no longer needs (a stop string was
  /// generated, or its client went away).
  void cancel(const std::shared_ptr<Job> &job) {
    std::lock_guard<std::mutex> lock(mutex);
    if (job->done)
      return;
    cancels.push_back(job);
    wake.notify_one();
  }

  /// Waits (up to \p seconds) until \p jobs have new events or are done.
  template <typename Ready>
  void waitFor(Ready ready, double seconds) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait_for(lock, std::chrono::duration<double>(seconds),
                     [&] { return ready(); });
  }
  std::mutex &lock() { return mutex; }

  void refused(int status) {
    std::lock_guard<std::mutex> lock(mutex);
    ++metrics.refused[status];
  }
  bool serving() {
    std::lock_guard<std::mutex> lock(mutex);
    return !stopping;
  }
  std::string metricsText();

  /// Leads the ranks until SIGINT or SIGTERM, then shuts down.
  void run();

private:
  /// Hands the queued requests and cancellations to the generator.
  void admit();
  /// Gives each job its events.
  void deliver(const std::vector<pccrt::GenerationEvent> &events);
  /// Ends every job that has not finished with \p error.
  void failAll(const std::string &error);

  pccrt::Session &session;
  pccrt::Generator &generator;
  const ServeOptions &options;
  std::mutex mutex;
  std::condition_variable wake, changed;
  std::deque<std::shared_ptr<Job>> pending;
  std::vector<std::shared_ptr<Job>> cancels;
  std::map<int64_t, std::shared_ptr<Job>> active;
  bool stopping = false;
  Metrics metrics;
};

void Engine::admit() {
  std::lock_guard<std::mutex> lock(mutex);
  for (std::shared_ptr<Job> &job : pending) {
    job->id = generator.submit(job->request);
    active[job->id] = std::move(job);
  }
  pending.clear();
  for (const std::shared_ptr<Job> &job : cancels)
    if (!job->done && job->id >= 0)
      generator.cancel(job->id);
  cancels.clear();
}

void Engine::deliver(const std::vector<pccrt::GenerationEvent> &events) {
  std::lock_guard<std::mutex> lock(mutex);
  auto now = Clock::now();
  for (const pccrt::GenerationEvent &event : events) {
    auto it = active.find(event.request);
    if (it == active.end())
      continue;
    Job &job = *it->second;
    if (event.token >= 0) {
      ++metrics.generationTokens;
      metrics.cachedTokens += uint64_t(event.cachedTokens);
      if (!job.hadToken)
        metrics.ttft.observe(std::chrono::duration<double>(now - job.arrived)
                                 .count());
      else
        metrics.itl.observe(
            std::chrono::duration<double>(now - job.lastToken).count());
      job.hadToken = true;
      job.lastToken = now;
    }
    job.events.push_back(event);
    if (!event.finishReason.empty()) {
      job.done = true;
      ++metrics.finished[event.finishReason];
      metrics.e2e.observe(
          std::chrono::duration<double>(now - job.arrived).count());
      active.erase(it);
    }
  }
  metrics.load = generator.load();
  changed.notify_all();
}

void Engine::failAll(const std::string &error) {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto &[id, job] : active) {
    job->done = true;
    job->error = error;
    ++metrics.finished["error"];
  }
  active.clear();
  for (std::shared_ptr<Job> &job : pending) {
    job->done = true;
    job->error = error;
    ++metrics.finished["error"];
  }
  pending.clear();
  changed.notify_all();
}

void Engine::run() {
  // Past this, what still runs is answered with an error: the launcher
  // ends the ranks 10 s after the signal.
  constexpr double kDrainSeconds = 6;
  std::optional<Clock::time_point> stopAt;
  auto lastCommand = Clock::now();
  for (;;) {
    if (!stopAt && stopRequested) {
      stopAt = Clock::now();
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
      llvm::outs() << "pcc: shutting down: " << active.size() + pending.size()
                   << " request(s) to finish\n";
      llvm::outs().flush();
    }
    bool busy;
    {
      std::unique_lock<std::mutex> lock(mutex);
      if (!generator.busy() && pending.empty() && cancels.empty() && !stopAt)
        wake.wait_for(lock, std::chrono::milliseconds(100));
      busy = generator.busy() || !pending.empty();
    }
    if (stopAt && (!busy || secondsSince(*stopAt) > kDrainSeconds)) {
      if (busy)
        failAll("the server shut down before the request finished");
      return;
    }
    if (!busy && cancels.empty()) {
      // The other ranks wait in the next command: keep their waits short
      // of the watchdog's timeout.
      if (secondsSince(lastCommand) > 5) {
        session.ping();
        lastCommand = Clock::now();
      }
      continue;
    }
    admit();
    std::vector<pccrt::GenerationEvent> events;
    try {
      events = session.step();
    } catch (const pccrt::Error &e) {
      failAll(std::string("the model failed: ") + e.what());
      throw;
    }
    lastCommand = Clock::now();
    deliver(events);
  }
}

std::string Engine::metricsText() {
  std::lock_guard<std::mutex> lock(mutex);
  std::string text;
  llvm::raw_string_ostream os(text);
  auto metric = [&](llvm::StringRef name, llvm::StringRef type,
                    llvm::StringRef help) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " "
       << type << "\n";
  };
  metric("pcc_requests_total", "counter",
         "Prompts that finished, by finish reason (error: the server ended "
         "them).");
  for (const char *reason : {"stop", "length", "abort", "error"})
    os << "pcc_requests_total{finish_reason=\"" << reason << "\"} "
       << metrics.finished[reason] << "\n";
  metric("pcc_request_errors_total", "counter",
         "Requests refused, by HTTP status.");
  for (int status : {400, 401, 404, 503})
    os << "pcc_request_errors_total{status=\"" << status << "\"} "
       << metrics.refused[status] << "\n";
  metric("pcc_prompt_tokens_total", "counter", "Prompt tokens taken.");
  os << "pcc_prompt_tokens_total " << metrics.promptTokens << "\n";
  metric("pcc_prefix_cache_hits_total", "counter",
         "Prompt tokens whose keys and values the prefix cache held.");
  os << "pcc_prefix_cache_hits_total " << metrics.cachedTokens << "\n";
  metric("pcc_generation_tokens_total", "counter", "Tokens generated.");
  os << "pcc_generation_tokens_total " << metrics.generationTokens << "\n";
  metric("pcc_requests_running", "gauge",
         "Prompts in the running batch (prefilling or decoding).");
  os << "pcc_requests_running " << metrics.load.running << "\n";
  metric("pcc_requests_waiting", "gauge",
         "Prompts waiting for a place in the batch.");
  os << "pcc_requests_waiting "
     << metrics.load.waiting + int64_t(pending.size()) << "\n";
  const pccrt::GenerationShape &shape = generator.shape();
  metric("pcc_kv_cache_usage_ratio", "gauge",
         "The KV cache's blocks in use, as a fraction of its blocks.");
  os << llvm::formatv("pcc_kv_cache_usage_ratio {0:F6}\n",
                      double(metrics.load.usedBlocks) /
                          double(std::max<int64_t>(shape.numBlocks, 1)));
  metrics.ttft.print(os, "pcc_time_to_first_token_seconds",
                     "From a prompt's arrival to its first token.");
  metrics.itl.print(os, "pcc_inter_token_latency_seconds",
                    "Between a prompt's consecutive tokens.");
  metrics.e2e.print(os, "pcc_e2e_request_latency_seconds",
                    "From a prompt's arrival to its last token.");
  return text;
}

/// A completions request, checked.
struct Completion {
  /// /v1/chat/completions: messages through the chat template.
  bool chat = false;
  std::vector<std::vector<int64_t>> prompts;
  pccrt::Sampling sampling;
  std::vector<std::string> stopStrings;
  bool stream = false, includeUsage = false, returnTokenIds = false;
};

/// The server's view of the build and the tokenizer, and the completions
/// handler.
class Api {
public:
  Api(Engine &engine, const ServeOptions &options, std::string model,
      const pccrt::GenerationShape &shape, int64_t maxSeq,
      const Tokenizer *tokenizer, const ChatTemplate *chatTemplate)
      : engine(engine), options(options), model(std::move(model)), shape(shape),
        maxSeq(maxSeq), tokenizer(tokenizer), chatTemplate(chatTemplate) {}

  void install(httplib::Server &server);

private:
  Completion parse(const httplib::Request &request, bool chat) const;
  /// A chat request's messages, rendered by the chat template and
  /// encoded.
  std::vector<int64_t> chatPrompt(const json::Object &object) const;
  std::vector<int64_t> promptOf(const json::Value &value,
                                const std::string &param) const;
  void completions(const httplib::Request &request, httplib::Response &response,
                   bool chat);
  void fail(httplib::Response &response, const ApiError &e) {
    engine.refused(e.status);
    response.status = e.status;
    response.set_content(errorBody(e), "application/json");
  }

  Engine &engine;
  const ServeOptions &options;
  std::string model;
  pccrt::GenerationShape shape;
  int64_t maxSeq;
  const Tokenizer *tokenizer;
  const ChatTemplate *chatTemplate;
  std::atomic<int64_t> nextId{0};
  /// The seeds of requests that give none.
  mutable std::mt19937_64 seeds{std::random_device{}()};
  mutable std::mutex seedMutex;
};

[[noreturn]] void refuse(const std::string &message,
                         const std::string &param = "") {
  throw ApiError{400, message, param};
}

std::vector<int64_t> Api::promptOf(const json::Value &value,
                                   const std::string &param) const {
  std::vector<int64_t> ids;
  if (std::optional<llvm::StringRef> text = value.getAsString()) {
    if (!tokenizer)
      refuse("a text prompt needs a tokenizer (pcc serve --tokenizer "
             "tokenizer.json); give token ids instead",
             param);
    ids = tokenizer->encode(*text);
  } else if (const json::Array *array = value.getAsArray()) {
    for (const json::Value &v : *array) {
      std::optional<int64_t> id = v.getAsInteger();
      if (!id)
        refuse("a prompt is a string or a list of token ids", param);
      if (*id < 0 || *id >= shape.vocabulary)
        refuse("token id " + std::to_string(*id) +
                   " is outside the vocabulary of " +
                   std::to_string(shape.vocabulary),
               param);
      ids.push_back(*id);
    }
  } else {
    refuse("a prompt is a string or a list of token ids", param);
  }
  if (ids.empty())
    refuse("the prompt is empty", param);
  return ids;
}

std::vector<int64_t> Api::chatPrompt(const json::Object &object) const {
  if (!tokenizer)
    refuse("chat completions need a tokenizer (pcc serve --tokenizer)",
           "messages");
  if (!chatTemplate)
    refuse("this server has no chat template (pcc serve --chat-template, "
           "or a tokenizer_config.json with one beside --tokenizer)",
           "messages");
  const json::Array *messages = object.getArray("messages");
  if (!messages || messages->empty())
    refuse("'messages' must be a list of messages, not empty", "messages");
  // OpenAI's content may be a list of parts; the template takes text.
  json::Array normalized;
  for (const json::Value &m : *messages) {
    const json::Object *message = m.getAsObject();
    if (!message || !message->getString("role"))
      refuse("each message is an object with a 'role'", "messages");
    json::Object copy = *message;
    if (const json::Array *parts = message->getArray("content")) {
      std::string text;
      for (const json::Value &part : *parts) {
        const json::Object *p = part.getAsObject();
        if (!p || p->getString("type") != llvm::StringRef("text") ||
            !p->getString("text"))
          refuse("only text parts of a message's content are supported",
                 "messages");
        text += p->getString("text")->str();
      }
      copy["content"] = text;
    } else if (const json::Value *content = message->get("content");
               content && !content->getAsString() &&
               content->kind() != json::Value::Null) {
      refuse("a message's content is a string or a list of text parts",
             "messages");
    }
    normalized.push_back(std::move(copy));
  }
  json::Object variables{{"messages", std::move(normalized)},
                         {"add_generation_prompt", true}};
  if (const json::Value *tools = object.get("tools"))
    variables["tools"] = *tools;
  llvm::Expected<std::string> text = chatTemplate->render(variables);
  if (!text)
    refuse("the chat template: " + llvm::toString(text.takeError()),
           "messages");
  return promptOf(json::Value(std::move(*text)), "messages");
}

Completion Api::parse(const httplib::Request &request, bool chat) const {
  llvm::Expected<json::Value> body = json::parse(request.body);
  if (!body)
    refuse("the body is not JSON: " + llvm::toString(body.takeError()));
  const json::Object *object = body->getAsObject();
  if (!object)
    refuse("the body must be a JSON object");
  Completion c;
  pccrt::Sampling &s = c.sampling;
  if (options.defaults) {
    s = *options.defaults;
  } else {
    s.maxNewTokens = 16; // OpenAI's default
    s.temperature = 1;
  }
  bool seeded = false;
  auto number = [&](llvm::StringRef key, double &out) {
    if (const json::Value *v = object->get(key)) {
      if (v->kind() == json::Value::Null)
        return;
      std::optional<double> n = v->getAsNumber();
      if (!n)
        refuse("'" + key.str() + "' must be a number", key.str());
      out = *n;
    }
  };
  auto integer = [&](llvm::StringRef key, int64_t &out) {
    if (const json::Value *v = object->get(key)) {
      if (v->kind() == json::Value::Null)
        return false;
      std::optional<int64_t> n = v->getAsInteger();
      if (!n)
        refuse("'" + key.str() + "' must be an integer", key.str());
      out = *n;
      return true;
    }
    return false;
  };
  auto boolean = [&](llvm::StringRef key, bool &out) {
    if (const json::Value *v = object->get(key)) {
      if (v->kind() == json::Value::Null)
        return;
      std::optional<bool> b = v->getAsBoolean();
      if (!b)
        refuse("'" + key.str() + "' must be true or false", key.str());
      out = *b;
    }
  };

  if (std::optional<llvm::StringRef> name = object->getString("model"))
    if (*name != model)
      throw ApiError{404, "the model '" + name->str() +
                              "' does not exist; this server serves '" +
                              model + "'",
                     "model"};
  c.chat = chat;
  if (chat) {
    c.prompts.push_back(chatPrompt(*object));
  } else {
    const json::Value *prompt = object->get("prompt");
    if (!prompt)
      refuse("'prompt' is required", "prompt");
    // A string, a list of ids, or a list of either.
    const json::Array *list = prompt->getAsArray();
    bool many = list && !list->empty() &&
                ((*list)[0].getAsString() || (*list)[0].getAsArray());
    if (many) {
      for (const json::Value &p : *list)
        c.prompts.push_back(promptOf(p, "prompt"));
    } else {
      c.prompts.push_back(promptOf(*prompt, "prompt"));
    }
  }

  bool limited = integer("max_tokens", s.maxNewTokens);
  if (chat) {
    limited |= integer("max_completion_tokens", s.maxNewTokens);
    // Chat answers run to the end of the context unless limited (OpenAI's
    // and vLLM's default), or to a generation config's max_new_tokens.
    if (!limited && !options.defaults) {
      int64_t size = int64_t(c.prompts[0].size());
      if (size >= maxSeq)
        refuse("this model's maximum context length is " +
                   std::to_string(maxSeq) + " tokens; the conversation takes " +
                   std::to_string(size),
               "messages");
      s.maxNewTokens = maxSeq - size;
    }
  }
  if (s.maxNewTokens < 1)
    refuse("'max_tokens' must be at least 1, not " +
               std::to_string(s.maxNewTokens),
           "max_tokens");
  for (const std::vector<int64_t> &p : c.prompts)
    if (int64_t(p.size()) + s.maxNewTokens > maxSeq)
      refuse("this model's maximum context length is " +
                 std::to_string(maxSeq) + " tokens; the request asks for " +
                 std::to_string(int64_t(p.size()) + s.maxNewTokens) + " (" +
                 std::to_string(p.size()) + " in the prompt, " +
                 std::to_string(s.maxNewTokens) + " to generate)",
             "max_tokens");
  number("temperature", s.temperature);
  number("top_p", s.topP);
  int64_t topK = 0;
  if (integer("top_k", topK))
    s.topK = topK == -1 ? 0 : topK; // vLLM's -1: every token
  // OpenAI's penalties, and vLLM's repetition penalty.
  integer("min_tokens", s.minNewTokens); // vLLM's
  number("presence_penalty", s.presencePenalty);
  number("frequency_penalty", s.frequencyPenalty);
  number("repetition_penalty", s.repetitionPenalty);
  if (std::string range = s.rangeError(); !range.empty())
    refuse(range);
  int64_t seed = 0;
  if (integer("seed", seed)) {
    s.seed = uint64_t(seed);
    seeded = true;
  }
  if (!seeded) {
    std::lock_guard<std::mutex> lock(seedMutex);
    s.seed = seeds();
  }
  int64_t n = 1;
  integer("n", n);
  if (n != 1)
    refuse("'n' must be 1: pcc returns one choice per prompt", "n");
  bool echo = false;
  boolean("echo", echo);
  if (echo)
    refuse("'echo' is not supported", "echo");
  if (chat) {
    // Chat's logprobs: a flag, and top_logprobs alternatives.
    bool wanted = false;
    boolean("logprobs", wanted);
    int64_t top = 0;
    integer("top_logprobs", top);
    if (top < 0 || top > pccrt::kMaxLogprobs)
      refuse("'top_logprobs' must be an integer from 0 to " +
                 std::to_string(pccrt::kMaxLogprobs),
             "top_logprobs");
    if (wanted)
      s.logprobs = top;
  } else if (const json::Value *v = object->get("logprobs");
             v && v->kind() != json::Value::Null) {
    std::optional<int64_t> k = v->getAsInteger();
    if (!k || *k < 0 || *k > pccrt::kMaxLogprobs)
      refuse("'logprobs' must be an integer from 0 to " +
                 std::to_string(pccrt::kMaxLogprobs),
             "logprobs");
    s.logprobs = *k;
  }
  // Stop: strings (need the tokenizer) or token ids; vLLM's
  // stop_token_ids too.
  auto stops = [&](llvm::StringRef key) {
    const json::Value *v = object->get(key);
    if (!v || v->kind() == json::Value::Null)
      return;
    std::vector<const json::Value *> items;
    if (const json::Array *a = v->getAsArray())
      for (const json::Value &x : *a)
        items.push_back(&x);
    else
      items.push_back(v);
    for (const json::Value *x : items) {
      if (std::optional<llvm::StringRef> text = x->getAsString()) {
        if (!tokenizer)
          refuse("stop strings need a tokenizer (pcc serve --tokenizer); "
                 "give token ids instead",
                 key.str());
        if (text->empty())
          refuse("a stop string is empty", key.str());
        c.stopStrings.push_back(text->str());
      } else if (std::optional<int64_t> id = x->getAsInteger()) {
        s.stop.push_back(*id);
      } else {
        refuse("'" + key.str() + "' holds strings or token ids", key.str());
      }
    }
  };
  stops("stop");
  stops("stop_token_ids");
  boolean("stream", c.stream);
  boolean("return_token_ids", c.returnTokenIds);
  if (const json::Object *o = object->getObject("stream_options"))
    if (std::optional<bool> u = o->getBoolean("include_usage"))
      c.includeUsage = *u;
  return c;
}

/// A choice while its prompt runs: its tokens and text, and what was sent.
struct Choice {
  std::shared_ptr<Job> job;
  /// Events taken from the job, not yet looked at.
  std::deque<pccrt::GenerationEvent> queued;
  std::vector<int64_t> tokens;
  std::vector<std::vector<pccrt::TokenLogprob>> logprobs;
  std::string text;
  int64_t cachedTokens = 0;
  size_t textSent = 0, tokensSent = 0;
  bool finished = false, reported = false;
  std::string finishReason, error;
};

/// The text of \p c that can be sent while it runs: neither a trailing
/// replacement character (bytes of a character still to come) nor the
/// beginning of a stop string.
size_t settledLength(const Choice &c, const std::vector<std::string> &stops) {
  llvm::StringRef text = c.text;
  if (c.finished)
    return text.size();
  while (text.ends_with("\xEF\xBF\xBD"))
    text = text.drop_back(3);
  size_t keep = text.size();
  for (const std::string &stop : stops)
    for (size_t n = std::min(stop.size() - 1, text.size()); n > 0; --n)
      if (text.ends_with(llvm::StringRef(stop).take_front(n))) {
        keep = std::min(keep, text.size() - n);
        break;
      }
  return keep;
}

void Api::completions(const httplib::Request &request,
                      httplib::Response &response, bool chat) {
  Completion c;
  try {
    c = parse(request, chat);
  } catch (const ApiError &e) {
    return fail(response, e);
  }
  auto choices = std::make_shared<std::vector<Choice>>();
  std::vector<std::shared_ptr<Job>> jobs;
  for (std::vector<int64_t> &prompt : c.prompts) {
    auto job = std::make_shared<Job>();
    job->request.prompt = prompt;
    job->request.sampling = c.sampling;
    jobs.push_back(job);
    choices->push_back(
        Choice{job, {}, {}, {}, "", 0, 0, 0, false, false, "", ""});
  }
  if (std::optional<ApiError> e = engine.submit(jobs))
    return fail(response, *e);
  std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(nextId++);
  int64_t created = int64_t(std::time(nullptr));
  auto shared = std::make_shared<Completion>(std::move(c));

  // Takes the choices' new events, up to \p limit tokens each (a stream
  // sends a chunk per token); true when every choice has finished.
  auto advance = [this, choices, shared](size_t limit) {
    bool all = true;
    for (Choice &ch : *choices) {
      {
        std::lock_guard<std::mutex> lock(engine.lock());
        ch.queued.insert(ch.queued.end(), ch.job->events.begin(),
                         ch.job->events.end());
        ch.job->events.clear();
        if (ch.job->done && !ch.job->error.empty() && !ch.finished) {
          ch.finished = true;
          ch.error = ch.job->error;
        }
      }
      for (size_t taken = 0; !ch.queued.empty() && taken < limit;) {
        pccrt::GenerationEvent event = std::move(ch.queued.front());
        ch.queued.pop_front();
        if (ch.finished)
          continue;
        taken += event.token >= 0;
        if (event.token >= 0) {
          if (ch.tokens.empty())
            ch.cachedTokens = event.cachedTokens;
          ch.tokens.push_back(event.token);
          if (!event.logprobs.empty())
            ch.logprobs.push_back(event.logprobs);
        }
        if (!event.finishReason.empty()) {
          ch.finished = true;
          ch.finishReason = event.finishReason;
        }
      }
      if (tokenizer && !ch.tokens.empty()) {
        llvm::Expected<std::string> text = tokenizer->decode(ch.tokens);
        if (text)
          ch.text = std::move(*text);
        else
          llvm::consumeError(text.takeError());
        // The earliest stop string ends the choice, and is not sent.
        size_t at = std::string::npos;
        for (const std::string &stop : shared->stopStrings)
          at = std::min(at, ch.text.find(stop));
        if (at != std::string::npos) {
          ch.text.resize(at);
          if (!ch.finished) {
            ch.finished = true;
            engine.cancel(ch.job);
          }
          ch.finishReason = "stop";
        }
      }
      all &= ch.finished;
    }
    return all;
  };
  auto pending = [choices]() {
    for (const Choice &ch : *choices)
      if (!ch.finished && (!ch.queued.empty() || !ch.job->events.empty() ||
                           ch.job->done))
        return true;
    return false;
  };

  auto tokenText = [this](int64_t token) {
    if (!tokenizer)
      return "token_id:" + std::to_string(token);
    llvm::Expected<std::string> text = tokenizer->decode({token});
    if (!text) {
      llvm::consumeError(text.takeError());
      return "token_id:" + std::to_string(token);
    }
    return *text;
  };
  // The choice's part from what was sent on: its text, ids, log-probs.
  auto choiceJson = [this, shared, tokenText](Choice &ch, size_t index,
                                              size_t textEnd, size_t tokensEnd,
                                              bool final) {
    std::string piece = ch.text.substr(ch.textSent, textEnd - ch.textSent);
    json::Object o{{"index", int64_t(index)}};
    if (!shared->chat) {
      o["text"] = piece;
    } else if (!shared->stream) {
      o["message"] = json::Object{{"role", "assistant"}, {"content", piece}};
    } else {
      // The first chunk names the role.
      json::Object delta{{"content", piece}};
      if (ch.tokensSent == 0 && ch.textSent == 0)
        delta["role"] = "assistant";
      o["delta"] = std::move(delta);
    }
    if (shared->chat && shared->sampling.logprobs >= 0) {
      // Chat's form: per token its text, log-probability and bytes, and
      // its alternatives.
      auto entry = [&](const pccrt::TokenLogprob &lp) {
        std::string t = tokenText(lp.token);
        json::Array bytes;
        for (unsigned char b : t)
          bytes.push_back(int64_t(b));
        return json::Object{
            {"token", t}, {"logprob", lp.logprob}, {"bytes", std::move(bytes)}};
      };
      json::Array content;
      for (size_t i = ch.tokensSent; i < tokensEnd && i < ch.logprobs.size();
           ++i) {
        const std::vector<pccrt::TokenLogprob> &lp = ch.logprobs[i];
        json::Object e = entry(lp[0]);
        json::Array top;
        for (size_t k = 1; k < lp.size(); ++k)
          top.push_back(entry(lp[k]));
        e["top_logprobs"] = std::move(top);
        content.push_back(std::move(e));
      }
      o["logprobs"] = json::Object{{"content", std::move(content)}};
    } else if (shared->sampling.logprobs >= 0) {
      json::Array tokens, tokenLogprobs, top, offsets;
      size_t offset = ch.textSent;
      for (size_t i = ch.tokensSent; i < tokensEnd && i < ch.logprobs.size();
           ++i) {
        const std::vector<pccrt::TokenLogprob> &lp = ch.logprobs[i];
        std::string t = tokenText(lp[0].token);
        tokens.push_back(t);
        tokenLogprobs.push_back(lp[0].logprob);
        json::Object alternatives;
        for (size_t k = 1; k < lp.size(); ++k)
          alternatives[tokenText(lp[k].token)] = lp[k].logprob;
        top.push_back(std::move(alternatives));
        offsets.push_back(int64_t(offset));
        offset += t.size();
      }
      o["logprobs"] = json::Object{{"tokens", std::move(tokens)},
                                   {"token_logprobs", std::move(tokenLogprobs)},
                                   {"top_logprobs", std::move(top)},
                                   {"text_offset", std::move(offsets)}};
    } else {
      o["logprobs"] = nullptr;
    }
    if (shared->returnTokenIds || !tokenizer) {
      json::Array ids;
      for (size_t i = ch.tokensSent; i < tokensEnd; ++i)
        ids.push_back(ch.tokens[i]);
      o["token_ids"] = std::move(ids);
      if (ch.tokensSent == 0) {
        json::Array prompt;
        for (int64_t t : ch.job->request.prompt)
          prompt.push_back(t);
        o["prompt_token_ids"] = std::move(prompt);
      }
    }
    o["finish_reason"] = final ? json::Value(ch.finishReason)
                               : json::Value(nullptr);
    ch.textSent = textEnd;
    ch.tokensSent = tokensEnd;
    return o;
  };
  auto usage = [choices]() {
    int64_t prompt = 0, completion = 0, cached = 0;
    for (const Choice &ch : *choices) {
      prompt += int64_t(ch.job->request.prompt.size());
      completion += int64_t(ch.tokens.size());
      cached += ch.cachedTokens;
    }
    return json::Object{
        {"prompt_tokens", prompt},
        {"completion_tokens", completion},
        {"total_tokens", prompt + completion},
        {"prompt_tokens_details", json::Object{{"cached_tokens", cached}}}};
  };
  auto header = [this, id, created](const char *object) {
    return json::Object{{"id", id},
                        {"object", object},
                        {"created", created},
                        {"model", model}};
  };

  if (!shared->stream) {
    while (!advance(SIZE_MAX))
      engine.waitFor(pending, 1.0);
    for (const Choice &ch : *choices)
      if (!ch.error.empty())
        return fail(response, ApiError{503, ch.error, ""});
    json::Object body =
        header(shared->chat ? "chat.completion" : "text_completion");
    json::Array out;
    json::Array prompts;
    for (size_t i = 0; i < choices->size(); ++i) {
      Choice &ch = (*choices)[i];
      out.push_back(choiceJson(ch, i, ch.text.size(), ch.tokens.size(), true));
      json::Array prompt;
      for (int64_t t : ch.job->request.prompt)
        prompt.push_back(t);
      prompts.push_back(std::move(prompt));
    }
    body["choices"] = std::move(out);
    body["usage"] = usage();
    if (shared->returnTokenIds)
      body["prompt_token_ids"] = std::move(prompts);
    std::string text;
    llvm::raw_string_ostream(text) << json::Value(std::move(body));
    response.set_content(text, "application/json");
    return;
  }

  // Server-Sent Events: a chunk per choice whenever it has something new,
  // then the usage if asked, then [DONE].
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider(
      "text/event-stream",
      [this, choices, shared, advance, pending, choiceJson, usage,
       header](size_t, httplib::DataSink &sink) mutable {
        auto send = [&](const json::Value &v) {
          std::string line;
          llvm::raw_string_ostream(line) << "data: " << v << "\n\n";
          return sink.write(line.data(), line.size());
        };
        if (!sink.is_writable())
          return false;
        bool all = advance(1);
        for (size_t i = 0; i < choices->size(); ++i) {
          Choice &ch = (*choices)[i];
          if (ch.reported)
            continue;
          if (!ch.error.empty()) {
            ApiError e{503, ch.error, ""};
            std::string line = "data: " + errorBody(e) + "\n\n";
            sink.write(line.data(), line.size());
            ch.reported = true;
            continue;
          }
          size_t textEnd = settledLength(ch, shared->stopStrings);
          size_t tokensEnd = ch.tokens.size();
          if (textEnd == ch.textSent && tokensEnd == ch.tokensSent &&
              !ch.finished)
            continue;
          if (textEnd < ch.textSent)
            textEnd = ch.textSent;
          json::Object chunk = header(shared->chat ? "chat.completion.chunk"
                                                   : "text_completion");
          chunk["choices"] = json::Array{
              choiceJson(ch, i, textEnd, tokensEnd, ch.finished)};
          if (!send(json::Value(std::move(chunk))))
            return false;
          ch.reported = ch.finished;
        }
        if (all) {
          if (shared->includeUsage) {
            json::Object chunk = header(shared->chat ? "chat.completion.chunk"
                                                     : "text_completion");
            chunk["choices"] = json::Array{};
            chunk["usage"] = usage();
            send(json::Value(std::move(chunk)));
          }
          const char done[] = "data: [DONE]\n\n";
          sink.write(done, sizeof done - 1);
          sink.done();
          return true;
        }
        engine.waitFor(pending, 0.5);
        return true;
      },
      [this, choices](bool success) {
        // A client that went away: its prompts stop taking steps.
        if (!success)
          for (Choice &ch : *choices)
            engine.cancel(ch.job);
      });
}

void Api::install(httplib::Server &server) {
  server.set_pre_routing_handler(
      [this](const httplib::Request &request, httplib::Response &response) {
        if (options.apiKey.empty() ||
            !llvm::StringRef(request.path).starts_with("/v1/"))
          return httplib::Server::HandlerResponse::Unhandled;
        if (request.get_header_value("Authorization") ==
            "Bearer " + options.apiKey)
          return httplib::Server::HandlerResponse::Unhandled;
        fail(response, ApiError{401,
                                request.has_header("Authorization")
                                    ? "the API key is wrong"
                                    : "this server needs an API key "
                                      "(Authorization: Bearer KEY)",
                                ""});
        return httplib::Server::HandlerResponse::Handled;
      });
  server.Post("/v1/chat/completions", [this](const httplib::Request &request,
                                             httplib::Response &response) {
    completions(request, response, /*chat=*/true);
  });
  server.Post("/v1/completions", [this](const httplib::Request &request,
                                        httplib::Response &response) {
    completions(request, response, /*chat=*/false);
  });
  server.Get("/v1/models", [this](const httplib::Request &,
                                  httplib::Response &response) {
    json::Object entry{{"id", model},
                       {"object", "model"},
                       {"created", int64_t(std::time(nullptr))},
                       {"owned_by", "pcc"},
                       {"max_model_len", maxSeq}};
    std::string text;
    llvm::raw_string_ostream(text) << json::Value(json::Object{
        {"object", "list"}, {"data", json::Array{std::move(entry)}}});
    response.set_content(text, "application/json");
  });
  server.Get("/health", [this](const httplib::Request &,
                               httplib::Response &response) {
    response.status = engine.serving() ? 200 : 503;
  });
  server.Get("/metrics", [this](const httplib::Request &,
                                httplib::Response &response) {
    response.set_content(engine.metricsText(),
                         "text/plain; version=0.0.4; charset=utf-8");
  });
  server.set_error_handler([this](const httplib::Request &request,
                                  httplib::Response &response) {
    if (response.status != 404 || !response.body.empty())
      return;
    fail(response, ApiError{404,
                            "no route " + request.method + " " + request.path,
                            ""});
  });
}

} // namespace

llvm::LogicalResult pcc::runServer(const RunOptions &options,
                                   const std::string &lib,
                                   const std::string &weights,
                                   pccrt::Communicator *comm,
                                   pccrt::Communicator *runComm,
                                   llvm::raw_ostream &summary) {
  const GenerateOptions &g = *options.generation;
  const ServeOptions &serve = *g.serve;
  int rank = comm ? comm->rank() : 0;
  // Rank 0's engine loop reads the signals' flag; the others ignore them.
  struct sigaction action {};
  action.sa_handler = rank == 0 ? requestStop : SIG_IGN;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  std::unique_ptr<pccrt::Session> session;
  std::optional<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chatTemplate;
  httplib::Server server;
  int port = int(serve.port);
  int listening = -1;
  // Every rank reads the same report, and fails alike.
  int64_t maxSeq = readGenerationMaxSeq(options.dir);
  session =
      std::make_unique<pccrt::Session>(lib, weights, comm, maxSeq, runComm);
  std::string error;
  try {
    if (!session->generator())
      throw pccrt::Error(options.dir + ": not a generation build (compile "
                                       "it with pcc compile --generate)");
    loadTrainedParameters(options, session->model());
    if (rank == 0 && !g.tokenizer.empty())
      tokenizer.emplace(loadTokenizer(
          g.tokenizer, session->generator()->shape().vocabulary));
    if (rank == 0)
      chatTemplate = loadChatTemplate(g.chatTemplate, g.tokenizer);
    if (rank == 0) {
      // cpp-httplib listens with a backlog of 5, which a burst of clients
      // overflows (their connections reset): the socket's options are
      // where its descriptor can be had, to listen again with a longer one.
      server.set_socket_options([&listening](int socket) {
        int yes = 1;
        setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        listening = socket;
      });
      // Bound before the ranks go on: a port in use fails them all.
      bool bound = port == 0 ? (port = server.bind_to_any_port(serve.host)) > 0
                             : server.bind_to_port(serve.host, port);
      if (!bound)
        throw pccrt::Error("cannot listen on " + serve.host + ":" +
                           std::to_string(serve.port) + ": " +
                           std::strerror(errno));
      if (listening >= 0)
        ::listen(listening, SOMAXCONN);
    }
  } catch (const pccrt::Error &e) {
    error = e.what();
  }
  if (!agreeToGoOn(comm, error))
    return llvm::failure();
  if (rank != 0) {
    session->follow();
    return llvm::success();
  }

  std::string model = serve.modelName;
  if (model.empty())
    model = llvm::sys::path::filename(
                llvm::StringRef(options.dir).rtrim('/'))
                .str();
  const pccrt::GenerationShape &shape = session->generator()->shape();
  Engine engine(*session, serve);
  Api api(engine, serve, model, shape, maxSeq,
          tokenizer ? &*tokenizer : nullptr,
          chatTemplate ? &*chatTemplate : nullptr);
  api.install(server);
  // Threads enough for every request the queue and the batch hold, so
  // that a request waits in the engine's queue, where it is counted, and
  // not for a thread.
  size_t threads = size_t(std::clamp<int64_t>(
      serve.maxQueue + shape.maxBatch + 8, 8, 1024));
  server.new_task_queue = [threads] {
    return new httplib::ThreadPool(threads);
  };
  std::thread http([&] { server.listen_after_bind(); });
  int64_t ranks = comm ? comm->numRanks() : 1;
  summary << llvm::formatv(
      "pcc: serving '{0}' on http://{1}:{2} ({3} rank(s), up to {4} "
      "sequences of {5} tokens{6}{7})\n",
      model, serve.host, port, ranks, shape.maxBatch, maxSeq,
      tokenizer ? ", text through " + g.tokenizer : std::string(),
      chatTemplate ? ", chat through " + chatTemplate->name().str()
                   : std::string());
  summary.flush();
  llvm::outs().flush();
  llvm::LogicalResult result = llvm::success();
  try {
    engine.run();
  } catch (const pccrt::Error &e) {
    server.stop();
    http.join();
    throw;
  }
  server.stop();
  http.join();
  session->close();
  summary << "pcc: the server stopped\n";
  return result;
}

llvm::LogicalResult pcc::runFollower(const RunOptions &options,
                                     const std::string &lib,
                                     const std::string &weights,
                                     pccrt::Communicator *comm,
                                     pccrt::Communicator *runComm,
                                     llvm::raw_ostream &) {
  if (!comm || comm->rank() == 0)
    throw pccrt::Error("pcc follow runs the ranks other than 0 of a session "
                       "whose rank 0 leads from elsewhere (import pcc)");
  // Rank 0 stops the session; Ctrl-C in the terminal, which reaches the
  // whole process group, must not end this rank in a collective.
  signal(SIGINT, SIG_IGN);
  int64_t maxSeq = 0;
  if (llvm::sys::fs::exists(options.dir + "/report.json"))
    try {
      maxSeq = readGenerationMaxSeq(options.dir);
    } catch (const pccrt::Error &) {
      // Not a generation build.
    }
  pccrt::Session session(lib, weights, comm, maxSeq, runComm);
  session.follow();
  return llvm::success();
}
