// RUN: pcc-translate --graph-to-cpp --split-input-file --verify-diagnostics %s

// Malformed training-step signatures are diagnosed, never emitted.

// expected-error@+1 {{state 'w' has no dense pcc.init initial value}}
func.func @no_init(%w: tensor<3xf32> {pcc.state = "w"}) -> tensor<3xf32> {
  return %w : tensor<3xf32>
}

// -----

// expected-error@+1 {{state 'w': pcc.init has type 'tensor<4xf32>', the argument 'tensor<3xf32>'}}
func.func @init_type(%w: tensor<3xf32> {pcc.state = "w", pcc.init = dense<0.0> : tensor<4xf32>}) -> tensor<3xf32> {
  return %w : tensor<3xf32>
}

// -----

// expected-error@+1 {{state 'w' appears twice}}
func.func @twice(%a: tensor<3xf32> {pcc.state = "w", pcc.init = dense<0.0> : tensor<3xf32>},
                 %b: tensor<3xf32> {pcc.state = "w", pcc.init = dense<0.0> : tensor<3xf32>}) -> tensor<3xf32> {
  return %a : tensor<3xf32>
}

// -----

// expected-error@+1 {{result 0 updates 'v', which is no state argument}}
func.func @unknown(%w: tensor<3xf32> {pcc.state = "w", pcc.init = dense<0.0> : tensor<3xf32>})
    -> (tensor<3xf32> {pcc.state_update = "v"}) {
  return %w : tensor<3xf32>
}

// -----

// expected-error@+1 {{state 'w' is updated twice}}
func.func @updated_twice(%w: tensor<3xf32> {pcc.state = "w", pcc.init = dense<0.0> : tensor<3xf32>})
    -> (tensor<3xf32> {pcc.state_update = "w"}, tensor<3xf32> {pcc.state_update = "w"}) {
  return %w, %w : tensor<3xf32>, tensor<3xf32>
}

// -----

// expected-error@+1 {{the update of state 's' has type 'tensor<1xf32>', the state 'tensor<f32>'}}
func.func @update_type(%s: tensor<f32> {pcc.state = "s", pcc.init = dense<0.0> : tensor<f32>})
    -> (tensor<1xf32> {pcc.state_update = "s"}) {
  %r = graph.reshape %s : tensor<f32> to tensor<1xf32>
  return %r : tensor<1xf32>
}

// -----

// expected-error@+1 {{result 0 is both a gradient and a state update}}
func.func @both(%w: tensor<3xf32> {pcc.state = "w", pcc.init = dense<0.0> : tensor<3xf32>})
    -> (tensor<3xf32> {pcc.state_update = "w", pcc.grad = "w"}) {
  return %w : tensor<3xf32>
}

// -----

func.func @weight_named_like_state(%w: tensor<3xf32> {pcc.state = "w", pcc.init = dense<0.0> : tensor<3xf32>}) -> tensor<3xf32> {
  // expected-error@+1 {{weight 'w' has the name of a state argument}}
  %c = graph.weight "w" dense<1.0> : tensor<3xf32>
  %s = graph.add %w, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %s : tensor<3xf32>
}
