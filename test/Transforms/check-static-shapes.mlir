// RUN: pcc-opt %s --pcc-check-static-shapes --split-input-file | FileCheck %s

// Ranked tensors of static shape (rank 0 and empty ones included) with the
// element types the code generator supports pass, unchanged.

// CHECK-LABEL: func.func @supported_element_types(
// CHECK-SAME:      tensor<2xi1>, %{{.*}}: tensor<2xi8>, %{{.*}}: tensor<2xui8>, %{{.*}}: tensor<2xsi8>, %{{.*}}: tensor<2xi16>,
// CHECK-SAME:      tensor<2xi32>, %{{.*}}: tensor<2xi64>, %{{.*}}: tensor<2xf16>, %{{.*}}: tensor<2xbf16>,
// CHECK-SAME:      tensor<2xf32>, %{{.*}}: tensor<2xf64>, %{{.*}}: tensor<f32>, %{{.*}}: tensor<0x3xf32>)
// CHECK-NEXT:    return
func.func @supported_element_types(%b: tensor<2xi1>, %i8: tensor<2xi8>, %u8: tensor<2xui8>, %s8: tensor<2xsi8>,
                                   %i16: tensor<2xi16>, %i32: tensor<2xi32>, %i64: tensor<2xi64>,
                                   %h: tensor<2xf16>, %bf: tensor<2xbf16>, %f: tensor<2xf32>, %d: tensor<2xf64>,
                                   %s: tensor<f32>, %e: tensor<0x3xf32>) {
  return
}

// -----

// Op results are checked as well as arguments.

// CHECK-LABEL: func.func @ops(
// CHECK-NEXT:    %[[W:.*]] = graph.weight "w" dense<1.000000e+00> : tensor<3x2xbf16>
// CHECK-NEXT:    %[[C:.*]] = graph.cast %arg0 : tensor<2x3xf32> to tensor<2x3xbf16>
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %[[C]], %[[W]]
// CHECK-NEXT:    %[[S:.*]] = graph.reduce_sum %[[M]]
// CHECK-NEXT:    return %[[S]] : tensor<bf16>
func.func @ops(%x: tensor<2x3xf32>) -> tensor<bf16> {
  %w = graph.weight "w" dense<1.0> : tensor<3x2xbf16>
  %c = graph.cast %x : tensor<2x3xf32> to tensor<2x3xbf16>
  %m = graph.matmul %c, %w : (tensor<2x3xbf16>, tensor<3x2xbf16>) -> tensor<2x2xbf16>
  %s = graph.reduce_sum %m {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x2xbf16>) -> tensor<bf16>
  return %s : tensor<bf16>
}

// -----

// A function without arguments or values.

// CHECK-LABEL: func.func @empty()
// CHECK-NEXT:    return
func.func @empty() {
  return
}
