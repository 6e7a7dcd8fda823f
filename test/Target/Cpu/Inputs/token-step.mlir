// A training step on token ids, for `pcc run --data`: loss = mean((ids / 100
// - w)^2) over a [2,4] batch, its gradient, and w -= 0.5 * gradient.

func.func @step(%ids: tensor<2x4xi64> {onnx.name = "input_ids"},
                %w: tensor<4xf32> {graph.state = "w", graph.init = dense<0.0> : tensor<4xf32>},
                %t: tensor<i64> {graph.state = "pcc.step", graph.init = dense<0> : tensor<i64>})
    -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<4xf32> {graph.grad = 1 : i64},
        tensor<4xf32> {graph.update = 1 : i64}, tensor<i64> {graph.update = 2 : i64}) {
  %f = graph.cast %ids : tensor<2x4xi64> to tensor<2x4xf32>
  %scale = graph.constant dense<0.01> : tensor<f32>
  %s = graph.mul %f, %scale : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %d = graph.sub %w, %s : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %sq = graph.mul %d, %d : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %loss = graph.reduce_mean %sq {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  %k = graph.constant dense<0.25> : tensor<f32>
  %gd = graph.mul %d, %k : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %g = graph.reduce_sum %gd {axes = array<i64: 0>, keepdims = false} : (tensor<2x4xf32>) -> tensor<4xf32>
  %lr = graph.constant dense<0.5> : tensor<f32>
  %u = graph.mul %g, %lr : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %w1 = graph.sub %w, %u : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %one = graph.constant dense<1> : tensor<i64>
  %t1 = graph.add %t, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %loss, %g, %w1, %t1 : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>
}
