// A training step on one [2,3] input: loss = mean((x + w)^2), its gradient,
// a momentum update of w and a step counter (see ../training-step.mlir).

func.func @step(%x: tensor<2x3xf32> {onnx.name = "x"},
                %w: tensor<3xf32> {graph.state = "w", graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>},
                %m: tensor<3xf32> {graph.state = "w.adamw.m", graph.init = dense<0.0> : tensor<3xf32>},
                %step: tensor<f32> {graph.state = "pcc.step", graph.init = dense<0.0> : tensor<f32>})
    -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 1 : i64},
        tensor<3xf32> {graph.update = 1 : i64},
        tensor<3xf32> {graph.update = 2 : i64},
        tensor<f32> {graph.update = 3 : i64}) {
  %d = graph.add %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %sq = graph.mul %d, %d : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %loss = graph.reduce_mean %sq {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  %k = graph.constant dense<0.333333343> : tensor<f32>
  %gd = graph.mul %d, %k : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %g = graph.reduce_sum %gd {axes = array<i64: 0>, keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
  %beta = graph.constant dense<0.9> : tensor<f32>
  %mb = graph.mul %m, %beta : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %m1 = graph.add %mb, %g : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %lr = graph.constant dense<0.1> : tensor<f32>
  %u = graph.mul %m1, %lr : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %w1 = graph.sub %w, %u : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %s1 = graph.add %step, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss, %g, %w1, %m1, %s1 : tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
}
