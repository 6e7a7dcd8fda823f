// RUN: pcc-translate --graph-to-cpp %s | FileCheck %s

// A reduction over an empty set (a reduced dimension of extent 0) writes
// each output the reduction's identity, as ONNX defines it: -inf for a
// max, 0 for a sum, NaN (0 / 0) for a mean. (It used to write nothing.)

func.func @main(%x: tensor<2x0x4xf32> {onnx.name = "x"}) -> (tensor<2x1x4xf32> {onnx.name = "m"}, tensor<2x4xf32> {onnx.name = "s"}, tensor<2x4xf32> {onnx.name = "a"}) {
  %m = graph.reduce_max %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x0x4xf32>) -> tensor<2x1x4xf32>
  %s = graph.reduce_sum %x {axes = array<i64: 1>, keepdims = false} : (tensor<2x0x4xf32>) -> tensor<2x4xf32>
  %a = graph.reduce_mean %x {axes = array<i64: 1>, keepdims = false} : (tensor<2x0x4xf32>) -> tensor<2x4xf32>
  return %m, %s, %a : tensor<2x1x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// CHECK: std::fill_n([[M:v[0-9]+]], 8, -std::numeric_limits<float>::infinity());
// CHECK: std::fill_n([[S:v[0-9]+]], 8, float(0));
// CHECK: std::fill_n([[A:v[0-9]+]], 8, std::numeric_limits<float>::quiet_NaN());
