//===- Comm.h - Communicators of multi-rank programs ------------*- C++ -*-===//
//
// A backend-neutral communicator: the ranks of a program arranged on a mesh,
// with the collectives and transfers that generated code calls through the
// pccrt_comm handle of its run context (pccrt.h). Backends: MPI (Debian's
// Open MPI) for the CPU target; TCP sockets for ranks that a torchrun-style
// launcher started without MPI; NCCL (libpccrt_nccl.so, loaded at run time)
// for the CUDA target on GPUs, set up over either of the others.
//
// A rank records in a RankMonitor which step it runs and which operation it
// waits in, so that a watchdog can end a rank whose peer died or hung
// instead of letting it wait forever, and so that the process that launched
// the ranks can say which rank failed and where the others were.
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_COMM_H
#define PCCRT_COMM_H

#include "pccrt/pccrt.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pccrt {

struct CommTrampolines;

/// The operations a rank can wait in, as its monitor reports them.
enum class CommOp : int32_t {
  None = 0,
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Send,
  Recv,
  /// Completing started sends (Communicator::waitAll).
  Wait,
  /// An agreement of all ranks (Communicator::agree).
  Barrier,
  /// The shutdown of the backend, which waits for every rank.
  Finalize,
};

/// "all_reduce", "all_gather", ..., "barrier", "finalize"; "none".
const char *commOpName(CommOp op);

/// Where one rank stands. Kept in memory, or in a status file that the
/// launcher created and reads while the rank runs (a shared mapping, so that
/// recording an operation costs two stores, not a write to a file).
class RankMonitor {
public:
  enum class Phase : int32_t {
    Starting = 0, ///< the initial value of a fresh status file
    Running,      ///< set up, or running steps
    Done,         ///< finished without error
    Error,        ///< failed with the recorded message
    TimedOut,     ///< waited in one operation longer than the timeout
    FaultExit,    ///< exited on purpose (pcc run --fault kind=exit)
    FaultHang,    ///< hangs on purpose (pcc run --fault kind=hang)
  };

  /// The status file's layout, fixed so that the launcher can read it.
  struct Status {
    std::atomic<int32_t> phase;
    std::atomic<int32_t> op;      ///< the CommOp this rank waits in
    std::atomic<int64_t> step;    ///< the step it runs, from 1; 0 before
    std::atomic<int64_t> opSince; ///< CLOCK_MONOTONIC ns when `op` began
    std::atomic<int32_t> pid;
    std::atomic<int32_t> printed; ///< 1 if the rank printed `message` itself
    char message[1008];           ///< of Error and TimedOut, NUL-terminated
  };

  /// A status in this process's memory.
  RankMonitor();
  /// The status in \p statusFile (made by the launcher), mapped shared;
  /// throws an Error naming the file if it cannot be mapped.
  explicit RankMonitor(const std::string &statusFile);
  /// The monitor of world rank \p rank: in the file the launcher named
  /// in $PCCRT_STATUS_DIR (see launchRanks), else in memory.
  static std::unique_ptr<RankMonitor> forRank(int rank);
  ~RankMonitor();
  RankMonitor(const RankMonitor &) = delete;
  RankMonitor &operator=(const RankMonitor &) = delete;

  /// True if a launcher reads this status (then it reports failures).
  bool sharedWithLauncher() const { return mapped; }
  const Status &status() const { return *state; }

  void setStep(int64_t step);
  int64_t step() const;
  void setPhase(Phase phase);
  /// Records \p message and the phase (Error or TimedOut); \p printed says
  /// whether the rank printed it itself or leaves that to the launcher.
  void setError(Phase phase, const std::string &message, bool printed);

  /// Marks \p op as what this rank waits in until leave(); what was marked
  /// before is restored then (an agreement may run inside a gather).
  CommOp enter(CommOp op);
  void leave(CommOp previous);

  /// Starts a thread that calls \p onTimeout once, from that thread, when
  /// one operation has lasted more than \p seconds, with the operation and
  /// the seconds waited; and exits the process if its parent (the launcher)
  /// has gone, so that no rank outlives its job. Seconds <= 0: no timeout.
  void startWatchdog(double seconds,
                     std::function<void(CommOp, double)> onTimeout);

private:
  void stopWatchdog();

  Status *state;
  bool mapped = false;
  std::unique_ptr<Status> owned;
  std::thread watchdog;
  std::atomic<bool> stopping{false};
};

class Communicator {
public:
  virtual ~Communicator() = default;

  int rank() const { return rankIndex; }
  int numRanks() const { return worldSize; }
  const std::vector<int64_t> &meshShape() const { return mesh; }
  /// This rank's coordinate along mesh axis `axis`.
  int64_t coordinate(size_t axis) const;
  /// The size and this rank's position in the group of `axes` (a mask).
  int64_t groupSize(uint32_t axes) const;
  int64_t groupPosition(uint32_t axes) const;
  /// The mask of every mesh axis: the group of all ranks.
  uint32_t allAxes() const {
    return uint32_t((uint64_t(1) << mesh.size()) - 1);
  }
  /// The C handle for a run context.
  pccrt_comm *handle() { return &cHandle; }

  /// Records every operation in \p monitor (which must outlive its use
  /// here); null stops recording.
  void setMonitor(RankMonitor *monitor) { monitorPtr = monitor; }
  RankMonitor *monitor() const { return monitorPtr; }

  // The operations, as in pccrt_comm_ops; they throw pccrt::Error.
  void allReduce(uint32_t axes, void *data, int64_t count, int32_t dtype,
                 int32_t reduction);
  void allGather(uint32_t axes, const void *in, void *out, int64_t count,
                 int32_t dtype);
  void reduceScatter(uint32_t axes, const void *in, void *out, int64_t count,
                     int32_t dtype, int32_t reduction);
  void allToAll(uint32_t axes, const void *in, void *out, int64_t count,
                int32_t dtype);
  void send(uint32_t axes, int32_t peer, int32_t tag, const void *data,
            int64_t count, int32_t dtype);
  void recv(uint32_t axes, int32_t peer, int32_t tag, void *data, int64_t count,
            int32_t dtype);
  void isend(uint32_t axes, int32_t peer, int32_t tag, const void *data,
             int64_t count, int32_t dtype);
  void waitAll();
  /// A send completed by waitSend(request) (or waitAll), as in
  /// pccrt_comm_ops; returns the request (-1: completed already).
  int32_t startSend(uint32_t axes, int32_t peer, int32_t tag, const void *data,
                    int64_t count, int32_t dtype);
  void waitSend(int32_t request);

  /// Collectives started now and completed by wait(request), as in
  /// pccrt_comm_ops; they return the request (-1: completed already).
  int32_t startAllReduce(uint32_t axes, void *data, int64_t count,
                         int32_t dtype, int32_t reduction, void *stream);
  int32_t startAllGather(uint32_t axes, const void *in, void *out,
                         int64_t count, int32_t dtype, void *stream);
  int32_t startReduceScatter(uint32_t axes, const void *in, void *out,
                             int64_t count, int32_t dtype, int32_t reduction,
                             void *stream);
  /// Completes \p request; -1 completes every started collective (and, on
  /// a stream-ordered communicator, the work queued on \p stream).
  void wait(int32_t request, void *stream);
  /// Whether collectives work on device memory in stream order (NCCL).
  bool streamOrdered() const { return isStreamOrdered(); }

  /// Nanoseconds the caller has spent in collectives so far: in blocking
  /// ones, in starting them and in waiting for them. What a started
  /// collective overlaps with the caller's work is not counted; a run whose
  /// collectives all overlap spends only their starts here. Wall time: a
  /// collective within another, or on another thread at the same time, adds
  /// nothing more, so that it never exceeds the time that passed.
  int64_t collectiveNanoseconds() const { return collectiveNs; }

  /// Every rank tells the others whether it is ready to go on: \p error is
  /// empty if so, else why not (truncated to 1000 bytes). Returns the
  /// errors of all ranks, by rank, so that all of them stop together and
  /// one of them can report what went wrong where; all empty if none
  /// failed. Collective over all ranks.
  std::vector<std::string> agree(const std::string &error);

  /// Ends every rank of the program at once with exit status \p code:
  /// what a rank does when it cannot go on while others may be waiting for
  /// it. Callable from any thread.
  [[noreturn]] virtual void abort(int code);

  /// The last failure of an operation called through handle().
  const std::string &lastError() const { return error; }

protected:
  Communicator(int rank, int size, std::vector<int64_t> meshShape);
  /// Checks an axes mask against the mesh; throws otherwise.
  void checkAxes(uint32_t axes) const;

  // What backends implement; the public operations record them in the
  // monitor around these calls.
  virtual void doAllReduce(uint32_t axes, void *data, int64_t count,
                           int32_t dtype, int32_t reduction) = 0;
  virtual void doAllGather(uint32_t axes, const void *in, void *out,
                           int64_t count, int32_t dtype) = 0;
  virtual void doReduceScatter(uint32_t axes, const void *in, void *out,
                               int64_t count, int32_t dtype,
                               int32_t reduction) = 0;
  virtual void doAllToAll(uint32_t axes, const void *in, void *out,
                          int64_t count, int32_t dtype) = 0;
  virtual void doSend(uint32_t axes, int32_t peer, int32_t tag,
                      const void *data, int64_t count, int32_t dtype) = 0;
  virtual void doRecv(uint32_t axes, int32_t peer, int32_t tag, void *data,
                      int64_t count, int32_t dtype) = 0;
  /// Non-blocking sends; a backend without them sends at once.
  virtual void doIsend(uint32_t axes, int32_t peer, int32_t tag,
                       const void *data, int64_t count, int32_t dtype) {
    doSend(axes, peer, tag, data, count, dtype);
  }
  virtual void doWaitAll() {}
  /// Sends completed one by one; a backend without them sends at once
  /// (and returns -1).
  virtual int32_t doStartSend(uint32_t axes, int32_t peer, int32_t tag,
                              const void *data, int64_t count, int32_t dtype) {
    doSend(axes, peer, tag, data, count, dtype);
    return -1;
  }
  virtual void doWaitSend(int32_t request) {}
  /// A collective started apart from its completion: \p run performs it
  /// with the blocking operation above. The default runs it at once and
  /// returns -1; with PCCRT_DEFER_COLLECTIVES=1 in the environment (a test
  /// of the generated programs) it keeps it and runs it only when it is
  /// waited for, so that a program that reads a result before its wait,
  /// or overwrites an input, computes wrong numbers. A backend that
  /// overlaps collectives with the device's work (NCCL) overrides this,
  /// doWait and isStreamOrdered.
  virtual int32_t doStart(CommOp op, std::function<void()> run, void *stream);
  virtual void doWait(int32_t request, void *stream);
  virtual bool isStreamOrdered() const { return false; }
  /// Whether started collectives are kept until waited for
  /// (PCCRT_DEFER_COLLECTIVES=1).
  bool defersCollectives() const { return deferCollectives; }

  /// Marks an operation in the monitor for the lifetime of the scope.
  class OpScope {
  public:
    OpScope(const Communicator &comm, CommOp op);
    ~OpScope();

  private:
    RankMonitor *monitor;
    CommOp previous = CommOp::None;
  };

private:
  struct CHandle : pccrt_comm {
    Communicator *self;
  };
  /// Adds its lifetime to collectiveNs, less what another timer's already
  /// covers (the time while at least one collective runs).
  class CollectiveTimer {
  public:
    explicit CollectiveTimer(Communicator &comm);
    ~CollectiveTimer();

  private:
    Communicator &comm;
  };
  static const pccrt_comm_ops cOps;
  friend struct CommTrampolines;
  int rankIndex, worldSize;
  std::vector<int64_t> mesh;
  CHandle cHandle;
  std::string error;
  RankMonitor *monitorPtr = nullptr;
  int64_t collectiveNs = 0;
  /// The collectives running now, and since when one has.
  std::mutex timerMutex;
  int timersRunning = 0;
  int64_t timersSince = 0;
  /// Deferred collectives (PCCRT_DEFER_COLLECTIVES), by request.
  bool deferCollectives = false;
  int32_t nextRequest = 0;
  std::map<int32_t, std::pair<CommOp, std::function<void()>>> deferred;
};

/// True when libpccrt was built with MPI.
bool haveMpi();
/// Initializes MPI once (no-op if already initialized) and returns this
/// process's rank and the world size.
void initMpi(int *rank, int *size);
/// Shuts MPI down if it was initialized and is not yet finalized. It waits
/// for every rank: a monitor given marks the wait as CommOp::Finalize.
void finalizeMpi(RankMonitor *monitor = nullptr);
/// An MPI communicator over MPI_COMM_WORLD arranged on `meshShape`, whose
/// product must equal the world size.
std::unique_ptr<Communicator>
createMpiCommunicator(std::vector<int64_t> meshShape);

/// Where the ranks of a run without MPI find one another, as torchrun tells
/// its workers: this process's RANK of WORLD_SIZE, and MASTER_ADDR and
/// MASTER_PORT, where rank 0 listens; MASTER_PORT + 1 where torchrun's agent
/// serves its own store at MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True,
/// the default of its c10d and static rendezvous).
struct SocketBootstrap {
  int rank = 0;
  int worldSize = 1;
  std::string masterAddr;
  /// Where rank 0 listens, and what names it in messages.
  int masterPort = 0;
  std::string portSource = "MASTER_PORT";
  /// This rank's index on its host ($LOCAL_RANK), or -1 if not given.
  int localRank = -1;
  /// How long the ranks wait for one another to join; <= 0: no limit.
  double timeoutSeconds = 300;

  /// True if RANK or WORLD_SIZE is set in the environment.
  static bool inEnvironment();
  /// Reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and LOCAL_RANK (the
  /// last optional) and TORCHELASTIC_USE_AGENT_STORE; throws a one-line
  /// Error naming a variable that is missing or malformed.
  static SocketBootstrap fromEnvironment();
};

/// A communicator over TCP connections between every pair of the
/// bootstrap's ranks, arranged on `meshShape` (whose product must be its
/// world size). Rank 0 listens on every address at the master port; the
/// others connect to it, retrying until the bootstrap's timeout since rank 0
/// may start last, and learn every rank's address from it; each then
/// connects to the ranks above it. All connections are made when this
/// returns; throws a one-line Error (the rendezvous failed, the port is
/// taken, the ranks disagree on the world size or the mesh) otherwise.
/// An operation that loses a peer (it exited or failed) throws an Error
/// naming it, and the communicator is unusable after; abort() closes every
/// connection, so that the other ranks fail too. Destroying it waits (up to
/// the timeout) for every rank to close its side, as MPI_Finalize does.
std::unique_ptr<Communicator>
createSocketCommunicator(std::vector<int64_t> meshShape,
                         const SocketBootstrap &bootstrap);

/// The NCCL communicator of a CUDA build on GPUs: the ranks, mesh and groups
/// of \p bootstrap (which must outlive it and which it uses to set up its
/// groups), its operations on device memory. It is loaded from
/// libpccrt_nccl.so, so that libpccrt needs neither CUDA nor NCCL: the one
/// named by $PCC_NCCL_LIBRARY if set, else the one in `../lib` beside this
/// executable, else the one the library path finds. That library resolves
/// libpccrt's symbols against the executable, which must export them (the
/// PCCRuntime target makes executables that link it do so when it builds
/// the library). The GPU is the \p localRank-th visible one (\p localRank:
/// this rank's index on its host; a rank without a GPU of its own is an
/// error); it becomes this thread's current device. An
/// operation that fails or waits longer than \p timeoutSeconds (0: no
/// limit) throws an Error after aborting the NCCL communicators. Records
/// its operations in \p bootstrap's monitor. Throws an Error saying why
/// when the library cannot be loaded or the communicator cannot be made.
std::unique_ptr<Communicator> loadNcclCommunicator(Communicator &bootstrap,
                                                   int localRank,
                                                   double timeoutSeconds);

} // namespace pccrt

/// The entry point of libpccrt_nccl.so, which loadNcclCommunicator calls:
/// a new NCCL communicator over \p bootstrap on the \p localRank-th visible
/// GPU (made this thread's current device), owned by the
/// caller; or null, with a one-line reason in \p error (NUL-terminated,
/// at most \p errorSize bytes). Throws nothing.
extern "C" pccrt::Communicator *
pccrt_nccl_create(pccrt::Communicator *bootstrap, int localRank,
                  double timeoutSeconds, char *error, size_t errorSize);

#endif // PCCRT_COMM_H
