// RUN: pcc-translate --graph-to-cpp %s | FileCheck %s

// A batch of products that share one matrix B, whose A's matrices follow
// each other row after row (a linear layer over [batch, tokens, features]),
// runs as one product of all of A's rows: a call of 2 x 4 rows, not two
// calls of 4 each reading B again. Where B differs along the batch
// (attention's heads), or A's matrices are not one after another (a
// transposed view), the batch runs as products of its own. The one product
// takes an epilogue over all its rows as any product does.

func.func @main(%x: tensor<2x4x8xf32> {onnx.name = "x"},
                %y: tensor<2x8x4xf32> {onnx.name = "y"},
                %b: tensor<2x8x16xf32> {onnx.name = "b"},
                %w: tensor<8x16xf32> {onnx.name = "w"},
                %r: tensor<2x4x16xf32> {onnx.name = "r"})
    -> (tensor<2x4x16xf32> {onnx.name = "shared"},
        tensor<2x4x16xf32> {onnx.name = "per_batch"},
        tensor<2x4x16xf32> {onnx.name = "transposed"},
        tensor<2x4x16xf32> {onnx.name = "with_epilogue"}) {
  %s = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %p = graph.matmul %x, %b : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  %yt = graph.transpose %y {perm = array<i64: 0, 2, 1>} : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  %t = graph.matmul %yt, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %e = graph.matmul %x, %w {graph.epilogue} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %er = graph.add %e, %r : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %s, %p, %t, %er : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// CHECK:      float* [[X:a[0-9]+]] = (float*)in[0];
// CHECK:      float* [[W:a[0-9]+]] = (float*)in[3];
// CHECK:      // graph.matmul
// CHECK-NEXT: {
// CHECK-NEXT:   pcc_k::gemm<float>(8, 16, 8, float(1), [[X]] + 0, 8, false, [[W]] + 0, 16, false, float(0), {{v[0-9]+}} + 0, 16);
// CHECK-NEXT: }
// CHECK:      // graph.matmul
// CHECK-NEXT: {
// CHECK-NEXT: #pragma omp parallel for
// CHECK-NEXT:   for
// CHECK-NEXT:     pcc_k::gemmSerial<float>(4, 16, 8,
// CHECK:      // graph.matmul
// CHECK-NEXT: {
// CHECK-NEXT: #pragma omp parallel for
// CHECK-NEXT:   for
// CHECK-NEXT:     pcc_k::gemmSerial<float>(4, 16, 8, {{.*}}, true,
// CHECK:      // graph.matmul
// CHECK-NEXT: {
// CHECK-NEXT: void *const [[ARGS:pcc_args[0-9]+]][] = {{.*}};
// CHECK-NEXT: {
// CHECK-NEXT:   pcc_k::gemm<float>(8, 16, 8, float(1), [[X]] + 0, 8, false, [[W]] + 0, 16, false, float(0), {{v[0-9]+}} + 0, 16);
// CHECK-NEXT: }
// CHECK-NEXT: pcc_loop{{[0-9]+}}([[ARGS]], 0, 8, 0, 16);
