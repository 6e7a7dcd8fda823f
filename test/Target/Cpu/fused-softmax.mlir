// RUN: pcc-opt %s --pcc-fuse | pcc-translate --graph-to-cpp | FileCheck %s
// RUN: pcc-opt %s --pcc-fuse | pcc-translate --graph-to-cuda | FileCheck %s --check-prefix=CUDA
// RUN: pcc-opt %s --pcc-fuse | FileCheck %s --check-prefix=IR

// Attention's scale and mask before a softmax over the last axis: the
// fusion that computes them runs inside the softmax's kernel, one row at a
// time, so the scaled and masked scores never reach memory. The mask is
// read broadcast along the heads (its row offset has no i1 term) and along
// the row (j). A softmax whose input has other readers reads it from
// memory as before.

func.func @main(%s: tensor<2x3x4x4xf32> {onnx.name = "scores"}, %m: tensor<2x1x4x4xf32> {onnx.name = "mask"})
    -> (tensor<2x3x4x4xf32> {onnx.name = "p"}, tensor<2x3x4x4xf32> {onnx.name = "q"}, tensor<2x3x4x4xf32> {onnx.name = "r"}) {
  %c = graph.constant dense<0.5> : tensor<f32>
  %0 = graph.mul %s, %c : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %1 = graph.add %0, %m : (tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32>
  %2 = graph.softmax %1 {axis = 3 : i64} : tensor<2x3x4x4xf32>
  %3 = graph.exp %s : tensor<2x3x4x4xf32>
  %4 = graph.log_softmax %3 {axis = 3 : i64} : tensor<2x3x4x4xf32>
  return %2, %4, %3 : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
}

// pcc-fuse marks the fusion that the softmax computes (IR); the
// log-softmax's input is a single op, read from memory.
// IR:      graph.fusion
// IR:      } {graph.row_prologue}
// IR-NEXT: graph.softmax
// IR-NOT:  graph.row_prologue

// CHECK:      static void [[SM:pcc_loop[0-9]+]](float* __restrict p0, const float* __restrict p1, const float* __restrict p2) {
// CHECK-NEXT:   for (int64_t i0 = 0; i0 < 2; ++i0)
// CHECK-NEXT:     for (int64_t i1 = 0; i1 < 3; ++i1)
// CHECK-NEXT:       for (int64_t i2 = 0; i2 < 4; ++i2)
// CHECK-NEXT:         {
// CHECK-NEXT:           float* y = p0 + 0 + i0 * 48 + i1 * 16 + i2 * 4;
// CHECK-NEXT:           for (int64_t j = 0; j < 4; ++j) { float x; float t0 = p1[(0 + i0 * 48 + i1 * 16 + i2 * 4) + j]; float t1 = p2[(0 + i0 * 16 + i2 * 4) + j]; float t2 = float(0x1p-1f); float t3 = float(t0 * t2); float t4 = float(t3 + t1); x = t4; y[j] = x; }
// CHECK-NEXT:           pcc_k::softmaxRow(y, y, 4, false);
// CHECK-NEXT:         }
// CHECK-NEXT: }
// CHECK:      [[SM]]({{v[0-9]+|\(\(float\*\)out\[0\]\)}}, a0, a1);
// The exponential is also an output: the log-softmax reads it from memory.
// CHECK:      pcc_k::softmax<float>({{.*}}, 24, 4, 1, true);
// CHECK-NOT:  pcc_k::softmax<float>

// CUDA:       __global__ void [[SM:pcc_loop[0-9]+]](float* __restrict__ p0, const float* __restrict__ p1, const float* __restrict__ p2) {
// CUDA-NEXT:    for (int64_t r = blockIdx.x; r < 24; r += gridDim.x) {
// CUDA-NEXT:      int64_t q = r;
// CUDA-NEXT:      const int64_t i2 = q % 4; q /= 4;
// CUDA-NEXT:      const int64_t i1 = q % 3; q /= 3;
// CUDA-NEXT:      const int64_t i0 = q;
// CUDA-NEXT:      float* y = p0 + 0 + i0 * 48 + i1 * 16 + i2 * 4;
// CUDA-NEXT:      for (int64_t j = threadIdx.x; j < 4; j += blockDim.x) { float x; {{.*}} x = t4; y[j] = x; }
// CUDA-NEXT:      __syncthreads();
// CUDA-NEXT:      pcc_cu::softmaxRowBlock(y, y, 4, false);
// CUDA-NEXT:    }
// CUDA-NEXT:  }
// CUDA:       PCC_LAUNCH([[SM]], 24u, pcc_cu::kBlock, pcc_cu::stream(),
// CUDA:       pcc_cu::softmax<float>({{.*}}, 24, 4, 1, true);
