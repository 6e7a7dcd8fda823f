//===- pcc_cuda_emulation.h - CUDA on the host, for tests -------*- C++ -*-===//
//
// Tests compile the .cu files of pcc's CUDA target as plain C++17 for the
// host, with this header force-included (`g++ -x c++ -include
// pcc_cuda_emulation.h model.cu`), so that the target is tested where no GPU
// exists. The header emulates what the generated code uses and nothing more:
// the kernel qualifiers and built-in variables, PCC_LAUNCH, block and warp
// synchronization, atomics, the device math names, bf16/half, the runtime API
// on host memory, and the cuBLASLt matmul served by cblas.
//
// A block's threads are fibers of the launching OS thread. Blocks run one
// after another, so results are bitwise reproducible. A fiber runs until its
// thread exits or waits at a barrier, so a kernel that never synchronizes
// costs one context switch in and one out per block. docs/CudaEmulation.md
// says what the emulation checks and what it cannot.
//
// Needs only libc, libstdc++ and (for cuBLASLt) cblas; x86-64 Linux.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_CUDA_EMULATION_H
#define PCC_CUDA_EMULATION_H

#define PCC_CUDA_EMULATION 1

#if !defined(__x86_64__) || !defined(__linux__)
#error "pcc_cuda_emulation.h switches fibers with x86-64 Linux assembly"
#endif

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#ifndef PCC_CUDA_EMULATION_NO_CUBLASLT
#include <cblas.h>
#endif

//===----------------------------------------------------------------------===//
// Qualifiers
//===----------------------------------------------------------------------===//

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
// A block runs entirely on one OS thread, so a thread-local static is one
// object per block's threads, as shared memory is. Blocks that later run on
// the same OS thread see what the previous one left, which CUDA does not
// promise either. `extern __shared__` (dynamic shared memory) has no
// equivalent: PCC_LAUNCH asks for none.
#define __shared__ static thread_local
// __restrict__ is a GNU keyword already.

/// The launch configuration type; converts from an integer as CUDA's does.
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1)
      : x(x), y(y), z(z) {}
};

/// The type of threadIdx and blockIdx.
struct uint3 {
  unsigned x, y, z;
};

inline constexpr int warpSize = 32;

//===----------------------------------------------------------------------===//
// Runtime API types and errors
//===----------------------------------------------------------------------===//

/// Values are CUDA's, so that a printed code means the same thing.
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorIllegalState = 401,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

/// A recorded graph: the work captured from a stream, in its order. Each
/// node returns cudaSuccess or why it failed when it runs.
struct CUgraph_st {
  std::vector<std::function<cudaError_t()>> Nodes;
};
typedef CUgraph_st *cudaGraph_t;
struct CUgraphExec_st {
  std::vector<std::function<cudaError_t()>> Nodes;
};
typedef CUgraphExec_st *cudaGraphExec_t;

enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

struct CUstream_st {
  unsigned Flags;
  /// The graph being recorded from this stream, if any, and the first
  /// error that invalidated the recording.
  CUgraph_st *Capture = nullptr;
  cudaError_t CaptureError = cudaSuccess;
};
typedef CUstream_st *cudaStream_t;

struct CUevent_st {
  unsigned Flags;
  bool Recorded;
  std::chrono::steady_clock::time_point Time;
};
typedef CUevent_st *cudaEvent_t;

enum : unsigned {
  cudaStreamDefault = 0x0,
  cudaStreamNonBlocking = 0x1,
  cudaEventDefault = 0x0,
  cudaEventBlockingSync = 0x1,
  cudaEventDisableTiming = 0x2,
};

/// The number of devices the emulation reports; several ranks in one process
/// may each want their own. They all share host memory.
#ifndef PCC_CUDA_EMULATION_DEVICE_COUNT
#define PCC_CUDA_EMULATION_DEVICE_COUNT 1
#endif

namespace pcc_cuda {
namespace detail {

// Like CUDA's, the last error is per host thread.
inline thread_local cudaError_t LastError = cudaSuccess;
inline thread_local int CurrentDevice = 0;

inline cudaError_t recordError(cudaError_t Error) {
  if (Error != cudaSuccess)
    LastError = Error;
  return Error;
}

/// The stream this host thread is recording a graph from (captures are
/// thread-local, cudaStreamCaptureModeThreadLocal; one at a time).
inline thread_local CUstream_st *CapturingStream = nullptr;

inline bool capturing(cudaStream_t Stream) {
  return Stream && Stream->Capture;
}

/// A call that a recording forbids: CUDA fails it and invalidates the
/// recording, whose end then fails.
inline cudaError_t invalidateCapture(cudaStream_t Stream, cudaError_t Error) {
  if (Stream && Stream->CaptureError == cudaSuccess)
    Stream->CaptureError = Error;
  return recordError(Error);
}

/// Calls that may synchronize implicitly (cudaMalloc, cudaMemcpy, ...) are
/// forbidden on a thread that is recording.
inline cudaError_t checkNotCapturing() {
  if (CapturingStream)
    return invalidateCapture(CapturingStream, cudaErrorStreamCaptureImplicit);
  return cudaSuccess;
}

/// Work queued on a stream: recorded when the stream is recording, else
/// run now.
inline cudaError_t enqueue(cudaStream_t Stream,
                           std::function<cudaError_t()> Work) {
  if (capturing(Stream)) {
    if (Stream->CaptureError == cudaSuccess)
      Stream->Capture->Nodes.push_back(std::move(Work));
    return cudaSuccess;
  }
  return Work();
}

[[noreturn]] __attribute__((format(printf, 1, 2))) inline void
fatal(const char *Format, ...) {
  std::fputs("pcc cuda emulation: ", stderr);
  va_list Args;
  va_start(Args, Format);
  std::vfprintf(stderr, Format, Args);
  va_end(Args);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  std::abort();
}

//===----------------------------------------------------------------------===//
// Fibers
//===----------------------------------------------------------------------===//

/// Each emulated thread gets this much stack. Kernels keep their locals in
/// registers on a GPU; 64 KiB leaves room for printf and spilled arrays.
#ifdef PCC_CUDA_EMULATION_STACK_BYTES
constexpr size_t kFiberStackBytes = PCC_CUDA_EMULATION_STACK_BYTES;
#else
constexpr size_t kFiberStackBytes = 64 * 1024;
#endif
constexpr unsigned kMaxThreadsPerBlock = 1024;

} // namespace detail
} // namespace pcc_cuda

// Saves the callee-saved state of the System V ABI (rbx, rbp, r12-r15, the
// MXCSR and x87 control words) on the current stack, stores the stack pointer
// in *rdi, and resumes the context whose stack pointer is rsi. ucontext's
// swapcontext would also save the signal mask, a system call per switch.
// The function lives in a COMDAT group so that every translation unit that
// includes this header may define it.
asm(".pushsection .text.pcc_cuda_swap_context,\"axG\",@progbits,"
    "pcc_cuda_swap_context,comdat"
    R"(
  .weak pcc_cuda_swap_context
  .hidden pcc_cuda_swap_context
  .type pcc_cuda_swap_context,@function
  .p2align 4
pcc_cuda_swap_context:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr 8(%rsp)
  fldcw (%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size pcc_cuda_swap_context, .-pcc_cuda_swap_context
  .popsection
)");

extern "C" __attribute__((visibility("hidden"))) void
pcc_cuda_swap_context(void **SaveSp, void *LoadSp);

namespace pcc_cuda {
namespace detail {

struct ThreadState;

struct Fiber {
  void *Sp = nullptr;
  void *Mapping = nullptr;
  size_t MappingBytes = 0;
};

enum class WaitKind : uint8_t { None, Block, Warp };

/// Warp-level operations; the lanes meeting at one warp barrier must all be
/// doing the same one.
enum class WarpOp : uint8_t { Shuffle, Sync, Ballot, All, Any };

inline const char *warpOpName(WarpOp Op) {
  switch (Op) {
  case WarpOp::Shuffle:
    return "__shfl*_sync";
  case WarpOp::Sync:
    return "__syncwarp";
  case WarpOp::Ballot:
    return "__ballot_sync";
  case WarpOp::All:
    return "__all_sync";
  case WarpOp::Any:
    return "__any_sync";
  }
  return "?";
}

struct ThreadState {
  uint3 Idx;
  unsigned Linear;
  Fiber *Fib;
  WaitKind Waiting;
  // What the thread publishes at a warp operation and what it gets back.
  bool Pred;
  int Src; // Lane to read, or -1 for the thread's own value.
  uint64_t Value;
  uint64_t Result;
};

/// One warp-level operation in progress: the lanes of Mask meet there, and
/// it completes when every lane of Mask that has not exited has arrived.
struct WarpGroup {
  uint32_t Mask;
  uint32_t Arrived;
  WarpOp Op;
};

/// Lanes of one warp may wait in several operations with different masks at
/// once (the lower half-warp shuffles among itself while the upper half waits
/// in __syncwarp for it); a lane waits in at most one.
struct WarpState {
  uint32_t Live; // Lanes that exist and have not exited.
  std::vector<WarpGroup> Groups;
};

struct LaunchInfo {
  const char *Name;
  dim3 Grid, Block;
  void (*Invoke)(void *);
  void *Body;
};

/// The emulated device of one OS thread: its fiber pool and the state of the
/// block being run.
class Machine {
public:
  Machine() = default;
  Machine(const Machine &) = delete;
  Machine &operator=(const Machine &) = delete;
  ~Machine();

  void run(const LaunchInfo &Launch);

  void syncThreads();
  uint64_t warpOp(unsigned Mask, WarpOp Op, uint64_t Value, int Src, bool Pred);

  ThreadState *Current = nullptr;
  uint3 BlockIdx{0, 0, 0};
  dim3 BlockDim, GridDim;
  const LaunchInfo *Launch = nullptr;

  [[noreturn]] static void fiberMain() noexcept;

private:
  Fiber *acquireFiber();
  void startThread(ThreadState &T, Fiber *F);
  void runBlock();
  /// Parks the running thread until the scheduler resumes it. The call is
  /// opaque, so the compiler reloads shared memory after it.
  void suspend() { pcc_cuda_swap_context(&Current->Fib->Sp, SchedulerSp); }
  void makeReady(ThreadState &T);
  void releaseBlockBarrier();
  void releaseWarpGroup(WarpState &W, size_t Group, unsigned WarpIndex);
  void exitThread();
  bool readyEmpty() const { return ReadyCount == 0; }
  [[noreturn]] void reportDeadlock();

  std::vector<Fiber *> AllFibers, FreeFibers;
  std::vector<ThreadState> Threads;
  std::vector<WarpState> Warps;
  std::vector<ThreadState *> BlockWaiters;
  std::vector<ThreadState *> Ready; // A ring of NumThreads entries.
  size_t ReadyHead = 0, ReadyCount = 0;
  unsigned NumThreads = 0, NextUnstarted = 0, NumExited = 0;
  unsigned BlockArrived = 0;
  void *SchedulerSp = nullptr;
};

// A plain pointer, so that reading the built-in variables needs no TLS
// initialization wrapper.
inline thread_local Machine *CurrentMachine = nullptr;

inline Machine::~Machine() {
  if (CurrentMachine == this)
    CurrentMachine = nullptr;
  for (Fiber *F : AllFibers) {
    munmap(F->Mapping, F->MappingBytes);
    delete F;
  }
}

inline Machine &machine() {
  // Owns the machine of this OS thread; runs once per launch, not per access.
  static thread_local std::unique_ptr<Machine> Owner;
  if (!Owner)
    Owner = std::make_unique<Machine>();
  return *Owner;
}

inline Machine &runningMachine(const char *What) {
  Machine *M = CurrentMachine;
  if (!M || !M->Current)
    fatal("%s called outside a kernel", What);
  return *M;
}

inline Fiber *Machine::acquireFiber() {
  if (!FreeFibers.empty()) {
    Fiber *F = FreeFibers.back();
    FreeFibers.pop_back();
    return F;
  }
  size_t Page = size_t(sysconf(_SC_PAGESIZE));
  size_t StackBytes = (kFiberStackBytes + Page - 1) / Page * Page;
  // One page below the stack stays inaccessible, so that an overflow faults
  // instead of writing into the neighbouring fiber.
  size_t Bytes = StackBytes + Page;
  void *Mapping = mmap(nullptr, Bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (Mapping == MAP_FAILED)
    fatal("cannot map a %zu-byte fiber stack", Bytes);
  mprotect(Mapping, Page, PROT_NONE);
  auto *F = new Fiber;
  F->Mapping = Mapping;
  F->MappingBytes = Bytes;

  // The first switch to the fiber pops the frame that pcc_cuda_swap_context
  // pushes and "returns" into fiberMain with the stack aligned as after a
  // call. Its own return address is null, which ends backtraces.
  auto *Top =
      reinterpret_cast<uint64_t *>(static_cast<char *>(Mapping) + Bytes);
  Top[-1] = 0;
  Top[-2] = reinterpret_cast<uint64_t>(&Machine::fiberMain);
  for (int I = 3; I <= 8; ++I)
    Top[-I] = 0; // rbp, rbx, r12-r15
  // The fiber starts with the floating-point modes of the launching thread.
  uint32_t Mxcsr;
  uint16_t ControlWord;
  asm volatile("stmxcsr %0" : "=m"(Mxcsr));
  asm volatile("fnstcw %0" : "=m"(ControlWord));
  Top[-9] = Mxcsr;
  Top[-10] = ControlWord;
  F->Sp = &Top[-10];
  AllFibers.push_back(F);
  return F;
}

inline void Machine::startThread(ThreadState &T, Fiber *F) {
  unsigned I = unsigned(&T - Threads.data());
  T.Linear = I;
  T.Idx.x = I % BlockDim.x;
  T.Idx.y = I / BlockDim.x % BlockDim.y;
  T.Idx.z = I / (BlockDim.x * BlockDim.y);
  T.Fib = F;
  T.Waiting = WaitKind::None;
}

inline void Machine::makeReady(ThreadState &T) {
  T.Waiting = WaitKind::None;
  Ready[(ReadyHead + ReadyCount) % NumThreads] = &T;
  ++ReadyCount;
}

inline void Machine::releaseBlockBarrier() {
  for (ThreadState *T : BlockWaiters)
    makeReady(*T);
  BlockWaiters.clear();
  BlockArrived = 0;
}

inline void Machine::syncThreads() {
  // Exited threads count as arrived: a kernel whose surplus threads return
  // early and whose others then synchronize does not deadlock.
  if (++BlockArrived == NumThreads - NumExited) {
    releaseBlockBarrier();
    asm volatile("" ::: "memory");
    return;
  }
  BlockWaiters.push_back(Current);
  Current->Waiting = WaitKind::Block;
  suspend();
}

inline void Machine::releaseWarpGroup(WarpState &W, size_t Group,
                                      unsigned WarpIndex) {
  WarpGroup G = W.Groups[Group];
  W.Groups[Group] = W.Groups.back();
  W.Groups.pop_back();
  ThreadState *Lanes = &Threads[WarpIndex * 32];
  uint32_t Ballot = 0;
  for (uint32_t Bits = G.Arrived; Bits; Bits &= Bits - 1) {
    unsigned Lane = unsigned(__builtin_ctz(Bits));
    if (Lanes[Lane].Pred)
      Ballot |= 1u << Lane;
  }
  for (uint32_t Bits = G.Arrived; Bits; Bits &= Bits - 1) {
    ThreadState &L = Lanes[__builtin_ctz(Bits)];
    switch (G.Op) {
    case WarpOp::Shuffle:
      if (L.Src < 0)
        L.Result = L.Value;
      else if (G.Arrived >> L.Src & 1)
        L.Result = Lanes[L.Src].Value;
      else
        // The source lane does not exist, has exited or is not in the
        // mask: CUDA leaves the result undefined; all-ones bits are a NaN
        // for every floating-point type, which tests notice.
        L.Result = ~uint64_t(0);
      break;
    case WarpOp::Sync:
    case WarpOp::Ballot:
      L.Result = Ballot;
      break;
    case WarpOp::All:
      L.Result = Ballot == G.Arrived;
      break;
    case WarpOp::Any:
      L.Result = Ballot != 0;
      break;
    }
    if (&L != Current)
      makeReady(L);
  }
}

inline uint64_t Machine::warpOp(unsigned Mask, WarpOp Op, uint64_t Value,
                                int Src, bool Pred) {
  ThreadState &T = *Current;
  unsigned WarpIndex = T.Linear / 32, Lane = T.Linear % 32;
  WarpState &W = Warps[WarpIndex];
  uint32_t Bit = 1u << Lane;
  if (!(Mask & Bit))
    fatal("kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s with mask "
          "0x%08x, which excludes the calling lane %u",
          Launch->Name, BlockIdx.x, BlockIdx.y, BlockIdx.z, T.Idx.x, T.Idx.y,
          T.Idx.z, warpOpName(Op), Mask, Lane);
  size_t Group = 0;
  while (Group < W.Groups.size() && W.Groups[Group].Mask != Mask)
    ++Group;
  if (Group == W.Groups.size()) {
    W.Groups.push_back({Mask, 0, Op});
  } else if (W.Groups[Group].Op != Op) {
    const WarpGroup &G = W.Groups[Group];
    fatal("kernel %s, block (%u,%u,%u), warp %u: lane %u calls %s while "
          "lanes 0x%08x wait in %s, both with mask 0x%08x",
          Launch->Name, BlockIdx.x, BlockIdx.y, BlockIdx.z, WarpIndex, Lane,
          warpOpName(Op), G.Arrived, warpOpName(G.Op), Mask);
  }
  T.Value = Value;
  T.Src = Src;
  T.Pred = Pred;
  WarpGroup &G = W.Groups[Group];
  G.Arrived |= Bit;
  if (G.Arrived == (G.Mask & W.Live)) {
    releaseWarpGroup(W, Group, WarpIndex);
    asm volatile("" ::: "memory");
    return T.Result;
  }
  T.Waiting = WaitKind::Warp;
  suspend();
  return T.Result;
}

inline void Machine::exitThread() {
  ThreadState &T = *Current;
  ++NumExited;
  if (BlockArrived && BlockArrived == NumThreads - NumExited)
    releaseBlockBarrier();
  unsigned WarpIndex = T.Linear / 32;
  WarpState &W = Warps[WarpIndex];
  W.Live &= ~(1u << T.Linear % 32);
  // Releasing swaps the last group into the released one's place.
  for (size_t Group = 0; Group < W.Groups.size();) {
    if (W.Groups[Group].Arrived == (W.Groups[Group].Mask & W.Live))
      releaseWarpGroup(W, Group, WarpIndex);
    else
      ++Group;
  }
}

inline void Machine::fiberMain() noexcept {
  Machine &M = *CurrentMachine;
  for (;;) {
    M.Launch->Invoke(M.Launch->Body);
    M.exitThread();
    Fiber *F = M.Current->Fib;
    // Start the next thread on this fiber when nothing else can run: a
    // kernel that never synchronizes then switches twice per block.
    if (M.readyEmpty() && M.NextUnstarted < M.NumThreads) {
      ThreadState &Next = M.Threads[M.NextUnstarted++];
      M.startThread(Next, F);
      M.Current = &Next;
      continue;
    }
    M.FreeFibers.push_back(F);
    pcc_cuda_swap_context(&F->Sp, M.SchedulerSp);
    // Resumed by the scheduler with a fresh thread to run.
  }
}

inline void Machine::runBlock() {
  NextUnstarted = 0;
  NumExited = 0;
  BlockArrived = 0;
  BlockWaiters.clear();
  ReadyHead = ReadyCount = 0;
  for (unsigned W = 0; W < Warps.size(); ++W) {
    unsigned Lanes = NumThreads - W * 32 < 32 ? NumThreads - W * 32 : 32;
    Warps[W].Live = Lanes == 32 ? ~0u : (1u << Lanes) - 1;
    Warps[W].Groups.clear();
  }
  for (;;) {
    ThreadState *T;
    if (ReadyCount) {
      T = Ready[ReadyHead];
      ReadyHead = (ReadyHead + 1) % NumThreads;
      --ReadyCount;
    } else if (NextUnstarted < NumThreads) {
      T = &Threads[NextUnstarted++];
      startThread(*T, acquireFiber());
    } else if (NumExited == NumThreads) {
      break;
    } else {
      reportDeadlock();
    }
    Current = T;
    pcc_cuda_swap_context(&SchedulerSp, T->Fib->Sp);
  }
}

inline void Machine::reportDeadlock() {
  unsigned AtBlock = 0, AtWarp = 0;
  for (const ThreadState &T : Threads) {
    AtBlock += T.Waiting == WaitKind::Block;
    AtWarp += T.Waiting == WaitKind::Warp;
  }
  std::fprintf(stderr,
               "pcc cuda emulation: deadlock in kernel %s, block (%u,%u,%u) "
               "of grid (%u,%u,%u), block size (%u,%u,%u): %u threads wait "
               "at __syncthreads, %u at warp operations, %u exited\n",
               Launch->Name, BlockIdx.x, BlockIdx.y, BlockIdx.z, GridDim.x,
               GridDim.y, GridDim.z, BlockDim.x, BlockDim.y, BlockDim.z,
               AtBlock, AtWarp, NumExited);
  for (unsigned I = 0; I < Warps.size(); ++I) {
    for (const WarpGroup &G : Warps[I].Groups)
      std::fprintf(
          stderr, "  warp %u: lanes 0x%08x wait in %s for lanes 0x%08x\n", I,
          G.Arrived, warpOpName(G.Op), G.Mask & Warps[I].Live & ~G.Arrived);
  }
  fatal("deadlock in kernel %s, block (%u,%u,%u)", Launch->Name, BlockIdx.x,
        BlockIdx.y, BlockIdx.z);
}

inline void Machine::run(const LaunchInfo &L) {
  if (Launch)
    fatal("kernel %s launched from kernel %s: dynamic parallelism is not "
          "emulated",
          L.Name, Launch->Name);
  // Each shared library that includes this header owns a machine, but they
  // may share this variable: claim it for the launch.
  CurrentMachine = this;
  Launch = &L;
  GridDim = L.Grid;
  BlockDim = L.Block;
  NumThreads = L.Block.x * L.Block.y * L.Block.z;
  Threads.resize(NumThreads);
  Warps.resize((NumThreads + 31) / 32);
  Ready.resize(NumThreads);
  BlockWaiters.reserve(NumThreads);
  for (unsigned Z = 0; Z < L.Grid.z; ++Z)
    for (unsigned Y = 0; Y < L.Grid.y; ++Y)
      for (unsigned X = 0; X < L.Grid.x; ++X) {
        BlockIdx = {X, Y, Z};
        runBlock();
      }
  Current = nullptr;
  Launch = nullptr;
}

/// CUDA's limits for compute capability 7.0 and later.
inline bool validConfiguration(const dim3 &G, const dim3 &B) {
  uint64_t Threads = uint64_t(B.x) * B.y * B.z;
  return G.x && G.y && G.z && Threads && Threads <= kMaxThreadsPerBlock &&
         B.x <= 1024 && B.y <= 1024 && B.z <= 64 && G.y <= 65535 &&
         G.z <= 65535;
}

inline cudaError_t launch(const LaunchInfo &L) {
  if (!validConfiguration(L.Grid, L.Block))
    return recordError(cudaErrorInvalidConfiguration);
  machine().run(L);
  return cudaSuccess;
}

/// The arguments of a launch, converted to the kernel's parameter types
/// (one base per parameter), and the kernel. Lighter to compile than
/// std::tuple and std::apply, which took most of a model's compile time:
/// a launch instantiates this once per kernel signature.
template <size_t I, typename T> struct LaunchArg { T Value; };
template <typename Indices, typename... Params> struct LaunchArgs;
template <size_t... Is, typename... Params>
struct LaunchArgs<std::index_sequence<Is...>, Params...>
    : LaunchArg<Is, Params>... {
  void (*Kernel)(Params...);
  static void invoke(void *B) {
    const auto &Args = *static_cast<const LaunchArgs *>(B);
    Args.Kernel(static_cast<const LaunchArg<Is, Params> &>(Args).Value...);
  }
};

/// `Value`, converted as an argument is to its parameter's type.
template <typename Param, typename Arg> Param convertArgument(Arg &&Value) {
  return std::forward<Arg>(Value);
}

/// Runs a launch whose arguments are converted, or records it.
template <typename Pack>
void launchPack(const char *Name, const Pack &Values, dim3 Grid, dim3 Block,
                cudaStream_t Stream) {
  if (capturing(Stream)) {
    if (!validConfiguration(Grid, Block)) {
      invalidateCapture(Stream, cudaErrorInvalidConfiguration);
      return;
    }
    enqueue(Stream, [=]() {
      LaunchInfo L{Name, Grid, Block, &Pack::invoke,
                   const_cast<Pack *>(&Values)};
      return launch(L);
    });
    return;
  }
  LaunchInfo L{Name, Grid, Block, &Pack::invoke, const_cast<Pack *>(&Values)};
  launch(L);
}

/// Runs Kernel over the grid. Like CUDA, converts the arguments to the
/// kernel's parameter types once; every thread gets a copy of that.
/// On a stream that records a graph, the launch and its converted
/// arguments are recorded (a bad configuration fails at once, as CUDA's).
template <typename... Params, typename... Args>
void launchKernel(const char *Name, void (*Kernel)(Params...), dim3 Grid,
                  dim3 Block, cudaStream_t Stream, Args &&...A) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "PCC_LAUNCH: wrong number of kernel arguments");
  using Pack = LaunchArgs<std::index_sequence_for<Params...>, Params...>;
  Pack Values{{convertArgument<Params>(std::forward<Args>(A))}..., Kernel};
  launchPack(Name, Values, Grid, Block, Stream);
}

template <typename T> uint64_t toBits(T V) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "warp shuffles move values of at most 8 bytes");
  uint64_t Bits = 0;
  std::memcpy(&Bits, &V, sizeof(T));
  return Bits;
}

template <typename T> T fromBits(uint64_t Bits) {
  T V;
  std::memcpy(&V, &Bits, sizeof(T));
  return V;
}

inline unsigned laneId() {
  return runningMachine("a warp operation").Current->Linear % 32;
}

inline void checkWidth(int Width) {
  if (Width < 1 || Width > 32 || (Width & (Width - 1)))
    fatal("shuffle width %d is not a power of two in [1, 32]", Width);
}

template <typename T> T shuffle(unsigned Mask, T Var, int Src) {
  return fromBits<T>(
      CurrentMachine->warpOp(Mask, WarpOp::Shuffle, toBits(Var), Src, false));
}

} // namespace detail
} // namespace pcc_cuda

//===----------------------------------------------------------------------===//
// Built-in variables, launch, synchronization
//===----------------------------------------------------------------------===//

// Read-only views of the state of the running thread and block.
#define threadIdx                                                              \
  (static_cast<const uint3 &>(::pcc_cuda::detail::CurrentMachine->Current->Idx))
#define blockIdx                                                               \
  (static_cast<const uint3 &>(::pcc_cuda::detail::CurrentMachine->BlockIdx))
#define blockDim                                                               \
  (static_cast<const dim3 &>(::pcc_cuda::detail::CurrentMachine->BlockDim))
#define gridDim                                                                \
  (static_cast<const dim3 &>(::pcc_cuda::detail::CurrentMachine->GridDim))

// Synchronous: the kernel has run over the whole grid when this returns. An
// invalid configuration is reported by cudaGetLastError, as in CUDA.
#ifndef PCC_LAUNCH
#define PCC_LAUNCH(kernel, grid, block, stream, ...)                           \
  ::pcc_cuda::detail::launchKernel(#kernel, kernel, grid, block, stream,       \
                                   ##__VA_ARGS__)
#endif

inline void __syncthreads() {
  ::pcc_cuda::detail::runningMachine("__syncthreads").syncThreads();
}

inline void __syncwarp(unsigned Mask = 0xffffffffu) {
  ::pcc_cuda::detail::runningMachine("__syncwarp")
      .warpOp(Mask, ::pcc_cuda::detail::WarpOp::Sync, 0, -1, false);
}

inline unsigned __ballot_sync(unsigned Mask, int Pred) {
  return unsigned(
      ::pcc_cuda::detail::runningMachine("__ballot_sync")
          .warpOp(Mask, ::pcc_cuda::detail::WarpOp::Ballot, 0, -1, Pred != 0));
}

inline int __all_sync(unsigned Mask, int Pred) {
  return int(
      ::pcc_cuda::detail::runningMachine("__all_sync")
          .warpOp(Mask, ::pcc_cuda::detail::WarpOp::All, 0, -1, Pred != 0));
}

inline int __any_sync(unsigned Mask, int Pred) {
  return int(
      ::pcc_cuda::detail::runningMachine("__any_sync")
          .warpOp(Mask, ::pcc_cuda::detail::WarpOp::Any, 0, -1, Pred != 0));
}

// The shuffles pick their source lane as PTX's shfl.sync does: within the
// lane's segment of Width lanes, reading an earlier segment is allowed, and
// an out-of-range source yields the lane's own value.

template <typename T>
T __shfl_sync(unsigned Mask, T Var, int SrcLane, int Width = warpSize) {
  ::pcc_cuda::detail::checkWidth(Width);
  unsigned Lane = ::pcc_cuda::detail::laneId();
  unsigned First = Lane & ~unsigned(Width - 1);
  int Src = int(First | (unsigned(SrcLane) & unsigned(Width - 1)));
  return ::pcc_cuda::detail::shuffle(Mask, Var, Src);
}

template <typename T>
T __shfl_up_sync(unsigned Mask, T Var, unsigned Delta, int Width = warpSize) {
  ::pcc_cuda::detail::checkWidth(Width);
  unsigned Lane = ::pcc_cuda::detail::laneId();
  unsigned First = Lane & ~unsigned(Width - 1);
  int Src = Delta <= Lane - First ? int(Lane - Delta) : -1;
  return ::pcc_cuda::detail::shuffle(Mask, Var, Src);
}

template <typename T>
T __shfl_down_sync(unsigned Mask, T Var, unsigned Delta, int Width = warpSize) {
  ::pcc_cuda::detail::checkWidth(Width);
  unsigned Lane = ::pcc_cuda::detail::laneId();
  unsigned Last = Lane | unsigned(Width - 1);
  int Src = Delta <= Last - Lane ? int(Lane + Delta) : -1;
  return ::pcc_cuda::detail::shuffle(Mask, Var, Src);
}

template <typename T>
T __shfl_xor_sync(unsigned Mask, T Var, int LaneMask, int Width = warpSize) {
  ::pcc_cuda::detail::checkWidth(Width);
  unsigned Lane = ::pcc_cuda::detail::laneId();
  unsigned Last = Lane | unsigned(Width - 1);
  unsigned Src = Lane ^ unsigned(LaneMask);
  return ::pcc_cuda::detail::shuffle(Mask, Var, Src <= Last ? int(Src) : -1);
}

// Blocks run one at a time on one OS thread, so every access is already
// ordered; nothing to fence.
inline void __threadfence() {}
inline void __threadfence_block() {}

//===----------------------------------------------------------------------===//
// Atomics
//===----------------------------------------------------------------------===//
// Relaxed, like CUDA's, and atomic for real so that they stay correct if
// blocks ever run on several OS threads.

namespace pcc_cuda {
namespace detail {
/// Applies Op by compare-and-swap; for types and operations the __atomic
/// builtins lack (floating-point add, min/max).
template <typename T, typename Fn> T atomicUpdate(T *Address, Fn Op) {
  T Old;
  __atomic_load(Address, &Old, __ATOMIC_RELAXED);
  T New;
  do
    New = Op(Old);
  while (!__atomic_compare_exchange(Address, &Old, &New, /*weak=*/true,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return Old;
}
} // namespace detail
} // namespace pcc_cuda

#define PCC_CUDA_INTEGER_ATOMICS(T)                                            \
  inline T atomicAdd(T *Address, T Val) {                                      \
    return __atomic_fetch_add(Address, Val, __ATOMIC_RELAXED);                 \
  }                                                                            \
  inline T atomicSub(T *Address, T Val) {                                      \
    return __atomic_fetch_sub(Address, Val, __ATOMIC_RELAXED);                 \
  }                                                                            \
  inline T atomicAnd(T *Address, T Val) {                                      \
    return __atomic_fetch_and(Address, Val, __ATOMIC_RELAXED);                 \
  }                                                                            \
  inline T atomicOr(T *Address, T Val) {                                       \
    return __atomic_fetch_or(Address, Val, __ATOMIC_RELAXED);                  \
  }                                                                            \
  inline T atomicXor(T *Address, T Val) {                                      \
    return __atomic_fetch_xor(Address, Val, __ATOMIC_RELAXED);                 \
  }                                                                            \
  inline T atomicExch(T *Address, T Val) {                                     \
    return __atomic_exchange_n(Address, Val, __ATOMIC_RELAXED);                \
  }                                                                            \
  inline T atomicCAS(T *Address, T Compare, T Val) {                           \
    __atomic_compare_exchange_n(Address, &Compare, Val, /*weak=*/false,        \
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);           \
    return Compare;                                                            \
  }                                                                            \
  inline T atomicMax(T *Address, T Val) {                                      \
    return ::pcc_cuda::detail::atomicUpdate(                                   \
        Address, [Val](T Old) { return Old < Val ? Val : Old; });              \
  }                                                                            \
  inline T atomicMin(T *Address, T Val) {                                      \
    return ::pcc_cuda::detail::atomicUpdate(                                   \
        Address, [Val](T Old) { return Val < Old ? Val : Old; });              \
  }

PCC_CUDA_INTEGER_ATOMICS(int)
PCC_CUDA_INTEGER_ATOMICS(unsigned)
PCC_CUDA_INTEGER_ATOMICS(long long)
PCC_CUDA_INTEGER_ATOMICS(unsigned long long)
#undef PCC_CUDA_INTEGER_ATOMICS

inline float atomicAdd(float *Address, float Val) {
  return ::pcc_cuda::detail::atomicUpdate(
      Address, [Val](float Old) { return Old + Val; });
}
inline double atomicAdd(double *Address, double Val) {
  return ::pcc_cuda::detail::atomicUpdate(
      Address, [Val](double Old) { return Old + Val; });
}
inline float atomicExch(float *Address, float Val) {
  float Old;
  __atomic_exchange(Address, &Val, &Old, __ATOMIC_RELAXED);
  return Old;
}

//===----------------------------------------------------------------------===//
// Math
//===----------------------------------------------------------------------===//
// Device math has the host's names (expf, tanhf, ...); these are the
// CUDA-only ones. The fast intrinsics are exact here, which only makes
// results more accurate than on a GPU.

inline float __expf(float X) { return std::exp(X); }
inline float __logf(float X) { return std::log(X); }
inline float __sinf(float X) { return std::sin(X); }
inline float __cosf(float X) { return std::cos(X); }
inline float __powf(float X, float Y) { return std::pow(X, Y); }
inline float rsqrtf(float X) { return 1.0f / std::sqrt(X); }
inline double rsqrt(double X) { return 1.0 / std::sqrt(X); }
inline float __fdividef(float X, float Y) { return X / Y; }
inline float fdividef(float X, float Y) { return X / Y; }
inline float __frcp_rn(float X) { return 1.0f / X; }
inline float __fsqrt_rn(float X) { return std::sqrt(X); }
inline float __fmaf_rn(float X, float Y, float Z) { return std::fma(X, Y, Z); }
/// Clamps to [0, 1]; NaN becomes 0, as on the GPU.
inline float __saturatef(float X) {
  return X > 0.0f ? (X < 1.0f ? X : 1.0f) : 0.0f;
}
template <typename T> T __ldg(const T *Address) { return *Address; }

//===----------------------------------------------------------------------===//
// bf16 and half
//===----------------------------------------------------------------------===//
// Storage types; arithmetic goes through float, as the implicit conversions
// make it. Conversions from float round to nearest even; a NaN becomes the
// canonical NaN CUDA produces (0x7fff).

namespace pcc_cuda {
namespace detail {
inline uint32_t floatBits(float F) {
  uint32_t U;
  std::memcpy(&U, &F, 4);
  return U;
}
inline float bitsFloat(uint32_t U) {
  float F;
  std::memcpy(&F, &U, 4);
  return F;
}

inline uint16_t floatToBfloat16Bits(float F) {
  uint32_t U = floatBits(F);
  if ((U & 0x7fffffffu) > 0x7f800000u)
    return 0x7fff;
  // Adding 0x7fff rounds up when the dropped half exceeds 0x8000; the kept
  // low bit breaks ties towards even. Carries into the exponent are right.
  return uint16_t((U + 0x7fffu + ((U >> 16) & 1)) >> 16);
}

inline uint16_t floatToHalfBits(float F) {
  uint32_t U = floatBits(F);
  uint16_t Sign = uint16_t(U >> 16 & 0x8000);
  uint32_t A = U & 0x7fffffffu;
  if (A > 0x7f800000u)
    return 0x7fff;
  if (A >= 0x477ff000u) // At least 65520, which rounds to infinity.
    return Sign | 0x7c00;
  if (A >= 0x38800000u) { // Normal in half: rebias 127 -> 15, drop 13 bits.
    A += 0xfffu + ((A >> 13) & 1);
    return uint16_t(Sign | ((A - 0x38000000u) >> 13));
  }
  if (A <= 0x33000000u) // At most 2^-25, half the smallest subnormal: zero.
    return Sign;
  // A half subnormal: the value in units of 2^-24, rounded to nearest even.
  uint32_t Mantissa = (A & 0x7fffffu) | 0x800000u;
  unsigned Shift = 126 - (A >> 23);
  uint32_t Result = Mantissa >> Shift;
  uint32_t Rest = Mantissa & ((1u << Shift) - 1), Half = 1u << (Shift - 1);
  if (Rest > Half || (Rest == Half && (Result & 1)))
    ++Result;
  return uint16_t(Sign | Result);
}

inline float halfBitsToFloat(uint16_t H) {
  uint32_t Sign = uint32_t(H & 0x8000) << 16;
  uint32_t Exponent = H >> 10 & 0x1f, Mantissa = H & 0x3ff;
  if (Exponent == 0) { // Zero or subnormal: exact in float.
    float Magnitude = float(Mantissa) * 0x1p-24f;
    return Sign ? -Magnitude : Magnitude;
  }
  if (Exponent == 31)
    return bitsFloat(Sign | 0x7f800000u | Mantissa << 13);
  return bitsFloat(Sign | (Exponent + 112) << 23 | Mantissa << 13);
}
} // namespace detail
} // namespace pcc_cuda

struct __nv_bfloat16 {
  uint16_t Bits;
  __nv_bfloat16() = default;
  __nv_bfloat16(float F) : Bits(::pcc_cuda::detail::floatToBfloat16Bits(F)) {}
  operator float() const {
    return ::pcc_cuda::detail::bitsFloat(uint32_t(Bits) << 16);
  }
};
typedef __nv_bfloat16 nv_bfloat16;

struct __half {
  uint16_t Bits;
  __half() = default;
  __half(float F) : Bits(::pcc_cuda::detail::floatToHalfBits(F)) {}
  operator float() const { return ::pcc_cuda::detail::halfBitsToFloat(Bits); }
};
typedef __half half;

inline __nv_bfloat16 __float2bfloat16(float F) { return __nv_bfloat16(F); }
inline __nv_bfloat16 __float2bfloat16_rn(float F) { return __nv_bfloat16(F); }
inline float __bfloat162float(__nv_bfloat16 B) { return float(B); }
inline __half __float2half(float F) { return __half(F); }
inline __half __float2half_rn(float F) { return __half(F); }
inline float __half2float(__half H) { return float(H); }

//===----------------------------------------------------------------------===//
// Runtime API on host memory
//===----------------------------------------------------------------------===//
// Every call completes before it returns, so streams and events only order
// what is already ordered.

inline const char *cudaGetErrorName(cudaError_t Error) {
  switch (Error) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorInvalidValue:
    return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation:
    return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidConfiguration:
    return "cudaErrorInvalidConfiguration";
  case cudaErrorIllegalState:
    return "cudaErrorIllegalState";
  case cudaErrorLaunchFailure:
    return "cudaErrorLaunchFailure";
  case cudaErrorStreamCaptureUnsupported:
    return "cudaErrorStreamCaptureUnsupported";
  case cudaErrorStreamCaptureInvalidated:
    return "cudaErrorStreamCaptureInvalidated";
  case cudaErrorStreamCaptureImplicit:
    return "cudaErrorStreamCaptureImplicit";
  case cudaErrorNoDevice:
    return "cudaErrorNoDevice";
  case cudaErrorInvalidDevice:
    return "cudaErrorInvalidDevice";
  }
  return "cudaErrorUnknown";
}

inline const char *cudaGetErrorString(cudaError_t Error) {
  switch (Error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorIllegalState:
    return "the operation cannot be performed in the present state";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure";
  case cudaErrorStreamCaptureUnsupported:
    return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated:
    return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureImplicit:
    return "operation would make the legacy stream depend on a capturing "
           "blocking stream";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  }
  return "unknown error";
}

inline cudaError_t cudaGetLastError() {
  cudaError_t Error = ::pcc_cuda::detail::LastError;
  ::pcc_cuda::detail::LastError = cudaSuccess;
  return Error;
}

inline cudaError_t cudaPeekAtLastError() {
  return ::pcc_cuda::detail::LastError;
}

namespace pcc_cuda {
namespace detail {
/// Device allocations are aligned as cudaMalloc's and filled with all-ones
/// bytes (NaN as floats), so that reading memory no kernel wrote shows.
inline cudaError_t allocate(void **Ptr, size_t Bytes) {
  if (!Ptr)
    return recordError(cudaErrorInvalidValue);
  *Ptr = nullptr;
  if (!Bytes)
    return cudaSuccess;
  size_t Rounded = (Bytes + 255) / 256 * 256;
  if (Rounded < Bytes)
    return recordError(cudaErrorMemoryAllocation);
  void *P = std::aligned_alloc(256, Rounded);
  if (!P)
    return recordError(cudaErrorMemoryAllocation);
  std::memset(P, 0xff, Rounded);
  *Ptr = P;
  return cudaSuccess;
}
} // namespace detail
} // namespace pcc_cuda

// Allocation and the synchronous copies may synchronize the device, which
// a thread that records a graph must not do.
inline cudaError_t cudaMalloc(void **DevPtr, size_t Bytes) {
  if (cudaError_t Error = ::pcc_cuda::detail::checkNotCapturing())
    return Error;
  return ::pcc_cuda::detail::allocate(DevPtr, Bytes);
}
template <typename T> cudaError_t cudaMalloc(T **DevPtr, size_t Bytes) {
  return cudaMalloc(reinterpret_cast<void **>(DevPtr), Bytes);
}
inline cudaError_t cudaFree(void *DevPtr) {
  if (cudaError_t Error = ::pcc_cuda::detail::checkNotCapturing())
    return Error;
  std::free(DevPtr);
  return cudaSuccess;
}
inline cudaError_t cudaMallocHost(void **Ptr, size_t Bytes) {
  return ::pcc_cuda::detail::allocate(Ptr, Bytes);
}
template <typename T> cudaError_t cudaMallocHost(T **Ptr, size_t Bytes) {
  return cudaMallocHost(reinterpret_cast<void **>(Ptr), Bytes);
}
inline cudaError_t cudaFreeHost(void *Ptr) {
  std::free(Ptr);
  return cudaSuccess;
}

inline cudaError_t cudaMemcpy(void *Dst, const void *Src, size_t Bytes,
                              cudaMemcpyKind Kind) {
  if (cudaError_t Error = ::pcc_cuda::detail::checkNotCapturing())
    return Error;
  if (unsigned(Kind) > cudaMemcpyDefault || (Bytes && (!Dst || !Src)))
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  if (Bytes)
    std::memmove(Dst, Src, Bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void *Dst, const void *Src, size_t Bytes,
                                   cudaMemcpyKind Kind,
                                   cudaStream_t Stream = nullptr) {
  using namespace ::pcc_cuda::detail;
  if (!capturing(Stream)) {
    if (unsigned(Kind) > cudaMemcpyDefault || (Bytes && (!Dst || !Src)))
      return recordError(cudaErrorInvalidValue);
    if (Bytes)
      std::memmove(Dst, Src, Bytes);
    return cudaSuccess;
  }
  // A recorded copy may not involve host memory: the emulation cannot tell
  // pinned memory (which CUDA would accept) from pageable, and a run's
  // graph has no business with either.
  if (Kind != cudaMemcpyDeviceToDevice)
    return invalidateCapture(Stream, cudaErrorStreamCaptureUnsupported);
  if (Bytes && (!Dst || !Src))
    return recordError(cudaErrorInvalidValue);
  return enqueue(Stream, [=]() {
    if (Bytes)
      std::memmove(Dst, Src, Bytes);
    return cudaSuccess;
  });
}
inline cudaError_t cudaMemset(void *DevPtr, int Value, size_t Bytes) {
  if (cudaError_t Error = ::pcc_cuda::detail::checkNotCapturing())
    return Error;
  if (Bytes && !DevPtr)
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  if (Bytes)
    std::memset(DevPtr, Value, Bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *DevPtr, int Value, size_t Bytes,
                                   cudaStream_t Stream = nullptr) {
  using namespace ::pcc_cuda::detail;
  if (Bytes && !DevPtr)
    return recordError(cudaErrorInvalidValue);
  return enqueue(Stream, [=]() {
    if (Bytes)
      std::memset(DevPtr, Value, Bytes);
    return cudaSuccess;
  });
}

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *Stream,
                                             unsigned Flags) {
  if (!Stream)
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  *Stream = new CUstream_st{Flags};
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t *Stream) {
  return cudaStreamCreateWithFlags(Stream, cudaStreamDefault);
}
inline cudaError_t cudaStreamDestroy(cudaStream_t Stream) {
  delete Stream;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t Stream) {
  if (::pcc_cuda::detail::capturing(Stream))
    return ::pcc_cuda::detail::invalidateCapture(
        Stream, cudaErrorStreamCaptureUnsupported);
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() {
  if (::pcc_cuda::detail::CapturingStream)
    return ::pcc_cuda::detail::invalidateCapture(
        ::pcc_cuda::detail::CapturingStream,
        cudaErrorStreamCaptureUnsupported);
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// Graphs: a stream's work recorded between cudaStreamBeginCapture and
// cudaStreamEndCapture instead of run, and run again by cudaGraphLaunch.
//===----------------------------------------------------------------------===//

inline cudaError_t cudaStreamBeginCapture(cudaStream_t Stream,
                                          cudaStreamCaptureMode Mode) {
  using namespace ::pcc_cuda::detail;
  // The legacy default stream cannot be recorded.
  if (!Stream)
    return recordError(cudaErrorStreamCaptureUnsupported);
  if (Stream->Capture || CapturingStream ||
      Mode == cudaStreamCaptureModeRelaxed)
    return recordError(cudaErrorIllegalState);
  Stream->Capture = new CUgraph_st;
  Stream->CaptureError = cudaSuccess;
  CapturingStream = Stream;
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t Stream,
                                        cudaGraph_t *Graph) {
  using namespace ::pcc_cuda::detail;
  if (!Stream || !Graph)
    return recordError(cudaErrorInvalidValue);
  if (!Stream->Capture)
    return recordError(cudaErrorIllegalState);
  std::unique_ptr<CUgraph_st> Recorded(Stream->Capture);
  Stream->Capture = nullptr;
  if (CapturingStream == Stream)
    CapturingStream = nullptr;
  *Graph = nullptr;
  if (Stream->CaptureError != cudaSuccess)
    return recordError(cudaErrorStreamCaptureInvalidated);
  *Graph = Recorded.release();
  return cudaSuccess;
}
inline cudaError_t cudaStreamIsCapturing(cudaStream_t Stream,
                                         cudaStreamCaptureStatus *Status) {
  if (!Status)
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  *Status = !Stream || !Stream->Capture ? cudaStreamCaptureStatusNone
            : Stream->CaptureError != cudaSuccess
                ? cudaStreamCaptureStatusInvalidated
                : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *Exec,
                                        cudaGraph_t Graph,
                                        unsigned long long /*Flags*/ = 0) {
  if (!Exec || !Graph)
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  *Exec = new CUgraphExec_st{Graph->Nodes};
  return cudaSuccess;
}
/// Runs the recorded work in its order (or records it, on a recording
/// stream); the first node that fails ends the launch with its error.
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t Exec, cudaStream_t Stream) {
  using namespace ::pcc_cuda::detail;
  if (!Exec)
    return recordError(cudaErrorInvalidValue);
  const std::vector<std::function<cudaError_t()>> &Nodes = Exec->Nodes;
  return enqueue(Stream, [Nodes]() {
    for (const std::function<cudaError_t()> &Node : Nodes)
      if (cudaError_t Error = Node())
        return recordError(Error);
    return cudaSuccess;
  });
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t Exec) {
  delete Exec;
  return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t Graph) {
  delete Graph;
  return cudaSuccess;
}

inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *Event,
                                            unsigned Flags) {
  if (!Event)
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  *Event = new CUevent_st{Flags, false, {}};
  return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t *Event) {
  return cudaEventCreateWithFlags(Event, cudaEventDefault);
}
inline cudaError_t cudaEventDestroy(cudaEvent_t Event) {
  delete Event;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t Event,
                                   cudaStream_t /*Stream*/ = nullptr) {
  if (!Event)
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  Event->Recorded = true;
  Event->Time = std::chrono::steady_clock::now();
  return cudaSuccess;
}
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t Event,
                                       unsigned /*Flags*/ = 0) {
  if (!Event)
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t Event) {
  if (!Event)
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  return cudaSuccess;
}
/// Host time between the two records; meaningless as GPU time, but lets
/// timing code run.
inline cudaError_t cudaEventElapsedTime(float *Ms, cudaEvent_t Start,
                                        cudaEvent_t End) {
  if (!Ms || !Start || !End || !Start->Recorded || !End->Recorded ||
      (Start->Flags & cudaEventDisableTiming) ||
      (End->Flags & cudaEventDisableTiming))
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  *Ms =
      std::chrono::duration<float, std::milli>(End->Time - Start->Time).count();
  return cudaSuccess;
}

inline cudaError_t cudaGetDeviceCount(int *Count) {
  if (!Count)
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  *Count = PCC_CUDA_EMULATION_DEVICE_COUNT;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int Device) {
  if (Device < 0 || Device >= PCC_CUDA_EMULATION_DEVICE_COUNT)
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidDevice);
  ::pcc_cuda::detail::CurrentDevice = Device;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int *Device) {
  if (!Device)
    return ::pcc_cuda::detail::recordError(cudaErrorInvalidValue);
  *Device = ::pcc_cuda::detail::CurrentDevice;
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// cuBLASLt
//===----------------------------------------------------------------------===//
// The matmul is served by cblas. Its descriptors are checked as cuBLASLt
// would, and more strictly where that catches a mis-described GEMM; a
// rejected call says why on stderr. Enumerator values are cuBLAS's.

#ifndef PCC_CUDA_EMULATION_NO_CUBLASLT

enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_16F = 2,
  CUDA_R_16BF = 14,
};
typedef cudaDataType_t cudaDataType;

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};

enum cublasOperation_t {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
};

// Every f32 compute type accumulates in exact f32 here.
enum cublasComputeType_t {
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};

enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
};

enum cublasLtMatrixLayoutAttribute_t {
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
};

struct cublasLtContext {
  unsigned Unused;
};
typedef cublasLtContext *cublasLtHandle_t;

struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t ComputeType;
  cudaDataType_t ScaleType;
  cublasOperation_t TransA, TransB;
};
typedef cublasLtMatmulDescOpaque_t *cublasLtMatmulDesc_t;

struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t Type;
  uint64_t Rows, Cols;
  int64_t Ld;
  int32_t BatchCount;
  int64_t BatchStride; // In elements.
};
typedef cublasLtMatrixLayoutOpaque_t *cublasLtMatrixLayout_t;

/// Opaque; the emulation ignores the algorithm it is given.
struct cublasLtMatmulAlgo_t {
  uint64_t Data[8];
};

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *Handle) {
  if (!Handle)
    return CUBLAS_STATUS_INVALID_VALUE;
  *Handle = new cublasLtContext{0};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t Handle) {
  if (!Handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  delete Handle;
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *Desc,
                                               cublasComputeType_t Compute,
                                               cudaDataType_t Scale) {
  if (!Desc)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (Compute) {
  case CUBLAS_COMPUTE_32F:
  case CUBLAS_COMPUTE_32F_FAST_16F:
  case CUBLAS_COMPUTE_32F_FAST_16BF:
  case CUBLAS_COMPUTE_32F_FAST_TF32:
    break;
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (Scale != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *Desc =
      new cublasLtMatmulDescOpaque_t{Compute, Scale, CUBLAS_OP_N, CUBLAS_OP_N};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t Desc) {
  delete Desc;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t Desc,
                               cublasLtMatmulDescAttributes_t Attr,
                               const void *Buf, size_t Bytes) {
  if (!Desc || !Buf)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (Attr != CUBLASLT_MATMUL_DESC_TRANSA &&
      Attr != CUBLASLT_MATMUL_DESC_TRANSB)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  int32_t Op;
  if (Bytes != sizeof(Op))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&Op, Buf, sizeof(Op));
  if (Op != CUBLAS_OP_N && Op != CUBLAS_OP_T)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  (Attr == CUBLASLT_MATMUL_DESC_TRANSA ? Desc->TransA : Desc->TransB) =
      cublasOperation_t(Op);
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *Layout,
                                                 cudaDataType_t Type,
                                                 uint64_t Rows, uint64_t Cols,
                                                 int64_t Ld) {
  if (!Layout)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (Type != CUDA_R_32F && Type != CUDA_R_16F && Type != CUDA_R_16BF)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // Column-major: a column's rows must fit in the leading dimension.
  if (Ld < 0 || uint64_t(Ld) < Rows ||
      Rows > uint64_t(std::numeric_limits<int>::max()) ||
      Cols > uint64_t(std::numeric_limits<int>::max()))
    return CUBLAS_STATUS_INVALID_VALUE;
  *Layout = new cublasLtMatrixLayoutOpaque_t{Type, Rows, Cols, Ld, 1, 0};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t
cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t Layout) {
  delete Layout;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t Layout,
                                 cublasLtMatrixLayoutAttribute_t Attr,
                                 const void *Buf, size_t Bytes) {
  if (!Layout || !Buf)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (Attr) {
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: {
    int32_t Count;
    if (Bytes != sizeof(Count))
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&Count, Buf, sizeof(Count));
    if (Count < 1)
      return CUBLAS_STATUS_INVALID_VALUE;
    Layout->BatchCount = Count;
    return CUBLAS_STATUS_SUCCESS;
  }
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: {
    int64_t Stride;
    if (Bytes != sizeof(Stride))
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&Stride, Buf, sizeof(Stride));
    Layout->BatchStride = Stride;
    return CUBLAS_STATUS_SUCCESS;
  }
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

namespace pcc_cuda {
namespace detail {
inline size_t elementBytes(cudaDataType_t Type) {
  return Type == CUDA_R_32F ? 4 : 2;
}

inline float loadElement(cudaDataType_t Type, const void *Base, size_t I) {
  switch (Type) {
  case CUDA_R_32F:
    return static_cast<const float *>(Base)[I];
  case CUDA_R_16BF:
    return float(static_cast<const __nv_bfloat16 *>(Base)[I]);
  case CUDA_R_16F:
    return float(static_cast<const __half *>(Base)[I]);
  }
  return 0.0f;
}

inline void storeElement(cudaDataType_t Type, void *Base, size_t I, float V) {
  switch (Type) {
  case CUDA_R_32F:
    static_cast<float *>(Base)[I] = V;
    return;
  case CUDA_R_16BF:
    static_cast<__nv_bfloat16 *>(Base)[I] = __nv_bfloat16(V);
    return;
  case CUDA_R_16F:
    static_cast<__half *>(Base)[I] = __half(V);
    return;
  }
}

/// Copies a column-major Rows x Cols matrix between leading dimensions and
/// element types, converting through float.
inline void copyMatrix(size_t Rows, size_t Cols, cudaDataType_t SrcType,
                       const void *Src, size_t SrcLd, cudaDataType_t DstType,
                       void *Dst, size_t DstLd) {
  for (size_t J = 0; J < Cols; ++J)
    for (size_t I = 0; I < Rows; ++I)
      storeElement(DstType, Dst, J * DstLd + I,
                   loadElement(SrcType, Src, J * SrcLd + I));
}

[[nodiscard]] __attribute__((format(printf, 1, 2))) inline cublasStatus_t
rejectMatmul(const char *Format, ...) {
  std::fputs("pcc cuda emulation: cublasLtMatmul: ", stderr);
  va_list Args;
  va_start(Args, Format);
  std::vfprintf(stderr, Format, Args);
  va_end(Args);
  std::fputc('\n', stderr);
  return CUBLAS_STATUS_INVALID_VALUE;
}

inline const char *opName(cublasOperation_t Op) {
  return Op == CUBLAS_OP_N ? "N" : "T";
}
} // namespace detail
} // namespace pcc_cuda

/// D = alpha * op(A) * op(B) + beta * C for each batch, column-major.
inline cublasStatus_t
cublasLtMatmul(cublasLtHandle_t Handle, cublasLtMatmulDesc_t Desc,
               const void *Alpha, const void *A, cublasLtMatrixLayout_t Adesc,
               const void *B, cublasLtMatrixLayout_t Bdesc, const void *Beta,
               const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
               cublasLtMatrixLayout_t Ddesc,
               const cublasLtMatmulAlgo_t * /*Algo*/, void *Workspace,
               size_t WorkspaceBytes, cudaStream_t Stream) {
  using namespace ::pcc_cuda::detail;
  if (!Handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!Desc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !Alpha || !Beta)
    return rejectMatmul("null descriptor or scale pointer");
  if (capturing(Stream)) {
    // Recorded as CUDA records it: the descriptors and host scalars as
    // they are now, the matrices by address.
    cublasLtMatmulDescOpaque_t D0 = *Desc;
    cublasLtMatrixLayoutOpaque_t LA = *Adesc, LB = *Bdesc, LC = *Cdesc,
                                 LD = *Ddesc;
    float AlphaV = *static_cast<const float *>(Alpha);
    float BetaV = *static_cast<const float *>(Beta);
    enqueue(Stream, [=]() mutable {
      return cublasLtMatmul(Handle, &D0, &AlphaV, A, &LA, B, &LB, &BetaV, C,
                            &LC, D, &LD, nullptr, Workspace, WorkspaceBytes,
                            nullptr) == CUBLAS_STATUS_SUCCESS
                 ? cudaSuccess
                 : cudaErrorLaunchFailure;
    });
    return CUBLAS_STATUS_SUCCESS;
  }
  if (WorkspaceBytes && !Workspace)
    return rejectMatmul("%zu workspace bytes at a null pointer",
                        WorkspaceBytes);

  cudaDataType_t InType = Adesc->Type, OutType = Ddesc->Type;
  if (Bdesc->Type != InType || Cdesc->Type != OutType ||
      (InType == CUDA_R_32F && OutType != CUDA_R_32F) ||
      (InType != CUDA_R_32F && OutType != CUDA_R_32F && OutType != InType))
    return CUBLAS_STATUS_NOT_SUPPORTED;

  // op(A) is M x K, op(B) is K x N, C and D are M x N.
  const cublasLtMatrixLayoutOpaque_t &La = *Adesc, &Lb = *Bdesc, &Lc = *Cdesc,
                                     &Lo = *Ddesc;
  uint64_t M = Lo.Rows, N = Lo.Cols;
  bool TA = Desc->TransA == CUBLAS_OP_T, TB = Desc->TransB == CUBLAS_OP_T;
  uint64_t AM = TA ? La.Cols : La.Rows, AK = TA ? La.Rows : La.Cols;
  uint64_t BK = TB ? Lb.Cols : Lb.Rows, BN = TB ? Lb.Rows : Lb.Cols;
  if (AM != M || BN != N || AK != BK)
    return rejectMatmul(
        "op%s(A) is %llux%llu and op%s(B) is %llux%llu, but D is %llux%llu",
        opName(Desc->TransA), (unsigned long long)AM, (unsigned long long)AK,
        opName(Desc->TransB), (unsigned long long)BK, (unsigned long long)BN,
        (unsigned long long)M, (unsigned long long)N);
  if (Lc.Rows != M || Lc.Cols != N)
    return rejectMatmul("C is %llux%llu but D is %llux%llu",
                        (unsigned long long)Lc.Rows,
                        (unsigned long long)Lc.Cols, (unsigned long long)M,
                        (unsigned long long)N);
  int32_t Batches = Lo.BatchCount;
  if (La.BatchCount != Batches || Lb.BatchCount != Batches ||
      Lc.BatchCount != Batches)
    return rejectMatmul("batch counts differ: A %d, B %d, C %d, D %d",
                        La.BatchCount, Lb.BatchCount, Lc.BatchCount, Batches);
  // Batches of D written over one another would race on a GPU.
  if (Batches > 1 && M && N &&
      (Lo.BatchStride < 0 ||
       uint64_t(Lo.BatchStride) < uint64_t(Lo.Ld) * (N - 1) + M))
    return rejectMatmul("D's batch stride %lld makes its batches overlap",
                        (long long)Lo.BatchStride);
  if (C == D && (Lc.Ld != Lo.Ld || Lc.BatchStride != Lo.BatchStride))
    return rejectMatmul("C and D are one buffer with different layouts");
  uint64_t K = AK;
  float AlphaV = *static_cast<const float *>(Alpha);
  float BetaV = *static_cast<const float *>(Beta);
  if (!M || !N)
    return CUBLAS_STATUS_SUCCESS;
  if (!D || (BetaV != 0.0f && !C) || (K && (!A || !B)))
    return rejectMatmul("null matrix pointer");

  size_t InBytes = elementBytes(InType), OutBytes = elementBytes(OutType);
  // Inputs that are not f32 are widened to dense f32 copies, and an output
  // that is not f32 is computed in an f32 buffer and rounded once at the end.
  std::vector<float> AF, BF, DF;
  for (int32_t Batch = 0; Batch < Batches; ++Batch) {
    const char *Ab = static_cast<const char *>(A) +
                     Batch * La.BatchStride * int64_t(InBytes);
    const char *Bb = static_cast<const char *>(B) +
                     Batch * Lb.BatchStride * int64_t(InBytes);
    const char *Cb = static_cast<const char *>(C) +
                     Batch * Lc.BatchStride * int64_t(OutBytes);
    char *Db =
        static_cast<char *>(D) + Batch * Lo.BatchStride * int64_t(OutBytes);
    float *Out = reinterpret_cast<float *>(Db);
    size_t OutLd = size_t(Lo.Ld);
    if (OutType != CUDA_R_32F) {
      DF.resize(M * N);
      Out = DF.data();
      OutLd = M;
    }
    // cblas accumulates into its output, so C goes there first; beta = 0
    // must not read C at all (it may hold NaN).
    if (BetaV != 0.0f && (Cb != Db || OutType != CUDA_R_32F))
      copyMatrix(M, N, OutType, Cb, size_t(Lc.Ld), CUDA_R_32F, Out, OutLd);
    if (!K) {
      for (size_t J = 0; J < N; ++J)
        for (size_t I = 0; I < M; ++I)
          Out[J * OutLd + I] =
              BetaV != 0.0f ? BetaV * Out[J * OutLd + I] : 0.0f;
    } else {
      const float *AP = reinterpret_cast<const float *>(Ab);
      const float *BP = reinterpret_cast<const float *>(Bb);
      size_t ALd = size_t(La.Ld), BLd = size_t(Lb.Ld);
      if (InType != CUDA_R_32F) {
        AF.resize(La.Rows * La.Cols);
        BF.resize(Lb.Rows * Lb.Cols);
        copyMatrix(La.Rows, La.Cols, InType, Ab, ALd, CUDA_R_32F, AF.data(),
                   La.Rows);
        copyMatrix(Lb.Rows, Lb.Cols, InType, Bb, BLd, CUDA_R_32F, BF.data(),
                   Lb.Rows);
        AP = AF.data();
        BP = BF.data();
        ALd = La.Rows;
        BLd = Lb.Rows;
      }
      cblas_sgemm(CblasColMajor, TA ? CblasTrans : CblasNoTrans,
                  TB ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
                  AlphaV, AP, int(ALd), BP, int(BLd), BetaV, Out, int(OutLd));
    }
    if (OutType != CUDA_R_32F)
      copyMatrix(M, N, CUDA_R_32F, Out, OutLd, OutType, Db, size_t(Lo.Ld));
  }
  return CUBLAS_STATUS_SUCCESS;
}

#endif // PCC_CUDA_EMULATION_NO_CUBLASLT

#endif // PCC_CUDA_EMULATION_H
