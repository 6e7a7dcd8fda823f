//===- PccModule.cpp - pcc's Python module --------------------------------===//
//
// `import pcc` binds a pccrt::Session: the build loaded once, its entries
// run on NumPy arrays, a generation build's requests generated with
// continuous batching. A build of several ranks runs its rank 0 in this
// process and the others as `pcc follow` processes, which this module
// starts, connected to it over TCP (the socket communicator) and led by
// it until the session closes: the ranks stay up between calls.
//
// pcc's errors are raised as pcc.Error with pcc's message; the GIL is
// released while the model runs.
//
//===----------------------------------------------------------------------===//

#include "pcc/Tokenizer/ChatTemplate.h"
#include "pcc/Tokenizer/Tokenizer.h"

#include "pccrt/Comm.h"
#include "pccrt/Session.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <arpa/inet.h>
#include <csignal>
#include <cstring>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

extern char **environ;

namespace py = pybind11;
using namespace pccrt;

namespace {

/// A TCP port free on this host now, for rank 0 to listen on.
int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    throw Error(std::string("cannot open a socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr *>(&address), &size) == 0)
    port = ntohs(address.sin_port);
  close(fd);
  if (port < 0)
    throw Error(std::string("cannot find a free port: ") +
                std::strerror(errno));
  return port;
}

int32_t dtypeOf(const py::dtype &dtype) {
  switch (dtype.kind()) {
  case 'f':
    if (dtype.itemsize() == 4)
      return PCCRT_F32;
    if (dtype.itemsize() == 8)
      return PCCRT_F64;
    if (dtype.itemsize() == 2)
      return PCCRT_F16;
    break;
  case 'i':
    if (dtype.itemsize() == 8)
      return PCCRT_I64;
    if (dtype.itemsize() == 4)
      return PCCRT_I32;
    break;
  case 'b':
    return PCCRT_BOOL;
  default:
    break;
  }
  throw Error("arrays of dtype " +
              py::str(static_cast<const py::handle &>(dtype))
                  .cast<std::string>() +
              " are not taken (float32, float64, float16, int64, int32, "
              "bool)");
}

py::dtype numpyOf(int32_t dtype) {
  switch (dtype) {
  case PCCRT_F32:
    return py::dtype("float32");
  case PCCRT_F64:
    return py::dtype("float64");
  case PCCRT_F16:
    return py::dtype("float16");
  case PCCRT_I64:
    return py::dtype("int64");
  case PCCRT_I32:
    return py::dtype("int32");
  case PCCRT_BOOL:
    return py::dtype("bool");
  case PCCRT_BF16:
    return py::dtype("uint16"); // bfloat16's bits
  default:
    throw Error("an output of dtype " + std::to_string(dtype) +
                " has no NumPy type");
  }
}

/// A session and, on several ranks, the processes of the others.
class PySession {
public:
  PySession(const std::string &dir, const std::string &library,
            const std::string &weights, int64_t maxSequence,
            const std::string &pcc, double timeoutSeconds) {
    std::vector<int64_t> mesh = Model::meshOf(library);
    int64_t ranks = 1;
    for (int64_t size : mesh)
      ranks *= size;
    if (ranks > 1)
      startRanks(dir, mesh, ranks, pcc, timeoutSeconds);
    try {
      py::gil_scoped_release release;
      session = std::make_unique<Session>(library, weights, comm.get(),
                                          maxSequence);
    } catch (...) {
      stopRanks(/*agree=*/false);
      throw;
    }
  }
  ~PySession() {
    try {
      close();
    } catch (const Error &) {
    }
  }

  /// Ends the session on every rank and waits for their processes.
  void close() {
    if (!session)
      return;
    py::gil_scoped_release release;
    session->close();
    session.reset();
    stopRanks(/*agree=*/true);
  }

  Session &get() {
    if (!session)
      throw Error("the session is closed");
    return *session;
  }

  int64_t numRanks() const { return comm ? comm->numRanks() : 1; }

private:
  void startRanks(const std::string &dir, const std::vector<int64_t> &mesh,
                  int64_t ranks, const std::string &pcc, double timeout) {
    if (access(pcc.c_str(), X_OK) != 0)
      throw Error(pcc + ": the pcc executable that runs the other ranks is "
                        "not there (set PCC_EXECUTABLE)");
    int port = freePort();
    for (int64_t r = 1; r < ranks; ++r) {
      std::vector<std::string> env;
      for (char **e = environ; *e; ++e) {
        llvm::StringRef entry(*e);
        // The bootstrap's variables are this session's, and a launcher's
        // would make the rank look for its job.
        if (entry.starts_with("RANK=") || entry.starts_with("WORLD_SIZE=") ||
            entry.starts_with("MASTER_ADDR=") ||
            entry.starts_with("MASTER_PORT=") ||
            entry.starts_with("LOCAL_RANK=") || entry.starts_with("OMPI_") ||
            entry.starts_with("PMI_") || entry.starts_with("SLURM_"))
          continue;
        env.push_back(*e);
      }
      env.push_back("RANK=" + std::to_string(r));
      env.push_back("LOCAL_RANK=" + std::to_string(r));
      env.push_back("WORLD_SIZE=" + std::to_string(ranks));
      env.push_back("MASTER_ADDR=127.0.0.1");
      env.push_back("MASTER_PORT=" + std::to_string(port));
      env.push_back("TORCHELASTIC_USE_AGENT_STORE=False");
      std::vector<std::string> args{pcc, "follow", dir, "--timeout",
                                    std::to_string(int64_t(timeout))};
      std::vector<char *> argv, envp;
      for (std::string &a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      for (std::string &e : env)
        envp.push_back(e.data());
      envp.push_back(nullptr);
      pid_t pid = -1;
      int error = posix_spawn(&pid, pcc.c_str(), nullptr, nullptr,
                              argv.data(), envp.data());
      if (error) {
        stopRanks(/*agree=*/false);
        throw Error("cannot start " + pcc + ": " + std::strerror(error));
      }
      workers.push_back(pid);
    }
    SocketBootstrap bootstrap;
    bootstrap.rank = 0;
    bootstrap.worldSize = int(ranks);
    bootstrap.masterAddr = "127.0.0.1";
    bootstrap.masterPort = port;
    bootstrap.timeoutSeconds = timeout;
    try {
      py::gil_scoped_release release;
      comm = createSocketCommunicator(mesh, bootstrap);
    } catch (...) {
      stopRanks(/*agree=*/false);
      throw;
    }
  }

  /// Waits for the other ranks to end (after agreeing with them that all
  /// are done, as `pcc follow` does before it exits), ending them after
  /// a few seconds if they do not.
  void stopRanks(bool agree) {
    if (comm && agree) {
      try {
        comm->agree("");
      } catch (const Error &) {
      }
    }
    comm.reset();
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (pid_t pid : workers) {
      int status = 0;
      while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > until) {
          kill(pid, SIGKILL);
          waitpid(pid, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    workers.clear();
  }

  std::vector<pid_t> workers;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Session> session;
};

/// `run`: the model's step on named arrays.
py::dict run(PySession &self, const py::dict &feeds,
             const std::string &entryName) {
  Session &session = self.get();
  // The default step, or the entry point of that name (a --train --eval
  // build's "eval").
  int32_t entry = 0;
  if (!entryName.empty()) {
    entry = session.model().findEntry(entryName);
    if (entry < 0) {
      std::string names;
      for (int32_t i = 0; i < session.model().numEntries(); ++i)
        names += std::string(i ? ", " : "") + "'" +
                 session.model().entry(i).name + "'";
      throw Error("the build has no entry '" + entryName + "' (it has " +
                  names + ")");
    }
  }
  const pccrt_entry_info &info = session.model().entry(entry);
  std::vector<Tensor> inputs;
  size_t used = 0;
  for (int32_t i = 0; i < info.num_inputs; ++i) {
    const char *name = info.inputs[i].name;
    if (!feeds.contains(name))
      throw Error("no array for the model's input '" + std::string(name) +
                  "'");
    ++used;
    py::array array = py::array::ensure(feeds[name], py::array::c_style);
    if (!array)
      throw Error("input '" + std::string(name) + "' is not an array");
    Tensor t;
    t.name = name;
    t.dtype = dtypeOf(array.dtype());
    for (py::ssize_t d = 0; d < array.ndim(); ++d)
      t.shape.push_back(int64_t(array.shape(d)));
    const auto *bytes = static_cast<const uint8_t *>(array.data());
    t.data.assign(bytes, bytes + array.nbytes());
    inputs.push_back(std::move(t));
  }
  if (used != feeds.size()) {
    for (auto item : feeds) {
      std::string key = py::str(item.first);
      bool known = false;
      for (int32_t i = 0; i < info.num_inputs; ++i)
        known |= key == info.inputs[i].name;
      if (!known)
        throw Error("the model has no input '" + key + "'");
    }
  }
  std::vector<Tensor> outputs;
  {
    py::gil_scoped_release release;
    outputs = session.run(entry, inputs);
  }
  py::dict result;
  for (Tensor &t : outputs) {
    py::array array(numpyOf(t.dtype), t.shape);
    std::memcpy(array.mutable_data(), t.data.data(), t.data.size());
    result[py::str(t.name)] = array;
  }
  return result;
}

struct PyResult {
  std::vector<int64_t> tokens;
  std::string finishReason;
  py::object text = py::none();
};

/// `generate`: every prompt's tokens, in order.
std::vector<PyResult> generate(PySession &self,
                               const std::vector<std::vector<int64_t>> &prompts,
                               int64_t maxNewTokens, double temperature,
                               int64_t topK, double topP, uint64_t seed,
                               const std::vector<int64_t> &stop,
                               double repetitionPenalty, double presencePenalty,
                               double frequencyPenalty, int64_t minNewTokens) {
  Session &session = self.get();
  Generator *generator = session.generator();
  if (!generator)
    throw Error("not a generation build (compile it with pcc compile "
                "--generate)");
  if (prompts.empty())
    throw Error("no prompts");
  Sampling sampling;
  sampling.maxNewTokens = maxNewTokens;
  sampling.temperature = temperature;
  sampling.topK = topK;
  sampling.topP = topP;
  sampling.seed = seed;
  sampling.stop = stop;
  sampling.repetitionPenalty = repetitionPenalty;
  sampling.presencePenalty = presencePenalty;
  sampling.frequencyPenalty = frequencyPenalty;
  sampling.minNewTokens = minNewTokens;
  if (std::string range = sampling.rangeError(); !range.empty())
    throw Error(range);
  int64_t vocabulary = generator->shape().vocabulary;
  for (const std::vector<int64_t> &p : prompts)
    for (int64_t id : p)
      if (id < 0 || id >= vocabulary)
        throw Error("token id " + std::to_string(id) +
                    " is outside the vocabulary of " +
                    std::to_string(vocabulary));
  std::vector<int64_t> ids;
  std::vector<PyResult> results(prompts.size());
  {
    py::gil_scoped_release release;
    for (const std::vector<int64_t> &p : prompts) {
      GenerationRequest request;
      request.prompt = p;
      request.sampling = sampling;
      ids.push_back(generator->submit(std::move(request)));
    }
    while (generator->busy())
      session.step();
    for (size_t i = 0; i < ids.size(); ++i) {
      const GenerationResult &r = generator->result(ids[i]);
      results[i].tokens = r.tokens;
      results[i].finishReason = r.finishReason;
    }
  }
  return results;
}

} // namespace

PYBIND11_MODULE(_pcc, m) {
  m.doc() = "pcc's runtime: a compiled build kept loaded, its ranks up";
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const Error &e) {
      error(e.what());
    }
  });

  py::class_<PyResult>(m, "Result")
      .def_readonly("tokens", &PyResult::tokens)
      .def_readonly("finish_reason", &PyResult::finishReason)
      .def_readwrite("text", &PyResult::text)
      .def("__repr__", [](const PyResult &r) {
        return "Result(tokens=" + std::string(py::str(py::cast(r.tokens))) +
               ", finish_reason='" + r.finishReason + "')";
      });

  py::class_<PySession>(m, "_Session")
      .def(
          py::init<const std::string &, const std::string &,
                   const std::string &, int64_t, const std::string &, double>(),
          py::arg("dir"), py::arg("library"), py::arg("weights"),
          py::arg("max_sequence"), py::arg("pcc"), py::arg("timeout"))
      .def("run", &run, py::arg("feeds"), py::arg("entry") = "")
      .def("generate", &generate, py::arg("prompts"), py::arg("max_new_tokens"),
           py::arg("temperature"), py::arg("top_k"), py::arg("top_p"),
           py::arg("seed"), py::arg("stop"), py::arg("repetition_penalty"),
           py::arg("presence_penalty"), py::arg("frequency_penalty"),
           py::arg("min_new_tokens"))
      .def("close", &PySession::close)
      .def_property_readonly("num_ranks", &PySession::numRanks)
      .def_property_readonly("input_names",
                             [](PySession &self) {
                               const pccrt_model_info &info =
                                   self.get().model().info();
                               std::vector<std::string> names;
                               for (int32_t i = 0; i < info.num_inputs; ++i)
                                 names.push_back(info.inputs[i].name);
                               return names;
                             })
      .def_property_readonly("is_training", [](PySession &self) {
        return self.get().model().isTraining();
      });

  py::class_<pcc::Tokenizer>(m, "Tokenizer")
      .def(py::init([](const std::string &path) {
             llvm::Expected<pcc::Tokenizer> t = pcc::Tokenizer::fromFile(path);
             if (!t)
               throw Error(llvm::toString(t.takeError()));
             return std::move(*t);
           }),
           py::arg("path"))
      .def("encode",
           [](const pcc::Tokenizer &t, const std::string &text) {
             return t.encode(text);
           })
      .def("decode", [](const pcc::Tokenizer &t,
                        const std::vector<int64_t> &ids) {
        llvm::Expected<std::string> text = t.decode(ids);
        if (!text)
          throw Error(llvm::toString(text.takeError()));
        // Lossy already: invalid bytes were replaced.
        return py::str(*text);
      });

  py::class_<pcc::ChatTemplate>(m, "_ChatTemplate")
      .def(py::init([](const std::string &path) {
             llvm::Expected<pcc::ChatTemplate> t =
                 pcc::ChatTemplate::fromFile(path);
             if (!t)
               throw Error(llvm::toString(t.takeError()));
             return std::move(*t);
           }),
           py::arg("path"))
      // The variables as JSON text (the Python side dumps them).
      .def("render", [](const pcc::ChatTemplate &t,
                        const std::string &variables) {
        llvm::Expected<llvm::json::Value> v = llvm::json::parse(variables);
        if (!v || !v->getAsObject()) {
          if (!v)
            llvm::consumeError(v.takeError());
          throw Error("the chat template's variables must be a JSON object");
        }
        llvm::Expected<std::string> text = t.render(*v->getAsObject());
        if (!text)
          throw Error(llvm::toString(text.takeError()));
        return py::str(*text);
      });
}
