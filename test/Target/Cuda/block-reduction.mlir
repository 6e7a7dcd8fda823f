// RUN: pcc-translate --graph-to-cuda %s | FileCheck %s

// Reductions with few outputs and many inputs each run one block per
// output: the block's threads take the reduced elements in turn and combine
// their partial results in a fixed tree (pcc_cu::blockCombine), accumulating
// 16-bit floats in float. A mean over the whole tensor (a loss) is one
// block, not one thread. Short reductions stay one thread per output.

func.func @main(%x: tensor<4x1024xf32> {onnx.name = "x"}, %h: tensor<3x512xbf16> {onnx.name = "h"},
                %s: tensor<2x8xf32> {onnx.name = "s"})
    -> (tensor<f32> {onnx.name = "mean"}, tensor<4xf32> {onnx.name = "rowmax"},
        tensor<3xbf16> {onnx.name = "hsum"}, tensor<2xf32> {onnx.name = "short"}) {
  %0 = graph.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x1024xf32>) -> tensor<f32>
  %1 = graph.reduce_max %x {axes = array<i64: 1>, keepdims = false} : (tensor<4x1024xf32>) -> tensor<4xf32>
  %2 = graph.reduce_sum %h {axes = array<i64: 1>, keepdims = false} : (tensor<3x512xbf16>) -> tensor<3xbf16>
  %3 = graph.reduce_sum %s {axes = array<i64: 1>, keepdims = false} : (tensor<2x8xf32>) -> tensor<2xf32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<4xf32>, tensor<3xbf16>, tensor<2xf32>
}

// CHECK:      __global__ void [[MEAN:pcc_loop[0-9]+]](float* __restrict__ p0, const float* __restrict__ p1) {
// CHECK-NEXT:   for (int64_t t = blockIdx.x; t < 1; t += gridDim.x) {
// CHECK-NEXT:     typename pcc_cu::AccumulatorOf<float>::type acc = typename pcc_cu::AccumulatorOf<float>::type(float(0));
// CHECK-NEXT:     for (int64_t q = threadIdx.x; q < 4096; q += blockDim.x) {
// CHECK:            acc = pcc_cu::combine<pcc_cu::Combine::Sum>(acc,
// CHECK:          acc = pcc_cu::blockCombine<pcc_cu::Combine::Sum>(acc,
// CHECK-NEXT:     if (threadIdx.x == 0)
// CHECK-NEXT:       p0[0] = float(acc / typename pcc_cu::AccumulatorOf<float>::type(4096));
// CHECK:      __global__ void [[MAX:pcc_loop[0-9]+]](
// CHECK-NEXT:   for (int64_t t = blockIdx.x; t < 4; t += gridDim.x) {
// CHECK:          typename pcc_cu::AccumulatorOf<float>::type acc = typename pcc_cu::AccumulatorOf<float>::type(-std::numeric_limits<float>::infinity());
// CHECK:          acc = pcc_cu::blockCombine<pcc_cu::Combine::Max>(acc,
// CHECK:      __global__ void [[HSUM:pcc_loop[0-9]+]](pcc_cu::bf16* __restrict__ p0, const pcc_cu::bf16* __restrict__ p1) {
// CHECK:          typename pcc_cu::AccumulatorOf<pcc_cu::bf16>::type acc
// CHECK:            p0[0 + i0] = pcc_cu::bf16(acc);
// CHECK:      __global__ void [[SHORT:pcc_loop[0-9]+]](
// CHECK-NEXT:   for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < 2; t += int64_t(blockDim.x) * gridDim.x) {
// CHECK:      PCC_LAUNCH([[MEAN]], 1u, pcc_cu::kBlock, pcc_cu::stream(),
// CHECK:      PCC_LAUNCH([[MAX]], 4u, pcc_cu::kBlock, pcc_cu::stream(),
// CHECK:      PCC_LAUNCH([[HSUM]], 3u, pcc_cu::kBlock, pcc_cu::stream(),
// CHECK:      PCC_LAUNCH([[SHORT]], pcc_cu::blocksFor(2), pcc_cu::kBlock, pcc_cu::stream(),
