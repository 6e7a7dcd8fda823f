// RUN: pcc-opt %s --pcc-fuse | pcc-translate --graph-to-cpp | FileCheck %s
// RUN: pcc-opt %s --pcc-fuse | pcc-translate --graph-to-cuda | FileCheck %s --check-prefix=CUDA

// What a fusion computes from its one-element inputs and constants alone
// (an optimizer's bias corrections, 1 - beta^t) is the same for every
// element: the CPU's kernel computes it once, before its loop, whose
// parameters lose their restrict qualifiers inside OpenMP's outlined body,
// where the C++ compiler cannot hoist a power itself. A one-element input
// that is only read is read there too: read in the loop, it might alias
// the loop's stores, and GCC left AdamW's update (three such inputs)
// unvectorized, at half the speed. CUDA's kernel computes it in each
// thread's iteration, as before.

func.func @main(%w: tensor<64xf32> {onnx.name = "w"}, %t: tensor<f32> {onnx.name = "t"}, %s: tensor<f32> {onnx.name = "s"})
    -> (tensor<64xf32> {onnx.name = "y"}, tensor<64xf32> {onnx.name = "z"}) {
  %c = graph.constant dense<0.9> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %p = graph.pow %c, %t : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %d = graph.sub %one, %p : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %r = graph.sqrt %d : tensor<f32>
  %y = graph.mul %w, %r : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
  %e = graph.exp %w : tensor<64xf32>
  %z = graph.mul %e, %s : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
  return %y, %z : tensor<64xf32>, tensor<64xf32>
}

// CHECK:      static void pcc_loop{{[0-9]+}}(float* __restrict p0, const float* __restrict p1, const float* __restrict p2) {
// CHECK-NEXT:   const float t0 = p1[0]; {{.*}} = float(std::pow({{.*}} = std::sqrt(
// CHECK-NEXT:   for (int64_t i0 = 0; i0 < 64; ++i0)
// CHECK-NEXT:     { float t6 = p2[0 + i0]; float t7 = float(t6 * t5); p0[0 + i0] = t7;  }
// CHECK-NEXT: }
// CHECK-NEXT: static void pcc_loop{{[0-9]+}}(float* __restrict p0, const float* __restrict p1, const float* __restrict p2) {
// CHECK-NEXT:   const float t0 = p2[0];
// CHECK-NEXT:   for (int64_t i0 = 0; i0 < 64; ++i0)
// CHECK-NEXT:     { float t1 = p1[0 + i0]; float t2 = pcc_k::fexp(t1); float t3 = float(t2 * t0);

// CUDA:      __global__ void pcc_loop{{[0-9]+}}(float* __restrict__ p0, const float* __restrict__ p1, const float* __restrict__ p2) {
// CUDA:        { const float t0 = p1[0]; {{.*}}pow({{.*}}float t6 = p2[0 + i0]; float t7 = float(t6 * t5); p0[0 + i0] = t7;  }
// CUDA:        { const float t0 = p2[0];  float t1 = p1[0 + i0];
