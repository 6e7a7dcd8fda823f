//===- GenerationRequests.h - pcc generate's requests -----------*- C++ -*-===//

#ifndef PCC_DRIVER_GENERATIONREQUESTS_H
#define PCC_DRIVER_GENERATIONREQUESTS_H

#include "pcc/Tokenizer/ChatTemplate.h"
#include "pccrt/Comm.h"
#include "pccrt/Generate.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace pcc {

class ChatTemplate;
class Tokenizer;

/// The requests of `text`, the contents of the requests file `file`: one
/// JSON object a line ({"prompt": [ids]}, or {"prompt": "text"} encoded
/// with `tokenizer`, or {"messages": [...]} rendered by `chat` and
/// encoded, and any of max_new_tokens, min_new_tokens,
/// temperature, top_k, top_p, repetition_penalty, presence_penalty,
/// frequency_penalty, seed, stop and arrival_step, over `defaults`), blank
/// lines skipped. Throws a pccrt::Error naming the file, the line and, for a
/// token, its position for anything malformed: not JSON, an unknown key, a
/// prompt that is empty, longer than `maxSeq` or with an id outside
/// `vocabulary`, an option out of its range, no request.
std::vector<pccrt::GenerationRequest>
parseGenerationRequests(llvm::StringRef text, const std::string &file,
                        const pccrt::Sampling &defaults, int64_t vocabulary,
                        int64_t maxSeq, const Tokenizer *tokenizer = nullptr,
                        const ChatTemplate *chat = nullptr);

/// The chat template of `path` (a Jinja file, or a tokenizer_config.json),
/// else that of the tokenizer_config.json beside `tokenizerPath` if it has
/// one; none without either. Throws a pccrt::Error naming the file.
std::optional<ChatTemplate> loadChatTemplate(const std::string &path,
                                             const std::string &tokenizerPath);

/// `sampling` with the defaults of the Hugging Face generation_config.json
/// at `path` as transformers' generate() takes them: greedy unless
/// do_sample (then temperature, top_k and top_p, transformers' defaults 1,
/// 50 and 1 where unset), repetition_penalty, max_new_tokens,
/// min_new_tokens, and eos_token_id (one or a list) added to the stop
/// tokens. Keys that would change the tokens in a way pcc cannot (beam
/// search, n-gram bans, suppressed or forced tokens, ...) are refused
/// unless they hold the value that changes nothing; the others (ids of
/// special tokens, transformers' version, ...) are ignored. Throws a
/// pccrt::Error naming the file.
pccrt::Sampling readGenerationConfig(const std::string &path,
                                     pccrt::Sampling sampling);

/// As readGenerationConfig, of `text`, the contents of the file `path`.
pccrt::Sampling parseGenerationConfig(llvm::StringRef text,
                                      const std::string &path,
                                      pccrt::Sampling sampling);

/// The tokenizer.json at `path` for a model of `vocabulary` tokens; throws
/// a pccrt::Error naming the file if it cannot be read or has more tokens.
Tokenizer loadTokenizer(const std::string &path, int64_t vocabulary);

/// (Generate.cpp) Every rank of `comm` (none: this rank alone) says
/// whether it is ready,
/// `error` empty if so. If one is not, rank 0 throws the first error as a
/// pccrt::Error and the others return false, so that all stop together.
bool agreeToGoOn(pccrt::Communicator *comm, const std::string &error);

} // namespace pcc

#endif // PCC_DRIVER_GENERATIONREQUESTS_H
