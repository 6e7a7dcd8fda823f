// RUN: pcc-opt %s --pcc-mixed-precision | FileCheck %s
// RUN: pcc-opt %s --pcc-mixed-precision=dtype=f16 | FileCheck %s --check-prefix=F16
// RUN: not pcc-opt %s --pcc-mixed-precision=dtype=f8 2>&1 | FileCheck %s --check-prefix=BAD

// The products read their operands cast to bf16 and give a bf16 result,
// cast back to f32 for its readers; a Gemm's bias is added after, in f32
// (scaled by beta); everything else is left in f32.

// CHECK-LABEL: func.func @mlp
func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %v: tensor<16x8xf32>) -> tensor<4x8xf32> {
  // CHECK:      %[[X:.*]] = graph.cast %arg0 : tensor<4x8xf32> to tensor<4x8xbf16>
  // CHECK-NEXT: %[[W:.*]] = graph.cast %arg1 : tensor<8x16xf32> to tensor<8x16xbf16>
  // CHECK-NEXT: %[[P:.*]] = graph.gemm %[[X]], %[[W]] {alpha = 2.000000e+00 : f32, beta = 0.000000e+00 : f32} : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  // CHECK-NEXT: %[[UP:.*]] = graph.cast %[[P]] : tensor<4x16xbf16> to tensor<4x16xf32>
  // CHECK-NEXT: %[[B:.*]] = graph.constant dense<5.000000e-01> : tensor<f32>
  // CHECK-NEXT: %[[S:.*]] = graph.mul %arg2, %[[B]]
  // CHECK-NEXT: %[[H:.*]] = graph.add %[[UP]], %[[S]] : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %[[R:.*]] = graph.relu %[[H]] : tensor<4x16xf32>
  // CHECK-NEXT: %[[R16:.*]] = graph.cast %[[R]] : tensor<4x16xf32> to tensor<4x16xbf16>
  // CHECK-NEXT: %[[V16:.*]] = graph.cast %arg3 : tensor<16x8xf32> to tensor<16x8xbf16>
  // CHECK-NEXT: %[[Y16:.*]] = graph.matmul %[[R16]], %[[V16]] : (tensor<4x16xbf16>, tensor<16x8xbf16>) -> tensor<4x8xbf16>
  // CHECK-NEXT: %[[Y:.*]] = graph.cast %[[Y16]] : tensor<4x8xbf16> to tensor<4x8xf32>
  // CHECK-NEXT: return %[[Y]]
  // F16: graph.matmul {{.*}} -> tensor<4x8xf16>
  // BAD: pcc-mixed-precision: dtype 'f8' is not bf16 or f16
  %0 = graph.gemm %x, %w, %b {alpha = 2.0 : f32, beta = 0.5 : f32} : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %1 = graph.relu %0 : tensor<4x16xf32>
  %2 = graph.matmul %1, %v : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// A product already on 16-bit floats is left alone.
// CHECK-LABEL: func.func @narrow
// CHECK-NOT: graph.cast
func.func @narrow(%a: tensor<2x2xbf16>, %b: tensor<2x2xbf16>) -> tensor<2x2xbf16> {
  %0 = graph.matmul %a, %b : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x2xbf16>
  return %0 : tensor<2x2xbf16>
}
