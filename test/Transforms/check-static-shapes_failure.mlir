// RUN: pcc-opt %s --pcc-check-static-shapes --split-input-file --allow-unregistered-dialect -verify-diagnostics
// RUN: not pcc-opt %s --pcc-check-static-shapes --split-input-file --allow-unregistered-dialect 2>&1 | FileCheck %s

// Arguments are reported at the function, op results at the op; only the
// first offending value of a function is reported.

// expected-error @+1 {{value of type 'tensor<?x3xf32>' has no static shape}}
func.func @dynamic_argument(%x: tensor<?x3xf32>, %y: tensor<*xf32>) {
  return
}

// -----

// expected-error @+1 {{value of type 'tensor<*xf32>' has no static shape}}
func.func @unranked_argument(%x: tensor<2xf32>, %y: tensor<*xf32>) {
  return
}

// -----

// expected-error @+1 {{value of type 'f32' has no static shape}}
func.func @not_a_tensor(%x: f32) {
  return
}

// -----

func.func @dynamic_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{value of type 'tensor<?x3xf32>' has no static shape}}
  %0 = "test.op"(%x) : (tensor<2x3xf32>) -> tensor<?x3xf32>
  %1 = "test.op"(%0) : (tensor<?x3xf32>) -> tensor<*xf32>
  return
}

// -----

// The error names the op's location: its ONNX node, for imported models.
// CHECK: error: loc("/h.0/MatMul"): value of type 'tensor<2x?xf32>' has no static shape
func.func @named_node(%x: tensor<2x3xf32>) {
  // expected-error @unknown {{value of type 'tensor<2x?xf32>' has no static shape}}
  %0 = "test.op"(%x) : (tensor<2x3xf32>) -> tensor<2x?xf32> loc("/h.0/MatMul")
  return
}

// -----

// expected-error @+1 {{element type 'i4' is not supported by the code generator}}
func.func @i4_argument(%x: tensor<2xi4>) {
  return
}

// -----

func.func @complex_constant() {
  // expected-error @+1 {{element type 'complex<f32>' is not supported by the code generator}}
  %0 = graph.constant dense<(1.0, 2.0)> : tensor<2xcomplex<f32>>
  return
}

// -----

func.func @f8_constant() {
  // expected-error @+1 {{element type 'f8E4M3FN' is not supported by the code generator}}
  %0 = graph.constant dense<1.0> : tensor<2xf8E4M3FN>
  return
}

// -----

// expected-error @+1 {{element type 'index' is not supported by the code generator}}
func.func @index_argument(%x: tensor<2xindex>) {
  return
}

// -----

// expected-error @+1 {{element type 'i128' is not supported by the code generator}}
func.func @i128_argument(%x: tensor<2xi128>) {
  return
}
