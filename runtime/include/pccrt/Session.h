//===- Session.h - A build kept loaded on every rank of its mesh -*- C++ -*-===//
//
// A Session loads a build once (its weights, and a generation build's KV
// cache, resident on their ranks) and runs any of its entries, and a
// generation build's requests, until it is closed: what `pcc serve` and
// `import pcc` keep behind them.
//
// On a mesh of several ranks rank 0 leads: its calls are the session's,
// and every other rank follows them (follow()), so that the ranks make the
// same collective calls in the same order. Each call is one command that
// rank 0 hands to all ranks, with what the others need of it (a run's
// inputs); the commands of a generation step carry its new requests.
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_SESSION_H
#define PCCRT_SESSION_H

#include "pccrt/Generate.h"
#include "pccrt/Runtime.h"

#include <memory>
#include <string>
#include <vector>

namespace pccrt {

class Communicator;

class Session {
public:
  /// Loads the build (its library and weights; see Model::load) on this
  /// rank of \p comm (null: a build of one rank). A generation build gets
  /// a Generator whose longest sequence is \p maxSequence (> 0). The
  /// generated code runs on \p runComm when given (Model::setRunCommunicator).
  /// Collective on a mesh: every rank loads, then the ranks agree, and
  /// all throw an Error (naming the rank that failed) if one failed.
  Session(const std::string &library, const std::string &weights,
          Communicator *comm = nullptr, int64_t maxSequence = 0,
          Communicator *runComm = nullptr);
  /// Closes the session if rank 0 has not.
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  Model &model() { return *modelPtr; }
  /// Whether this rank leads (rank 0, or the only rank).
  bool leads() const { return rank == 0; }
  /// The generation build's Generator, or null. Only rank 0 submits to it
  /// and cancels; its steps are taken with step().
  Generator *generator() { return generatorPtr.get(); }

  // What rank 0 calls; every other rank takes part through follow().

  /// Runs entry \p entry (Model::run) on \p inputs, whole, and returns its
  /// outputs whole. Throws an Error, before any rank runs, for inputs that
  /// do not match the entry's.
  std::vector<Tensor> run(int32_t entry, const std::vector<Tensor> &inputs);
  /// One step of the generator (Generator::step()).
  std::vector<GenerationEvent> step();
  /// Keeps the other ranks' waits short while rank 0 has nothing to do:
  /// a command that does nothing.
  void ping();
  /// Ends the session on every rank; the model stays loaded here.
  void close();

  /// On a rank other than 0: carries out rank 0's commands until it
  /// closes the session.
  void follow();

private:
  enum class Command : int64_t { None = 0, Run, Step, Ping, Close };
  /// Rank 0 hands every rank the command, its entry and \p words (which
  /// the others receive); returns what rank 0 sent.
  void exchange(Command &command, int64_t &entry, std::vector<int64_t> &words);
  std::vector<Tensor> runEntry(int32_t entry,
                               const std::vector<Tensor> &inputs);

  Communicator *comm = nullptr;
  int rank = 0;
  bool closed = false;
  std::unique_ptr<Model> modelPtr;
  std::unique_ptr<Generator> generatorPtr;
  std::vector<Tensor> outputs;
};

} // namespace pccrt

#endif // PCCRT_SESSION_H
