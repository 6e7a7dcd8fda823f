// RUN: pcc-translate --graph-to-cpp --function=main --split-input-file --verify-diagnostics %s

// Calls the CPU target refuses: every callee is a private function defined
// in the module, and calls do not recurse (a call runs in the workspace
// after its caller's). MLIR's verifier already refuses a call of a symbol
// that is no function.

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'func.call' op 'nowhere' does not reference a valid function}}
  %y = call @nowhere(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func private @external(tensor<4xf32>) -> tensor<4xf32>

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{call of 'external': a declaration without a body; the callee must be defined in the module}}
  %y = call @external(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{call of 'helper': a public function; a program has one public function, its entry, and calls private ones}}
  %y = call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func private @back(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{call of 'main': it is the program's entry, which only the runtime calls}}
  %y = call @main(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

func.func private @even(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @odd(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func private @odd(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{call of 'even': recursion; a call runs in the workspace after its caller's, so calls must not recurse}}
  %y = call @even(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @even(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func private @self(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{call of 'self': recursion}}
  %y = call @self(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A weight of a callee may share its name with a weight of another
// function only if it is the same tensor.

func.func private @f() -> tensor<3xf32> {
  // expected-error@+1 {{weight 'w' is defined twice with different values or layouts}}
  %w = graph.weight "w" dense<2.0> : tensor<3xf32>
  return %w : tensor<3xf32>
}

func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %w = graph.weight "w" dense<1.0> : tensor<3xf32>
  %y = call @f() : () -> tensor<3xf32>
  return %w, %y : tensor<3xf32>, tensor<3xf32>
}

// -----

func.func private @f() -> tensor<3xf32> {
  // expected-error@+1 {{weight 's' has the name of a state argument}}
  %w = graph.weight "s" dense<2.0> : tensor<3xf32>
  return %w : tensor<3xf32>
}

func.func @main(%s: tensor<3xf32> {graph.state = "s", graph.init = dense<0.0> : tensor<3xf32>}) -> tensor<3xf32> {
  %y = call @f() : () -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

// A partial sum that the callee accumulates into (dist.accumulates) is
// overwritten by the call: the caller may read it no more, and it may be
// no argument of the caller but a state that the caller updates with the
// result.

func.func private @grad(%x: tensor<4xf32>, %partial: tensor<4xf32>) -> (tensor<4xf32> {dist.accumulates = 1 : i64}) {
  %s = graph.add %partial, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %first = graph.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // expected-error@+1 {{result 0 of 'grad' is written into an operand that is not the call's alone (a partial sum in this function's workspace, or a state that it updates with the result)}}
  %a = call @grad(%x, %first) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a, %first : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func private @grad(%x: tensor<4xf32>, %partial: tensor<4xf32>) -> (tensor<4xf32> {dist.accumulates = 1 : i64}) {
  %s = graph.add %partial, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

func.func @main(%x: tensor<4xf32>, %p: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{result 0 of 'grad' is written into an operand that is not the call's alone (a partial sum in this function's workspace, or a state that it updates with the result)}}
  %a = call @grad(%x, %p) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// A state that the call updates in place may be read before the call, not
// after it: here the caller returns its old value too.

func.func private @update(%p: tensor<4xf32>) -> (tensor<4xf32> {dist.accumulates = 0 : i64}) {
  %one = graph.constant dense<1.0> : tensor<f32>
  %s = graph.add %p, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

func.func @main(%p: tensor<4xf32> {graph.state = "p", graph.init = dense<0.0> : tensor<4xf32>})
    -> (tensor<4xf32>, tensor<4xf32> {graph.update = 0 : i64}) {
  // expected-error@+1 {{result 0 of 'update' is written into an operand that is not the call's alone}}
  %a = call @update(%p) : (tensor<4xf32>) -> tensor<4xf32>
  return %p, %a : tensor<4xf32>, tensor<4xf32>
}
