// BUG: the broadcasting element-wise ops (graph.add ... graph.xor, the
// comparisons) and graph.gemm accept operands of different element types
// (ONNX requires one type T): graph.add of f32 and i64 verifies, giving an
// f32 result, and graph.gemm of f32 and f16 verifies. graph.matmul does
// reject it ("MatMul: element types differ"). See inferBroadcastType and
// GemmOp::inferReturnTypes in lib/Dialect/Graph/IR/GraphOps.cpp.
// Each case below must be rejected.
// RUN: not pcc-opt %s -split-input-file 2>&1 | FileCheck %s

func.func @add_mixed(%x: tensor<2x3xf32>, %y: tensor<2x3xi64>) {
  // CHECK: invalid-element-types.mlir:[[@LINE+1]]:{{[0-9]+}}: error:
  %0 = graph.add %x, %y : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @less_mixed(%x: tensor<3xf32>, %y: tensor<3xf16>) {
  // CHECK: invalid-element-types.mlir:[[@LINE+1]]:{{[0-9]+}}: error:
  %0 = graph.less %x, %y : (tensor<3xf32>, tensor<3xf16>) -> tensor<3xi1>
  return
}

// -----

func.func @gemm_mixed(%x: tensor<2x3xf32>, %y: tensor<2x3xf16>) {
  // CHECK: invalid-element-types.mlir:[[@LINE+1]]:{{[0-9]+}}: error:
  %0 = graph.gemm %x, %y {transB = true} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<2x2xf32>
  return
}
