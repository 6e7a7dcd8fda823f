// RUN: pcc-opt %s --split-input-file --verify-diagnostics

// The training-step contract is verified by the Graph dialect wherever its
// attributes appear: states with their initial values, updates and
// gradients pointing at state arguments by index, one loss, unit markers.

// expected-error@+1 {{argument 0: state 'w' has no graph.init value}}
func.func @no_init(%w: tensor<3xf32> {graph.state = "w"}) -> tensor<3xf32> {
  return %w : tensor<3xf32>
}

// -----

// expected-error@+1 {{argument 0: graph.init has type 'tensor<4xf32>', the argument 'tensor<3xf32>'}}
func.func @init_type(%w: tensor<3xf32> {graph.state = "w", graph.init = dense<0.0> : tensor<4xf32>}) -> tensor<3xf32> {
  return %w : tensor<3xf32>
}

// -----

// expected-error@+1 {{argument 0: graph.init without graph.state}}
func.func @init_alone(%w: tensor<3xf32> {graph.init = dense<0.0> : tensor<3xf32>}) -> tensor<3xf32> {
  return %w : tensor<3xf32>
}

// -----

// expected-error@+1 {{argument 0: state 'w' is also argument 1}}
func.func @twice(%a: tensor<3xf32> {graph.state = "w", graph.init = dense<0.0> : tensor<3xf32>},
                 %b: tensor<3xf32> {graph.state = "w", graph.init = dense<0.0> : tensor<3xf32>}) -> tensor<3xf32> {
  return %a : tensor<3xf32>
}

// -----

// expected-error@+1 {{result 0: graph.update names argument 1, out of range}}
func.func @out_of_range(%w: tensor<3xf32> {graph.state = "w", graph.init = dense<0.0> : tensor<3xf32>})
    -> (tensor<3xf32> {graph.update = 1 : i64}) {
  return %w : tensor<3xf32>
}

// -----

// expected-error@+1 {{result 0: graph.update names argument 0, which is no graph.state}}
func.func @not_a_state(%x: tensor<3xf32>) -> (tensor<3xf32> {graph.update = 0 : i64}) {
  return %x : tensor<3xf32>
}

// -----

// expected-error@+1 {{result 0: argument 0 ('w') has a second update in result 1}}
func.func @updated_twice(%w: tensor<3xf32> {graph.state = "w", graph.init = dense<0.0> : tensor<3xf32>})
    -> (tensor<3xf32> {graph.update = 0 : i64}, tensor<3xf32> {graph.update = 0 : i64}) {
  return %w, %w : tensor<3xf32>, tensor<3xf32>
}

// -----

// expected-error@+1 {{result 0: graph.update names argument 0 of type 'tensor<f32>', not 'tensor<1xf32>'}}
func.func @update_type(%s: tensor<f32> {graph.state = "s", graph.init = dense<0.0> : tensor<f32>})
    -> (tensor<1xf32> {graph.update = 0 : i64}) {
  %r = graph.reshape %s : tensor<f32> to tensor<1xf32>
  return %r : tensor<1xf32>
}

// -----

// expected-error@+1 {{result 0 is both a gradient and a state update}}
func.func @both(%w: tensor<3xf32> {graph.state = "w", graph.init = dense<0.0> : tensor<3xf32>})
    -> (tensor<3xf32> {graph.update = 0 : i64, graph.grad = 0 : i64}) {
  return %w : tensor<3xf32>
}

// -----

// expected-error@+1 {{result 0: graph.grad must be an integer argument index}}
func.func @grad_by_name(%w: tensor<3xf32> {graph.state = "w", graph.init = dense<0.0> : tensor<3xf32>})
    -> (tensor<3xf32> {graph.grad = "w"}) {
  return %w : tensor<3xf32>
}

// -----

// expected-error@+1 {{argument 1: graph.state_of names the argument itself}}
func.func @moment_of_itself(%w: tensor<3xf32> {graph.state = "w", graph.init = dense<0.0> : tensor<3xf32>},
                            %m: tensor<3xf32> {graph.state = "w.m", graph.init = dense<0.0> : tensor<3xf32>, graph.state_of = 1 : i64}) -> tensor<3xf32> {
  return %w : tensor<3xf32>
}

// -----

// expected-error@+1 {{result 0: the loss must be a float scalar, got 'tensor<3xf32>'}}
func.func @vector_loss(%x: tensor<3xf32>) -> (tensor<3xf32> {graph.loss}) {
  return %x : tensor<3xf32>
}

// -----

// expected-error@+1 {{result 1: a second graph.loss}}
func.func @two_losses(%x: tensor<f32>) -> (tensor<f32> {graph.loss}, tensor<f32> {graph.loss}) {
  return %x, %x : tensor<f32>, tensor<f32>
}

// -----

func.func @backward_value(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error@+1 {{graph.backward must be a unit attribute}}
  %y = graph.neg %x {graph.backward = 1 : i64} : tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @gradient_norm_value(%x: tensor<f32>) -> tensor<f32> {
  // expected-error@+1 {{graph.gradient_norm must be a unit attribute}}
  %y = graph.add %x, %x {graph.gradient_norm = "sum"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// expected-error@+1 {{argument 0: unknown Graph dialect attribute 'graph.stat'}}
func.func @typo(%w: tensor<3xf32> {graph.stat = "w"}) -> tensor<3xf32> {
  return %w : tensor<3xf32>
}

// -----

// A complete step: a parameter, its moment, their updates, its gradient and
// the loss.
func.func @valid(%x: tensor<3xf32>,
                 %w: tensor<3xf32> {graph.state = "w", graph.init = dense<1.0> : tensor<3xf32>},
                 %m: tensor<3xf32> {graph.state = "w.m", graph.init = dense<0.0> : tensor<3xf32>, graph.state_of = 1 : i64})
    -> (tensor<f32> {graph.loss}, tensor<3xf32> {graph.grad = 1 : i64},
        tensor<3xf32> {graph.update = 1 : i64}, tensor<3xf32> {graph.update = 2 : i64}) {
  %y = graph.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l, %x, %w, %m : tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// pcc-fuse's code-generation marks belong to the ops they describe.
func.func @epilogue_on_an_element_wise_op(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{graph.epilogue is for graph.gemm and graph.matmul}}
  %y = graph.exp %x {graph.epilogue} : tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @row_prologue_without_a_softmax(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{graph.row_prologue is for a graph.fusion of one result that only a softmax reads}}
  %y = graph.exp %x {graph.row_prologue} : tensor<3xf32>
  return %y : tensor<3xf32>
}
