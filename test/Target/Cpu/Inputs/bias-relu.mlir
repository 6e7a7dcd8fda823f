// An inference function: y = relu(x + bias).

func.func @main(%x: tensor<2x3xf32> {onnx.name = "x"}) -> (tensor<2x3xf32> {onnx.name = "y"}) {
  %w = graph.weight "bias" dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %0 = graph.add %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = graph.relu %0 : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
