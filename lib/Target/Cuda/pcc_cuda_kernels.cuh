// pcc_cuda_kernels.cuh - the kernel library of pcc's CUDA target.
//
// Generated CUDA code includes this header: the library's device state (one
// stream, a cuBLASLt handle, an index-error flag), GEMM through cuBLASLt,
// and the kernels of ops that are more than one loop nest (softmax, layer
// normalization, gathers and scatters, cumulative sums). The element-wise
// loop nests themselves are generated next to the model.
//
// The same text compiles as host C++ against pcc's CUDA emulation header
// (pcc_cuda_emulation.h, beside this file), which defines PCC_CUDA_EMULATION, dim3, the runtime
// and cuBLASLt subsets and PCC_LAUNCH: so the code never writes <<<>>>.
//
// Results follow the CPU target's kernels (pcc_kernels.h) element for
// element: the same formulas and, where a reduction runs in one thread, the
// same order of accumulation.

#ifndef PCC_CUDA_KERNELS_CUH
#define PCC_CUDA_KERNELS_CUH

#ifndef PCC_CUDA_EMULATION
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define PCC_LAUNCH(kernel, grid, block, stream, ...)                           \
  kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif

#include "pccrt.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

// The program's functions (the model's steps) are host code, straight-line
// sequences of launches and library calls. As on the CPU target
// (pcc_kernels.h), they are compiled unoptimized: the host compiler's
// optimizer has nothing to win there (a launch costs microseconds either
// way) and took a quarter of nvcc's host compile, and two thirds of the
// emulation's when each launch was inlined into them. The kernels, and
// the library's host code, are optimized.
#if defined(__clang__)
#define PCC_PROGRAM __attribute__((optnone))
#elif defined(__GNUC__)
#define PCC_PROGRAM __attribute__((optimize("O0")))
#else
#define PCC_PROGRAM
#endif

namespace pcc_cu {

/// Threads per block of the library's and the generated kernels.
constexpr int kBlock = 256;

/// 16-bit float storage whose arithmetic is float's (as pcc_kernels.h's on
/// the CPU): an expression of the generated code converts each operand to
/// float and rounds the result once, whatever operators CUDA's own types
/// define. Layout-compatible with __nv_bfloat16 and __half for cuBLASLt.
struct bf16 {
  __nv_bfloat16 value;
  bf16() = default;
  template <typename U, typename = std::enable_if_t<std::is_arithmetic_v<U>>>
  __host__ __device__ bf16(U v) : value(__float2bfloat16(float(v))) {}
  __host__ __device__ operator float() const {
    return __bfloat162float(value);
  }
};
struct f16 {
  __half value;
  f16() = default;
  template <typename U, typename = std::enable_if_t<std::is_arithmetic_v<U>>>
  __host__ __device__ f16(U v) : value(__float2half(float(v))) {}
  __host__ __device__ operator float() const { return __half2float(value); }
};

/// Shapes passed by value to a kernel (at most 16 dimensions).
struct Dims {
  int64_t d[16];
};

/// What a library (one model) keeps on the device between runs.
struct State {
  cudaStream_t own = nullptr;
  /// The stream of the current run: the context's, else the library's own.
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void *ltWorkspace = nullptr;
  size_t ltWorkspaceBytes = size_t(32) << 20;
  /// Set by kernels that meet an index out of range.
  int *indexError = nullptr;
  /// A device call of this run failed (printed when it happened).
  bool failed = false;
};

inline State &state() {
  static State s;
  return s;
}

inline cudaStream_t stream() { return state().stream; }

/// Records a failed device call: prints it once per run, and the run
/// returns PCCRT_ERR_DEVICE when it ends.
inline bool check(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return true;
  if (!state().failed)
    std::fprintf(stderr, "pcc: CUDA error in %s: %s\n", what,
                 cudaGetErrorString(e));
  state().failed = true;
  return false;
}

inline bool checkLt(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return true;
  if (!state().failed)
    std::fprintf(stderr, "pcc: cuBLASLt error %d in %s\n", int(s), what);
  state().failed = true;
  return false;
}

/// Starts a run: the device state on first use, the run's stream.
inline int begin(const pccrt_context *ctx) {
  State &s = state();
  s.failed = false;
  if (!s.own) {
    if (!check(cudaStreamCreateWithFlags(&s.own, cudaStreamNonBlocking),
               "creating the stream") ||
        !checkLt(cublasLtCreate(&s.lt), "cublasLtCreate") ||
        !check(cudaMalloc(&s.ltWorkspace, s.ltWorkspaceBytes),
               "allocating the GEMM workspace") ||
        !check(cudaMalloc((void **)&s.indexError, sizeof(int)),
               "allocating the error flag") ||
        !check(cudaMemset(s.indexError, 0, sizeof(int)),
               "clearing the error flag"))
      return PCCRT_ERR_DEVICE;
  }
  s.stream = ctx->stream ? (cudaStream_t)ctx->stream : s.own;
  return PCCRT_OK;
}

/// Ends a run: waits for its work, and reports a failure of any of it, or
/// an index out of range that a gather or scatter met (the flag is read
/// once per run, here, so that nothing in the run waits for the device).
inline int finish(const pccrt_context *ctx) {
  State &s = state();
  // Collectives queued on the device in stream order (NCCL) are waited for
  // by the communicator, which watches for failures and timeouts.
  if (ctx->comm && ctx->comm->ops->stream_ordered(ctx->comm) &&
      ctx->comm->ops->wait(ctx->comm, -1, s.stream))
    return PCCRT_ERR_COMM;
  check(cudaGetLastError(), "a kernel launch");
  check(cudaStreamSynchronize(s.stream), "the run");
  int flag = 0;
  if (!s.failed &&
      check(cudaMemcpy(&flag, s.indexError, sizeof(int),
                       cudaMemcpyDeviceToHost),
            "reading the error flag") &&
      flag)
    check(cudaMemset(s.indexError, 0, sizeof(int)), "clearing the error flag");
  if (s.failed)
    return PCCRT_ERR_DEVICE;
  return flag ? PCCRT_ERR_INDEX_OUT_OF_RANGE : PCCRT_OK;
}

/// Waits for the work queued so far (before host code reads the buffers:
/// the communicator's calls).
inline int synchronize() {
  check(cudaGetLastError(), "a kernel launch");
  return check(cudaStreamSynchronize(state().stream), "synchronizing")
             ? PCCRT_OK
             : PCCRT_ERR_DEVICE;
}

/// Before a collective starts: a host communicator needs the device's
/// queued work done; a stream-ordered one orders the collective after it.
inline int beforeCollective(const pccrt_context *ctx) {
  return ctx->comm->ops->stream_ordered(ctx->comm) ? PCCRT_OK : synchronize();
}

/// Blocks of kBlock threads for a grid-stride loop over `n` iterations.
inline unsigned blocksFor(int64_t n) {
  int64_t b = (n + kBlock - 1) / kBlock;
  return unsigned(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

//===----------------------------------------------------------------------===//
// CUDA graphs: the steady state of a program without host communication
//===----------------------------------------------------------------------===//

/// The graph of a run, recorded for one set of buffers. A program whose run
/// is only device work (a single rank: no communicator call, no host read
/// before the end) queues it through runGraph: the first run with a set of
/// buffers runs eagerly, the second records its work into a CUDA graph, and
/// later runs launch that graph, one call instead of hundreds of launches.
/// The kernels' arguments are all fixed by the buffers' addresses (shapes
/// are static, data-dependent values live in device memory), so a graph is
/// valid as long as the addresses are the same; other addresses (or
/// another stream) make a new one. PCC_CUDA_GRAPHS=0 turns graphs off.
struct GraphCache {
  cudaGraphExec_t exec = nullptr;
  uint64_t key = 0;
  bool seen = false;
  /// Recording failed once: this library runs eagerly from then on.
  bool broken = false;
};

inline GraphCache &graphCache() {
  static GraphCache g;
  return g;
}

/// PCC_CUDA_GRAPHS: "0" runs every step eagerly; "report" says on stderr
/// when a run has been recorded.
inline const char *graphsSetting() {
  const char *v = std::getenv("PCC_CUDA_GRAPHS");
  return v ? v : "";
}
inline bool graphsEnabled() {
  static const bool enabled = std::strcmp(graphsSetting(), "0") != 0;
  return enabled;
}

/// What a graph's kernels read from the run context: its buffers' addresses
/// and the stream.
inline uint64_t graphKey(const pccrt_context *ctx,
                         const pccrt_model_info *info) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void *p) {
    h = (h ^ uint64_t(reinterpret_cast<uintptr_t>(p))) * 1099511628211ull;
  };
  for (int32_t i = 0; i < info->num_inputs; ++i)
    mix(ctx->inputs[i]);
  for (int32_t i = 0; i < info->num_outputs; ++i)
    mix(ctx->outputs[i]);
  for (int32_t i = 0; i < info->num_weights; ++i)
    mix(ctx->weights[i]);
  mix(ctx->workspace);
  mix(state().stream);
  return h;
}

/// Queues the run's device work, `step` (which returns a pccrt error code),
/// through the graph cache, then ends the run (finish).
template <typename Step>
int runGraph(const pccrt_context *ctx, const pccrt_model_info *info,
             Step &&step) {
  State &s = state();
  GraphCache &g = graphCache();
  if (!graphsEnabled() || g.broken) {
    if (int error = step())
      return error;
    return finish(ctx);
  }
  uint64_t key = graphKey(ctx, info);
  if (g.exec && g.key == key) {
    check(cudaGraphLaunch(g.exec, s.stream), "launching the run's graph");
    return finish(ctx);
  }
  if (g.key != key || !g.seen) {
    // New buffers: run eagerly once (a failure shows where it happens).
    if (g.exec)
      cudaGraphExecDestroy(g.exec);
    g = GraphCache{nullptr, key, true, false};
    if (int error = step())
      return error;
    return finish(ctx);
  }
  // Same buffers a second time: record the run, then launch it.
  cudaGraph_t graph = nullptr;
  if (!check(cudaStreamBeginCapture(s.stream,
                                    cudaStreamCaptureModeThreadLocal),
             "starting to record the run's graph"))
    return PCCRT_ERR_DEVICE;
  int error = step();
  cudaError_t ended = cudaStreamEndCapture(s.stream, &graph);
  if (error || s.failed || ended != cudaSuccess || !graph) {
    // Nothing recorded ran. Say why once, and run eagerly from now on.
    if (graph)
      cudaGraphDestroy(graph);
    cudaGetLastError();
    if (!s.failed && !error)
      std::fprintf(stderr,
                   "pcc: warning: recording the run as a CUDA graph failed "
                   "(%s); running without graphs\n",
                   cudaGetErrorString(ended));
    g.broken = true;
    s.failed = false;
    if (int again = step())
      return again;
    return finish(ctx);
  }
  bool ok = check(cudaGraphInstantiate(&g.exec, graph, 0),
                  "instantiating the run's graph");
  cudaGraphDestroy(graph);
  if (!ok) {
    g.exec = nullptr;
    return PCCRT_ERR_DEVICE;
  }
  if (std::strcmp(graphsSetting(), "report") == 0)
    std::fprintf(stderr, "pcc: recorded the run as a CUDA graph; the runs "
                         "that follow with the same buffers launch it\n");
  check(cudaGraphLaunch(g.exec, s.stream), "launching the run's graph");
  return finish(ctx);
}

//===----------------------------------------------------------------------===//
// The runtime's access to device memory (pccrt_device_ops)
//===----------------------------------------------------------------------===//

inline int deviceAlloc(void **memory, uint64_t bytes) {
  *memory = nullptr;
  // A buffer of no bytes still gets an address.
  return check(cudaMalloc(memory, size_t(bytes ? bytes : 1)), "cudaMalloc")
             ? PCCRT_OK
             : PCCRT_ERR_DEVICE;
}
inline void deviceRelease(void *memory) { cudaFree(memory); }
inline int deviceUpload(void *device, const void *host, uint64_t bytes) {
  return !bytes || check(cudaMemcpy(device, host, size_t(bytes),
                                    cudaMemcpyHostToDevice),
                         "copying to the device")
             ? PCCRT_OK
             : PCCRT_ERR_DEVICE;
}
inline int deviceDownload(void *host, const void *device, uint64_t bytes) {
  return !bytes || check(cudaMemcpy(host, device, size_t(bytes),
                                    cudaMemcpyDeviceToHost),
                         "copying from the device")
             ? PCCRT_OK
             : PCCRT_ERR_DEVICE;
}
inline const pccrt_device_ops kDeviceOps = {deviceAlloc, deviceRelease,
                                            deviceUpload, deviceDownload};

inline void copy(void *dst, const void *src, int64_t bytes) {
  if (dst != src && bytes > 0)
    check(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice,
                          state().stream),
          "a copy");
}

template <typename T>
__global__ void fillKernel(T *__restrict__ dst, int64_t n, T value) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    dst[i] = value;
}

template <typename T, typename V> inline void fill(T *dst, int64_t n, V v) {
  if (n <= 0)
    return;
  auto kernel = &fillKernel<T>;
  PCC_LAUNCH(kernel, blocksFor(n), kBlock, state().stream, dst, n, T(v));
}

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

/// The element types cuBLASLt multiplies here: f32, and bf16 and f16 with
/// f32 accumulation (compute type and scale type f32).
template <typename T> struct LtType;
template <> struct LtType<float> {
  static constexpr cudaDataType_t data = CUDA_R_32F;
};
template <> struct LtType<bf16> {
  static constexpr cudaDataType_t data = CUDA_R_16BF;
};
template <> struct LtType<f16> {
  static constexpr cudaDataType_t data = CUDA_R_16F;
};
template <typename T, typename = void> struct HasLtType : std::false_type {};
template <typename T>
struct HasLtType<T, std::void_t<decltype(LtType<T>::data)>> : std::true_type {
};

/// The type a product or a block reduction of T accumulates in: float for
/// the 16-bit floats.
template <typename T> struct AccumulatorOf {
  using type = T;
};
template <> struct AccumulatorOf<bf16> {
  using type = float;
};
template <> struct AccumulatorOf<f16> {
  using type = float;
};

/// C = alpha * op(A) * op(B) + beta * C, row-major, for types cuBLASLt has
/// no descriptor for here (and k = 0): one thread per element, k in order.
template <typename T>
__global__ void gemmNaive(int64_t m, int64_t n, int64_t k, float alpha,
                          const T *a, int64_t lda, bool transA, const T *b,
                          int64_t ldb, bool transB, float beta, T *c,
                          int64_t ldc, int64_t batch, int64_t strideA,
                          int64_t strideB, int64_t strideC) {
  using Acc = typename AccumulatorOf<T>::type;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       e < batch * m * n; e += int64_t(blockDim.x) * gridDim.x) {
    int64_t q = e / (m * n), i = e / n % m, j = e % n;
    const T *aq = a + q * strideA, *bq = b + q * strideB;
    Acc acc = Acc(0);
    for (int64_t p = 0; p < k; ++p)
      acc += Acc(transA ? aq[p * lda + i] : aq[i * lda + p]) *
             Acc(transB ? bq[j * ldb + p] : bq[p * ldb + j]);
    T *cq = c + q * strideC + i * ldc + j;
    *cq = beta == 0 ? T(Acc(alpha) * acc)
                    : T(Acc(alpha) * acc + Acc(beta) * Acc(*cq));
  }
}

/// Row-major C = alpha * op(A) * op(B) + beta * C, `batch` times at the
/// given element strides. cuBLASLt is column-major: a row-major matrix is
/// its transpose, so the product is computed as C^T = op(B)^T op(A)^T, B's
/// buffer as cuBLASLt's first operand.
template <typename T>
inline void gemm(int64_t m, int64_t n, int64_t k, T alpha, const T *a,
                 int64_t lda, bool transA, const T *b, int64_t ldb,
                 bool transB, T beta, T *c, int64_t ldc, int64_t batch = 1,
                 int64_t strideA = 0, int64_t strideB = 0,
                 int64_t strideC = 0) {
  State &s = state();
  if (m == 0 || n == 0 || batch == 0)
    return;
  // The scale factors are f32 whatever T is (cuBLASLt's scale type).
  float alphaF = float(alpha), betaF = float(beta);
  if (!HasLtType<T>::value || k == 0) {
    // cuBLASLt also wants k >= 1: C = beta * C.
    auto kernel = &gemmNaive<T>;
    PCC_LAUNCH(kernel, blocksFor(batch * m * n), kBlock, s.stream, m, n, k,
               alphaF, a, lda, transA, b, ldb, transB, betaF, c, ldc, batch,
               strideA, strideB, strideC);
  } else if constexpr (HasLtType<T>::value) {
    cudaDataType_t type = LtType<T>::data;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasOperation_t opFirst = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opSecond = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    // First operand (B's buffer): op gives n x k; second (A's): k x m.
    bool ok =
        checkLt(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F,
                                         CUDA_R_32F),
                "cublasLtMatmulDescCreate") &&
        checkLt(cublasLtMatmulDescSetAttribute(desc,
                                               CUBLASLT_MATMUL_DESC_TRANSA,
                                               &opFirst, sizeof(opFirst)),
                "setting TRANSA") &&
        checkLt(cublasLtMatmulDescSetAttribute(desc,
                                               CUBLASLT_MATMUL_DESC_TRANSB,
                                               &opSecond, sizeof(opSecond)),
                "setting TRANSB") &&
        checkLt(cublasLtMatrixLayoutCreate(&la, type, transB ? k : n,
                                           transB ? n : k, ldb),
                "the first operand's layout") &&
        checkLt(cublasLtMatrixLayoutCreate(&lb, type, transA ? m : k,
                                           transA ? k : m, lda),
                "the second operand's layout") &&
        checkLt(cublasLtMatrixLayoutCreate(&lc, type, n, m, ldc),
                "the result's layout");
    if (ok && batch > 1) {
      int32_t count = int32_t(batch);
      int64_t strides[3] = {strideB, strideA, strideC};
      cublasLtMatrixLayout_t layouts[3] = {la, lb, lc};
      for (int q = 0; q < 3 && ok; ++q)
        ok = checkLt(cublasLtMatrixLayoutSetAttribute(
                         layouts[q], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                         &count, sizeof(count)),
                     "the batch count") &&
             checkLt(cublasLtMatrixLayoutSetAttribute(
                         layouts[q],
                         CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                         &strides[q], sizeof(strides[q])),
                     "the batch stride");
    }
    if (ok)
      checkLt(cublasLtMatmul(s.lt, desc, &alphaF, b, la, a, lb, &betaF, c, lc,
                             c, lc, nullptr, s.ltWorkspace,
                             s.ltWorkspaceBytes, s.stream),
              "cublasLtMatmul");
    if (lc)
      cublasLtMatrixLayoutDestroy(lc);
    if (lb)
      cublasLtMatrixLayoutDestroy(lb);
    if (la)
      cublasLtMatrixLayoutDestroy(la);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
}

//===----------------------------------------------------------------------===//
// Block reductions
//===----------------------------------------------------------------------===//

/// The sum (or max) of `v` over the block, in every thread. The block has
/// kBlock threads.
template <typename T, bool Max>
__device__ __forceinline__ T blockReduce(T v, T *scratch) {
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    T other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = Max ? (v < other ? other : v) : v + other;
  }
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kBlock / 32 ? scratch[lane]
                           : (Max ? -std::numeric_limits<T>::infinity() : T(0));
    for (int offset = 16; offset > 0; offset /= 2) {
      T other = __shfl_xor_sync(0xffffffffu, v, offset);
      v = Max ? (v < other ? other : v) : v + other;
    }
    if (lane == 0)
      scratch[0] = v;
  }
  __syncthreads();
  T result = scratch[0];
  __syncthreads();
  return result;
}

enum class Combine { Sum, Max, Min };

template <Combine C, typename T>
__device__ __forceinline__ T combine(T a, T b) {
  if constexpr (C == Combine::Max)
    return a < b ? b : a;
  else if constexpr (C == Combine::Min)
    return b < a ? b : a;
  else
    return a + b;
}

/// The combination of every thread's `v` over the block (of kBlock
/// threads), in every thread, in a fixed order (lanes, then warps): the
/// generated reductions with few outputs and many inputs each, one block
/// per output. `identity` is what a missing warp contributes. The block
/// may call it again at once: it synchronizes before it returns.
template <Combine C, typename T>
__device__ __forceinline__ T blockCombine(T v, T identity) {
  __shared__ T scratch[kBlock / 32];
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2)
    v = combine<C>(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  v = lane < kBlock / 32 ? scratch[lane] : identity;
  for (int offset = 16; offset > 0; offset /= 2)
    v = combine<C>(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();
  return v;
}

//===----------------------------------------------------------------------===//
// Softmax, layer normalization
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float expOf(float v) { return expf(v); }
__device__ __forceinline__ double expOf(double v) { return exp(v); }

/// Softmax (or log-softmax) of one row of n elements by the threads of a
/// block, the sum in double, as the CPU's; ys may be xs (each thread reads
/// and writes the same elements, and the reductions' barriers separate the
/// reads of the maximum from the writes). Every thread of the block calls
/// it.
template <typename T>
__device__ void softmaxRowBlock(const T *xs, T *ys, int64_t n, bool logOut) {
  __shared__ double scratchSum[kBlock / 32];
  __shared__ T scratchMax[kBlock / 32];
  T mx = -std::numeric_limits<T>::infinity();
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    mx = mx < xs[j] ? xs[j] : mx;
  mx = blockReduce<T, true>(mx, scratchMax);
  if (mx == -std::numeric_limits<T>::infinity())
    mx = T(0);
  double sum = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    sum += double(T(expOf(T(xs[j] - mx))));
  sum = blockReduce<double, false>(sum, scratchSum);
  if (logOut) {
    T shift = T(double(mx) + log(sum));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      ys[j] = T(xs[j] - shift);
  } else {
    T scale = T(1.0 / sum);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      ys[j] = T(T(expOf(T(xs[j] - mx))) * scale);
  }
}

/// Softmax (or log-softmax) of each row of n contiguous elements: one block
/// per row.
template <typename T>
__global__ void softmaxRows(const T *__restrict__ x, T *__restrict__ y,
                            int64_t rows, int64_t n, bool logOut) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    softmaxRowBlock(x + r * n, y + r * n, n, logOut);
}

/// Softmax along the middle extent of [outer, n, inner] with inner > 1: one
/// thread per column, in order.
template <typename T>
__global__ void softmaxColumns(const T *__restrict__ x, T *__restrict__ y,
                               int64_t outer, int64_t n, int64_t inner,
                               bool logOut) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       e < outer * inner; e += int64_t(blockDim.x) * gridDim.x) {
    int64_t o = e / inner, i = e % inner;
    const T *xs = x + o * n * inner + i;
    T *ys = y + o * n * inner + i;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < n; ++j)
      mx = mx < xs[j * inner] ? xs[j * inner] : mx;
    if (mx == -std::numeric_limits<T>::infinity())
      mx = T(0);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += double(T(expOf(T(xs[j * inner] - mx))));
    if (logOut) {
      T shift = T(double(mx) + log(sum));
      for (int64_t j = 0; j < n; ++j)
        ys[j * inner] = T(xs[j * inner] - shift);
    } else {
      T scale = T(1.0 / sum);
      for (int64_t j = 0; j < n; ++j)
        ys[j * inner] = T(T(expOf(T(xs[j * inner] - mx))) * scale);
    }
  }
}

template <typename T>
inline void softmax(const T *x, T *y, int64_t outer, int64_t n, int64_t inner,
                    bool log) {
  if (outer * n * inner == 0)
    return;
  if (inner == 1) {
    auto kernel = &softmaxRows<T>;
    PCC_LAUNCH(kernel, unsigned(outer < 65535 ? outer : 65535), kBlock,
               state().stream, x, y, outer, n, log);
  } else {
    auto kernel = &softmaxColumns<T>;
    PCC_LAUNCH(kernel, blocksFor(outer * inner), kBlock, state().stream, x, y,
               outer, n, inner, log);
  }
}

/// Layer normalization of each row of n elements, statistics in double: one
/// block per row.
template <typename T>
__global__ void layerNormRows(const T *__restrict__ x,
                              const T *__restrict__ scale,
                              const T *__restrict__ bias, T *__restrict__ y,
                              T *__restrict__ mean, T *__restrict__ invStd,
                              int64_t rows, int64_t n, T eps) {
  __shared__ double scratch[kBlock / 32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n;
    double s = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      s += double(xr[j]);
    double mu = blockReduce<double, false>(s, scratch) / double(n);
    double v = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      v += (double(xr[j]) - mu) * (double(xr[j]) - mu);
    v = blockReduce<double, false>(v, scratch);
    double inv = 1.0 / sqrt(v / double(n) + double(eps));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      double out = (double(xr[j]) - mu) * inv * double(scale[j]);
      y[r * n + j] = T(bias ? out + double(bias[j]) : out);
    }
    if (threadIdx.x == 0) {
      mean[r] = T(mu);
      invStd[r] = T(inv);
    }
  }
}

template <typename T>
inline void layerNorm(const T *x, const T *scale, const T *bias, T *y, T *mean,
                      T *invStd, int64_t outer, int64_t n, T eps) {
  if (outer == 0)
    return;
  auto kernel = &layerNormRows<T>;
  PCC_LAUNCH(kernel, unsigned(outer < 65535 ? outer : 65535), kBlock,
             state().stream, x, scale, bias, y, mean, invStd, outer, n, eps);
}

//===----------------------------------------------------------------------===//
// Attention (FlashAttention's forward and backward): tiles of queries and
// keys in shared memory, f32 arithmetic whatever the operands' type
//===----------------------------------------------------------------------===//

/// As pcc_k::AttentionShape on the CPU: extents, and the strides of the
/// batch, head and sequence dimensions of the query, key, value and output
/// (feature stride 1) and of a bias's [batch, heads, queries, keys].
struct AttentionShape {
  int64_t batch, heads, groups, queries, keys, features, valueFeatures;
  int64_t qStrides[3], kStrides[3], vStrides[3], oStrides[3], biasStrides[4];
  float scale;
  bool causal;
  float softcap = 0; ///< above 0: softcap * tanh(s / softcap) of the scaled s
  int64_t window = 0; ///< above 0: key j hidden from query i if j <= i - window

  /// The first key that query `i` may see.
  __device__ __host__ int64_t firstKey(int64_t i) const {
    return window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
  }
};

__device__ __host__ __forceinline__ int64_t smaller(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/// The tiles: 16 queries by 32 keys; features up to 128 (pcc-fuse-attention
/// leaves wider heads unfused for this target).
constexpr int64_t kAttentionRows = 16, kAttentionKeys = 32,
                  kAttentionMaxFeatures = 128;

/// The operands the kernels read (null where a kernel has none: a bias, or
/// the forward's output, its gradient and log-sum-exp), and `head`, the
/// same pointers moved to batch entry b and query head h: its query, output
/// and bias, its key/value group's keys and values, its row of the
/// log-sum-exp.
template <typename T> struct AttentionOperands {
  const T *q, *k, *v, *bias, *o, *dout;
  const float *lse;

  __device__ AttentionOperands head(const AttentionShape &a, int64_t b,
                                    int64_t h) const {
    int64_t g = h / (a.heads / a.groups);
    auto at = [&](const T *p, const int64_t *strides, int64_t head) {
      return p ? p + b * strides[0] + head * strides[1] : nullptr;
    };
    return {at(q, a.qStrides, h),
            at(k, a.kStrides, g),
            at(v, a.vStrides, g),
            at(bias, a.biasStrides, h),
            at(o, a.oStrides, h),
            at(dout, a.oStrides, h),
            lse ? lse + (b * a.heads + h) * a.queries : nullptr};
  }
};

/// The score of query row `i` and key `j` of one head: scaled, capped,
/// biased, and -inf where the causal mask or the window hides the key.
/// Under a cap, `slope` (if given) gets its derivative, 1 - tanh^2.
template <typename T>
__device__ __forceinline__ float
attentionScore(const AttentionShape &a, const AttentionOperands<T> &head,
               int64_t i, int64_t j, float *slope = nullptr) {
  if ((a.causal && j > i) || j < a.firstKey(i))
    return -INFINITY;
  const T *qRow = head.q + i * a.qStrides[2],
          *kRow = head.k + j * a.kStrides[2];
  float dot = 0;
  for (int64_t f = 0; f < a.features; ++f)
    dot += float(qRow[f]) * float(kRow[f]);
  dot *= a.scale;
  if (a.softcap > 0) {
    float t = tanhf(dot / a.softcap);
    dot = a.softcap * t;
    if (slope)
      *slope = 1.0f - t * t;
  }
  if (head.bias)
    dot += float(head.bias[i * a.biasStrides[2] + j * a.biasStrides[3]]);
  return dot;
}

/// One block per tile of queries of one head: the tiles of keys in turn,
/// each key tile's values in shared memory, the scores of the tile in
/// shared memory, a running maximum and sum per row. A head's sink, if
/// any, starts its rows' maximum and, as exp(0), their sums.
template <typename T>
__global__ void attentionForward(AttentionOperands<T> in,
                                 const T *__restrict__ sinks, T *__restrict__ o,
                                 float *__restrict__ lse, AttentionShape a) {
  __shared__ float vs[kAttentionKeys][kAttentionMaxFeatures];
  __shared__ float s[kAttentionRows][kAttentionKeys];
  __shared__ float acc[kAttentionRows][kAttentionMaxFeatures];
  __shared__ float mx[kAttentionRows], sum[kAttentionRows],
      correction[kAttentionRows];
  int64_t rowTiles = (a.queries + kAttentionRows - 1) / kAttentionRows;
  int64_t e = a.valueFeatures;
  for (int64_t tile = blockIdx.x; tile < a.batch * a.heads * rowTiles;
       tile += gridDim.x) {
    int64_t i0 = tile % rowTiles * kAttentionRows, bh = tile / rowTiles;
    int64_t b = bh / a.heads, h = bh % a.heads;
    int64_t rows = smaller(kAttentionRows, a.queries - i0);
    AttentionOperands<T> at = in.head(a, b, h);
    for (int64_t x = threadIdx.x; x < kAttentionRows * e; x += blockDim.x)
      acc[x / e][x % e] = 0;
    if (threadIdx.x < kAttentionRows) {
      mx[threadIdx.x] = sinks ? float(sinks[h]) : -INFINITY;
      sum[threadIdx.x] = sinks ? 1.0f : 0.0f;
    }
    int64_t keyEnd = a.causal ? smaller(a.keys, i0 + rows) : a.keys;
    for (int64_t j0 = a.firstKey(i0) / kAttentionKeys * kAttentionKeys;
         j0 < keyEnd; j0 += kAttentionKeys) {
      int64_t cols = smaller(kAttentionKeys, keyEnd - j0);
      __syncthreads();
      for (int64_t x = threadIdx.x; x < cols * e; x += blockDim.x)
        vs[x / e][x % e] = float(at.v[(j0 + x / e) * a.vStrides[2] + x % e]);
      for (int64_t x = threadIdx.x; x < kAttentionRows * kAttentionKeys;
           x += blockDim.x) {
        int64_t r = x / kAttentionKeys, c = x % kAttentionKeys;
        s[r][c] = r < rows && c < cols ? attentionScore(a, at, i0 + r, j0 + c)
                                       : -INFINITY;
      }
      __syncthreads();
      if (threadIdx.x < kAttentionRows) {
        int64_t r = threadIdx.x;
        float m = mx[r];
        for (int64_t c = 0; c < cols; ++c)
          m = fmaxf(m, s[r][c]);
        float added = 0;
        for (int64_t c = 0; c < cols; ++c) {
          s[r][c] = m == -INFINITY ? 0.0f : expf(s[r][c] - m);
          added += s[r][c];
        }
        correction[r] = m == -INFINITY ? 1.0f : expf(mx[r] - m);
        sum[r] = sum[r] * correction[r] + added;
        mx[r] = m;
      }
      __syncthreads();
      for (int64_t x = threadIdx.x; x < kAttentionRows * e; x += blockDim.x) {
        int64_t r = x / e, f = x % e;
        float value = acc[r][f] * correction[r];
        for (int64_t c = 0; c < cols; ++c)
          value += s[r][c] * vs[c][f];
        acc[r][f] = value;
      }
    }
    __syncthreads();
    for (int64_t x = threadIdx.x; x < rows * e; x += blockDim.x) {
      int64_t r = x / e, f = x % e;
      o[b * a.oStrides[0] + h * a.oStrides[1] + (i0 + r) * a.oStrides[2] + f] =
          T(sum[r] > 0 ? acc[r][f] / sum[r] : 0.0f);
    }
    if (threadIdx.x < rows)
      lse[(b * a.heads + h) * a.queries + i0 + threadIdx.x] =
          sum[threadIdx.x] > 0 ? mx[threadIdx.x] + logf(sum[threadIdx.x])
                               : -INFINITY;
    __syncthreads();
  }
}

/// The probabilities (from the saved log-sum-exp) and the score gradients
/// dS = P * (dP - delta) of rows [i0, i0 + rows) and keys [j0, j0 + cols)
/// of one head, into p and ds; delta holds each row's dout . o. Every
/// thread of the block calls it; it synchronizes before it returns.
template <typename T>
__device__ void
attentionScoreGrads(const AttentionShape &a, const AttentionOperands<T> &head,
                    int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                    const float *delta, float (*p)[kAttentionKeys],
                    float (*ds)[kAttentionKeys]) {
  for (int64_t x = threadIdx.x; x < kAttentionRows * kAttentionKeys;
       x += blockDim.x) {
    int64_t r = x / kAttentionKeys, c = x % kAttentionKeys;
    float prob = 0, grad = 0;
    if (r < rows && c < cols) {
      float slope = 1;
      float score = attentionScore(a, head, i0 + r, j0 + c, &slope);
      float m = head.lse[i0 + r];
      prob = m == -INFINITY || score == -INFINITY
                 ? 0.0f
                 : expf(fminf(0.0f, score - m));
      const T *dor = head.dout + (i0 + r) * a.oStrides[2];
      const T *vc = head.v + (j0 + c) * a.vStrides[2];
      float dp = 0;
      for (int64_t f = 0; f < a.valueFeatures; ++f)
        dp += float(dor[f]) * float(vc[f]);
      grad = prob * (dp - delta[r]) * slope;
    }
    p[r][c] = prob;
    ds[r][c] = grad;
  }
  __syncthreads();
}

/// Each row's dout . o, into delta.
template <typename T>
__device__ void attentionDelta(const AttentionShape &a,
                               const AttentionOperands<T> &head, int64_t i0,
                               int64_t rows, float *delta) {
  if (threadIdx.x < rows) {
    const T *orow = head.o + (i0 + threadIdx.x) * a.oStrides[2];
    const T *dor = head.dout + (i0 + threadIdx.x) * a.oStrides[2];
    float d = 0;
    for (int64_t f = 0; f < a.valueFeatures; ++f)
      d += float(dor[f]) * float(orow[f]);
    delta[threadIdx.x] = d;
  }
  __syncthreads();
}

/// out[c][f] += scale * sum_r w[r][c] * src[r * stride + f] for the tile's
/// `rows` rows and `cols` keys and `width` features, by the block's threads
/// (a key's value or key gradient from the rows of dout or q).
template <typename T>
__device__ void attentionAddWeightedRows(const float (*w)[kAttentionKeys],
                                         int64_t rows, int64_t cols,
                                         const T *src, int64_t stride,
                                         int64_t width, float scale,
                                         float (*out)[kAttentionMaxFeatures]) {
  for (int64_t x = threadIdx.x; x < cols * width; x += blockDim.x) {
    int64_t c = x / width, f = x % width;
    float value = 0;
    for (int64_t r = 0; r < rows; ++r)
      value += w[r][c] * float(src[r * stride + f]);
    out[c][f] += value * scale;
  }
}

/// The key and value gradients: one block per tile of keys of one key/value
/// head, over every query head of its group and every tile of queries the
/// causal mask leaves them, accumulated in shared memory.
template <typename T>
__global__ void attentionKeyGrads(AttentionOperands<T> in, T *__restrict__ dk,
                                  T *__restrict__ dv, AttentionShape a) {
  __shared__ float dks[kAttentionKeys][kAttentionMaxFeatures];
  __shared__ float dvs[kAttentionKeys][kAttentionMaxFeatures];
  __shared__ float p[kAttentionRows][kAttentionKeys];
  __shared__ float ds[kAttentionRows][kAttentionKeys];
  __shared__ float delta[kAttentionRows];
  int64_t keyTiles = (a.keys + kAttentionKeys - 1) / kAttentionKeys;
  int64_t perGroup = a.heads / a.groups;
  int64_t d = a.features, e = a.valueFeatures;
  for (int64_t tile = blockIdx.x; tile < a.batch * a.groups * keyTiles;
       tile += gridDim.x) {
    int64_t j0 = tile % keyTiles * kAttentionKeys, bg = tile / keyTiles;
    int64_t b = bg / a.groups, g = bg % a.groups;
    int64_t cols = smaller(kAttentionKeys, a.keys - j0);
    for (int64_t x = threadIdx.x; x < kAttentionKeys * kAttentionMaxFeatures;
         x += blockDim.x) {
      dks[x / kAttentionMaxFeatures][x % kAttentionMaxFeatures] = 0;
      dvs[x / kAttentionMaxFeatures][x % kAttentionMaxFeatures] = 0;
    }
    __syncthreads();
    for (int64_t h = g * perGroup; h < (g + 1) * perGroup; ++h) {
      AttentionOperands<T> at = in.head(a, b, h);
      int64_t first = a.causal ? j0 / kAttentionRows * kAttentionRows : 0;
      int64_t rowEnd = a.window > 0
                           ? smaller(a.queries, j0 + cols + a.window - 1)
                           : a.queries;
      for (int64_t i0 = first; i0 < rowEnd; i0 += kAttentionRows) {
        int64_t rows = smaller(kAttentionRows, a.queries - i0);
        attentionDelta(a, at, i0, rows, delta);
        attentionScoreGrads(a, at, i0, rows, j0, cols, delta, p, ds);
        attentionAddWeightedRows(p, rows, cols, at.dout + i0 * a.oStrides[2],
                                 a.oStrides[2], e, 1.0f, dvs);
        attentionAddWeightedRows(ds, rows, cols, at.q + i0 * a.qStrides[2],
                                 a.qStrides[2], d, a.scale, dks);
        __syncthreads();
      }
    }
    for (int64_t x = threadIdx.x; x < cols * d; x += blockDim.x)
      dk[((b * a.groups + g) * a.keys + j0 + x / d) * d + x % d] =
          T(dks[x / d][x % d]);
    for (int64_t x = threadIdx.x; x < cols * e; x += blockDim.x)
      dv[((b * a.groups + g) * a.keys + j0 + x / e) * e + x % e] =
          T(dvs[x / e][x % e]);
    __syncthreads();
  }
}

/// The query gradients: one block per tile of queries of one head, over
/// the tiles of keys the causal mask leaves it.
template <typename T>
__global__ void attentionQueryGrads(AttentionOperands<T> in, T *__restrict__ dq,
                                    AttentionShape a) {
  __shared__ float dqs[kAttentionRows][kAttentionMaxFeatures];
  __shared__ float p[kAttentionRows][kAttentionKeys];
  __shared__ float ds[kAttentionRows][kAttentionKeys];
  __shared__ float delta[kAttentionRows];
  int64_t rowTiles = (a.queries + kAttentionRows - 1) / kAttentionRows;
  int64_t d = a.features;
  for (int64_t tile = blockIdx.x; tile < a.batch * a.heads * rowTiles;
       tile += gridDim.x) {
    int64_t i0 = tile % rowTiles * kAttentionRows, bh = tile / rowTiles;
    int64_t b = bh / a.heads, h = bh % a.heads;
    int64_t rows = smaller(kAttentionRows, a.queries - i0);
    AttentionOperands<T> at = in.head(a, b, h);
    for (int64_t x = threadIdx.x; x < kAttentionRows * d; x += blockDim.x)
      dqs[x / d][x % d] = 0;
    attentionDelta(a, at, i0, rows, delta);
    int64_t keyEnd = a.causal ? smaller(a.keys, i0 + rows) : a.keys;
    for (int64_t j0 = a.firstKey(i0) / kAttentionKeys * kAttentionKeys;
         j0 < keyEnd; j0 += kAttentionKeys) {
      int64_t cols = smaller(kAttentionKeys, keyEnd - j0);
      attentionScoreGrads(a, at, i0, rows, j0, cols, delta, p, ds);
      for (int64_t x = threadIdx.x; x < rows * d; x += blockDim.x) {
        int64_t r = x / d, f = x % d;
        float value = 0;
        for (int64_t c = 0; c < cols; ++c)
          value += ds[r][c] * float(at.k[(j0 + c) * a.kStrides[2] + f]);
        dqs[r][f] += value * a.scale;
      }
      __syncthreads();
    }
    for (int64_t x = threadIdx.x; x < rows * d; x += blockDim.x)
      dq[((b * a.heads + h) * a.queries + i0 + x / d) * d + x % d] =
          T(dqs[x / d][x % d]);
    __syncthreads();
  }
}

template <typename T>
inline void attention(const T *q, const T *k, const T *v, const T *bias,
                      const T *sinks, T *o, float *lse, AttentionShape a) {
  int64_t tiles =
      a.batch * a.heads * ((a.queries + kAttentionRows - 1) / kAttentionRows);
  if (tiles == 0)
    return;
  AttentionOperands<T> in{q, k, v, bias, nullptr, nullptr, nullptr};
  auto kernel = &attentionForward<T>;
  PCC_LAUNCH(kernel, unsigned(tiles < 65535 ? tiles : 65535), kBlock,
             state().stream, in, sinks, o, lse, a);
}

template <typename T>
inline void attentionGrad(const T *q, const T *k, const T *v, const T *bias,
                          const T *o, const float *lse, const T *dout, T *dq,
                          T *dk, T *dv, AttentionShape a) {
  int64_t keyTiles =
      a.batch * a.groups * ((a.keys + kAttentionKeys - 1) / kAttentionKeys);
  int64_t rowTiles =
      a.batch * a.heads * ((a.queries + kAttentionRows - 1) / kAttentionRows);
  if (keyTiles == 0 || rowTiles == 0)
    return;
  AttentionOperands<T> in{q, k, v, bias, o, dout, lse};
  auto keys = &attentionKeyGrads<T>;
  PCC_LAUNCH(keys, unsigned(keyTiles < 65535 ? keyTiles : 65535), kBlock,
             state().stream, in, dk, dv, a);
  auto queries = &attentionQueryGrads<T>;
  PCC_LAUNCH(queries, unsigned(rowTiles < 65535 ? rowTiles : 65535), kBlock,
             state().stream, in, dq, a);
}

//===----------------------------------------------------------------------===//
// A paged KV cache (graph.cache_write, graph.paged_attention): the layout
// and the checks of the CPU's kernels (pcc_kernels.h); an index out of
// range sets the error flag.
//===----------------------------------------------------------------------===//

/// The extents of a step and its cache, as pcc_k::PagedShape.
struct PagedShape {
  int64_t tokens, heads, groups, features, valueFeatures;
  int64_t blocks, blockSize, sequences, blocksPerSequence;
  float scale;
  float softcap = 0;  ///< as AttentionShape's
  int64_t window = 0; ///< above 0: the keys from positions[n] - window + 1

  /// The first position that a query at position `last` may see.
  __device__ __host__ int64_t firstKey(int64_t last) const {
    return window > 0 && last - window + 1 > 0 ? last - window + 1 : 0;
  }
};

/// The cache block of position `p` of the sequence in row `slot`, or -1.
__device__ __forceinline__ int64_t pagedBlock(const int64_t *table,
                                              const PagedShape &l,
                                              int64_t slot, int64_t p) {
  if (slot < 0 || slot >= l.sequences || p < 0 ||
      p / l.blockSize >= l.blocksPerSequence)
    return -1;
  int64_t block = table[slot * l.blocksPerSequence + p / l.blockSize];
  return block >= 0 && block < l.blocks ? block : -1;
}

/// One thread per element of the rows [1, groups, tokens, width].
template <typename T>
__global__ void cacheWriteKernel(T *__restrict__ cache,
                                 const T *__restrict__ rows,
                                 const int64_t *__restrict__ slots,
                                 const int64_t *__restrict__ positions,
                                 const int64_t *__restrict__ table,
                                 PagedShape l, int64_t width, int *error) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       e < l.groups * l.tokens * width; e += int64_t(blockDim.x) * gridDim.x) {
    int64_t x = e % width, n = e / width % l.tokens, g = e / width / l.tokens;
    if (slots[n] < 0)
      continue;
    int64_t block = pagedBlock(table, l, slots[n], positions[n]);
    if (block < 0) {
      atomicExch(error, 1);
      continue;
    }
    cache[((block * l.groups + g) * l.blockSize +
           positions[n] % l.blockSize) *
              width +
          x] = rows[e];
  }
}

template <typename T>
inline void cacheWrite(T *cache, const T *rows, const int64_t *slots,
                       const int64_t *positions, const int64_t *table,
                       PagedShape l, int64_t width) {
  int64_t count = l.groups * l.tokens * width;
  if (count == 0)
    return;
  auto kernel = &cacheWriteKernel<T>;
  PCC_LAUNCH(kernel, blocksFor(count), kBlock, state().stream, cache, rows,
             slots, positions, table, l, width, state().indexError);
}

/// Keys scored at once by a block of paged attention.
constexpr int64_t kPagedKeys = 64;

/// One block per token and query head: its sequence's keys kPagedKeys at a
/// time, their scores in shared memory, a running maximum and sum.
template <typename T>
__global__ void pagedAttentionKernel(
    const T *__restrict__ q, const T *__restrict__ keys,
    const T *__restrict__ values, const int64_t *__restrict__ slots,
    const int64_t *__restrict__ positions, const int64_t *__restrict__ table,
    T *__restrict__ o, PagedShape l, const T *__restrict__ slopes,
    const T *__restrict__ sinks, int *error) {
  __shared__ float qs[kAttentionMaxFeatures], acc[kAttentionMaxFeatures];
  __shared__ float s[kPagedKeys];
  __shared__ float mx, sum, correction;
  __shared__ int64_t blocks[kPagedKeys];
  int64_t d = l.features, e = l.valueFeatures;
  int64_t perGroup = l.heads / l.groups;
  for (int64_t task = blockIdx.x; task < l.tokens * l.heads;
       task += gridDim.x) {
    int64_t n = task / l.heads, h = task % l.heads, g = h / perGroup;
    T *out = o + (h * l.tokens + n) * e;
    __syncthreads();
    if (slots[n] < 0) {
      for (int64_t x = threadIdx.x; x < e; x += blockDim.x)
        out[x] = T(0.0f);
      continue;
    }
    const T *qr = q + (h * l.tokens + n) * d;
    for (int64_t x = threadIdx.x; x < d; x += blockDim.x)
      qs[x] = float(qr[x]) * l.scale;
    for (int64_t x = threadIdx.x; x < e; x += blockDim.x)
      acc[x] = 0;
    if (threadIdx.x == 0) {
      mx = sinks ? float(sinks[h]) : -INFINITY;
      sum = sinks ? 1.0f : 0.0f;
    }
    int64_t last = positions[n];
    int64_t first = l.firstKey(last);
    for (int64_t j0 = first; j0 <= last; j0 += kPagedKeys) {
      int64_t cols = smaller(kPagedKeys, last + 1 - j0);
      __syncthreads();
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        int64_t block = pagedBlock(table, l, slots[n], j0 + c);
        blocks[c] = block;
        if (block < 0) {
          atomicExch(error, 1);
          s[c] = -INFINITY;
          continue;
        }
        const T *kr =
            keys + ((block * l.groups + g) * l.blockSize +
                    (j0 + c) % l.blockSize) *
                       d;
        float dot = 0;
        for (int64_t f = 0; f < d; ++f)
          dot += qs[f] * float(kr[f]);
        if (l.softcap > 0)
          dot = l.softcap * tanhf(dot / l.softcap);
        if (slopes)
          dot += float(slopes[h]) * float(j0 + c - last);
        s[c] = dot;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        float m = mx;
        for (int64_t c = 0; c < cols; ++c)
          m = fmaxf(m, s[c]);
        float added = 0;
        for (int64_t c = 0; c < cols; ++c) {
          s[c] = s[c] == -INFINITY ? 0.0f : expf(s[c] - m);
          added += s[c];
        }
        correction = expf(mx - m);
        sum = sum * correction + added;
        mx = m;
      }
      __syncthreads();
      for (int64_t x = threadIdx.x; x < e; x += blockDim.x) {
        float a = acc[x] * correction;
        for (int64_t c = 0; c < cols; ++c)
          if (blocks[c] >= 0)
            a += s[c] * float(values[((blocks[c] * l.groups + g) *
                                          l.blockSize +
                                      (j0 + c) % l.blockSize) *
                                         e +
                                     x]);
        acc[x] = a;
      }
    }
    __syncthreads();
    for (int64_t x = threadIdx.x; x < e; x += blockDim.x)
      out[x] = T(sum > 0 ? acc[x] / sum : 0.0f);
  }
}

template <typename T>
inline void pagedAttention(const T *q, const T *keys, const T *values,
                           const int64_t *slots, const int64_t *positions,
                           const int64_t *table, T *o, PagedShape l,
                           const T *slopes = nullptr,
                           const T *sinks = nullptr) {
  int64_t tasks = l.tokens * l.heads;
  if (tasks == 0)
    return;
  auto kernel = &pagedAttentionKernel<T>;
  PCC_LAUNCH(kernel, unsigned(tasks < 65535 ? tasks : 65535), kBlock,
             state().stream, q, keys, values, slots, positions, table, o, l,
             slopes, sinks, state().indexError);
}

//===----------------------------------------------------------------------===//
// Gathers and scatters: an index out of range sets the error flag, which
// the run reads back when it ends (finish): the run then fails as on the
// CPU, and no call in between waits for the device.
//===----------------------------------------------------------------------===//

template <typename T, typename I>
__global__ void gatherKernel(const T *__restrict__ data,
                             const I *__restrict__ idx, T *__restrict__ out,
                             int64_t outer, int64_t k, int64_t inner,
                             int64_t count, int *error) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       e < outer * count * inner; e += int64_t(blockDim.x) * gridDim.x) {
    int64_t t = e % inner, j = e / inner % count, o = e / inner / count;
    int64_t i = int64_t(idx[j]);
    if (i < 0)
      i += k;
    if (i < 0 || i >= k) {
      atomicExch(error, 1);
      continue;
    }
    out[e] = data[(o * k + i) * inner + t];
  }
}

template <typename T, typename I>
inline void gather(const T *data, const I *idx, T *out, int64_t outer,
                  int64_t k, int64_t inner, int64_t count) {
  if (outer * count * inner == 0)
    return;
  auto kernel = &gatherKernel<T, I>;
  PCC_LAUNCH(kernel, blocksFor(outer * count * inner), kBlock, state().stream,
             data, idx, out, outer, k, inner, count, state().indexError);
}

/// The offset into a tensor of shape `dataShape` of index element `e` (of
/// shape `idxShape`), its coordinate along `axis` taken from the index;
/// -1 when out of range.
template <typename I>
__device__ __forceinline__ int64_t indexedOffset(const I *idx, int64_t e,
                                                 int rank, const Dims &data,
                                                 const Dims &index, int axis) {
  int64_t coord[16];
  int64_t rest = e;
  for (int d = rank - 1; d >= 0; --d) {
    coord[d] = rest % index.d[d];
    rest /= index.d[d];
  }
  int64_t off = 0;
  for (int d = 0; d < rank; ++d) {
    int64_t c = coord[d];
    if (d == axis) {
      c = int64_t(idx[e]);
      if (c < 0)
        c += data.d[d];
      if (c < 0 || c >= data.d[d])
        return -1;
    }
    off = off * data.d[d] + c;
  }
  return off;
}

inline int64_t product(int rank, const Dims &shape) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d)
    n *= shape.d[d];
  return n;
}

template <typename T, typename I>
__global__ void gatherElementsKernel(const T *__restrict__ data,
                                     const I *__restrict__ idx,
                                     T *__restrict__ out, int rank, Dims shape,
                                     Dims index, int axis, int64_t total,
                                     int *error) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(blockDim.x) * gridDim.x) {
    int64_t off = indexedOffset(idx, e, rank, shape, index, axis);
    if (off < 0)
      atomicExch(error, 1);
    else
      out[e] = data[off];
  }
}

template <typename T, typename I>
inline void gatherElements(const T *data, const I *idx, T *out, int rank,
                          Dims shape, Dims index, int axis) {
  int64_t total = product(rank, index);
  if (total == 0)
    return;
  auto kernel = &gatherElementsKernel<T, I>;
  PCC_LAUNCH(kernel, blocksFor(total), kBlock, state().stream, data, idx, out,
             rank, shape, index, axis, total, state().indexError);
}

/// out = 0 (unless `accumulate`: out holds a partial sum, added to), then
/// out[... idx[e] ...] += updates[e] in the order of e: one thread, so
/// that repeated indices add up in the CPU's order.
template <typename T, typename I>
__global__ void scatterElementsAddKernel(const T *__restrict__ updates,
                                         const I *__restrict__ idx,
                                         T *__restrict__ out, int rank,
                                         Dims shape, Dims index, int axis,
                                         int64_t total, int *error) {
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  for (int64_t e = 0; e < total; ++e) {
    int64_t off = indexedOffset(idx, e, rank, shape, index, axis);
    if (off < 0) {
      atomicExch(error, 1);
      return;
    }
    out[off] = T(out[off] + updates[e]);
  }
}

template <typename T, typename I>
inline void scatterElementsAdd(const T *updates, const I *idx, T *out, int rank,
                              Dims shape, Dims index, int axis,
                              bool accumulate = false) {
  if (!accumulate)
    fill(out, product(rank, shape), T(0));
  int64_t total = product(rank, index);
  if (total == 0)
    return;
  auto kernel = &scatterElementsAddKernel<T, I>;
  PCC_LAUNCH(kernel, 1u, 1, state().stream, updates, idx, out, rank, shape,
             index, axis, total, state().indexError);
}

/// out [outer, k, inner] = 0, then each of the `count` update slices added
/// at its index: one thread per (outer, inner) element, the slices in
/// order.
template <typename T, typename I>
__global__ void scatterAddKernel(const T *__restrict__ updates,
                                 const I *__restrict__ idx,
                                 T *__restrict__ out, int64_t outer, int64_t k,
                                 int64_t inner, int64_t count, int *error) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       e < outer * inner; e += int64_t(blockDim.x) * gridDim.x) {
    int64_t o = e / inner, t = e % inner;
    for (int64_t j = 0; j < count; ++j) {
      int64_t i = int64_t(idx[j]);
      if (i < 0)
        i += k;
      if (i < 0 || i >= k) {
        atomicExch(error, 1);
        break;
      }
      T *dst = out + (o * k + i) * inner + t;
      *dst = T(*dst + updates[(o * count + j) * inner + t]);
    }
  }
}

template <typename T, typename I>
inline void scatterAdd(const T *updates, const I *idx, T *out, int64_t outer,
                       int64_t k, int64_t inner, int64_t count,
                       bool accumulate = false) {
  if (!accumulate)
    fill(out, outer * k * inner, T(0));
  if (outer * inner == 0)
    return;
  auto kernel = &scatterAddKernel<T, I>;
  PCC_LAUNCH(kernel, blocksFor(outer * inner), kBlock, state().stream, updates,
             idx, out, outer, k, inner, count, state().indexError);
}

//===----------------------------------------------------------------------===//
// Triangles and running sums
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void triluKernel(const T *__restrict__ x, T *__restrict__ y,
                            int64_t total, int64_t rows, int64_t cols,
                            bool upper, int64_t k) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(blockDim.x) * gridDim.x) {
    int64_t c = i % cols, r = i / cols % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    y[i] = keep ? x[i] : T(0);
  }
}

template <typename T>
inline void trilu(const T *x, T *y, int64_t batch, int64_t rows, int64_t cols,
                  bool upper, int64_t k) {
  int64_t total = batch * rows * cols;
  if (total == 0)
    return;
  auto kernel = &triluKernel<T>;
  PCC_LAUNCH(kernel, blocksFor(total), kBlock, state().stream, x, y, total,
             rows, cols, upper, k);
}

/// Whether `a` (at index `ia`) goes before `b` (at `ib`) among the k kept
/// by TopK, as the CPU's topKBefore orders them.
template <typename T>
__device__ inline bool topKBefore(T a, int64_t ia, T b, int64_t ib,
                                  bool largest) {
  float fa = float(a), fb = float(b);
  bool aNaN = fa != fa, bNaN = fb != fb;
  if (aNaN || bNaN)
    return aNaN && bNaN ? ia < ib : aNaN == largest;
  if (fa != fb)
    return largest ? fb < fa : fa < fb;
  return ia < ib;
}

/// One thread a row of [outer, n, inner]: the k best by selection, each
/// pass taking the best of those that come after the last one taken (the
/// order is total, so no element is taken twice).
template <typename T>
__global__ void topKKernel(const T *__restrict__ x, T *__restrict__ values,
                           int64_t *__restrict__ indices, int64_t outer,
                           int64_t n, int64_t inner, int64_t k, bool largest) {
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       r < outer * inner; r += int64_t(blockDim.x) * gridDim.x) {
    int64_t o = r / inner, c = r % inner;
    const T *row = x + o * n * inner + c;
    int64_t last = -1;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t i = 0; i < n; ++i) {
        if (last >= 0 &&
            !topKBefore(row[last * inner], last, row[i * inner], i, largest))
          continue;
        if (best < 0 ||
            topKBefore(row[i * inner], i, row[best * inner], best, largest))
          best = i;
      }
      int64_t e = (o * k + j) * inner + c;
      indices[e] = best;
      values[e] = row[best * inner];
      last = best;
    }
  }
}

template <typename T>
inline void topK(const T *x, T *values, int64_t *indices, int64_t outer,
                 int64_t n, int64_t inner, int64_t k, bool largest) {
  if (outer * inner == 0 || k == 0)
    return;
  auto kernel = &topKKernel<T>;
  PCC_LAUNCH(kernel, blocksFor(outer * inner), kBlock, state().stream, x,
             values, indices, outer, n, inner, k, largest);
}

template <typename T>
__global__ void cumSumKernel(const T *__restrict__ x, T *__restrict__ y,
                             int64_t outer, int64_t n, int64_t inner,
                             bool exclusive, bool reverse) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       e < outer * inner; e += int64_t(blockDim.x) * gridDim.x) {
    int64_t o = e / inner, k = e % inner;
    T acc = T(0);
    for (int64_t step = 0; step < n; ++step) {
      int64_t i = reverse ? n - 1 - step : step;
      int64_t at = (o * n + i) * inner + k;
      T v = x[at];
      if (exclusive) {
        y[at] = acc;
        acc = T(acc + v);
      } else {
        acc = T(acc + v);
        y[at] = acc;
      }
    }
  }
}

template <typename T>
inline void cumSum(const T *x, T *y, int64_t outer, int64_t n, int64_t inner,
                   bool exclusive, bool reverse) {
  if (outer * inner == 0)
    return;
  auto kernel = &cumSumKernel<T>;
  PCC_LAUNCH(kernel, blocksFor(outer * inner), kBlock, state().stream, x, y,
             outer, n, inner, exclusive, reverse);
}

/// Whether `v` is a NaN, for every element type (the 16-bit ones through
/// float); the host's and the device's isnan differ in where they live.
template <typename T> __host__ __device__ inline bool isNaN(T v) {
  return v != v;
}

/// Integer powers as the CPU computes them: `exp` multiplications (none for
/// a negative exponent).
template <typename T> __host__ __device__ inline T ipow(T base, T exp) {
  T r = 1;
  for (T i = 0; i < exp; ++i)
    r *= base;
  return r;
}

} // namespace pcc_cu

// Limits of the 16-bit float types, for reductions' initial values.
template <> struct std::numeric_limits<pcc_cu::bf16> {
  static constexpr bool is_specialized = true;
  __host__ __device__ static pcc_cu::bf16 infinity() {
    return pcc_cu::bf16(std::numeric_limits<float>::infinity());
  }
  __host__ __device__ static pcc_cu::bf16 quiet_NaN() {
    return pcc_cu::bf16(std::numeric_limits<float>::quiet_NaN());
  }
  __host__ __device__ static pcc_cu::bf16 lowest() {
    return pcc_cu::bf16(-3.38953139e38f);
  }
  __host__ __device__ static pcc_cu::bf16 max() {
    return pcc_cu::bf16(3.38953139e38f);
  }
};
template <> struct std::numeric_limits<pcc_cu::f16> {
  static constexpr bool is_specialized = true;
  __host__ __device__ static pcc_cu::f16 infinity() {
    return pcc_cu::f16(std::numeric_limits<float>::infinity());
  }
  __host__ __device__ static pcc_cu::f16 quiet_NaN() {
    return pcc_cu::f16(std::numeric_limits<float>::quiet_NaN());
  }
  __host__ __device__ static pcc_cu::f16 lowest() {
    return pcc_cu::f16(-65504.0f);
  }
  __host__ __device__ static pcc_cu::f16 max() { return pcc_cu::f16(65504.0f); }
};

#endif // PCC_CUDA_KERNELS_CUH
