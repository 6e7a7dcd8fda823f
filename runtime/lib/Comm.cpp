//===- Comm.cpp - The backend-neutral part of communicators ---------------===//

#include "pccrt/Comm.h"

#include "Internal.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace pccrt;
using namespace pccrt::detail;

const char *pccrt::commOpName(CommOp op) {
  switch (op) {
  case CommOp::None:
    return "none";
  case CommOp::AllReduce:
    return "all_reduce";
  case CommOp::AllGather:
    return "all_gather";
  case CommOp::ReduceScatter:
    return "reduce_scatter";
  case CommOp::AllToAll:
    return "all_to_all";
  case CommOp::Send:
    return "send";
  case CommOp::Recv:
    return "recv";
  case CommOp::Wait:
    return "wait";
  case CommOp::Barrier:
    return "barrier";
  case CommOp::Finalize:
    return "finalize";
  }
  return "none";
}

//===----------------------------------------------------------------------===//
// RankMonitor
//===----------------------------------------------------------------------===//

// The launcher and the ranks read one another's status through a file
// mapping, so its fields must be plain lock-free atomics at fixed offsets.
static_assert(std::atomic<int32_t>::is_always_lock_free &&
                  std::atomic<int64_t>::is_always_lock_free,
              "status fields must be lock-free to be shared between processes");
static_assert(std::is_standard_layout_v<RankMonitor::Status>,
              "the status file has a fixed layout");

namespace {
int64_t monotonicNanoseconds() {
  // CLOCK_MONOTONIC is one clock for every process of a host, so the
  // launcher can compare a rank's times with its own.
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
}
} // namespace

RankMonitor::RankMonitor() : owned(std::make_unique<Status>()) {
  state = owned.get();
  state->phase = int32_t(Phase::Starting);
  state->op = int32_t(CommOp::None);
  state->step = 0;
  state->opSince = 0;
  state->pid = int32_t(getpid());
  state->printed = 0;
  state->message[0] = 0;
}

RankMonitor::RankMonitor(const std::string &statusFile) {
  int fd = ::open(statusFile.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    fail(statusFile,
         std::string("cannot open rank status: ") + std::strerror(errno));
  // The launcher made the file this size; growing it here would hide a
  // mismatch of layouts between two builds.
  off_t size = lseek(fd, 0, SEEK_END);
  if (size != off_t(sizeof(Status))) {
    ::close(fd);
    fail(statusFile, "rank status file has " + std::to_string(size) +
                         " bytes, expected " + std::to_string(sizeof(Status)));
  }
  void *memory =
      mmap(nullptr, sizeof(Status), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int error = errno;
  ::close(fd);
  if (memory == MAP_FAILED)
    fail(statusFile,
         std::string("cannot map rank status: ") + std::strerror(error));
  state = static_cast<Status *>(memory);
  mapped = true;
  state->pid = int32_t(getpid());
}

std::unique_ptr<RankMonitor> RankMonitor::forRank(int rank) {
  const char *dir = std::getenv("PCCRT_STATUS_DIR");
  if (!dir || !*dir)
    return std::make_unique<RankMonitor>();
  return std::make_unique<RankMonitor>(std::string(dir) + "/rank-" +
                                       std::to_string(rank));
}

RankMonitor::~RankMonitor() {
  stopWatchdog();
  if (mapped)
    munmap(state, sizeof(Status));
}

void RankMonitor::setStep(int64_t step) { state->step = step; }
int64_t RankMonitor::step() const { return state->step; }
void RankMonitor::setPhase(Phase phase) { state->phase = int32_t(phase); }

void RankMonitor::setError(Phase phase, const std::string &message,
                           bool printed) {
  // The message first: the launcher reads it once it sees the phase.
  size_t n = std::min(message.size(), sizeof(state->message) - 1);
  std::memcpy(state->message, message.data(), n);
  state->message[n] = 0;
  state->printed = printed ? 1 : 0;
  state->phase = int32_t(phase);
}

CommOp RankMonitor::enter(CommOp op) {
  CommOp previous = CommOp(state->op.load());
  if (previous == CommOp::None)
    state->opSince = monotonicNanoseconds();
  state->op = int32_t(op);
  return previous;
}

void RankMonitor::leave(CommOp previous) { state->op = int32_t(previous); }

void RankMonitor::startWatchdog(double seconds,
                                std::function<void(CommOp, double)> onTimeout) {
  stopWatchdog();
  stopping = false;
  pid_t parent = getppid();
  watchdog = std::thread([this, seconds, parent, onTimeout] {
    bool fired = false;
    while (!stopping) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      // A rank whose launcher is gone has nobody to report to and would
      // hold its peers; it ends quietly.
      if (getppid() != parent)
        _exit(1);
      CommOp op = CommOp(state->op.load());
      if (fired || seconds <= 0 || op == CommOp::None)
        continue;
      double waited = double(monotonicNanoseconds() - state->opSince) * 1e-9;
      if (waited > seconds) {
        fired = true;
        onTimeout(op, waited);
      }
    }
  });
}

void RankMonitor::stopWatchdog() {
  if (!watchdog.joinable())
    return;
  stopping = true;
  watchdog.join();
}

//===----------------------------------------------------------------------===//
// Communicator
//===----------------------------------------------------------------------===//

Communicator::Communicator(int rank, int size, std::vector<int64_t> meshShape)
    : rankIndex(rank), worldSize(size), mesh(std::move(meshShape)) {
  int64_t product = 1;
  for (int64_t d : mesh) {
    if (d < 1)
      throw Error("mesh axes must have a positive size");
    product *= d;
  }
  if (product != size)
    throw Error("a mesh of " + std::to_string(product) +
                " ranks cannot run on " + std::to_string(size) + " processes");
  if (mesh.size() > 31)
    throw Error("a mesh has at most 31 axes");
  cHandle.ops = &cOps;
  cHandle.self = this;
  const char *defer = std::getenv("PCCRT_DEFER_COLLECTIVES");
  deferCollectives = defer && std::strcmp(defer, "1") == 0;
}

Communicator::OpScope::OpScope(const Communicator &comm, CommOp op)
    : monitor(comm.monitorPtr) {
  if (monitor)
    previous = monitor->enter(op);
}

Communicator::OpScope::~OpScope() {
  if (monitor)
    monitor->leave(previous);
}

Communicator::CollectiveTimer::CollectiveTimer(Communicator &comm)
    : comm(comm) {
  std::lock_guard<std::mutex> lock(comm.timerMutex);
  if (comm.timersRunning++ == 0)
    comm.timersSince = monotonicNanoseconds();
}

Communicator::CollectiveTimer::~CollectiveTimer() {
  std::lock_guard<std::mutex> lock(comm.timerMutex);
  if (--comm.timersRunning == 0)
    comm.collectiveNs += monotonicNanoseconds() - comm.timersSince;
}

void Communicator::allReduce(uint32_t axes, void *data, int64_t count,
                             int32_t dtype, int32_t reduction) {
  CollectiveTimer timer(*this);
  OpScope scope(*this, CommOp::AllReduce);
  doAllReduce(axes, data, count, dtype, reduction);
}

void Communicator::allGather(uint32_t axes, const void *in, void *out,
                             int64_t count, int32_t dtype) {
  CollectiveTimer timer(*this);
  OpScope scope(*this, CommOp::AllGather);
  doAllGather(axes, in, out, count, dtype);
}

void Communicator::reduceScatter(uint32_t axes, const void *in, void *out,
                                 int64_t count, int32_t dtype,
                                 int32_t reduction) {
  CollectiveTimer timer(*this);
  OpScope scope(*this, CommOp::ReduceScatter);
  doReduceScatter(axes, in, out, count, dtype, reduction);
}

void Communicator::allToAll(uint32_t axes, const void *in, void *out,
                            int64_t count, int32_t dtype) {
  CollectiveTimer timer(*this);
  OpScope scope(*this, CommOp::AllToAll);
  doAllToAll(axes, in, out, count, dtype);
}

void Communicator::send(uint32_t axes, int32_t peer, int32_t tag,
                        const void *data, int64_t count, int32_t dtype) {
  OpScope scope(*this, CommOp::Send);
  doSend(axes, peer, tag, data, count, dtype);
}

void Communicator::isend(uint32_t axes, int32_t peer, int32_t tag,
                         const void *data, int64_t count, int32_t dtype) {
  OpScope scope(*this, CommOp::Send);
  doIsend(axes, peer, tag, data, count, dtype);
}

void Communicator::waitAll() {
  OpScope scope(*this, CommOp::Wait);
  doWaitAll();
}

int32_t Communicator::startSend(uint32_t axes, int32_t peer, int32_t tag,
                                const void *data, int64_t count,
                                int32_t dtype) {
  OpScope scope(*this, CommOp::Send);
  return doStartSend(axes, peer, tag, data, count, dtype);
}

void Communicator::waitSend(int32_t request) {
  if (request < 0)
    return;
  OpScope scope(*this, CommOp::Wait);
  doWaitSend(request);
}

int32_t Communicator::startAllReduce(uint32_t axes, void *data, int64_t count,
                                     int32_t dtype, int32_t reduction,
                                     void *stream) {
  CollectiveTimer timer(*this);
  checkAxes(axes);
  return doStart(
      CommOp::AllReduce,
      [=] { doAllReduce(axes, data, count, dtype, reduction); }, stream);
}

int32_t Communicator::startAllGather(uint32_t axes, const void *in, void *out,
                                     int64_t count, int32_t dtype,
                                     void *stream) {
  CollectiveTimer timer(*this);
  checkAxes(axes);
  return doStart(
      CommOp::AllGather, [=] { doAllGather(axes, in, out, count, dtype); },
      stream);
}

int32_t Communicator::startReduceScatter(uint32_t axes, const void *in,
                                         void *out, int64_t count,
                                         int32_t dtype, int32_t reduction,
                                         void *stream) {
  CollectiveTimer timer(*this);
  checkAxes(axes);
  return doStart(
      CommOp::ReduceScatter,
      [=] { doReduceScatter(axes, in, out, count, dtype, reduction); },
      stream);
}

void Communicator::wait(int32_t request, void *stream) {
  CollectiveTimer timer(*this);
  doWait(request, stream);
}

int32_t Communicator::doStart(CommOp op, std::function<void()> run, void *) {
  if (!deferCollectives) {
    OpScope scope(*this, op);
    run();
    return -1;
  }
  int32_t request = nextRequest++;
  deferred.emplace(request, std::make_pair(op, std::move(run)));
  return request;
}

void Communicator::doWait(int32_t request, void *) {
  auto complete = [&](std::map<int32_t,
                               std::pair<CommOp, std::function<void()>>>::
                          iterator it) {
    auto [op, run] = std::move(it->second);
    deferred.erase(it);
    OpScope scope(*this, op);
    run();
  };
  if (request < 0) {
    while (!deferred.empty())
      complete(deferred.begin());
    return;
  }
  auto it = deferred.find(request);
  if (it == deferred.end()) {
    if (!deferCollectives || request >= nextRequest)
      throw Error("communicator: wait for request " + std::to_string(request) +
                  ", which no collective started");
    return; // completed by an earlier wait for everything
  }
  complete(it);
}

void Communicator::recv(uint32_t axes, int32_t peer, int32_t tag, void *data,
                        int64_t count, int32_t dtype) {
  OpScope scope(*this, CommOp::Recv);
  doRecv(axes, peer, tag, data, count, dtype);
}

std::vector<std::string> Communicator::agree(const std::string &error) {
  // Fixed-size slots: one all_gather, whatever the messages' lengths.
  constexpr size_t kSlot = 1024;
  if (worldSize == 1)
    return {error};
  std::vector<char> mine(kSlot, 0), all(kSlot * size_t(worldSize), 0);
  // A leading byte tells an empty message from no error at all.
  mine[0] = error.empty() ? 0 : 1;
  std::memcpy(mine.data() + 1, error.data(),
              std::min(error.size(), size_t(1000)));
  {
    OpScope scope(*this, CommOp::Barrier);
    doAllGather(allAxes(), mine.data(), all.data(), int64_t(kSlot), PCCRT_U8);
  }
  std::vector<std::string> errors(static_cast<size_t>(worldSize));
  for (int r = 0; r < worldSize; ++r) {
    const char *slot = all.data() + size_t(r) * kSlot;
    if (slot[0])
      errors[size_t(r)] = std::string(slot + 1, strnlen(slot + 1, kSlot - 1));
  }
  return errors;
}

void Communicator::abort(int code) { _exit(code); }

int64_t Communicator::coordinate(size_t axis) const {
  // Row-major: the last axis varies fastest.
  int64_t stride = 1;
  for (size_t a = mesh.size(); a-- > axis + 1;)
    stride *= mesh[a];
  return (rankIndex / stride) % mesh[axis];
}

void Communicator::checkAxes(uint32_t axes) const {
  if (axes == 0 || (axes >> mesh.size()) != 0)
    throw Error("communicator: axes mask " + std::to_string(axes) +
                " does not name axes of a mesh of " +
                std::to_string(mesh.size()));
}

int64_t Communicator::groupSize(uint32_t axes) const {
  checkAxes(axes);
  int64_t n = 1;
  for (size_t a = 0; a < mesh.size(); ++a)
    if (axes & (1u << a))
      n *= mesh[a];
  return n;
}

int64_t Communicator::groupPosition(uint32_t axes) const {
  checkAxes(axes);
  int64_t position = 0;
  for (size_t a = 0; a < mesh.size(); ++a)
    if (axes & (1u << a))
      position = position * mesh[a] + coordinate(a);
  return position;
}

/// The C entry points: each forwards to the C++ object and turns an Error
/// into PCCRT_ERR_COMM, keeping the message for the runtime to report.
struct pccrt::CommTrampolines {
  template <typename F> static int guard(pccrt_comm *comm, F &&f) {
    auto *self = static_cast<Communicator::CHandle *>(comm)->self;
    try {
      f(*self);
      return PCCRT_OK;
    } catch (const Error &e) {
      self->error = e.what();
      return PCCRT_ERR_COMM;
    }
  }
  static int allReduce(pccrt_comm *c, uint32_t axes, void *data, int64_t count,
                       int32_t dtype, int32_t reduction) {
    return guard(c, [&](Communicator &m) {
      m.allReduce(axes, data, count, dtype, reduction);
    });
  }
  static int allGather(pccrt_comm *c, uint32_t axes, const void *in, void *out,
                       int64_t count, int32_t dtype) {
    return guard(
        c, [&](Communicator &m) { m.allGather(axes, in, out, count, dtype); });
  }
  static int reduceScatter(pccrt_comm *c, uint32_t axes, const void *in,
                           void *out, int64_t count, int32_t dtype,
                           int32_t reduction) {
    return guard(c, [&](Communicator &m) {
      m.reduceScatter(axes, in, out, count, dtype, reduction);
    });
  }
  static int allToAll(pccrt_comm *c, uint32_t axes, const void *in, void *out,
                      int64_t count, int32_t dtype) {
    return guard(
        c, [&](Communicator &m) { m.allToAll(axes, in, out, count, dtype); });
  }
  static int send(pccrt_comm *c, uint32_t axes, int32_t peer, int32_t tag,
                  const void *data, int64_t count, int32_t dtype) {
    return guard(c, [&](Communicator &m) {
      m.send(axes, peer, tag, data, count, dtype);
    });
  }
  static int recv(pccrt_comm *c, uint32_t axes, int32_t peer, int32_t tag,
                  void *data, int64_t count, int32_t dtype) {
    return guard(c, [&](Communicator &m) {
      m.recv(axes, peer, tag, data, count, dtype);
    });
  }
  static int isend(pccrt_comm *c, uint32_t axes, int32_t peer, int32_t tag,
                   const void *data, int64_t count, int32_t dtype) {
    return guard(c, [&](Communicator &m) {
      m.isend(axes, peer, tag, data, count, dtype);
    });
  }
  static int waitAll(pccrt_comm *c) {
    return guard(c, [&](Communicator &m) { m.waitAll(); });
  }
  static int startAllReduce(pccrt_comm *c, uint32_t axes, void *data,
                            int64_t count, int32_t dtype, int32_t reduction,
                            void *stream, int32_t *request) {
    return guard(c, [&](Communicator &m) {
      *request = m.startAllReduce(axes, data, count, dtype, reduction, stream);
    });
  }
  static int startAllGather(pccrt_comm *c, uint32_t axes, const void *in,
                            void *out, int64_t count, int32_t dtype,
                            void *stream, int32_t *request) {
    return guard(c, [&](Communicator &m) {
      *request = m.startAllGather(axes, in, out, count, dtype, stream);
    });
  }
  static int startReduceScatter(pccrt_comm *c, uint32_t axes, const void *in,
                                void *out, int64_t count, int32_t dtype,
                                int32_t reduction, void *stream,
                                int32_t *request) {
    return guard(c, [&](Communicator &m) {
      *request = m.startReduceScatter(axes, in, out, count, dtype, reduction,
                                      stream);
    });
  }
  static int wait(pccrt_comm *c, int32_t request, void *stream) {
    return guard(c, [&](Communicator &m) { m.wait(request, stream); });
  }
  static int startSend(pccrt_comm *c, uint32_t axes, int32_t peer, int32_t tag,
                       const void *data, int64_t count, int32_t dtype,
                       int32_t *request) {
    return guard(c, [&](Communicator &m) {
      *request = m.startSend(axes, peer, tag, data, count, dtype);
    });
  }
  static int waitSend(pccrt_comm *c, int32_t request) {
    return guard(c, [&](Communicator &m) { m.waitSend(request); });
  }
  static int streamOrdered(pccrt_comm *c) {
    return static_cast<Communicator::CHandle *>(c)->self->streamOrdered() ? 1
                                                                         : 0;
  }
};

const pccrt_comm_ops Communicator::cOps = {CommTrampolines::allReduce,
                                           CommTrampolines::allGather,
                                           CommTrampolines::reduceScatter,
                                           CommTrampolines::allToAll,
                                           CommTrampolines::send,
                                           CommTrampolines::recv,
                                           CommTrampolines::isend,
                                           CommTrampolines::waitAll,
                                           CommTrampolines::startAllReduce,
                                           CommTrampolines::startAllGather,
                                           CommTrampolines::startReduceScatter,
                                           CommTrampolines::wait,
                                           CommTrampolines::streamOrdered,
                                           CommTrampolines::startSend,
                                           CommTrampolines::waitSend};

//===----------------------------------------------------------------------===//
// Loading the NCCL communicator
//===----------------------------------------------------------------------===//

namespace {
constexpr const char *kNcclLibrary = "libpccrt_nccl.so";

/// `<directory of this executable>/../lib/libpccrt_nccl.so`, where a build
/// or an install puts it; empty if the executable cannot be found.
std::string besideExecutable() {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return "";
  std::string path(self, size_t(n));
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return "";
  return path.substr(0, slash) + "/../lib/" + kNcclLibrary;
}

/// dlerror() on one line (it may span several), which names the object.
std::string loadError() {
  const char *text = dlerror();
  std::string error = text ? text : "unknown error";
  std::replace(error.begin(), error.end(), '\n', ' ');
  // The library takes its base class from the executable.
  if (error.find("undefined symbol: _Z") != std::string::npos &&
      error.find("pccrt") != std::string::npos)
    error += " (the executable must export libpccrt's symbols: link it "
             "with -rdynamic)";
  return error;
}
} // namespace

std::unique_ptr<Communicator>
pccrt::loadNcclCommunicator(Communicator &bootstrap, int localRank,
                            double timeoutSeconds) {
  // A library named explicitly is the only candidate: falling back to
  // another would hide a mistyped path.
  std::string path;
  void *library = nullptr;
  if (const char *named = std::getenv("PCC_NCCL_LIBRARY"); named && *named) {
    path = named;
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library)
      throw Error("PCC_NCCL_LIBRARY: " + loadError());
  } else {
    // A library that is there but fails to load (a missing libnccl, say)
    // is reported as such, not as absent.
    path = besideExecutable();
    if (!path.empty() && access(path.c_str(), F_OK) == 0) {
      library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!library)
        throw Error(loadError());
    } else {
      path = kNcclLibrary;
      library = dlopen(kNcclLibrary, RTLD_NOW | RTLD_LOCAL);
      if (!library) {
        // glibc names the object it could not open: this library, or one
        // it needs.
        std::string error = loadError();
        if (error.rfind(path + ": cannot open shared object file", 0) != 0)
          throw Error(error);
        throw Error(std::string(kNcclLibrary) +
                    " not found: pcc was built without NCCL (the CUDA "
                    "toolkit's nccl.h and libnccl), or set PCC_NCCL_LIBRARY");
      }
    }
  }
  auto create = reinterpret_cast<decltype(&pccrt_nccl_create)>(
      dlsym(library, "pccrt_nccl_create"));
  if (!create) {
    std::string error = loadError();
    dlclose(library);
    throw Error("not pcc's NCCL communicator: " + error);
  }
  // The library stays loaded for the life of the process: the communicator
  // it makes runs its code.
  char error[1024] = "";
  Communicator *comm =
      create(&bootstrap, localRank, timeoutSeconds, error, sizeof error);
  if (!comm)
    throw Error(std::string("NCCL communicator: ") +
                (*error ? error : "creation failed"));
  comm->setMonitor(bootstrap.monitor());
  return std::unique_ptr<Communicator>(comm);
}
