// RUN: pcc-translate --graph-to-cpp --split-input-file %s | FileCheck %s
// RUN: pcc-opt %s --split-input-file --pcc-fuse=epilogues=true | pcc-translate --graph-to-cpp --split-input-file | FileCheck %s --check-prefix=EPI

// An element-wise op computes its result in the buffer of an operand of
// the result's type that nothing reads after it (BufferPlanOptions::
// elementwiseInPlace): the sum of two parts made here lands in the first
// part's buffer, whose last reader it is.

dist.mesh @mesh(pp = 2)

func.func @sum(%x: tensor<2x3xf32> {onnx.name = "x"})
    -> (tensor<f32> {onnx.name = "y"}) {
  %a = graph.exp %x : tensor<2x3xf32>
  %b = dist.recv on @mesh axes ["pp"] from 1 tag 0 : tensor<2x3xf32>
  %s = graph.add %a, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = graph.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %y : tensor<f32>
}

// CHECK-LABEL: int pcc_model_run(const pccrt_context *ctx) {
// CHECK:      float* [[A:v[0-9]+]] = (float*)(ws + 0);
// CHECK-NEXT: float* [[B:v[0-9]+]] = (float*)(ws + 64);
// CHECK-NEXT: float* [[S:v[0-9]+]] = (float*)[[A]];
// The kernel reads and writes the part through one parameter (its
// parameters are restrict-qualified).
// CHECK:      // graph.add
// CHECK-NEXT: pcc_loop{{[0-9]+}}([[S]], [[B]]);

// -----

// Not where the operand is read after the op.

func.func @later(%x: tensor<2x3xf32> {onnx.name = "x"})
    -> (tensor<2x3xf32> {onnx.name = "y"}) {
  %a = graph.exp %x : tensor<2x3xf32>
  %s = graph.add %a, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = graph.tanh %s : tensor<2x3xf32>
  %y = graph.mul %t, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: int pcc_model_run(const pccrt_context *ctx) {
// CHECK:      float* [[A:v[0-9]+]] = (float*)(ws + 0);
// CHECK-NEXT: float* [[S:v[0-9]+]] = (float*)(ws + 64);
// CHECK-NEXT: float* [[T:v[0-9]+]] = (float*)[[S]];

// -----

// Nor where the op runs as a product's epilogue (pcc-fuse): inside the
// product, which still reads its own operands (here the sum's other one)
// while the epilogue writes. Without pcc-fuse, the sum takes the
// product's buffer.

func.func @epilogue(%x: tensor<4x8xf32> {onnx.name = "x"})
    -> (tensor<f32> {onnx.name = "y"}) {
  %w = graph.weight "w" dense<0.5> : tensor<8x8xf32>
  %h = graph.exp %x : tensor<4x8xf32>
  %p = graph.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = graph.add %p, %h : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = graph.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %y : tensor<f32>
}

// EPI-LABEL: int pcc_model_run(const pccrt_context *ctx) {
// EPI-LABEL: int pcc_model_run(const pccrt_context *ctx) {
// EPI-LABEL: int pcc_model_run(const pccrt_context *ctx) {
// EPI:      float* [[H:v[0-9]+]] = (float*)(ws + 0);
// EPI-NEXT: float* [[P:v[0-9]+]] = (float*)(ws + 128);
// EPI-NEXT: float* [[S:v[0-9]+]] = (float*)(ws + 256);
// EPI:      pcc_k::gemmPackedB(4, 8, 8, float(1), [[H]], {{.*}}, [[P]], 8, pcc_loop

// CHECK-LABEL: int pcc_model_run(const pccrt_context *ctx) {
// CHECK:      float* [[P:v[0-9]+]] = (float*)(ws + 128);
// CHECK-NEXT: float* [[S:v[0-9]+]] = (float*)[[P]];
