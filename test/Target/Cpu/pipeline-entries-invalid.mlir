// RUN: pcc-translate --graph-to-cpp --split-input-file --verify-diagnostics %s

// Entries of a pipeline-parallel program the CPU target refuses: one per
// coordinate of the mesh axis "pp", each marked dist.rank, and the same
// type or layout wherever two entries share a tensor's name.

dist.mesh @mesh(pp = 2)

func.func @a(%x: tensor<2xf32> {onnx.name = "x"}) attributes {dist.rank = 0 : i64} {
  return
}

// expected-error@+1 {{dist.rank = 0 again: 'a' is that pipeline rank's entry}}
func.func @b(%x: tensor<2xf32> {onnx.name = "x"}) attributes {dist.rank = 0 : i64} {
  return
}

// -----

// expected-error@+1 {{no entry for pipeline rank 1 of 2 (a public function with dist.rank = 1)}}
dist.mesh @mesh(pp = 2)

func.func @a(%x: tensor<2xf32> {onnx.name = "x"}) attributes {dist.rank = 0 : i64} {
  return
}

// -----

dist.mesh @mesh(pp = 2)

// expected-error@+1 {{dist.rank = 2 is no rank of the pipeline axis 'pp' (2 ranks)}}
func.func @a(%x: tensor<2xf32> {onnx.name = "x"}) attributes {dist.rank = 2 : i64} {
  return
}

// -----

dist.mesh @mesh(pp = 2)

func.func @a(%x: tensor<2xf32> {onnx.name = "x"}) attributes {dist.rank = 0 : i64} {
  return
}

// expected-error@+1 {{a public function without dist.rank: a program of several entries has one per pipeline rank, each marked with its rank}}
func.func @helper(%x: tensor<2xf32>) {
  return
}

// -----

dist.mesh @mesh(pp = 2)

func.func @a(%x: tensor<2xf32> {onnx.name = "x"}) attributes {dist.rank = 0 : i64} {
  return
}

// expected-error@+1 {{input 'x' is 'tensor<3xf32>' here but 'tensor<2xf32>' on another entry}}
func.func @b(%x: tensor<3xf32> {onnx.name = "x"}) attributes {dist.rank = 1 : i64} {
  return
}

// -----

dist.mesh @mesh(pp = 2)

func.func @a() -> (tensor<2xf32> {onnx.name = "y", dist.result_index = 0 : i64}) attributes {dist.rank = 0 : i64} {
  %c = graph.constant dense<1.0> : tensor<2xf32>
  return %c : tensor<2xf32>
}

// expected-error@+1 {{output 'y' is 'tensor<2xi64>' here but 'tensor<2xf32>' on another entry}}
func.func @b() -> (tensor<2xi64> {onnx.name = "y", dist.result_index = 0 : i64}) attributes {dist.rank = 1 : i64} {
  %c = graph.constant dense<1> : tensor<2xi64>
  return %c : tensor<2xi64>
}

// -----

dist.mesh @mesh(pp = 2)

func.func @a(%w: tensor<3xf32> {graph.state = "w", graph.init = dense<1.0> : tensor<3xf32>})
    -> (tensor<3xf32> {graph.update = 0 : i64}) attributes {dist.rank = 0 : i64} {
  return %w : tensor<3xf32>
}

// expected-error@+1 {{state 'w' has another initial value, type or layout here than on another entry}}
func.func @b(%w: tensor<3xf32> {graph.state = "w", graph.init = dense<2.0> : tensor<3xf32>})
    -> (tensor<3xf32> {graph.update = 0 : i64}) attributes {dist.rank = 1 : i64} {
  return %w : tensor<3xf32>
}

// -----

dist.mesh @mesh(pp = 2)

func.func private @f() -> tensor<3xf32> {
  // expected-error@+1 {{weight 'w' is defined twice with different values or layouts}}
  %w = graph.weight "w" dense<2.0> : tensor<3xf32>
  return %w : tensor<3xf32>
}

func.func @a() -> (tensor<3xf32> {onnx.name = "y"}) attributes {dist.rank = 0 : i64} {
  %w = graph.weight "w" dense<1.0> : tensor<3xf32>
  return %w : tensor<3xf32>
}

func.func @b() -> (tensor<3xf32> {onnx.name = "z"}) attributes {dist.rank = 1 : i64} {
  %y = call @f() : () -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

// An entry is called by the runtime only, not by another entry.

dist.mesh @mesh(pp = 2)

func.func @a() attributes {dist.rank = 0 : i64} {
  return
}

func.func @b() attributes {dist.rank = 1 : i64} {
  // expected-error@+1 {{call of 'a': it is the program's entry, which only the runtime calls}}
  call @a() : () -> ()
  return
}

// -----

// Transfers need ranks to transfer between.

dist.mesh @mesh(pp = 1)

func.func @a(%x: tensor<2xf32> {onnx.name = "x"}) {
  // expected-error@+1 {{a transfer in a program of one rank}}
  dist.send %x on @mesh axes ["pp"] to 0 tag 0 : tensor<2xf32>
  return
}
