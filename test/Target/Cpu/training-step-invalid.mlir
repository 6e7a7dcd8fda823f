// RUN: pcc-translate --graph-to-cpp --split-input-file --verify-diagnostics %s

// What the CPU target refuses in a training step that the Graph dialect's
// verifier accepts (the contract itself is pinned by
// test/Dialect/Graph/training-invalid.mlir).

// expected-error@+1 {{state 'w': the CPU target needs a dense graph.init value}}
func.func @sparse_init(%w: tensor<3xf32> {graph.state = "w", graph.init = sparse<[[0]], [1.0]> : tensor<3xf32>}) -> tensor<3xf32> {
  return %w : tensor<3xf32>
}

// -----

func.func @weight_named_like_state(%w: tensor<3xf32> {graph.state = "w", graph.init = dense<0.0> : tensor<3xf32>}) -> tensor<3xf32> {
  // expected-error@+1 {{weight 'w' has the name of a state argument}}
  %c = graph.weight "w" dense<1.0> : tensor<3xf32>
  %s = graph.add %w, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %s : tensor<3xf32>
}
