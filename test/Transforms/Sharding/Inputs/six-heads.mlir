// An attention projection into 6 heads of 4 (hidden 24).
func.func @main(%x: tensor<2x8x24xf32> {onnx.name = "x"}) -> (tensor<2x6x8x4xf32> {onnx.name = "q"}) {
  %wq = graph.weight "attn.q.weight" {exported_as = "parameter"} dense<0.02> : tensor<24x24xf32>
  %q = graph.matmul %x, %wq : (tensor<2x8x24xf32>, tensor<24x24xf32>) -> tensor<2x8x24xf32>
  %q4 = graph.reshape %q : tensor<2x8x24xf32> to tensor<2x8x6x4xf32>
  %qt = graph.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x6x4xf32>) -> tensor<2x6x8x4xf32>
  return %qt : tensor<2x6x8x4xf32>
}
