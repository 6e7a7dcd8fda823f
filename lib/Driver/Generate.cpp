//===- Generate.cpp - The `pcc generate` command --------------------------===//
//
// Reads requests (one JSON object a line: a prompt of token ids and any
// sampling options of its own), checks every one against the build before
// anything runs, generates with the runtime's continuous batching
// (pccrt::Generator), and writes one line per request in input order. Each
// rank of a multi-rank build does the same on the same requests; rank 0
// writes the results.
//
//===----------------------------------------------------------------------===//

#include "pcc/Driver/Driver.h"
#include "pcc/Driver/GenerationRequests.h"
#include "pcc/Tokenizer/Tokenizer.h"

#include "pccrt/Comm.h"
#include "pccrt/Generate.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace pcc;

int64_t pcc::readGenerationMaxSeq(const std::string &dir) {
  std::string path = dir + "/report.json";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    throw pccrt::Error(path + ": " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> report =
      llvm::json::parse((*buffer)->getBuffer());
  if (!report)
    throw pccrt::Error(path + ": " + llvm::toString(report.takeError()));
  const llvm::json::Object *object = report->getAsObject();
  const llvm::json::Object *generation =
      object ? object->getObject("generation") : nullptr;
  std::optional<int64_t> maxSeq =
      generation ? generation->getInteger("max_seq") : std::nullopt;
  if (!maxSeq)
    throw pccrt::Error(dir + ": not a generation build (compile it with "
                             "pcc compile --generate)");
  return *maxSeq;
}

bool pcc::agreeToGoOn(pccrt::Communicator *comm, const std::string &error) {
  if (!comm) {
    if (!error.empty())
      throw pccrt::Error(error);
    return true;
  }
  for (const std::string &e : comm->agree(error))
    if (!e.empty()) {
      if (comm->rank() == 0)
        throw pccrt::Error(e);
      return false;
    }
  return true;
}

void pcc::loadTrainedParameters(const RunOptions &options, pccrt::Model &model) {
  if (options.loadCheckpoint.empty())
    return;
  size_t loaded = pccrt::loadCheckpointParameters(options.loadCheckpoint,
                                                  model, options.stripPrefix);
  // Standard output may be the results: the note goes to stderr.
  if (!model.communicator() || model.communicator()->rank() == 0)
    llvm::errs() << "pcc: loaded " << loaded << " trained parameter(s) from "
                 << options.loadCheckpoint << "\n";
}

llvm::LogicalResult pcc::runGeneration(const RunOptions &options,
                                       const std::string &lib,
                                       const std::string &weights,
                                       pccrt::Communicator *comm,
                                       pccrt::Communicator *runComm,
                                       llvm::raw_ostream &summary) {
  const GenerateOptions &g = *options.generation;
  int rank = comm ? comm->rank() : 0;
  // Everything that can be wrong is checked on every rank before the
  // model runs; the ranks agree, so that none waits for one that failed.
  std::unique_ptr<pccrt::Model> model;
  std::unique_ptr<pccrt::Generator> generator;
  std::vector<pccrt::GenerationRequest> requests;
  std::optional<Tokenizer> tokenizer;
  std::string error;
  try {
    int64_t maxSeq = readGenerationMaxSeq(options.dir);
    model = pccrt::Model::load(lib, weights, "pcc", comm);
    if (runComm)
      model->setRunCommunicator(runComm);
    loadTrainedParameters(options, *model);
    generator = std::make_unique<pccrt::Generator>(*model, maxSeq);
    if (!g.tokenizer.empty())
      tokenizer.emplace(
          loadTokenizer(g.tokenizer, generator->shape().vocabulary));
    auto buffer = llvm::MemoryBuffer::getFile(g.prompts, /*IsText=*/true);
    if (!buffer)
      throw pccrt::Error(g.prompts + ": " + buffer.getError().message());
    std::optional<ChatTemplate> chat =
        loadChatTemplate(g.chatTemplate, g.tokenizer);
    requests = parseGenerationRequests(
        (*buffer)->getBuffer(), g.prompts, g.sampling,
        generator->shape().vocabulary, maxSeq,
        tokenizer ? &*tokenizer : nullptr, chat ? &*chat : nullptr);
    if (rank == 0 && !g.output.empty())
      pccrt::checkWritableFile(g.output);
  } catch (const pccrt::Error &e) {
    error = e.what();
  }
  if (!agreeToGoOn(comm, error))
    return llvm::failure();

  // Loading, not generation: the operands packed from the weights.
  model->prepare();
  auto start = std::chrono::steady_clock::now();
  std::vector<pccrt::GenerationResult> results =
      generator->generate(requests);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (rank != 0)
    return llvm::success();
  int64_t preemptions = 0;
  for (const pccrt::GenerationResult &r : results)
    preemptions += r.preemptions;
  if (preemptions)
    llvm::errs() << "pcc: note: the KV cache ran out of blocks: " << preemptions
                 << " preemption(s), their requests computed again\n";
  int64_t promptTokens = 0, cachedTokens = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    promptTokens += int64_t(requests[i].prompt.size());
    cachedTokens += results[i].cachedTokens;
  }
  if (cachedTokens)
    summary << "pcc: prefix cache: " << cachedTokens << " of " << promptTokens
            << " prompt tokens' keys and values reused\n";

  std::string text;
  llvm::raw_string_ostream os(text);
  int64_t generated = 0;
  double firstToken = 0, perToken = 0;
  int64_t timed = 0;
  for (const pccrt::GenerationResult &r : results) {
    llvm::json::Array tokens;
    for (int64_t t : r.tokens)
      tokens.push_back(t);
    llvm::json::Object line{{"tokens", std::move(tokens)},
                            {"finish_reason", r.finishReason}};
    if (tokenizer) {
      llvm::Expected<std::string> text = tokenizer->decode(r.tokens);
      if (!text)
        throw pccrt::Error(llvm::toString(text.takeError()));
      line["text"] = std::move(*text);
    }
    os << llvm::json::Value(std::move(line)) << "\n";
    generated += int64_t(r.tokens.size());
    firstToken += r.firstTokenSeconds;
    if (r.tokens.size() > 1) {
      perToken += (r.lastTokenSeconds - r.firstTokenSeconds) /
                  double(r.tokens.size() - 1);
      ++timed;
    }
  }
  if (g.output.empty()) {
    summary << text;
  } else {
    // Written whole or not at all.
    std::string partial = g.output + ".partial";
    {
      std::error_code ec;
      llvm::raw_fd_ostream out(partial, ec);
      if (ec)
        throw pccrt::Error(g.output + ": " + ec.message());
      out << text;
    }
    if (std::error_code ec = llvm::sys::fs::rename(partial, g.output))
      throw pccrt::Error(g.output + ": " + ec.message());
  }
  summary << llvm::formatv(
      "pcc: generated {0} tokens for {1} prompts in {2:F2} s (TTFT {3:F1} "
      "ms, {4:F2} ms/token, {5:F1} tokens/s)\n",
      generated, results.size(), seconds,
      1000 * firstToken / double(results.size()),
      timed ? 1000 * perToken / double(timed) : 0.0,
      seconds > 0 ? double(generated) / seconds : 0.0);
  return llvm::success();
}
