// RUN: pcc-translate --graph-to-cpp %s | FileCheck %s

// A nest that reads one operand transposed (contiguous along its
// next-to-last dimension, strided along its last) walks the last two
// dimensions in 16 x 16 tiles, so that each cache line of the strided
// operand is read once, not once per element. Attention's transpose of K
// keeps its leading dimension outside the tiles (its heads and head
// dimension merge into one); a nest narrower than a tile, or one that
// reads every operand in order, is not tiled.

func.func @main(%x: tensor<40x48xf32> {onnx.name = "x"}, %k: tensor<2x32x3x16xf32> {onnx.name = "k"}, %s: tensor<8x4xf32> {onnx.name = "s"})
    -> (tensor<48x40xf32> {onnx.name = "xt"}, tensor<2x3x16x32xf32> {onnx.name = "kt"}, tensor<4x8xf32> {onnx.name = "st"}, tensor<40x48xf32> {onnx.name = "e"}) {
  %0 = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<40x48xf32>) -> tensor<48x40xf32>
  %1 = graph.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x32x3x16xf32>) -> tensor<2x3x16x32xf32>
  %2 = graph.transpose %s {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %3 = graph.exp %x : tensor<40x48xf32>
  return %0, %1, %2, %3 : tensor<48x40xf32>, tensor<2x3x16x32xf32>, tensor<4x8xf32>, tensor<40x48xf32>
}

// CHECK:      static void pcc_loop{{[0-9]+}}(float* __restrict p0, const float* __restrict p1) {
// CHECK-NEXT:   for (int64_t t0 = 0; t0 < 48; t0 += 16)
// CHECK-NEXT:     for (int64_t t1 = 0; t1 < 40; t1 += 16)
// CHECK-NEXT:       for (int64_t i0 = t0; i0 < std::min<int64_t>(t0 + 16, 48); ++i0)
// CHECK-NEXT:         for (int64_t i1 = t1; i1 < std::min<int64_t>(t1 + 16, 40); ++i1)
// CHECK-NEXT:           { p0[0 + i0 * 40 + i1] = p1[0 + i0 + i1 * 48]; }
// CHECK-NEXT: }
// CHECK:      static void pcc_loop{{[0-9]+}}(float* __restrict p0, const float* __restrict p1) {
// CHECK-NEXT:   for (int64_t i0 = 0; i0 < 2; ++i0)
// CHECK-NEXT:     for (int64_t t1 = 0; t1 < 48; t1 += 16)
// CHECK-NEXT:       for (int64_t t2 = 0; t2 < 32; t2 += 16)
// CHECK-NEXT:         for (int64_t i1 = t1; i1 < std::min<int64_t>(t1 + 16, 48); ++i1)
// CHECK-NEXT:           for (int64_t i2 = t2; i2 < std::min<int64_t>(t2 + 16, 32); ++i2)
// CHECK-NEXT:             { p0[0 + i0 * 1536 + i1 * 32 + i2] = p1[0 + i0 * 1536 + i1 + i2 * 48]; }
// CHECK-NEXT: }
// CHECK:      static void pcc_loop{{[0-9]+}}(float* __restrict p0, const float* __restrict p1) {
// CHECK-NEXT:   for (int64_t i0 = 0; i0 < 4; ++i0)
// CHECK-NEXT:     for (int64_t i1 = 0; i1 < 8; ++i1)
// CHECK-NEXT:       { p0[0 + i0 * 8 + i1] = p1[0 + i0 + i1 * 4]; }
// CHECK-NEXT: }
// CHECK:      static void pcc_loop{{[0-9]+}}(float* __restrict p0, const float* __restrict p1) {
// CHECK-NEXT:   for (int64_t i0 = 0; i0 < 1920; ++i0)
