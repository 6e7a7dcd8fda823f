//===- NcclComm.cpp - The NCCL backend of communicators -------------------===//
//
// libpccrt_nccl.so: the communicator of CUDA builds on GPUs, loaded at run
// time by pccrt::loadNcclCommunicator so that libpccrt and pcc need neither
// CUDA nor NCCL. It links no libpccrt: the symbols of its base class come
// from the executable that loads it, and its groups are set up over the
// host (MPI) communicator it is given.
//
// Each group (a mask of mesh axes) gets NCCL communicators on first use:
// one for its collectives, and two for its transfers, one per direction
// (towards higher positions, towards lower ones). NCCL runs the operations
// of one communicator in the order they were issued, whatever their
// streams: two pipeline ranks that each start a large send to the other and
// then receive from it would deadlock on one communicator, each send
// waiting for a receive queued behind the other send. With one communicator
// a direction, a rank's sends to a peer and its receives from it never
// share one.
//
// Generated code calls every operation from the host after its own stream
// has drained, and expects the data in place when the call returns, except
// for isend, whose buffer stays untouched until wait_all. Collectives and
// receives therefore run on one stream and are waited for; sends run on
// another, so that a started send never delays a later receive.
//
//===----------------------------------------------------------------------===//

#include "pccrt/Comm.h"
#include "pccrt/Runtime.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace pccrt;

namespace {

/// NCCL's type for \p dtype. Transfers move booleans as bytes; 16-bit
/// integers have no NCCL type.
ncclDataType_t ncclType(int32_t dtype, bool reducing) {
  switch (dtype) {
  case PCCRT_F32:
    return ncclFloat32;
  case PCCRT_F64:
    return ncclFloat64;
  case PCCRT_F16:
    return ncclFloat16;
  case PCCRT_BF16:
    return ncclBfloat16;
  case PCCRT_I32:
    return ncclInt32;
  case PCCRT_I64:
    return ncclInt64;
  case PCCRT_U32:
    return ncclUint32;
  case PCCRT_U64:
    return ncclUint64;
  case PCCRT_I8:
    return ncclInt8;
  case PCCRT_U8:
    return ncclUint8;
  case PCCRT_BOOL:
    if (!reducing)
      return ncclUint8;
    throw Error("NCCL communicator: reductions of booleans are not "
                "supported");
  default:
    throw Error("NCCL communicator: elements of dtype " +
                std::to_string(dtype) + " are not supported");
  }
}

size_t ncclTypeSize(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}

ncclRedOp_t ncclOp(int32_t reduction) {
  switch (reduction) {
  case PCCRT_REDUCE_SUM:
    return ncclSum;
  case PCCRT_REDUCE_MAX:
    return ncclMax;
  case PCCRT_REDUCE_MIN:
    return ncclMin;
  case PCCRT_REDUCE_MEAN:
    return ncclAvg;
  default:
    throw Error("NCCL communicator: unknown reduction " +
                std::to_string(reduction));
  }
}

size_t elements(int64_t count) {
  if (count < 0)
    throw Error("NCCL communicator: a count of " + std::to_string(count) +
                " elements");
  return size_t(count);
}

/// \p text on one line: messages end up in one-line reports.
std::string oneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  return text;
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(Communicator &bootstrap, int device, double timeoutSeconds)
      : Communicator(bootstrap.rank(), bootstrap.numRanks(),
                     bootstrap.meshShape()),
        bootstrap(bootstrap), device(device), timeout(timeoutSeconds) {
    checkCuda(cudaSetDevice(device), "selecting GPU " + std::to_string(device));
    // Non-blocking: the legacy default stream, which NCCL's setup may use,
    // must not wait for a send in flight, nor a send for it.
    checkCuda(cudaStreamCreateWithFlags(&commStream, cudaStreamNonBlocking),
              "creating a stream");
    checkCuda(cudaStreamCreateWithFlags(&sendStream, cudaStreamNonBlocking),
              "creating a stream");
  }

  ~NcclCommunicator() override {
    if (!aborted) {
      try {
        wait(sendStream, "shutdown", kAllGroups);
        wait(commStream, "shutdown", kAllGroups);
        std::lock_guard<std::mutex> lock(mutex);
        for (auto &[axes, group] : groups)
          for (ncclComm_t comm : group.comms())
            if (comm)
              ncclCommDestroy(comm);
        groups.clear();
      } catch (const Error &) {
        // wait() aborted the communicators: nothing is left to destroy.
      }
    }
    for (auto &[request, event] : started)
      cudaEventDestroy(event);
    for (auto &[request, event] : sends)
      cudaEventDestroy(event);
    if (sendStream)
      cudaStreamDestroy(sendStream);
    if (commStream)
      cudaStreamDestroy(commStream);
  }

  [[noreturn]] void abort(int code) override {
    // Stops what NCCL has in flight here, then ends every rank as the
    // bootstrap communicator does (MPI_Abort for MPI), which a bare exit of
    // this process would not.
    abortComms();
    bootstrap.abort(code);
    // Unreachable; the compiler cannot see that through a virtual call.
    _exit(code);
  }

protected:
  void doAllReduce(uint32_t axes, void *data, int64_t count, int32_t dtype,
                   int32_t reduction) override {
    ncclComm_t comm = collectiveComm(axes);
    check(ncclAllReduce(data, data, elements(count), ncclType(dtype, true),
                        ncclOp(reduction), comm, commStream),
          "all_reduce", axes, comm);
    if (!streamOrdered)
      wait(commStream, "all_reduce", axes);
  }
  void doAllGather(uint32_t axes, const void *in, void *out, int64_t count,
                   int32_t dtype) override {
    ncclComm_t comm = collectiveComm(axes);
    check(ncclAllGather(in, out, elements(count), ncclType(dtype, false), comm,
                        commStream),
          "all_gather", axes, comm);
    if (!streamOrdered)
      wait(commStream, "all_gather", axes);
  }
  void doReduceScatter(uint32_t axes, const void *in, void *out, int64_t count,
                       int32_t dtype, int32_t reduction) override {
    ncclComm_t comm = collectiveComm(axes);
    check(ncclReduceScatter(in, out, elements(count), ncclType(dtype, true),
                            ncclOp(reduction), comm, commStream),
          "reduce_scatter", axes, comm);
    if (!streamOrdered)
      wait(commStream, "reduce_scatter", axes);
  }
  void doAllToAll(uint32_t axes, const void *in, void *out, int64_t count,
                  int32_t dtype) override {
    ncclComm_t comm = collectiveComm(axes);
    ncclDataType_t type = ncclType(dtype, false);
    size_t n = elements(count), block = n * ncclTypeSize(type);
    int peers = int(groupSize(axes));
    // One fused exchange: NCCL matches every pair's send and receive
    // together, so no order of them can deadlock.
    check(ncclGroupStart(), "all_to_all", axes, comm);
    ncclResult_t result = ncclSuccess;
    for (int peer = 0; peer < peers && result == ncclSuccess; ++peer) {
      result = ncclSend(static_cast<const char *>(in) + size_t(peer) * block, n,
                        type, peer, comm, commStream);
      if (result == ncclSuccess)
        result = ncclRecv(static_cast<char *>(out) + size_t(peer) * block, n,
                          type, peer, comm, commStream);
    }
    // The group must be closed even when a call in it failed.
    ncclResult_t end = ncclGroupEnd();
    check(result != ncclSuccess ? result : end, "all_to_all", axes, comm);
    wait(commStream, "all_to_all", axes);
  }
  void doSend(uint32_t axes, int32_t peer, int32_t tag, const void *data,
              int64_t count, int32_t dtype) override {
    startSend(axes, peer, data, count, dtype, "send");
    wait(sendStream, "send", axes);
  }
  void doIsend(uint32_t axes, int32_t peer, int32_t tag, const void *data,
               int64_t count, int32_t dtype) override {
    startSend(axes, peer, data, count, dtype, "isend");
  }
  void doWaitAll() override {
    wait(sendStream, "wait_all", kAllGroups);
    for (auto &[id, event] : sends)
      cudaEventDestroy(event);
    sends.clear();
  }
  // A send of start_send is complete when the event recorded after it on
  // the send stream is: later sends need not be.
  int32_t doStartSend(uint32_t axes, int32_t peer, int32_t tag,
                      const void *data, int64_t count, int32_t dtype) override {
    startSend(axes, peer, data, count, dtype, "start_send");
    cudaEvent_t done = makeEvent();
    checkCuda(cudaEventRecord(done, sendStream), "starting a send");
    int32_t id = nextSend++;
    sends[id] = done;
    return id;
  }
  void doWaitSend(int32_t id) override {
    auto it = sends.find(id);
    if (it == sends.end())
      return; // completed by a wait_all
    cudaEvent_t done = it->second;
    sends.erase(it);
    poll([&] { return cudaEventQuery(done); }, "wait_send", kAllGroups);
    cudaEventDestroy(done);
  }

  // Collectives started by generated code on the run's stream: queued on
  // the communication stream after the work queued on the run's stream so
  // far, without waiting on the host; a wait makes the run's stream wait
  // for the collective's event, so the device computes what does not
  // depend on it meanwhile. The end of a run (request -1) waits on the
  // host, watching for NCCL errors and the timeout.
  int32_t doStart(CommOp op, std::function<void()> run,
                  void *stream) override {
    if (!stream)
      return Communicator::doStart(op, std::move(run), stream);
    auto runStream = static_cast<cudaStream_t>(stream);
    cudaEvent_t ready = makeEvent();
    checkCuda(cudaEventRecord(ready, runStream), "ordering a collective");
    checkCuda(cudaStreamWaitEvent(commStream, ready, 0),
              "ordering a collective");
    cudaEventDestroy(ready);
    streamOrdered = true;
    try {
      run();
    } catch (...) {
      streamOrdered = false;
      throw;
    }
    streamOrdered = false;
    cudaEvent_t done = makeEvent();
    checkCuda(cudaEventRecord(done, commStream), "ordering a collective");
    int32_t request = nextStarted++;
    started[request] = done;
    return request;
  }
  void doWait(int32_t request, void *stream) override {
    auto runStream = static_cast<cudaStream_t>(stream);
    if (request < 0) {
      wait(commStream, "wait", kAllGroups);
      if (runStream)
        wait(runStream, "wait", kAllGroups);
      for (auto &[id, event] : started)
        cudaEventDestroy(event);
      started.clear();
      return;
    }
    auto it = started.find(request);
    if (it == started.end())
      return Communicator::doWait(request, stream);
    if (runStream)
      checkCuda(cudaStreamWaitEvent(runStream, it->second, 0),
                "waiting for a collective");
    else
      wait(commStream, "wait", kAllGroups);
    cudaEventDestroy(it->second);
    started.erase(it);
  }
  bool isStreamOrdered() const override { return true; }
  void doRecv(uint32_t axes, int32_t peer, int32_t tag, void *data,
              int64_t count, int32_t dtype) override {
    // NCCL has no tags: receives match sends in the order they started,
    // as pccrt.h promises.
    checkPeer(axes, peer);
    ncclComm_t comm = transferComm(axes, peer, groupPosition(axes));
    check(ncclRecv(data, elements(count), ncclType(dtype, false), peer, comm,
                   commStream),
          "recv", axes, comm);
    wait(commStream, "recv", axes);
  }

private:
  /// Not a group: the operation waits for sends of any group.
  static constexpr uint32_t kAllGroups = 0;

  /// The NCCL communicators of one group, each made on first use.
  struct Group {
    ncclComm_t collective = nullptr;
    /// Transfers to a higher position, and to a lower one.
    ncclComm_t upward = nullptr, downward = nullptr;
    std::vector<ncclComm_t> comms() const {
      return {collective, upward, downward};
    }
  };

  void startSend(uint32_t axes, int32_t peer, const void *data, int64_t count,
                 int32_t dtype, const char *op) {
    checkPeer(axes, peer);
    ncclComm_t comm = transferComm(axes, groupPosition(axes), peer);
    check(ncclSend(data, elements(count), ncclType(dtype, false), peer, comm,
                   sendStream),
          op, axes, comm);
  }

  void checkPeer(uint32_t axes, int32_t peer) {
    // A send to oneself would wait for a receive queued behind it.
    if (peer < 0 || peer >= groupSize(axes) || peer == groupPosition(axes))
      throw Error("NCCL communicator: peer " + std::to_string(peer) +
                  " is not another member of a group of " +
                  std::to_string(groupSize(axes)) + " (this rank is " +
                  std::to_string(groupPosition(axes)) + ")");
  }

  ncclComm_t collectiveComm(uint32_t axes) {
    checkUsable();
    checkAxes(axes);
    if (!groupFor(axes).collective) {
      std::vector<ncclComm_t> made = create(axes, 1);
      std::lock_guard<std::mutex> lock(mutex);
      groups[axes].collective = made[0];
    }
    return groupFor(axes).collective;
  }

  /// The communicator of transfers from position \p from to \p to.
  ncclComm_t transferComm(uint32_t axes, int64_t from, int64_t to) {
    checkUsable();
    checkAxes(axes);
    // Both directions at once: each member of a pipeline's group reaches
    // its first transfer without waiting for a peer, so all of them meet
    // here, whereas the first use of one direction alone may come in the
    // middle of a step, with transfers of the other in flight.
    if (!groupFor(axes).upward) {
      std::vector<ncclComm_t> made = create(axes, 2);
      std::lock_guard<std::mutex> lock(mutex);
      groups[axes].upward = made[0];
      groups[axes].downward = made[1];
    }
    Group group = groupFor(axes);
    return to > from ? group.upward : group.downward;
  }

  Group groupFor(uint32_t axes) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = groups.find(axes);
    return it == groups.end() ? Group() : it->second;
  }

  /// \p count new NCCL communicators over the group of \p axes, collective
  /// over its members: position 0 makes their ids, and the bootstrap
  /// communicator gives them to the others.
  std::vector<ncclComm_t> create(uint32_t axes, int count) {
    struct Ids {
      ncclResult_t status;
      ncclUniqueId ids[2];
    };
    int64_t size = groupSize(axes), position = groupPosition(axes);
    Ids mine{};
    mine.status = ncclSuccess;
    if (position == 0)
      for (int i = 0; i < count && mine.status == ncclSuccess; ++i)
        mine.status = ncclGetUniqueId(&mine.ids[i]);
    // Every member takes part even if position 0 failed, and then fails
    // with it instead of waiting for ids that never come.
    std::vector<Ids> all(static_cast<size_t>(size));
    bootstrap.allGather(axes, &mine, all.data(), int64_t(sizeof(Ids)),
                        PCCRT_U8);
    const Ids &first = all[0];
    if (first.status != ncclSuccess)
      fail("setup", axes,
           std::string("the group's first rank could not make an id: ") +
               ncclGetErrorString(first.status));
    checkCuda(cudaSetDevice(device), "selecting GPU " + std::to_string(device));
    std::vector<ncclComm_t> made;
    for (int i = 0; i < count; ++i) {
      ncclComm_t comm = nullptr;
      ncclResult_t result =
          ncclCommInitRank(&comm, int(size), first.ids[i], int(position));
      if (result != ncclSuccess) {
        for (ncclComm_t c : made)
          ncclCommAbort(c);
        fail("setup", axes, describe(result, nullptr));
      }
      made.push_back(comm);
    }
    return made;
  }

  /// Waits for the work queued on \p stream, polling so that an NCCL error
  /// or a peer that never comes ends the wait.
  void wait(cudaStream_t stream, const char *op, uint32_t axes) {
    poll([&] { return cudaStreamQuery(stream); }, op, axes);
  }

  /// Waits until \p query (a stream's or an event's) reports completion,
  /// watching for NCCL errors and the timeout.
  template <typename Query>
  void poll(Query query, const char *op, uint32_t axes) {
    using Clock = std::chrono::steady_clock;
    Clock::time_point start = Clock::now();
    for (;;) {
      cudaError_t state = query();
      if (state == cudaSuccess)
        return;
      if (state != cudaErrorNotReady)
        fail(op, axes, std::string("CUDA: ") + cudaGetErrorString(state));
      std::string error = asyncError();
      if (!error.empty())
        fail(op, axes, error);
      double waited =
          std::chrono::duration<double>(Clock::now() - start).count();
      if (timeout > 0 && waited > timeout)
        fail(op, axes,
             "no progress in " + std::to_string(int64_t(waited)) +
                 " s: a peer failed or hung");
      // Most operations end within microseconds: poll at first, then let
      // the core go between looks.
      if (waited < 0.01)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  /// The first asynchronous error of any communicator, or "".
  std::string asyncError() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto &[axes, group] : groups)
      for (ncclComm_t comm : group.comms()) {
        ncclResult_t result = ncclSuccess;
        if (!comm || ncclCommGetAsyncError(comm, &result) != ncclSuccess)
          continue;
        if (result != ncclSuccess && result != ncclInProgress)
          return describe(result, comm);
      }
    return "";
  }

  /// NCCL's name of \p result and its own account of the last error
  /// (which it keeps per thread; \p comm may be null).
  static std::string describe(ncclResult_t result, ncclComm_t comm) {
    std::string text = ncclGetErrorString(result);
    const char *last = ncclGetLastError(comm);
    if (last && *last)
      text += std::string(" (") + last + ")";
    return text;
  }

  void check(ncclResult_t result, const char *op, uint32_t axes,
             ncclComm_t comm) {
    if (result != ncclSuccess)
      fail(op, axes, describe(result, comm));
  }

  void checkCuda(cudaError_t error, const std::string &what) {
    if (error != cudaSuccess)
      throw Error("NCCL communicator: " + what + ": " +
                  cudaGetErrorString(error));
  }

  cudaEvent_t makeEvent() {
    cudaEvent_t event = nullptr;
    checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
              "creating an event");
    return event;
  }

  void checkUsable() {
    if (aborted)
      throw Error("NCCL communicator: aborted after an earlier failure");
  }

  /// Aborts every NCCL communicator, so that none waits for a peer that
  /// will not come, and throws the failure of \p op in the group of
  /// \p axes (kAllGroups: of whichever groups it waited for).
  [[noreturn]] void fail(const std::string &op, uint32_t axes,
                         const std::string &cause) {
    abortComms();
    std::string where = "in every group";
    if (axes != kAllGroups)
      where = "in the group of axes mask " + std::to_string(axes) +
              " (position " + std::to_string(groupPosition(axes)) + " of " +
              std::to_string(groupSize(axes)) + ")";
    throw Error(oneLine("NCCL " + op + " " + where + ": " + cause));
  }

  void abortComms() {
    std::lock_guard<std::mutex> lock(mutex);
    aborted = true;
    for (auto &[axes, group] : groups)
      for (ncclComm_t comm : group.comms())
        if (comm)
          ncclCommAbort(comm);
    groups.clear();
  }

  Communicator &bootstrap;
  int device;
  double timeout;
  cudaStream_t commStream = nullptr, sendStream = nullptr;
  /// Guards `groups` and `aborted` against abort() from another thread; it
  /// is never held while NCCL waits for peers.
  std::mutex mutex;
  std::map<uint32_t, Group> groups;
  std::atomic<bool> aborted{false};
  /// Collectives started in stream order and not yet waited for: the event
  /// each one's completion records on the communication stream.
  std::map<int32_t, cudaEvent_t> started;
  int32_t nextStarted = 0;
  /// Sends of start_send not yet waited for, by request.
  std::map<int32_t, cudaEvent_t> sends;
  int32_t nextSend = 0;
  /// Set while a started collective is queued: it does not wait on the
  /// host.
  bool streamOrdered = false;
};

} // namespace

extern "C" Communicator *pccrt_nccl_create(Communicator *bootstrap,
                                           int localRank, double timeoutSeconds,
                                           char *error, size_t errorSize) {
  std::string message;
  try {
    int devices = 0;
    cudaError_t result = cudaGetDeviceCount(&devices);
    if (result != cudaSuccess)
      throw Error(std::string("no GPU: ") + cudaGetErrorString(result));
    if (devices < 1)
      throw Error("no GPU");
    if (!bootstrap)
      throw Error("no bootstrap communicator");
    // NCCL needs a GPU of its own per rank: two ranks on one device fail
    // at their first operation ("duplicate GPU"), long after this point.
    if (localRank >= devices)
      throw Error("local rank " + std::to_string(localRank) + " of this "
                  "host has no GPU of its own (the host has " +
                  std::to_string(devices) + "): start at most one rank per "
                  "GPU");
    int device = std::max(localRank, 0);
    return new NcclCommunicator(*bootstrap, device, timeoutSeconds);
  } catch (const std::exception &e) {
    message = e.what();
  } catch (...) {
    message = "unknown failure";
  }
  if (error && errorSize) {
    size_t n = std::min(message.size(), errorSize - 1);
    std::memcpy(error, message.data(), n);
    error[n] = 0;
  }
  return nullptr;
}
