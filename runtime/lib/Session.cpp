//===- Session.cpp - A build kept loaded on every rank of its mesh --------===//

#include "pccrt/Session.h"

#include "pccrt/Comm.h"

#include <cstring>

using namespace pccrt;

Session::Session(const std::string &library, const std::string &weights,
                 Communicator *comm, int64_t maxSequence,
                 Communicator *runComm)
    : comm(comm && comm->numRanks() > 1 ? comm : nullptr),
      rank(comm ? comm->rank() : 0) {
  // Every rank loads, then all agree: none goes on to wait for a rank
  // that failed.
  std::string error;
  try {
    modelPtr = Model::load(library, weights, "pcc", comm);
    if (runComm)
      modelPtr->setRunCommunicator(runComm);
    if (modelPtr->findEntry("prefill") >= 0) {
      if (maxSequence < 1)
        throw Error("a generation build needs its longest sequence (its "
                    "--max-seq) to serve");
      generatorPtr = std::make_unique<Generator>(*modelPtr, maxSequence);
    }
    // Loading, not the first call: the operands packed from the weights.
    modelPtr->prepare();
  } catch (const Error &e) {
    error = e.what();
  }
  if (this->comm) {
    std::vector<std::string> errors = this->comm->agree(error);
    for (size_t r = 0; r < errors.size(); ++r)
      if (!errors[r].empty())
        throw Error(int(r) == rank ? errors[r]
                                   : "rank " + std::to_string(r) + ": " +
                                         errors[r]);
  } else if (!error.empty()) {
    throw Error(error);
  }
}

Session::~Session() {
  if (leads() && !closed) {
    try {
      close();
    } catch (const Error &) {
      // The other ranks are gone already.
    }
  }
}

void Session::exchange(Command &command, int64_t &entry,
                       std::vector<int64_t> &words) {
  if (!comm)
    return;
  int64_t header[3] = {0, 0, 0};
  if (leads()) {
    header[0] = int64_t(command);
    header[1] = entry;
    header[2] = int64_t(words.size());
  }
  uint32_t all = comm->allAxes();
  comm->allReduce(all, header, 3, PCCRT_I64, PCCRT_REDUCE_SUM);
  command = Command(header[0]);
  entry = header[1];
  if (!header[2])
    return;
  if (!leads())
    words.assign(size_t(header[2]), 0);
  comm->allReduce(all, words.data(), header[2], PCCRT_I64, PCCRT_REDUCE_SUM);
}

std::vector<Tensor> Session::runEntry(int32_t entry,
                                      const std::vector<Tensor> &inputs) {
  modelPtr->run(entry, inputs, outputs);
  return modelPtr->gather(entry, outputs);
}

std::vector<Tensor> Session::run(int32_t entry,
                                 const std::vector<Tensor> &inputs) {
  if (!leads())
    throw Error("Session::run: rank " + std::to_string(rank) +
                " follows rank 0's calls");
  if (closed)
    throw Error("the session is closed");
  if (entry < 0 || entry >= modelPtr->numEntries())
    throw Error("the build has no entry " + std::to_string(entry));
  if (entry != 0 && generatorPtr)
    throw Error("a generation build's steps run through its generator");
  // The entry's tables, with the model's mesh (for the whole shapes).
  pccrt_model_info info = modelPtr->info();
  info.num_inputs = modelPtr->entry(entry).num_inputs;
  info.inputs = modelPtr->entry(entry).inputs;
  if (inputs.size() != size_t(info.num_inputs))
    throw Error("the model takes " + std::to_string(info.num_inputs) +
                " inputs, got " + std::to_string(inputs.size()));
  // Checked here, before any rank runs: the others would wait for one
  // that failed.
  std::vector<int64_t> words;
  for (int32_t i = 0; i < info.num_inputs; ++i) {
    const pccrt_tensor_info &expected = info.inputs[i];
    const Tensor &given = inputs[size_t(i)];
    std::vector<int64_t> shape = wholeShape(info, expected);
    if (given.dtype != expected.dtype || given.shape != shape ||
        given.data.size() != size_t(given.numElements()) *
                                 dtypeSize(given.dtype))
      throw Error("input '" + std::string(expected.name) + "' must be " +
                  formatShape(shape) + " of dtype " +
                  std::to_string(expected.dtype) + ", got " +
                  formatShape(given.shape) + " of dtype " +
                  std::to_string(given.dtype));
    size_t at = words.size();
    words.resize(at + (given.data.size() + 7) / 8, 0);
    std::memcpy(&words[at], given.data.data(), given.data.size());
  }
  Command command = Command::Run;
  int64_t e = entry;
  exchange(command, e, words);
  return runEntry(entry, inputs);
}

std::vector<GenerationEvent> Session::step() {
  if (!generatorPtr)
    throw Error("not a generation build (compile it with pcc compile "
                "--generate)");
  if (closed)
    throw Error("the session is closed");
  Command command = Command::Step;
  int64_t entry = 0;
  std::vector<int64_t> words;
  exchange(command, entry, words);
  return generatorPtr->step();
}

void Session::ping() {
  if (closed)
    return;
  Command command = Command::Ping;
  int64_t entry = 0;
  std::vector<int64_t> words;
  exchange(command, entry, words);
}

void Session::close() {
  if (closed || !leads())
    return;
  closed = true;
  Command command = Command::Close;
  int64_t entry = 0;
  std::vector<int64_t> words;
  exchange(command, entry, words);
}

void Session::follow() {
  if (leads())
    return;
  const pccrt_model_info &info = modelPtr->info();
  while (!closed) {
    Command command = Command::None;
    int64_t entry = 0;
    std::vector<int64_t> words;
    exchange(command, entry, words);
    switch (command) {
    case Command::Run: {
      // The inputs rank 0 checked, rebuilt from its words.
      std::vector<Tensor> inputs;
      size_t at = 0;
      const auto *bytes = reinterpret_cast<const uint8_t *>(words.data());
      const pccrt_entry_info &e = modelPtr->entry(int32_t(entry));
      for (int32_t i = 0; i < e.num_inputs; ++i) {
        const pccrt_tensor_info &expected = e.inputs[i];
        Tensor t;
        t.name = expected.name;
        t.dtype = expected.dtype;
        t.shape = wholeShape(info, expected);
        size_t size = size_t(t.numElements()) * dtypeSize(t.dtype);
        t.data.assign(bytes + at, bytes + at + size);
        at += (size + 7) / 8 * 8;
        inputs.push_back(std::move(t));
      }
      runEntry(int32_t(entry), inputs);
      break;
    }
    case Command::Step:
      if (generatorPtr)
        generatorPtr->step();
      break;
    case Command::Ping:
    case Command::None:
      break;
    case Command::Close:
      closed = true;
      break;
    }
  }
}
