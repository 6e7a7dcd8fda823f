//===- MpiComm.cpp - The MPI backend of communicators ---------------------===//
//
// Groups are MPI sub-communicators of MPI_COMM_WORLD, split once per axes
// mask: the color is the rank's position on the other axes, the key its
// position on the masked ones. Means are sums divided by the group size.
//
// Started collectives (gradient buckets, ZeRO's gathers) run on a
// communication thread while the program computes. MPI progresses a
// non-blocking collective only inside MPI calls, and the program makes none
// between a start and its wait, so MPI_Iallreduce alone would move nothing
// until the wait; the thread instead runs each started collective as a
// non-blocking one whose completion the thread tests, sleeping between
// tests, so that it takes little of a core the program computes on (a
// blocking MPI call polls without pause). The caller's own waits (sends,
// receives, collectives) are non-blocking calls tested the same way after
// a short poll: a pipeline rank waits for its neighbour's activations for
// a large part of each step. Every MPI call of a
// rank is made in program order: by that thread while it has work queued,
// by the caller when it is idle. MPI thus sees each rank's calls in the
// order a run without the thread makes them (so no new deadlock can arise)
// and never two at once (MPI_THREAD_SERIALIZED).
//
// A group whose ranks all run on one host reduces and gathers through a
// segment of shared memory instead (SharedMemoryGroup), mapped when the
// groups are made; MPI still carries its transfers and what the segment
// does not reduce, and collectives too small for the segment to pay. Such
// a collective also runs in program order, and like MPI's returns once
// every member has joined. PCCRT_SHM=0 turns the segments off; PCCRT_SHM=2
// sends every collective they can run through them, whatever its size.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"
#include "SharedMemoryGroup.h"
#include "pccrt/Comm.h"
#include "pccrt/Runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef PCCRT_HAVE_MPI
#include <mpi.h>
#endif

using namespace pccrt;

#ifndef PCCRT_HAVE_MPI

bool pccrt::haveMpi() { return false; }

void pccrt::initMpi(int *, int *) {
  throw Error("this pcc was built without MPI (install libopenmpi-dev and "
              "rebuild)");
}

void pccrt::finalizeMpi(RankMonitor *) {}

std::unique_ptr<Communicator>
pccrt::createMpiCommunicator(std::vector<int64_t>) {
  throw Error("this pcc was built without MPI (install libopenmpi-dev and "
              "rebuild)");
}

#else

bool pccrt::haveMpi() { return true; }

void pccrt::initMpi(int *rank, int *size) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided;
    // Serialized: the communication thread and the caller's take turns.
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  }
  // Failures come back as codes, reported with the operation that failed.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
}

void pccrt::finalizeMpi(RankMonitor *monitor) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return;
  // Open MPI's finalize waits for every rank, so a rank that hung elsewhere
  // holds it: the watchdog must see this wait like any other.
  CommOp previous = monitor ? monitor->enter(CommOp::Finalize) : CommOp::None;
  MPI_Finalize();
  if (monitor)
    monitor->leave(previous);
}

namespace {
MPI_Datatype mpiType(int32_t dtype, bool reducing) {
  switch (dtype) {
  case PCCRT_F32:
    return MPI_FLOAT;
  case PCCRT_F64:
    return MPI_DOUBLE;
  case PCCRT_I64:
    return MPI_INT64_T;
  case PCCRT_I32:
    return MPI_INT32_T;
  case PCCRT_I16:
    return MPI_INT16_T;
  case PCCRT_I8:
    return MPI_INT8_T;
  case PCCRT_U64:
    return MPI_UINT64_T;
  case PCCRT_U32:
    return MPI_UINT32_T;
  case PCCRT_U16:
    return MPI_UINT16_T;
  case PCCRT_U8:
  case PCCRT_BOOL:
    return MPI_UINT8_T;
  case PCCRT_F16:
  case PCCRT_BF16:
    if (!reducing)
      return MPI_UINT16_T;
    throw Error("communicator: reductions of " + dtypeName(dtype) +
                " are not supported by the MPI backend");
  default:
    throw Error("communicator: unknown dtype " + std::to_string(dtype));
  }
}

MPI_Op mpiOp(int32_t reduction) {
  switch (reduction) {
  case PCCRT_REDUCE_SUM:
  case PCCRT_REDUCE_MEAN:
    return MPI_SUM;
  case PCCRT_REDUCE_MAX:
    return MPI_MAX;
  case PCCRT_REDUCE_MIN:
    return MPI_MIN;
  default:
    throw Error("communicator: unknown reduction " + std::to_string(reduction));
  }
}

int checkedCount(int64_t count) {
  if (count < 0 || count > INT_MAX)
    throw Error("communicator: " + std::to_string(count) +
                " elements in one call (at most " + std::to_string(INT_MAX) +
                ")");
  return int(count);
}

void check(int code, const char *what) {
  if (code == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(std::string("communicator: ") + what +
              " failed: " + std::string(text, size_t(length)));
}

/// Divides `count` elements in place by `n` (the mean of a sum).
void divide(void *data, int64_t count, int32_t dtype, int64_t n) {
  if (dtype == PCCRT_F32) {
    float *p = static_cast<float *>(data);
    for (int64_t i = 0; i < count; ++i)
      p[i] /= float(n);
  } else if (dtype == PCCRT_F64) {
    double *p = static_cast<double *>(data);
    for (int64_t i = 0; i < count; ++i)
      p[i] /= double(n);
  } else {
    throw Error("communicator: a mean needs float32 or float64 data");
  }
}

bool isHalfFloat(int32_t dtype) {
  return dtype == PCCRT_F16 || dtype == PCCRT_BF16;
}

/// `count` 16-bit floats widened to float, for MPI, which reduces no
/// 16-bit float type: the sum is then rounded once, when narrowed back.
std::vector<float> widen(const void *data, int64_t count, int32_t dtype) {
  std::vector<float> wide(size_t(std::max<int64_t>(count, 0)));
  const uint16_t *p = static_cast<const uint16_t *>(data);
  for (size_t i = 0; i < wide.size(); ++i)
    wide[i] = dtype == PCCRT_F16 ? detail::halfToFloat(p[i])
                                 : detail::bfloatToFloat(p[i]);
  return wide;
}

void narrow(const std::vector<float> &wide, void *data, int32_t dtype) {
  uint16_t *p = static_cast<uint16_t *>(data);
  for (size_t i = 0; i < wide.size(); ++i)
    p[i] = dtype == PCCRT_F16 ? detail::floatToHalf(wide[i])
                              : detail::floatToBfloat(wide[i]);
}

/// Waits until `done` (an MPI test that sets its flag) reports completion,
/// testing without pause while `poll()` holds and otherwise sleeping
/// between tests, 1 us at first and doubling to 100 us.
template <typename Test, typename Poll>
void waitSleeping(Test done, Poll poll, const char *what) {
  std::chrono::microseconds pause(1);
  for (;;) {
    int flag = 0;
    check(done(&flag), what);
    if (flag)
      return;
    if (poll())
      continue;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(100));
  }
}

/// Waits on the caller's thread until `done` (an MPI test) reports
/// completion: tests for about 50 us, then sleeps between tests
/// (waitSleeping). A blocking MPI call polls without pause for as long as
/// it waits: a whole core for a pipeline rank, which waits for its
/// neighbour a fifth of its step or more, taken from the rank computing
/// where the two share a physical core or the machine's CPU time (the
/// vCPUs of a virtual machine). GPT-2 124M at pp 2 on the 2-core VM, in
/// turns: 3826 ms a step against 4649 polling (medians of six runs each;
/// bench/RESULTS.md). A message between running ranks arrives within the
/// polling; one that a rank waits for while the other computes costs at
/// most a sleep's delay more.
template <typename Test> void waitOnCaller(Test done, const char *what) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  waitSleeping(
      done,
      [&] { return Clock::now() - start < std::chrono::microseconds(50); },
      what);
}

/// Completes `request` on the caller's thread (waitOnCaller).
void complete(MPI_Request &request, const char *what) {
  waitOnCaller(
      [&](int *flag) { return MPI_Test(&request, flag, MPI_STATUS_IGNORE); },
      what);
}

/// Whether started collectives run on a communication thread. MPI must
/// allow two threads to call it in turn. PCCRT_MPI_ASYNC=1 or 0 decides;
/// by default the thread is used where this host has a core that none of
/// its ranks computes on: MPI's shared-memory transport copies and sums on
/// the cores, so a collective overlapped with a computation that already
/// has every core slows the computation by about what it hides (measured
/// in bench/dp.sh).
bool asyncWanted(int size) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_SERIALIZED)
    return false;
  const char *env = std::getenv("PCCRT_MPI_ASYNC");
  if (env && std::strcmp(env, "0") == 0)
    return false;
  if (env && std::strcmp(env, "1") == 0)
    return true;
  int64_t busy =
      int64_t(detail::localRanks(size)) * detail::threadsPerRank(size);
  return int64_t(std::thread::hardware_concurrency()) > busy;
}

/// How often a rank polls a shared-memory barrier before it sleeps (on a
/// futex, which on a virtual machine takes tens of microseconds to wake):
/// where every computing thread of this host's ranks has a core, for about
/// a millisecond, since the member it waits for is running and the
/// segment's collectives last milliseconds; where they share cores, not at
/// all, since polling takes the core from the member it waits for.
int sharedMemorySpins(int size) {
  int64_t busy =
      int64_t(detail::localRanks(size)) * detail::threadsPerRank(size);
  return int64_t(std::thread::hardware_concurrency()) >= busy ? 20000 : 0;
}

/// A segment of shared memory that the members of a group mapped, and the
/// collectives over it.
struct SharedSegment {
  void *address = nullptr;
  size_t bytes = 0;
  std::unique_ptr<detail::SharedMemoryGroup> group;
  SharedSegment() = default;
  SharedSegment(const SharedSegment &) = delete;
  ~SharedSegment() {
    if (address)
      munmap(address, bytes);
  }
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(int rank, int size, std::vector<int64_t> mesh)
      : Communicator(rank, size, std::move(mesh)),
        async(size > 1 && asyncWanted(size)) {
    // Splitting is collective over every rank, so groups are made here,
    // where all ranks are, not on first use: pipeline stages use groups in
    // different orders (one stage's tensor-parallel all-reduce while the
    // next waits for its activations), which lazy splits would deadlock.
    size_t axes = meshShape().size();
    // So are the groups' shared-memory segments, which each member maps.
    const char *shm = std::getenv("PCCRT_SHM");
    bool mapShared = !(shm && std::strcmp(shm, "0") == 0);
    sharedAlways = shm && std::strcmp(shm, "2") == 0;
    int spins = sharedMemorySpins(size);
    if (size > 1 && axes <= 6)
      for (uint32_t mask = 1; mask < (uint32_t(1) << axes); ++mask) {
        group(mask);
        if (mapShared)
          mapSharedMemory(mask, spins);
      }
  }
  ~MpiCommunicator() override {
    if (worker.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        stopping = true;
      }
      changed.notify_all();
      worker.join();
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      for (auto &[mask, comm] : groups)
        MPI_Comm_free(&comm);
  }

  void doAllReduce(uint32_t axes, void *data, int64_t count, int32_t dtype,
                   int32_t reduction) override {
    if (isHalfFloat(dtype)) {
      std::vector<float> wide = widen(data, count, dtype);
      doAllReduce(axes, wide.data(), count, PCCRT_F32, reduction);
      narrow(wide, data, dtype);
      return;
    }
    int n = checkedCount(count);
    MPI_Datatype t = mpiType(dtype, true);
    MPI_Op op = mpiOp(reduction);
    if (detail::SharedMemoryGroup *local =
            sharedGroup(CommOp::AllReduce, axes, count, dtype);
        local && detail::SharedMemoryGroup::reduces(dtype, reduction))
      serialized([&] { local->allReduce(data, count, dtype, reduction); });
    else
      collective("all_reduce", [&](MPI_Request *r) {
        return MPI_Iallreduce(MPI_IN_PLACE, data, n, t, op, group(axes), r);
      });
    if (reduction == PCCRT_REDUCE_MEAN)
      divide(data, count, dtype, groupSize(axes));
  }
  void doAllGather(uint32_t axes, const void *in, void *out, int64_t count,
                   int32_t dtype) override {
    MPI_Datatype t = mpiType(dtype, false);
    int n = checkedCount(count);
    if (detail::SharedMemoryGroup *local =
            sharedGroup(CommOp::AllGather, axes, count, dtype)) {
      serialized([&] { local->allGather(in, out, count, dtypeSize(dtype)); });
      return;
    }
    collective("all_gather", [&](MPI_Request *r) {
      return MPI_Iallgather(in, n, t, out, n, t, group(axes), r);
    });
  }
  void doReduceScatter(uint32_t axes, const void *in, void *out, int64_t count,
                       int32_t dtype, int32_t reduction) override {
    checkedCount(count * groupSize(axes));
    if (isHalfFloat(dtype)) {
      std::vector<float> wide = widen(in, count * groupSize(axes), dtype);
      std::vector<float> mine(static_cast<size_t>(count));
      doReduceScatter(axes, wide.data(), mine.data(), count, PCCRT_F32,
                      reduction);
      narrow(mine, out, dtype);
      return;
    }
    int n = checkedCount(count);
    MPI_Datatype t = mpiType(dtype, true);
    MPI_Op op = mpiOp(reduction);
    if (detail::SharedMemoryGroup *local =
            sharedGroup(CommOp::ReduceScatter, axes, count, dtype);
        local && detail::SharedMemoryGroup::reduces(dtype, reduction))
      serialized(
          [&] { local->reduceScatter(in, out, count, dtype, reduction); });
    else
      collective("reduce_scatter", [&](MPI_Request *r) {
        return MPI_Ireduce_scatter_block(in, out, n, t, op, group(axes), r);
      });
    if (reduction == PCCRT_REDUCE_MEAN)
      divide(out, count, dtype, groupSize(axes));
  }
  void doAllToAll(uint32_t axes, const void *in, void *out, int64_t count,
                  int32_t dtype) override {
    MPI_Datatype t = mpiType(dtype, false);
    int n = checkedCount(count);
    collective("all_to_all", [&](MPI_Request *r) {
      return MPI_Ialltoall(in, n, t, out, n, t, group(axes), r);
    });
  }
  void doSend(uint32_t axes, int32_t peer, int32_t tag, const void *data,
              int64_t count, int32_t dtype) override {
    checkPeer(axes, peer);
    serialized([&] {
      MPI_Request request;
      check(MPI_Isend(data, checkedCount(count), mpiType(dtype, false), peer,
                      tag, group(axes), &request),
            "send");
      complete(request, "send");
    });
  }
  void doRecv(uint32_t axes, int32_t peer, int32_t tag, void *data,
              int64_t count, int32_t dtype) override {
    checkPeer(axes, peer);
    serialized([&] {
      MPI_Request request;
      check(MPI_Irecv(data, checkedCount(count), mpiType(dtype, false), peer,
                      tag, group(axes), &request),
            "recv");
      complete(request, "recv");
    });
  }
  void doIsend(uint32_t axes, int32_t peer, int32_t tag, const void *data,
               int64_t count, int32_t dtype) override {
    checkPeer(axes, peer);
    MPI_Request request;
    serialized([&] {
      check(MPI_Isend(data, checkedCount(count), mpiType(dtype, false), peer,
                      tag, group(axes), &request),
            "isend");
    });
    pending.push_back(request);
  }
  int32_t doStartSend(uint32_t axes, int32_t peer, int32_t tag,
                      const void *data, int64_t count, int32_t dtype) override {
    checkPeer(axes, peer);
    MPI_Request request;
    serialized([&] {
      check(MPI_Isend(data, checkedCount(count), mpiType(dtype, false), peer,
                      tag, group(axes), &request),
            "start_send");
    });
    int32_t id = nextSend++;
    started.emplace(id, request);
    return id;
  }
  void doWaitSend(int32_t id) override {
    auto it = started.find(id);
    if (it == started.end())
      return; // completed by a wait_all
    MPI_Request request = it->second;
    started.erase(it);
    serialized([&] { complete(request, "wait_send"); });
  }
  void doWaitAll() override {
    std::vector<MPI_Request> requests;
    requests.swap(pending);
    for (auto &[id, request] : started)
      requests.push_back(request);
    started.clear();
    if (requests.empty())
      return;
    serialized([&] {
      waitOnCaller(
          [&](int *flag) {
            return MPI_Testall(int(requests.size()), requests.data(), flag,
                               MPI_STATUSES_IGNORE);
          },
          "wait_all");
    });
  }

  int32_t doStart(CommOp op, std::function<void()> run, void *stream) override {
    if (!async || defersCollectives())
      return Communicator::doStart(op, std::move(run), stream);
    return submit(std::move(run));
  }
  void doWait(int32_t request, void *stream) override {
    if (!async || defersCollectives())
      return Communicator::doWait(request, stream);
    OpScope scope(*this, CommOp::Wait);
    std::unique_lock<std::mutex> lock(mutex);
    if (request >= submitted)
      throw Error("communicator: wait for request " + std::to_string(request) +
                  ", which no collective started");
    await(lock, request);
  }

  [[noreturn]] void abort(int code) override {
    // From any thread: Open MPI's abort only tells the process manager to
    // end the job, which is what a watchdog needs while the main thread is
    // blocked in a collective.
    MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
  }

private:
  /// Queues \p run on the communication thread (started on first use);
  /// returns its request.
  int32_t submit(std::function<void()> run) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!worker.joinable()) {
      worker = std::thread([this] { serve(); });
      workerId = worker.get_id();
    }
    int32_t id = submitted++;
    queue.push_back({id, std::move(run)});
    changed.notify_all();
    return id;
  }
  /// The communication thread: runs the queue in order until stopped.
  void serve() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty())
        return;
      Task task = std::move(queue.front());
      queue.pop_front();
      running = true;
      lock.unlock();
      std::exception_ptr failure;
      try {
        task.run();
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      if (failure)
        failures.emplace(task.id, failure);
      completed = task.id + 1;
      running = false;
      changed.notify_all();
    }
  }
  bool onWorker() const {
    return worker.joinable() && std::this_thread::get_id() == workerId;
  }
  /// Completes \p request on the communication thread: tests it, sleeping
  /// between tests (up to 100 us), so that the thread leaves the cores to
  /// the program's computation while its collective progresses.
  void finish(MPI_Request &request, const char *what) {
    // Without pause while the program waits for this thread.
    waitSleeping(
        [&](int *flag) { return MPI_Test(&request, flag, MPI_STATUS_IGNORE); },
        [&] { return callerWaits.load(std::memory_order_relaxed); }, what);
  }
  /// A collective in program order, \p start (given the request to fill)
  /// and the tests that complete it: on the communication thread, finish's;
  /// on the caller's, complete's, which sleep while the others are late.
  template <typename Start> void collective(const char *what, Start start) {
    serialized([&] {
      MPI_Request request;
      check(start(&request), what);
      if (onWorker())
        finish(request, what);
      else
        complete(request, what);
    });
  }
  /// Makes the MPI call \p call in program order: at once where the
  /// communication thread is idle (or is the caller), else after what it
  /// has queued, waiting for it.
  template <typename Call> void serialized(Call &&call) {
    if (!worker.joinable() || onWorker())
      return call();
    std::unique_lock<std::mutex> lock(mutex);
    if (queue.empty() && !running) {
      // Only this thread queues work, so the thread stays idle meanwhile.
      lock.unlock();
      return call();
    }
    lock.unlock();
    int32_t id = submit([&] { call(); });
    lock.lock();
    await(lock, id);
  }
  /// Waits (holding \p lock on `mutex`) until request \p request, or every
  /// request when it is negative, has run; rethrows its failure (the
  /// first of any, which a wait for everything reports for all).
  void await(std::unique_lock<std::mutex> &lock, int32_t request) {
    int32_t until = request < 0 ? submitted : request + 1;
    callerWaits = true;
    changed.wait(lock, [&] { return completed >= until; });
    callerWaits = false;
    auto failed = request < 0 ? failures.begin() : failures.find(request);
    if (failed == failures.end())
      return;
    std::exception_ptr failure = failed->second;
    if (request < 0)
      failures.clear();
    else
      failures.erase(failed);
    std::rethrow_exception(failure);
  }

  struct Task {
    int32_t id;
    std::function<void()> run;
  };
  /// Whether started collectives run on the communication thread.
  const bool async;
  std::thread worker;
  std::thread::id workerId;
  std::mutex mutex;
  std::condition_variable changed;
  /// Collectives (and, while it is busy, blocking calls) for the thread.
  std::deque<Task> queue;
  /// Requests are numbered in order; those below `completed` are done.
  int32_t submitted = 0, completed = 0;
  bool running = false, stopping = false;
  /// Whether the caller's thread waits for the communication thread.
  std::atomic<bool> callerWaits{false};
  /// Failures of requests not yet waited for.
  std::map<int32_t, std::exception_ptr> failures;
  /// Sends started and not yet completed.
  std::vector<MPI_Request> pending;
  /// Sends started by start_send and not yet completed, by request.
  std::map<int32_t, MPI_Request> started;
  int32_t nextSend = 0;
  void checkPeer(uint32_t axes, int32_t peer) {
    if (peer < 0 || peer >= groupSize(axes))
      throw Error("communicator: peer " + std::to_string(peer) +
                  " is outside a group of " + std::to_string(groupSize(axes)));
  }
  /// The sub-communicator of `axes`, split on first use.
  MPI_Comm group(uint32_t axes) {
    checkAxes(axes);
    auto it = groups.find(axes);
    if (it != groups.end())
      return it->second;
    // Color: the position on the other axes; key: on the masked ones.
    int64_t color = 0;
    for (size_t a = 0; a < meshShape().size(); ++a)
      if (!(axes & (1u << a)))
        color = color * meshShape()[a] + coordinate(a);
    MPI_Comm comm;
    check(MPI_Comm_split(MPI_COMM_WORLD, int(color), int(groupPosition(axes)),
                         &comm),
          "splitting a group");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    groups[axes] = comm;
    return comm;
  }
  std::map<uint32_t, MPI_Comm> groups;

  /// The shared-memory collectives of `axes`' group for `op` of a member's
  /// `count` elements of `dtype`, or null where MPI's are faster, or its
  /// ranks are on several hosts, or its segment could not be made.
  detail::SharedMemoryGroup *sharedGroup(CommOp op, uint32_t axes,
                                         int64_t count, int32_t dtype) {
    auto it = shared.find(axes);
    if (it == shared.end() ||
        (!sharedAlways && !detail::SharedMemoryGroup::pays(
                              op, uint64_t(count) * dtypeSize(dtype))))
      return nullptr;
    return it->second.group.get();
  }
  /// Maps a segment of shared memory for the group of `axes` if all its
  /// ranks are on this host: its first rank makes it, the others open it
  /// by the name it broadcasts, and the name goes once all have it mapped.
  /// Collective over the group; every member takes the same decision, and
  /// where any of them fails (no /dev/shm, too little room in it), the
  /// group's collectives stay MPI's.
  void mapSharedMemory(uint32_t axes, int spins) {
    int members = int(groupSize(axes)), position = int(groupPosition(axes));
    if (members < 2)
      return;
    MPI_Comm comm = group(axes);
    MPI_Comm host;
    check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, position,
                              MPI_INFO_NULL, &host),
          "splitting a group by host");
    int hostMembers = 0;
    MPI_Comm_size(host, &hostMembers);
    MPI_Comm_free(&host);
    if (hostMembers != members)
      return;
    size_t bytes = detail::SharedMemoryGroup::segmentBytes(members);
    // The name, then whether the first rank made the segment.
    char name[64] = {};
    int fd = -1;
    bool made = false;
    if (position == 0) {
      std::snprintf(name, sizeof(name) - 1, "/pccrt-%d-%u", int(getpid()),
                    axes);
      fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
      made = fd >= 0;
      // Reserved now (zeroed), so that a full /dev/shm fails here rather
      // than with SIGBUS at a first touch.
      name[sizeof(name) - 1] =
          made && posix_fallocate(fd, 0, off_t(bytes)) == 0;
    }
    check(MPI_Bcast(name, int(sizeof(name)), MPI_CHAR, 0, comm),
          "sharing a segment's name");
    bool ok = name[sizeof(name) - 1] != 0;
    name[sizeof(name) - 1] = 0;
    if (ok && position != 0) {
      fd = shm_open(name, O_RDWR, 0);
      ok = fd >= 0;
    }
    void *address = MAP_FAILED;
    if (ok)
      address = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0)
      close(fd);
    int mine = address != MAP_FAILED, all = 0;
    check(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, comm),
          "mapping shared memory");
    if (made)
      shm_unlink(name);
    if (!all) {
      if (address != MAP_FAILED)
        munmap(address, bytes);
      return;
    }
    SharedSegment &segment = shared[axes];
    segment.address = address;
    segment.bytes = bytes;
    // MPI's progress engine runs in its calls: a probe moves on the
    // rank's started sends while it waits. The wait is in program order
    // (serialized), so no other thread of the rank is in MPI meanwhile.
    segment.group = std::make_unique<detail::SharedMemoryGroup>(
        address, position, members, spins, [] {
          int flag = 0;
          MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
                     MPI_STATUS_IGNORE);
        });
  }
  std::map<uint32_t, SharedSegment> shared;
  /// Whether every collective that a group's segment can run takes it,
  /// whatever its size (PCCRT_SHM=2, for tests).
  bool sharedAlways = false;
};
} // namespace

std::unique_ptr<Communicator>
pccrt::createMpiCommunicator(std::vector<int64_t> meshShape) {
  int rank, size;
  initMpi(&rank, &size);
  return std::make_unique<MpiCommunicator>(rank, size, std::move(meshShape));
}

#endif // PCCRT_HAVE_MPI
