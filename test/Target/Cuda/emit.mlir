// RUN: pcc-translate --graph-to-cuda %s | FileCheck %s

// The CUDA target's spelling of the shared lowering: each loop nest a
// __global__ kernel over a grid-stride loop whose threads recover their
// coordinates from a linear index, launched with PCC_LAUNCH on the run's
// stream; a reduction one thread per output element with the reduced
// dimensions in order; GEMMs through pcc_cu::gemm (cuBLASLt) with their
// batch as a strided batch; softmax from the kernel library. No constant
// stays in host memory: the small table is a weight.

func.func @main(%x: tensor<2x3x4xf32> {onnx.name = "x"}, %y: tensor<2x4x5xf32> {onnx.name = "y"})
    -> (tensor<2x3x4xf32> {onnx.name = "sum"}, tensor<2x4xf32> {onnx.name = "red"},
        tensor<2x3x5xf32> {onnx.name = "mm"}, tensor<2x3x4xf32> {onnx.name = "sm"}) {
  %t = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = graph.add %x, %t : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %1 = graph.reduce_sum %x {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %2 = graph.matmul %x, %y : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %3 = graph.softmax %x {axis = 2 : i64} : tensor<2x3x4xf32>
  return %0, %1, %2, %3 : tensor<2x3x4xf32>, tensor<2x4xf32>, tensor<2x3x5xf32>, tensor<2x3x4xf32>
}

// CHECK:      #include "pcc_cuda_kernels.cuh"
// CHECK:      __global__ void [[ADD:pcc_loop[0-9]+]](float* __restrict__ p0, const float* __restrict__ p1, const float* __restrict__ p2) {
// CHECK-NEXT:   for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < 24; t += int64_t(blockDim.x) * gridDim.x) {
// CHECK-NEXT:     int64_t r = t;
// CHECK-NEXT:     const int64_t i1 = r % 4; r /= 4;
// CHECK-NEXT:     const int64_t i0 = r;
// CHECK-NEXT:     { p0[0 + i0 * 4 + i1] = float(p1[0 + i0 * 4 + i1] + p2[0 + i1]); }
// CHECK-NEXT:   }
// CHECK-NEXT: }
// The sum over the middle dimension: a thread per (i0, i2), i1 in order.
// CHECK:      __global__ void [[RED:pcc_loop[0-9]+]](float* __restrict__ p0, const float* __restrict__ p1) {
// CHECK-NEXT:   for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < 8; t += int64_t(blockDim.x) * gridDim.x) {
// CHECK-NEXT:     int64_t r = t;
// CHECK-NEXT:     const int64_t i2 = r % 4; r /= 4;
// CHECK-NEXT:     const int64_t i0 = r;
// CHECK-NEXT:     float acc = float(0);
// CHECK-NEXT:     for (int64_t i1 = 0; i1 < 3; ++i1) {
// CHECK-NEXT:       acc = float(acc + p1[0 + i0 * 12 + i1 * 4 + i2]);
// CHECK-NEXT:     }
// CHECK-NEXT:     p0[0 + i0 * 4 + i2] = acc;
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK:      {"pcc.const.0", 1, 1, pcc_w_shape0, PCCRT_KIND_CONSTANT
// CHECK:      extern "C" PCC_PROGRAM int pcc_model_run(const pccrt_context *ctx) {
// CHECK-NEXT:   using namespace pcc_model;
// CHECK-NEXT:   if (ctx->abi_version != PCCRT_ABI_VERSION) return PCCRT_ERR_ABI_MISMATCH;
// CHECK-NEXT:   if (int error = pcc_cu::begin(ctx)) return error;
// A single-rank run's work is queued through a CUDA graph.
// CHECK:        auto step = [&]() PCC_PROGRAM -> int {
// CHECK:        float* [[T:c[0-9]+]] = (float*)w[0];
// CHECK:        PCC_LAUNCH([[ADD]], pcc_cu::blocksFor(24), pcc_cu::kBlock, pcc_cu::stream(), {{.*}}, {{.*}}, [[T]]);
// CHECK:        PCC_LAUNCH([[RED]], pcc_cu::blocksFor(8), pcc_cu::kBlock, pcc_cu::stream(),
// CHECK:        pcc_cu::gemm<float>(3, 5, 4, float(1), {{a[0-9]+}} + 0 + 0 * 12, 4, false, {{a[0-9]+}} + 0 + 0 * 20, 5, false, float(0), {{v[0-9]+}} + 0 + 0 * 15, 5, 2, 12, 20, 15);
// CHECK:        pcc_cu::softmax<float>({{a[0-9]+}}, {{v[0-9]+}}, 6, 4, 1, false);
// CHECK:        pcc_cu::copy(((float*)out[0]),
// CHECK:        return PCCRT_OK;
// CHECK-NEXT:   };
// CHECK-NEXT:   return pcc_cu::runGraph(ctx, pcc_model_info(), step);
// CHECK-NEXT: }
// CHECK-NOT:  static const float
