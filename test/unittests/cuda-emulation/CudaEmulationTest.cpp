//===- CudaEmulationTest.cpp - Unit tests of pcc_cuda_emulation.h ---------===//
//
// The kernels are written as CUDA code is, launched with PCC_LAUNCH, and
// checked against plain loops.
//
//===----------------------------------------------------------------------===//

#include "pcc_cuda_emulation.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

namespace {

constexpr unsigned kFullMask = 0xffffffffu;

/// A device buffer of N elements, freed at scope exit.
template <typename T> struct DeviceBuffer {
  T *Data = nullptr;
  explicit DeviceBuffer(size_t N) {
    EXPECT_EQ(cudaMalloc(&Data, N * sizeof(T)), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(Data); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  T &operator[](size_t I) { return Data[I]; }
  T *operator->() { return Data; }
};

//===----------------------------------------------------------------------===//
// Element-wise and grid shape
//===----------------------------------------------------------------------===//

__global__ void gridStrideAxpb(float *Out, const float *__restrict__ In,
                               float A, float B, int N) {
  for (int I = blockIdx.x * blockDim.x + threadIdx.x; I < N;
       I += blockDim.x * gridDim.x)
    Out[I] = A * In[I] + B;
}

TEST(CudaEmulation, GridStrideElementwise) {
  const int N = 100003;
  DeviceBuffer<float> In(N), Out(N);
  for (int I = 0; I < N; ++I)
    In[I] = float(I % 1000) * 0.25f - 7.0f;
  PCC_LAUNCH(gridStrideAxpb, 64, 256, nullptr, Out.Data, In.Data, 3.0f, 0.5f,
             N);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int I = 0; I < N; ++I)
    ASSERT_EQ(Out[I], 3.0f * In[I] + 0.5f) << "at " << I;
}

struct ThreadRecord {
  uint3 Block, Thread;
  dim3 Grid, BlockShape;
};

__global__ void recordDims(ThreadRecord *Records, unsigned *BlockOrder,
                           unsigned *Counter) {
  unsigned BlockLinear =
      blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned ThreadLinear =
      threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned PerBlock = blockDim.x * blockDim.y * blockDim.z;
  Records[BlockLinear * PerBlock + ThreadLinear] = {blockIdx, threadIdx,
                                                    gridDim, blockDim};
  if (ThreadLinear == 0)
    BlockOrder[BlockLinear] = atomicAdd(Counter, 1u);
}

TEST(CudaEmulation, MultiDimensionalGridAndBlock) {
  const dim3 Grid(3, 2, 2), Block(4, 3, 2);
  const unsigned Blocks = 12, PerBlock = 24;
  DeviceBuffer<ThreadRecord> Records(Blocks * PerBlock);
  DeviceBuffer<unsigned> Order(Blocks), Counter(1);
  *Counter.Data = 0;
  PCC_LAUNCH(recordDims, Grid, Block, nullptr, Records.Data, Order.Data,
             Counter.Data);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (unsigned B = 0; B < Blocks; ++B) {
    // Blocks run in order, x fastest.
    EXPECT_EQ(Order[B], B);
    for (unsigned T = 0; T < PerBlock; ++T) {
      const ThreadRecord &R = Records[B * PerBlock + T];
      EXPECT_EQ(R.Block.x, B % 3);
      EXPECT_EQ(R.Block.y, B / 3 % 2);
      EXPECT_EQ(R.Block.z, B / 6);
      EXPECT_EQ(R.Thread.x, T % 4);
      EXPECT_EQ(R.Thread.y, T / 4 % 3);
      EXPECT_EQ(R.Thread.z, T / 12);
      EXPECT_TRUE(R.Grid.x == 3 && R.Grid.y == 2 && R.Grid.z == 2);
      EXPECT_TRUE(R.BlockShape.x == 4 && R.BlockShape.y == 3 &&
                  R.BlockShape.z == 2);
    }
  }
}

TEST(CudaEmulation, InvalidConfigurationIsALaunchError) {
  DeviceBuffer<float> Out(4);
  Out[0] = 1.0f;
  PCC_LAUNCH(gridStrideAxpb, 1, 2048, nullptr, Out.Data, Out.Data, 2.0f, 0.0f,
             1);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(Out[0], 1.0f) << "the kernel must not have run";
  PCC_LAUNCH(gridStrideAxpb, dim3(1, 1, 0), 32, nullptr, Out.Data, Out.Data,
             2.0f, 0.0f, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
}

//===----------------------------------------------------------------------===//
// Block and warp synchronization
//===----------------------------------------------------------------------===//

/// Sums each row of a [Rows, Cols] matrix with one block per row.
__global__ void rowSums(float *Sums, const float *Matrix, int Cols) {
  __shared__ float Partial[32];
  const float *Row = Matrix + size_t(blockIdx.x) * Cols;
  float V = 0.0f;
  for (int I = threadIdx.x; I < Cols; I += blockDim.x)
    V += Row[I];
  for (int Offset = 16; Offset > 0; Offset /= 2)
    V += __shfl_xor_sync(kFullMask, V, Offset);
  unsigned Lane = threadIdx.x % 32, Warp = threadIdx.x / 32;
  if (Lane == 0)
    Partial[Warp] = V;
  __syncthreads();
  if (Warp == 0) {
    V = Lane < blockDim.x / 32 ? Partial[Lane] : 0.0f;
    for (int Offset = 16; Offset > 0; Offset /= 2)
      V += __shfl_down_sync(kFullMask, V, Offset);
    if (Lane == 0)
      Sums[blockIdx.x] = V;
  }
}

TEST(CudaEmulation, BlockReductionWithSharedMemoryAndShuffles) {
  const int Rows = 37, Cols = 1000;
  DeviceBuffer<float> Matrix(Rows * Cols), Sums(Rows);
  // Small integers, so that every summation order gives the exact sum.
  for (int I = 0; I < Rows * Cols; ++I)
    Matrix[I] = float(I * 7 % 13) - 6.0f;
  PCC_LAUNCH(rowSums, Rows, 256, nullptr, Sums.Data, Matrix.Data, Cols);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int R = 0; R < Rows; ++R) {
    float Expected = 0.0f;
    for (int C = 0; C < Cols; ++C)
      Expected += Matrix[R * Cols + C];
    EXPECT_EQ(Sums[R], Expected) << "row " << R;
  }
}

__device__ float warpReduce(float V, bool Max) {
  for (int Offset = 16; Offset > 0; Offset /= 2) {
    float Other = __shfl_xor_sync(kFullMask, V, Offset);
    V = Max ? fmaxf(V, Other) : V + Other;
  }
  return V;
}

/// A block-wide reduction whose shared memory lives in a __device__ helper,
/// called twice by one kernel.
__device__ float blockReduce(float V, bool Max) {
  __shared__ float Partial[32];
  __shared__ float Result;
  unsigned Lane = threadIdx.x % 32, Warp = threadIdx.x / 32;
  V = warpReduce(V, Max);
  if (Lane == 0)
    Partial[Warp] = V;
  __syncthreads();
  if (Warp == 0) {
    float Identity = Max ? -INFINITY : 0.0f;
    V = warpReduce(Lane < (blockDim.x + 31) / 32 ? Partial[Lane] : Identity,
                   Max);
    if (Lane == 0)
      Result = V;
  }
  __syncthreads();
  return Result;
}

__global__ void softmaxRows(float *Out, const float *In, int Cols) {
  const float *Row = In + size_t(blockIdx.x) * Cols;
  float *OutRow = Out + size_t(blockIdx.x) * Cols;
  float Max = -INFINITY;
  for (int I = threadIdx.x; I < Cols; I += blockDim.x)
    Max = fmaxf(Max, Row[I]);
  Max = blockReduce(Max, /*Max=*/true);
  float Sum = 0.0f;
  for (int I = threadIdx.x; I < Cols; I += blockDim.x) {
    float E = __expf(Row[I] - Max);
    OutRow[I] = E;
    Sum += E;
  }
  Sum = blockReduce(Sum, /*Max=*/false);
  float Scale = __fdividef(1.0f, Sum);
  for (int I = threadIdx.x; I < Cols; I += blockDim.x)
    OutRow[I] *= Scale;
}

TEST(CudaEmulation, SoftmaxPerRow) {
  const int Rows = 19, Cols = 1000;
  DeviceBuffer<float> In(Rows * Cols), Out(Rows * Cols);
  for (int I = 0; I < Rows * Cols; ++I)
    In[I] = std::sin(float(I) * 0.37f) * 8.0f + float(I / Cols);
  PCC_LAUNCH(softmaxRows, Rows, 128, nullptr, Out.Data, In.Data, Cols);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int R = 0; R < Rows; ++R) {
    const float *Row = &In[R * Cols];
    float Max = -INFINITY, Sum = 0.0f;
    for (int C = 0; C < Cols; ++C)
      Max = std::max(Max, Row[C]);
    for (int C = 0; C < Cols; ++C)
      Sum += std::exp(Row[C] - Max);
    for (int C = 0; C < Cols; ++C)
      ASSERT_NEAR(Out[R * Cols + C], std::exp(Row[C] - Max) / Sum, 1e-6)
          << "row " << R << ", column " << C;
  }
}

/// Threads past N return at once; the rest then synchronize, which must
/// count the exited threads as arrived.
__global__ void rotateAfterEarlyExit(int *Out, int N) {
  __shared__ int Values[128];
  if (int(threadIdx.x) >= N)
    return;
  Values[threadIdx.x] = int(threadIdx.x) * 10;
  __syncthreads();
  Out[threadIdx.x] = Values[(threadIdx.x + 1) % N];
}

TEST(CudaEmulation, ExitedThreadsCountAsArrived) {
  const int N = 100;
  DeviceBuffer<int> Out(128);
  PCC_LAUNCH(rotateAfterEarlyExit, 2, 128, nullptr, Out.Data, N);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int I = 0; I < N; ++I)
    EXPECT_EQ(Out[I], (I + 1) % N * 10);
}

struct WarpResults {
  float Sum, Down, Up, Xor16;
  unsigned Ballot;
  int All, Any;
};

__global__ void partialWarpOps(WarpResults *Out) {
  unsigned T = threadIdx.x;
  float V = float(T + 1);
  float Sum = V;
  // The second warp has 8 lanes: reduce over those.
  for (int Offset = T < 32 ? 16 : 4; Offset > 0; Offset /= 2)
    Sum += __shfl_xor_sync(kFullMask, Sum, Offset);
  WarpResults &R = Out[T];
  R.Sum = Sum;
  R.Down = __shfl_down_sync(kFullMask, V, 1);
  R.Up = __shfl_up_sync(kFullMask, V, 2);
  R.Xor16 = __shfl_xor_sync(kFullMask, V, 16);
  R.Ballot = __ballot_sync(kFullMask, T % 2 == 0);
  R.All = __all_sync(kFullMask, T < 36);
  R.Any = __any_sync(kFullMask, T == 3);
}

TEST(CudaEmulation, PartialLastWarp) {
  DeviceBuffer<WarpResults> Out(40);
  PCC_LAUNCH(partialWarpOps, 1, 40, nullptr, Out.Data);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (unsigned T = 0; T < 40; ++T) {
    const WarpResults &R = Out[T];
    unsigned Lane = T % 32;
    bool Full = T < 32;
    float V = float(T + 1);
    EXPECT_EQ(R.Sum, Full ? 528.0f : 292.0f) << T; // 1+..+32, 33+..+40
    if (Lane == 31)
      EXPECT_EQ(R.Down, V) << "past the warp's end: own value";
    else if (T == 39)
      EXPECT_TRUE(std::isnan(R.Down)) << "lane 8 of the second warp is absent";
    else
      EXPECT_EQ(R.Down, V + 1.0f) << T;
    EXPECT_EQ(R.Up, Lane < 2 ? V : V - 2.0f) << T;
    if (Full)
      EXPECT_EQ(R.Xor16, float((T ^ 16) + 1)) << T;
    else
      EXPECT_TRUE(std::isnan(R.Xor16)) << T;
    EXPECT_EQ(R.Ballot, Full ? 0x55555555u : 0x55u) << T;
    EXPECT_EQ(R.All, Full ? 1 : 0) << T;
    EXPECT_EQ(R.Any, Full ? 1 : 0) << T;
  }
}

__global__ void shuffleWidths(int *Broadcast, int *Butterfly, int *Down,
                              int *Masked) {
  int T = int(threadIdx.x);
  Broadcast[T] = __shfl_sync(kFullMask, T, 3, 8);
  Butterfly[T] = __shfl_xor_sync(kFullMask, T, 8, 16);
  Down[T] = __shfl_down_sync(kFullMask, T, 2, 4);
  Masked[T] = -1;
  // Only the lower half-warp takes part, naming itself in the mask.
  if (T % 32 < 16)
    Masked[T] = __shfl_xor_sync(0x0000ffffu, T, 1);
  __syncwarp();
}

TEST(CudaEmulation, ShuffleWidthsAndMasks) {
  DeviceBuffer<int> Broadcast(64), Butterfly(64), Down(64), Masked(64);
  PCC_LAUNCH(shuffleWidths, 1, 64, nullptr, Broadcast.Data, Butterfly.Data,
             Down.Data, Masked.Data);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int T = 0; T < 64; ++T) {
    EXPECT_EQ(Broadcast[T], T / 8 * 8 + 3) << T;
    EXPECT_EQ(Butterfly[T], T ^ 8) << T;
    EXPECT_EQ(Down[T], T % 4 < 2 ? T + 2 : T) << T;
    EXPECT_EQ(Masked[T], T % 32 < 16 ? T ^ 1 : -1) << T;
  }
}

//===----------------------------------------------------------------------===//
// Deadlocks and misuse abort
//===----------------------------------------------------------------------===//

/// In block 1, thread 0 shuffles with lanes that wait at __syncthreads for
/// thread 0: neither can complete.
__global__ void shuffleAgainstBarrier(float *Out) {
  float V = float(threadIdx.x);
  if (blockIdx.x == 1 && threadIdx.x == 0)
    V = __shfl_xor_sync(kFullMask, V, 1);
  else
    __syncthreads();
  Out[blockIdx.x * blockDim.x + threadIdx.x] = V;
}

__global__ void mismatchedWarpOps(unsigned *Out) {
  if (threadIdx.x < 16)
    Out[threadIdx.x] = __shfl_xor_sync(kFullMask, threadIdx.x, 1);
  else
    Out[threadIdx.x] = __ballot_sync(kFullMask, 1);
}

TEST(CudaEmulationDeathTest, DeadlockAbortsNamingTheBlock) {
  // OpenBLAS has started threads; fork-only death tests would warn.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  DeviceBuffer<float> Out(3 * 64);
  EXPECT_DEATH(PCC_LAUNCH(shuffleAgainstBarrier, 3, 64, nullptr, Out.Data),
               "deadlock in kernel shuffleAgainstBarrier, block \\(1,0,0\\)"
               ".*63 threads wait at __syncthreads, 1 at warp operations");
}

TEST(CudaEmulationDeathTest, MismatchedWarpOperationsAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  DeviceBuffer<unsigned> Out(32);
  EXPECT_DEATH(PCC_LAUNCH(mismatchedWarpOps, 1, 32, nullptr, Out.Data),
               "kernel mismatchedWarpOps, block \\(0,0,0\\), warp 0: lane 16 "
               "calls __ballot_sync");
}

TEST(CudaEmulationDeathTest, BarrierOutsideAKernelAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(__syncthreads(), "__syncthreads called outside a kernel");
}

//===----------------------------------------------------------------------===//
// Atomics
//===----------------------------------------------------------------------===//

struct AtomicCounters {
  int Count;
  float FloatSum;
  double DoubleSum;
  unsigned long long Wide;
  int Max;
  unsigned Min;
  unsigned CasCount;
  int Seen[1024];
};

__global__ void countWithAtomics(AtomicCounters *C) {
  int T = int(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(&C->Count, 1);
  atomicAdd(&C->FloatSum, 0.5f);
  atomicAdd(&C->DoubleSum, 0.25);
  atomicAdd(&C->Wide, 1ull << 33);
  atomicMax(&C->Max, T * 3 - 1000);
  atomicMin(&C->Min, unsigned(5000 - T));
  // An increment built from compare-and-swap, as code without a native
  // atomic for its operation does.
  unsigned Old = C->CasCount, Assumed;
  do {
    Assumed = Old;
    Old = atomicCAS(&C->CasCount, Assumed, Assumed + 1);
  } while (Old != Assumed);
  int Previous = atomicExch(&C->Seen[T], T + 1);
  if (Previous != 0)
    atomicAdd(&C->Count, 1000000);
}

TEST(CudaEmulation, AtomicsFrom1024Threads) {
  DeviceBuffer<AtomicCounters> C(1);
  std::memset(C.Data, 0, sizeof(AtomicCounters));
  C->Min = ~0u;
  PCC_LAUNCH(countWithAtomics, 4, 256, nullptr, C.Data);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(C->Count, 1024);
  EXPECT_EQ(C->FloatSum, 512.0f);
  EXPECT_EQ(C->DoubleSum, 256.0);
  EXPECT_EQ(C->Wide, 1024ull << 33);
  EXPECT_EQ(C->Max, 1023 * 3 - 1000);
  EXPECT_EQ(C->Min, 5000u - 1023);
  EXPECT_EQ(C->CasCount, 1024u);
  for (int T = 0; T < 1024; ++T)
    ASSERT_EQ(C->Seen[T], T + 1);
}

TEST(CudaEmulation, AtomicReturnValues) {
  int I = 5;
  EXPECT_EQ(atomicAdd(&I, 2), 5);
  EXPECT_EQ(atomicCAS(&I, 6, 9), 7) << "a failed CAS returns the old value";
  EXPECT_EQ(I, 7);
  EXPECT_EQ(atomicCAS(&I, 7, 9), 7);
  EXPECT_EQ(I, 9);
  EXPECT_EQ(atomicMax(&I, 4), 9);
  EXPECT_EQ(atomicMin(&I, 4), 9);
  EXPECT_EQ(I, 4);
  unsigned long long W = 1;
  EXPECT_EQ(atomicCAS(&W, 1ull, 1ull << 40), 1ull);
  EXPECT_EQ(atomicExch(&W, 3ull), 1ull << 40);
  float F = 1.5f;
  EXPECT_EQ(atomicExch(&F, 2.5f), 1.5f);
  EXPECT_EQ(atomicAdd(&F, 1.0f), 2.5f);
  EXPECT_EQ(F, 3.5f);
}

//===----------------------------------------------------------------------===//
// bf16 and half
//===----------------------------------------------------------------------===//

float floatFromBits(uint32_t Bits) {
  float F;
  std::memcpy(&F, &Bits, 4);
  return F;
}

uint16_t bf16Bits(float F) { return __float2bfloat16(F).Bits; }
uint16_t halfBits(float F) { return __float2half(F).Bits; }

TEST(CudaEmulation, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(bf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16Bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16Bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16Bits(floatFromBits(0x3f808000)), 0x3f80) << "tie, even below";
  EXPECT_EQ(bf16Bits(floatFromBits(0x3f818000)), 0x3f82) << "tie, even above";
  EXPECT_EQ(bf16Bits(floatFromBits(0x3f808001)), 0x3f81) << "above the tie";
  EXPECT_EQ(bf16Bits(floatFromBits(0x3f807fff)), 0x3f80) << "below the tie";
  EXPECT_EQ(bf16Bits(floatFromBits(0x7f7fffff)), 0x7f80) << "overflows";
  EXPECT_EQ(bf16Bits(INFINITY), 0x7f80);
  EXPECT_EQ(bf16Bits(floatFromBits(0x00010000)), 0x0001) << "subnormal";
  EXPECT_EQ(bf16Bits(NAN), 0x7fff);
  EXPECT_EQ(bf16Bits(floatFromBits(0xff800001)), 0x7fff) << "NaN, not inf";
  EXPECT_EQ(__bfloat162float(__float2bfloat16(3.140625f)), 3.140625f);
  __nv_bfloat16 B;
  B.Bits = 0xc0a0;
  EXPECT_EQ(__bfloat162float(B), -5.0f);
}

TEST(CudaEmulation, HalfRoundsToNearestEven) {
  EXPECT_EQ(halfBits(1.0f), 0x3c00);
  EXPECT_EQ(halfBits(-2.0f), 0xc000);
  EXPECT_EQ(halfBits(65504.0f), 0x7bff);
  EXPECT_EQ(halfBits(65519.996f), 0x7bff);
  EXPECT_EQ(halfBits(65520.0f), 0x7c00) << "ties to even: infinity";
  EXPECT_EQ(halfBits(1.0f + 0x1p-11f), 0x3c00) << "tie, even below";
  EXPECT_EQ(halfBits(1.0f + 3 * 0x1p-11f), 0x3c02) << "tie, even above";
  EXPECT_EQ(halfBits(0x1p-14f), 0x0400) << "smallest normal";
  EXPECT_EQ(halfBits(0x1p-24f), 0x0001) << "smallest subnormal";
  EXPECT_EQ(halfBits(0x1p-25f), 0x0000) << "tie between 0 and 1 ulp";
  EXPECT_EQ(halfBits(1.5f * 0x1p-25f), 0x0001);
  EXPECT_EQ(halfBits(3 * 0x1p-25f), 0x0002) << "tie between 1 and 2 ulps";
  EXPECT_EQ(halfBits(5 * 0x1p-25f), 0x0002) << "tie between 2 and 3 ulps";
  EXPECT_EQ(halfBits(-0x1p-26f), 0x8000);
  EXPECT_EQ(halfBits(NAN), 0x7fff);
  EXPECT_EQ(__half2float(__float2half(-0.333251953125f)), -0.333251953125f);
  __half H;
  H.Bits = 0x0001;
  EXPECT_EQ(__half2float(H), 0x1p-24f);
  H.Bits = 0xfc00;
  EXPECT_EQ(__half2float(H), -INFINITY);
#ifdef __FLT16_MAX__
  // GCC's _Float16 converts with the same rounding: compare on every half
  // and on every float whose low 8 bits are zero (which includes every tie,
  // normal or subnormal), and on some that are not.
  auto compare = [](uint32_t Bits) {
    float F = floatFromBits(Bits);
    if (std::isnan(F))
      return true;
    _Float16 Reference = _Float16(F);
    uint16_t Expected;
    std::memcpy(&Expected, &Reference, 2);
    EXPECT_EQ(halfBits(F), Expected) << std::hex << Bits;
    return halfBits(F) == Expected;
  };
  for (uint64_t Bits = 0; Bits <= 0xffffffffu; Bits += 256)
    if (!compare(uint32_t(Bits)))
      return;
  for (uint64_t Bits = 0x7f; Bits <= 0xffffffffu; Bits += 65537)
    if (!compare(uint32_t(Bits)))
      return;
  for (uint32_t Bits = 0; Bits <= 0xffff; ++Bits) {
    _Float16 Reference;
    uint16_t Raw = uint16_t(Bits);
    std::memcpy(&Reference, &Raw, 2);
    H.Bits = Raw;
    float F = __half2float(H);
    if (std::isnan(float(Reference)))
      ASSERT_TRUE(std::isnan(F)) << std::hex << Bits;
    else
      ASSERT_EQ(F, float(Reference)) << std::hex << Bits;
  }
#endif
}

//===----------------------------------------------------------------------===//
// Runtime API
//===----------------------------------------------------------------------===//

TEST(CudaEmulation, RuntimeApi) {
  float *P = nullptr;
  ASSERT_EQ(cudaMalloc(&P, 1000), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(P) % 256, 0u);
  EXPECT_TRUE(std::isnan(P[249])) << "fresh device memory reads as NaN";
  std::vector<float> Host(250, 1.25f), Back(250);
  EXPECT_EQ(cudaMemcpy(P, Host.data(), 1000, cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(P, 0, 8), cudaSuccess);
  cudaStream_t Stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&Stream, cudaStreamNonBlocking),
            cudaSuccess);
  cudaEvent_t Event;
  ASSERT_EQ(cudaEventCreateWithFlags(&Event, cudaEventDisableTiming),
            cudaSuccess);
  EXPECT_EQ(
      cudaMemcpyAsync(Back.data(), P, 1000, cudaMemcpyDeviceToHost, Stream),
      cudaSuccess);
  EXPECT_EQ(cudaEventRecord(Event, Stream), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(nullptr, Event, 0), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(Event), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(Stream), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(Back[0], 0.0f);
  EXPECT_EQ(Back[1], 0.0f);
  EXPECT_EQ(Back[2], 1.25f);
  EXPECT_EQ(Back[249], 1.25f);
  EXPECT_EQ(cudaEventDestroy(Event), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(Stream), cudaSuccess);
  EXPECT_EQ(cudaFree(P), cudaSuccess);

  int Count = 0, Device = -1;
  EXPECT_EQ(cudaGetDeviceCount(&Count), cudaSuccess);
  EXPECT_EQ(Count, 1);
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaGetDevice(&Device), cudaSuccess);
  EXPECT_EQ(Device, 0);
  EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaMemcpy(nullptr, Host.data(), 4, cudaMemcpyDefault),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

//===----------------------------------------------------------------------===//
// cuBLASLt
//===----------------------------------------------------------------------===//

/// A row-major GEMM, C = op(A) op(B) (+ C), as a caller hands it to
/// cuBLASLt: seen column-major, the row-major matrices are transposed, so it
/// computes C^T = op(B)^T op(A)^T with B as the first operand.
struct RowMajorGemm {
  int M, N, K;
  bool TransA = false, TransB = false;
  int Batches = 1;
  float Beta = 0.0f;
  int LdcPad = 3; // C and D rows are N + LdcPad apart.
  bool InPlace = false;

  int ldc() const { return N + LdcPad; }
  int64_t strideA() const { return int64_t(M) * K + 5; }
  int64_t strideB() const { return int64_t(K) * N + 7; }
  int64_t strideC() const { return int64_t(M) * ldc() + 2; }

  float a(const std::vector<float> &A, int Batch, int I, int L) const {
    return A[Batch * strideA() + (TransA ? L * M + I : I * K + L)];
  }
  float b(const std::vector<float> &B, int Batch, int L, int J) const {
    return B[Batch * strideB() + (TransB ? J * K + L : L * N + J)];
  }

  /// Runs the GEMM with element type T for A and B, and U for C and D.
  template <typename T, typename U>
  cublasStatus_t run(cudaDataType_t InType, cudaDataType_t OutType,
                     const std::vector<float> &A, const std::vector<float> &B,
                     const std::vector<float> &C, std::vector<float> &D) const {
    std::vector<T> AT(A.begin(), A.end()), BT(B.begin(), B.end());
    std::vector<U> CT(C.begin(), C.end()), DT(C.size());
    // D starts as NaN: a beta of 0 must not read it.
    for (U &E : DT)
      E = U(NAN);
    cublasLtHandle_t Handle;
    cublasLtMatmulDesc_t Desc;
    cublasLtMatrixLayout_t LayoutA = nullptr, LayoutB = nullptr,
                           LayoutC = nullptr, LayoutD = nullptr;
    EXPECT_EQ(cublasLtCreate(&Handle), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&Desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              CUBLAS_STATUS_SUCCESS);
    // The first operand is B's buffer, the second A's.
    int32_t OpFirst = TransB ? CUBLAS_OP_T : CUBLAS_OP_N;
    int32_t OpSecond = TransA ? CUBLAS_OP_T : CUBLAS_OP_N;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(Desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                             &OpFirst, sizeof(OpFirst)),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(Desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                             &OpSecond, sizeof(OpSecond)),
              CUBLAS_STATUS_SUCCESS);
    // Column-major shapes of the row-major buffers.
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&LayoutB, InType, TransB ? K : N,
                                         TransB ? N : K, TransB ? K : N),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&LayoutA, InType, TransA ? M : K,
                                         TransA ? K : M, TransA ? M : K),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&LayoutC, OutType, N, M, ldc()),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&LayoutD, OutType, N, M, ldc()),
              CUBLAS_STATUS_SUCCESS);
    std::pair<cublasLtMatrixLayout_t, int64_t> Strides[] = {
        {LayoutA, strideA()},
        {LayoutB, strideB()},
        {LayoutC, strideC()},
        {LayoutD, strideC()}};
    for (auto [Layout, Stride] : Strides) {
      int32_t Count = Batches;
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(
                    Layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &Count,
                    sizeof(Count)),
                CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(
                    Layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    &Stride, sizeof(Stride)),
                CUBLAS_STATUS_SUCCESS);
    }
    float Alpha = 1.0f;
    const U *CPtr = InPlace ? DT.data() : CT.data();
    if (InPlace)
      DT = CT;
    cublasStatus_t Status = cublasLtMatmul(
        Handle, Desc, &Alpha, BT.data(), LayoutB, AT.data(), LayoutA, &Beta,
        CPtr, LayoutC, DT.data(), LayoutD, nullptr, nullptr, 0, nullptr);
    D.assign(DT.begin(), DT.end());
    for (cublasLtMatrixLayout_t Layout : {LayoutA, LayoutB, LayoutC, LayoutD})
      cublasLtMatrixLayoutDestroy(Layout);
    cublasLtMatmulDescDestroy(Desc);
    cublasLtDestroy(Handle);
    return Status;
  }

  void fill(std::vector<float> &A, std::vector<float> &B,
            std::vector<float> &C) const {
    A.resize(Batches * strideA());
    B.resize(Batches * strideB());
    C.resize(Batches * strideC());
    for (size_t I = 0; I < A.size(); ++I)
      A[I] = float(int(I * 37 % 17) - 8) * 0.125f;
    for (size_t I = 0; I < B.size(); ++I)
      B[I] = float(int(I * 11 % 23) - 11) * 0.25f;
    for (size_t I = 0; I < C.size(); ++I)
      C[I] = float(int(I % 7) - 3);
  }

  /// Checks D against a plain loop, to within RelTol of the largest term.
  void check(const std::vector<float> &A, const std::vector<float> &B,
             const std::vector<float> &C, const std::vector<float> &D,
             double RelTol) const {
    for (int Batch = 0; Batch < Batches; ++Batch)
      for (int I = 0; I < M; ++I)
        for (int J = 0; J < N; ++J) {
          double Sum = 0.0, Scale = 1.0;
          for (int L = 0; L < K; ++L) {
            double Term = double(a(A, Batch, I, L)) * b(B, Batch, L, J);
            Sum += Term;
            Scale = std::max(Scale, std::abs(Term));
          }
          size_t At = Batch * strideC() + size_t(I) * ldc() + J;
          Sum += Beta * C[At];
          ASSERT_NEAR(D[At], Sum, RelTol * Scale * K)
              << "batch " << Batch << ", C[" << I << "][" << J << "]";
        }
  }
};

TEST(CudaEmulation, CublasLtF32Gemms) {
  for (bool TransA : {false, true})
    for (bool TransB : {false, true}) {
      RowMajorGemm G{5, 7, 9};
      G.TransA = TransA;
      G.TransB = TransB;
      std::vector<float> A, B, C, D;
      G.fill(A, B, C);
      ASSERT_EQ((G.run<float, float>(CUDA_R_32F, CUDA_R_32F, A, B, C, D)),
                CUBLAS_STATUS_SUCCESS);
      SCOPED_TRACE(testing::Message()
                   << "TransA " << TransA << ", TransB " << TransB);
      G.check(A, B, C, D, 1e-6);
    }
}

TEST(CudaEmulation, CublasLtStridedBatchesAccumulate) {
  RowMajorGemm G{6, 4, 11};
  G.TransB = true;
  G.Batches = 3;
  G.Beta = 1.0f;
  std::vector<float> A, B, C, D;
  G.fill(A, B, C);
  ASSERT_EQ((G.run<float, float>(CUDA_R_32F, CUDA_R_32F, A, B, C, D)),
            CUBLAS_STATUS_SUCCESS);
  G.check(A, B, C, D, 1e-6);
  G.InPlace = true;
  ASSERT_EQ((G.run<float, float>(CUDA_R_32F, CUDA_R_32F, A, B, C, D)),
            CUBLAS_STATUS_SUCCESS);
  G.check(A, B, C, D, 1e-6);
}

TEST(CudaEmulation, CublasLtBfloat16Inputs) {
  RowMajorGemm G{8, 12, 33};
  G.TransA = true;
  G.Batches = 2;
  G.Beta = 1.0f;
  std::vector<float> A, B, C, D;
  G.fill(A, B, C);
  // Non-representable inputs, so that the rounding to bf16 matters.
  for (float &E : A)
    E *= 1.0f + 0x1p-10f;
  ASSERT_EQ((G.run<__nv_bfloat16, float>(CUDA_R_16BF, CUDA_R_32F, A, B, C, D)),
            CUBLAS_STATUS_SUCCESS);
  G.check(A, B, C, D, 1e-2);
  ASSERT_EQ((G.run<__nv_bfloat16, __nv_bfloat16>(CUDA_R_16BF, CUDA_R_16BF, A, B,
                                                 C, D)),
            CUBLAS_STATUS_SUCCESS);
  G.check(A, B, C, D, 1e-2);
  ASSERT_EQ((G.run<__half, float>(CUDA_R_16F, CUDA_R_32F, A, B, C, D)),
            CUBLAS_STATUS_SUCCESS);
  G.check(A, B, C, D, 1e-2);
}

TEST(CudaEmulation, CublasLtRejectsMisdescribedGemms) {
  cublasLtHandle_t Handle;
  cublasLtMatmulDesc_t Desc;
  ASSERT_EQ(cublasLtCreate(&Handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescCreate(&Desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  std::vector<float> A(64), B(64), D(64);
  float Alpha = 1.0f, Beta = 0.0f;
  auto matmul = [&](uint64_t AR, uint64_t AC, uint64_t BR, uint64_t BC,
                    uint64_t DR, uint64_t DC) {
    cublasLtMatrixLayout_t LA = nullptr, LB = nullptr, LD = nullptr;
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&LA, CUDA_R_32F, AR, AC, AR),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&LB, CUDA_R_32F, BR, BC, BR),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&LD, CUDA_R_32F, DR, DC, DR),
              CUBLAS_STATUS_SUCCESS);
    cublasStatus_t Status = cublasLtMatmul(
        Handle, Desc, &Alpha, A.data(), LA, B.data(), LB, &Beta, D.data(), LD,
        D.data(), LD, nullptr, nullptr, 0, nullptr);
    cublasLtMatrixLayoutDestroy(LA);
    cublasLtMatrixLayoutDestroy(LB);
    cublasLtMatrixLayoutDestroy(LD);
    return Status;
  };
  EXPECT_EQ(matmul(2, 3, 3, 4, 2, 4), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(matmul(2, 3, 4, 4, 2, 4), CUBLAS_STATUS_INVALID_VALUE) << "K";
  EXPECT_EQ(matmul(2, 3, 3, 4, 3, 4), CUBLAS_STATUS_INVALID_VALUE) << "M";
  EXPECT_EQ(matmul(2, 3, 3, 4, 2, 5), CUBLAS_STATUS_INVALID_VALUE) << "N";
  // The shapes that would fit without the transpose the descriptor asks for.
  int32_t Trans = CUBLAS_OP_T;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(Desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                           &Trans, sizeof(Trans)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(matmul(2, 3, 3, 4, 2, 4), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(matmul(3, 2, 3, 4, 2, 4), CUBLAS_STATUS_SUCCESS);

  cublasLtMatrixLayout_t Layout;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&Layout, CUDA_R_32F, 8, 2, 4),
            CUBLAS_STATUS_INVALID_VALUE)
      << "leading dimension below the row count";
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(Desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                           &Trans, 8),
            CUBLAS_STATUS_INVALID_VALUE)
      << "attribute of the wrong size";
  cublasLtMatmulDescDestroy(Desc);
  cublasLtDestroy(Handle);
}

//===----------------------------------------------------------------------===//
// Cost
//===----------------------------------------------------------------------===//

__global__ void axpy(float *Y, const float *X, float A, int N) {
  int I = blockIdx.x * blockDim.x + threadIdx.x;
  if (I < N)
    Y[I] = A * X[I] + Y[I];
}

__global__ void axpyWithBarrier(float *Y, const float *X, float A, int N) {
  __shared__ float Tile[256];
  int I = blockIdx.x * blockDim.x + threadIdx.x;
  Tile[threadIdx.x] = I < N ? X[I] : 0.0f;
  __syncthreads();
  if (I < N)
    Y[I] = A * Tile[threadIdx.x] + Y[I];
}

//===----------------------------------------------------------------------===//
// Graphs
//===----------------------------------------------------------------------===//

TEST(CudaEmulation, GraphRecordsInsteadOfRunningAndReplays) {
  constexpr int N = 300;
  DeviceBuffer<float> X(N), Y(N), Z(N);
  for (int I = 0; I < N; ++I) {
    X[I] = float(I);
    Y[I] = 1.0f;
  }
  cudaStream_t Stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&Stream, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(Stream, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  cudaStreamCaptureStatus Status = cudaStreamCaptureStatusNone;
  ASSERT_EQ(cudaStreamIsCapturing(Stream, &Status), cudaSuccess);
  EXPECT_EQ(Status, cudaStreamCaptureStatusActive);
  PCC_LAUNCH(axpy, (N + 127) / 128, 128, Stream, Y.Data, X.Data, 2.0f, N);
  ASSERT_EQ(cudaMemcpyAsync(Z.Data, Y.Data, N * sizeof(float),
                            cudaMemcpyDeviceToDevice, Stream),
            cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(Y.Data, 0, sizeof(float), Stream), cudaSuccess);
  // Recorded, not run.
  EXPECT_EQ(Y[0], 1.0f);
  EXPECT_EQ(Y[7], 1.0f);
  cudaGraph_t Graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(Stream, &Graph), cudaSuccess);
  ASSERT_NE(Graph, nullptr);
  cudaGraphExec_t Exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&Exec, Graph, 0), cudaSuccess);
  // Each launch runs the work again, in its order, on the data as it is.
  for (int Launch = 1; Launch <= 2; ++Launch) {
    ASSERT_EQ(cudaGraphLaunch(Exec, Stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(Stream), cudaSuccess);
    EXPECT_EQ(Y[0], 0.0f);
    EXPECT_EQ(Y[7], 1.0f + 2.0f * 7 * Launch);
    EXPECT_EQ(Z[7], Y[7]);
  }
  EXPECT_EQ(cudaGraphExecDestroy(Exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(Graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(Stream), cudaSuccess);
}

TEST(CudaEmulation, GraphRecordingRejectsWhatWouldWaitForTheDevice) {
  DeviceBuffer<float> X(4);
  float Host[4] = {};
  cudaStream_t Stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&Stream, cudaStreamNonBlocking),
            cudaSuccess);
  // The legacy stream cannot record.
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeThreadLocal),
            cudaErrorStreamCaptureUnsupported);
  cudaGetLastError();
  // Each of these fails and invalidates the recording, whose end fails.
  auto Forbidden = {
      +[](cudaStream_t S, float *, float *) {
        return cudaStreamSynchronize(S);
      },
      +[](cudaStream_t, float *D, float *H) {
        return cudaMemcpy(H, D, 4 * sizeof(float), cudaMemcpyDeviceToHost);
      },
      +[](cudaStream_t S, float *D, float *H) {
        return cudaMemcpyAsync(H, D, 4 * sizeof(float),
                               cudaMemcpyDeviceToHost, S);
      },
      +[](cudaStream_t, float *, float *) {
        void *P = nullptr;
        return cudaMalloc(&P, 16);
      },
      +[](cudaStream_t, float *, float *) { return cudaDeviceSynchronize(); },
  };
  int Case = 0;
  for (auto Call : Forbidden) {
    SCOPED_TRACE(testing::Message() << "case " << Case++);
    ASSERT_EQ(cudaStreamBeginCapture(Stream, cudaStreamCaptureModeThreadLocal),
              cudaSuccess);
    EXPECT_NE(Call(Stream, X.Data, Host), cudaSuccess);
    cudaStreamCaptureStatus Status = cudaStreamCaptureStatusNone;
    ASSERT_EQ(cudaStreamIsCapturing(Stream, &Status), cudaSuccess);
    EXPECT_EQ(Status, cudaStreamCaptureStatusInvalidated);
    cudaGraph_t Graph = reinterpret_cast<cudaGraph_t>(1);
    EXPECT_EQ(cudaStreamEndCapture(Stream, &Graph),
              cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(Graph, nullptr);
    cudaGetLastError();
  }
  // Once the recording ended, the same calls work.
  EXPECT_EQ(cudaStreamSynchronize(Stream), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(Host, X.Data, 4 * sizeof(float),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(Stream), cudaSuccess);
}

TEST(CudaEmulation, GraphRecordsCublasLtWithItsDescriptorsAsTheyWere) {
  // D (2x2, column-major) = A * B, with A's contents changed between
  // launches: the graph reads the matrices when it runs, and keeps the
  // descriptors and scalars it was recorded with.
  DeviceBuffer<float> A(4), B(4), D(4);
  for (int I = 0; I < 4; ++I) {
    A[I] = float(I + 1);
    B[I] = I == 0 || I == 3 ? 1.0f : 0.0f; // the identity
  }
  cublasLtHandle_t Lt = nullptr;
  cublasLtMatmulDesc_t Desc = nullptr;
  cublasLtMatrixLayout_t L = nullptr;
  ASSERT_EQ(cublasLtCreate(&Lt), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescCreate(&Desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&L, CUDA_R_32F, 2, 2, 2),
            CUBLAS_STATUS_SUCCESS);
  cudaStream_t Stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&Stream, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(Stream, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  {
    float Alpha = 2.0f, Beta = 0.0f;
    ASSERT_EQ(cublasLtMatmul(Lt, Desc, &Alpha, A.Data, L, B.Data, L, &Beta,
                             D.Data, L, D.Data, L, nullptr, nullptr, 0,
                             Stream),
              CUBLAS_STATUS_SUCCESS);
  } // Alpha goes out of scope: the recording holds its value.
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(L), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescDestroy(Desc), CUBLAS_STATUS_SUCCESS);
  cudaGraph_t Graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(Stream, &Graph), cudaSuccess);
  cudaGraphExec_t Exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&Exec, Graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(Exec, Stream), cudaSuccess);
  for (int I = 0; I < 4; ++I)
    EXPECT_EQ(D[I], 2.0f * float(I + 1));
  A[2] = 10.0f;
  ASSERT_EQ(cudaGraphLaunch(Exec, Stream), cudaSuccess);
  EXPECT_EQ(D[2], 20.0f);
  cudaGraphExecDestroy(Exec);
  cudaGraphDestroy(Graph);
  cublasLtDestroy(Lt);
  cudaStreamDestroy(Stream);
}

template <typename Fn> double secondsOf(Fn &&F) {
  auto Start = std::chrono::steady_clock::now();
  F();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
      .count();
}

TEST(CudaEmulation, LaunchCost) {
  const int N = 4096 * 256;
  DeviceBuffer<float> X(N), Y(N);
  for (int I = 0; I < N; ++I) {
    X[I] = float(I % 100);
    Y[I] = 1.0f;
  }
  double NoSync = secondsOf(
      [&] { PCC_LAUNCH(axpy, 4096, 256, nullptr, Y.Data, X.Data, 2.0f, N); });
  double WithSync = secondsOf([&] {
    PCC_LAUNCH(axpyWithBarrier, 4096, 256, nullptr, Y.Data, X.Data, 2.0f, N);
  });
  std::printf("[ timing   ] 1M threads: %.3f s without a barrier, %.3f s "
              "with one __syncthreads\n",
              NoSync, WithSync);
  for (int I = 0; I < N; ++I)
    ASSERT_EQ(Y[I], 4.0f * float(I % 100) + 1.0f) << I;
  EXPECT_LT(NoSync, 5.0);
}

//===----------------------------------------------------------------------===//
// Compiling a .cu file as the CUDA target's tests do
//===----------------------------------------------------------------------===//

/// Two translation units, each with a kernel that synchronizes, force-include
/// the header: they must compile without warnings and link (the context
/// switch is defined in both).
TEST(CudaEmulation, ForceIncludedIntoTwoTranslationUnits) {
  std::string Dir = testing::TempDir() + "pcc-cuda-emulation-XXXXXX";
  ASSERT_NE(mkdtemp(Dir.data()), nullptr);
  std::ofstream(Dir + "/kernels.cu") << R"(
__global__ void reverse(int *Out, const int *In) {
  __shared__ int Tile[64];
  Tile[threadIdx.x] = In[threadIdx.x];
  __syncthreads();
  Out[threadIdx.x] = Tile[blockDim.x - 1 - threadIdx.x];
}
void launchReverse(int *Out, const int *In, cudaStream_t Stream) {
  PCC_LAUNCH(reverse, 1, 64, Stream, Out, In);
}
)";
  std::ofstream(Dir + "/main.cu") << R"(
#include <cstdio>
void launchReverse(int *Out, const int *In, cudaStream_t Stream);
__global__ void warpSum(int *Out) {
  int V = threadIdx.x;
  for (int Offset = 16; Offset > 0; Offset /= 2)
    V += __shfl_down_sync(0xffffffffu, V, Offset);
  if (threadIdx.x == 0)
    *Out = V;
}
int main() {
  int *In, *Out;
  cudaMalloc(&In, 64 * sizeof(int));
  cudaMalloc(&Out, 64 * sizeof(int));
  for (int I = 0; I < 64; ++I)
    In[I] = I;
  launchReverse(Out, In, nullptr);
  int First = Out[0];
  PCC_LAUNCH(warpSum, 1, 32, 0, Out);
  std::printf("%d %d %s\n", First, Out[0],
              cudaGetErrorString(cudaGetLastError()));
  return 0;
}
)";
  std::string Command =
      std::string(PCC_TEST_CXX) +
      " -std=c++17 -O2 -fopenmp -Wall -Wextra -Werror -x c++ -include " +
      PCC_TEST_HEADER + " -I" + PCC_TEST_CBLAS_INCLUDE + " " + Dir +
      "/kernels.cu " + Dir + "/main.cu -x none -o " + Dir + "/model " +
      PCC_TEST_OPENBLAS_LIB + " 2>&1";
  ASSERT_EQ(std::system(Command.c_str()), 0) << Command;
  std::string Run = Dir + "/model > " + Dir + "/out.txt";
  ASSERT_EQ(std::system(Run.c_str()), 0);
  std::ifstream Output(Dir + "/out.txt");
  std::string Line;
  std::getline(Output, Line);
  EXPECT_EQ(Line, "63 496 no error");
  std::string Cleanup = "rm -rf " + Dir;
  EXPECT_EQ(std::system(Cleanup.c_str()), 0);
}

} // namespace
