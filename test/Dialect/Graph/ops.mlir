// RUN: pcc-opt %s | pcc-opt | FileCheck %s
// RUN: pcc-opt %s --mlir-print-op-generic | pcc-opt | FileCheck %s

// Every operation of the Graph dialect parses, verifies and prints back in
// its custom form; printing, re-parsing and printing again gives the same.

// CHECK-LABEL: func.func @constants
func.func @constants() -> (tensor<2x3xf32>, tensor<2x2xf32>, tensor<3xi64>, tensor<i1>) {
  // CHECK: graph.constant dense<1.000000e+00> : tensor<2x3xf32>
  %0 = graph.constant dense<1.0> : tensor<2x3xf32>
  // CHECK: graph.weight "fc.weight" dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
  %1 = graph.weight "fc.weight" dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  // CHECK: graph.constant dense<[1, -2, 3]> : tensor<3xi64>
  %2 = graph.constant dense<[1, -2, 3]> : tensor<3xi64>
  // CHECK: graph.constant dense<true> : tensor<i1>
  %3 = graph.constant dense<true> : tensor<i1>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<2x2xf32>, tensor<3xi64>, tensor<i1>
}

// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<4xi1>)
func.func @unary(%x: tensor<2x3xf32>, %b: tensor<4xi1>) {
  // CHECK: graph.sqrt %[[X]] : tensor<2x3xf32>
  %0 = graph.sqrt %x : tensor<2x3xf32>
  // CHECK: graph.reciprocal %[[X]] : tensor<2x3xf32>
  %1 = graph.reciprocal %x : tensor<2x3xf32>
  // CHECK: graph.neg %[[X]] : tensor<2x3xf32>
  %2 = graph.neg %x : tensor<2x3xf32>
  // CHECK: graph.abs %[[X]] : tensor<2x3xf32>
  %3 = graph.abs %x : tensor<2x3xf32>
  // CHECK: graph.erf %[[X]] : tensor<2x3xf32>
  %4 = graph.erf %x : tensor<2x3xf32>
  // CHECK: graph.tanh %[[X]] : tensor<2x3xf32>
  %5 = graph.tanh %x : tensor<2x3xf32>
  // CHECK: graph.sigmoid %[[X]] : tensor<2x3xf32>
  %6 = graph.sigmoid %x : tensor<2x3xf32>
  // CHECK: graph.exp %[[X]] : tensor<2x3xf32>
  %7 = graph.exp %x : tensor<2x3xf32>
  // CHECK: graph.log %[[X]] : tensor<2x3xf32>
  %8 = graph.log %x : tensor<2x3xf32>
  // CHECK: graph.relu %[[X]] : tensor<2x3xf32>
  %9 = graph.relu %x : tensor<2x3xf32>
  // CHECK: graph.floor %[[X]] : tensor<2x3xf32>
  %10 = graph.floor %x : tensor<2x3xf32>
  // CHECK: graph.ceil %[[X]] : tensor<2x3xf32>
  %11 = graph.ceil %x : tensor<2x3xf32>
  // CHECK: graph.sin %[[X]] : tensor<2x3xf32>
  %12 = graph.sin %x : tensor<2x3xf32>
  // CHECK: graph.cos %[[X]] : tensor<2x3xf32>
  %13 = graph.cos %x : tensor<2x3xf32>
  // CHECK: graph.not %[[B]] : tensor<4xi1>
  %14 = graph.not %b : tensor<4xi1>
  return
}

// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[R:.*]]: tensor<3xf32>, %[[S:.*]]: tensor<f32>, %[[B:.*]]: tensor<2x1xi1>, %[[C:.*]]: tensor<3xi1>)
func.func @binary(%x: tensor<2x3xf32>, %r: tensor<3xf32>, %s: tensor<f32>, %b: tensor<2x1xi1>, %c: tensor<3xi1>) {
  // CHECK: graph.add %[[X]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = graph.add %x, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.sub %[[R]], %[[X]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = graph.sub %r, %x : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.mul %[[X]], %[[S]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %2 = graph.mul %x, %s : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  // CHECK: graph.div %[[S]], %[[S]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %3 = graph.div %s, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK: graph.pow %[[X]], %[[S]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %4 = graph.pow %x, %s : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  // CHECK: graph.max %[[X]], %[[X]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = graph.max %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.min %[[X]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %6 = graph.min %x, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.and %[[B]], %[[C]] : (tensor<2x1xi1>, tensor<3xi1>) -> tensor<2x3xi1>
  %7 = graph.and %b, %c : (tensor<2x1xi1>, tensor<3xi1>) -> tensor<2x3xi1>
  // CHECK: graph.or %[[B]], %[[C]] : (tensor<2x1xi1>, tensor<3xi1>) -> tensor<2x3xi1>
  %8 = graph.or %b, %c : (tensor<2x1xi1>, tensor<3xi1>) -> tensor<2x3xi1>
  // CHECK: graph.xor %[[B]], %[[B]] : (tensor<2x1xi1>, tensor<2x1xi1>) -> tensor<2x1xi1>
  %9 = graph.xor %b, %b : (tensor<2x1xi1>, tensor<2x1xi1>) -> tensor<2x1xi1>
  return
}

// CHECK-LABEL: func.func @compare_where
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[R:.*]]: tensor<3xf32>, %[[I:.*]]: tensor<4xi64>)
func.func @compare_where(%x: tensor<2x3xf32>, %r: tensor<3xf32>, %i: tensor<4xi64>) {
  // CHECK: %[[EQ:.*]] = graph.equal %[[X]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %0 = graph.equal %x, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: graph.less %[[I]], %[[I]] : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
  %1 = graph.less %i, %i : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
  // CHECK: graph.less_or_equal %[[X]], %[[X]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %2 = graph.less_or_equal %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: graph.greater %[[R]], %[[X]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %3 = graph.greater %r, %x : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: graph.greater_or_equal %[[I]], %[[I]] : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
  %4 = graph.greater_or_equal %i, %i : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
  // CHECK: graph.where %[[EQ]], %[[X]], %[[R]] : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %5 = graph.where %0, %x, %r : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @cast
func.func @cast(%x: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // CHECK: graph.cast %{{.*}} : tensor<2x3xf32> to tensor<2x3xi64>
  %0 = graph.cast %x : tensor<2x3xf32> to tensor<2x3xi64>
  // CHECK: graph.cast %{{.*}} : tensor<4xi64> to tensor<4xi1>
  %1 = graph.cast %i : tensor<4xi64> to tensor<4xi1>
  // CHECK: graph.cast %{{.*}} : tensor<4xi64> to tensor<4xf16>
  %2 = graph.cast %i : tensor<4xi64> to tensor<4xf16>
  return
}

// CHECK-LABEL: func.func @contractions
// CHECK-SAME: (%[[A:.*]]: tensor<4x2x3xf32>, %[[B:.*]]: tensor<3x5xf32>, %[[V:.*]]: tensor<3xf32>, %[[M:.*]]: tensor<2x3xf32>, %[[N:.*]]: tensor<3x2xf32>, %[[C:.*]]: tensor<2xf32>)
func.func @contractions(%a: tensor<4x2x3xf32>, %b: tensor<3x5xf32>, %v: tensor<3xf32>,
                        %m: tensor<2x3xf32>, %n: tensor<3x2xf32>, %c: tensor<2xf32>) {
  // CHECK: graph.matmul %[[A]], %[[B]] : (tensor<4x2x3xf32>, tensor<3x5xf32>) -> tensor<4x2x5xf32>
  %0 = graph.matmul %a, %b : (tensor<4x2x3xf32>, tensor<3x5xf32>) -> tensor<4x2x5xf32>
  // CHECK: graph.matmul %[[A]], %[[V]] : (tensor<4x2x3xf32>, tensor<3xf32>) -> tensor<4x2xf32>
  %1 = graph.matmul %a, %v : (tensor<4x2x3xf32>, tensor<3xf32>) -> tensor<4x2xf32>
  // CHECK: graph.matmul %[[V]], %[[B]] : (tensor<3xf32>, tensor<3x5xf32>) -> tensor<5xf32>
  %2 = graph.matmul %v, %b : (tensor<3xf32>, tensor<3x5xf32>) -> tensor<5xf32>
  // CHECK: graph.matmul %[[V]], %[[V]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<f32>
  %3 = graph.matmul %v, %v : (tensor<3xf32>, tensor<3xf32>) -> tensor<f32>
  // CHECK: graph.gemm %[[M]], %[[N]] : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %4 = graph.gemm %m, %n : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  // CHECK: graph.gemm %[[M]], %[[M]], %[[C]] {alpha = 5.000000e-01 : f32, beta = 2.000000e+00 : f32, transB = true} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %5 = graph.gemm %m, %m, %c {alpha = 0.5 : f32, beta = 2.0 : f32, transB = true} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  // CHECK: graph.gemm %[[N]], %[[N]] {transA = true} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %6 = graph.gemm %n, %n {transA = true} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  // CHECK: graph.gemm %[[N]], %[[M]] {transA = true, transB = true} : (tensor<3x2xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>
  %7 = graph.gemm %n, %m {transA = true, transB = true} : (tensor<3x2xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// CHECK-LABEL: func.func @normalizations
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[S:.*]]: tensor<4xf32>, %[[T:.*]]: tensor<3x4xf32>)
func.func @normalizations(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>, %t: tensor<3x4xf32>) {
  // CHECK: graph.softmax %[[X]] {axis = 2 : i64} : tensor<2x3x4xf32>
  %0 = graph.softmax %x {axis = 2 : i64} : tensor<2x3x4xf32>
  // CHECK: graph.log_softmax %[[X]] {axis = 0 : i64} : tensor<2x3x4xf32>
  %1 = graph.log_softmax %x {axis = 0 : i64} : tensor<2x3x4xf32>
  // The default epsilon is elided.
  // CHECK: graph.layer_norm %[[X]], %[[S]], %[[S]] {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  %2:3 = graph.layer_norm %x, %s, %s {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  // CHECK: graph.layer_norm %[[X]], %[[T]] {axis = 1 : i64, epsilon = 1.000000e-03 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  %3:3 = graph.layer_norm %x, %t {axis = 1 : i64, epsilon = 1.0e-3 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  return
}

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
func.func @reductions(%x: tensor<2x3x4xf32>) {
  // CHECK: graph.reduce_mean %[[X]] {axes = array<i64: 2>} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  %0 = graph.reduce_mean %x {axes = array<i64: 2>} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  // CHECK: graph.reduce_sum %[[X]] {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  %1 = graph.reduce_sum %x {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  // CHECK: graph.reduce_max %[[X]] {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  %2 = graph.reduce_max %x {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  // keepdims = true is the default and elided.
  // CHECK: graph.reduce_min %[[X]] {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  %3 = graph.reduce_min %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  return
}

// CHECK-LABEL: func.func @movement
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[Y:.*]]: tensor<2x1x4xf32>, %[[I:.*]]: tensor<5xi64>, %[[J:.*]]: tensor<2x2xi32>)
func.func @movement(%x: tensor<2x3x4xf32>, %y: tensor<2x1x4xf32>, %i: tensor<5xi64>, %j: tensor<2x2xi32>) {
  // CHECK: graph.reshape %[[X]] : tensor<2x3x4xf32> to tensor<6x4xf32>
  %0 = graph.reshape %x : tensor<2x3x4xf32> to tensor<6x4xf32>
  // CHECK: graph.transpose %[[X]] {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %1 = graph.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // CHECK: graph.expand %[[Y]] : tensor<2x1x4xf32> to tensor<5x2x3x4xf32>
  %2 = graph.expand %y : tensor<2x1x4xf32> to tensor<5x2x3x4xf32>
  // CHECK: graph.slice %[[X]] {sizes = array<i64: 1, 2, 2>, starts = array<i64: 1, 2, 0>, steps = array<i64: 1, -1, 3>} : (tensor<2x3x4xf32>) -> tensor<1x2x2xf32>
  %3 = graph.slice %x {starts = array<i64: 1, 2, 0>, sizes = array<i64: 1, 2, 2>, steps = array<i64: 1, -1, 3>} : (tensor<2x3x4xf32>) -> tensor<1x2x2xf32>
  // CHECK: graph.concat %[[X]], %[[Y]], %[[X]] {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<2x3x4xf32>) -> tensor<2x7x4xf32>
  %4 = graph.concat %x, %y, %x {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<2x3x4xf32>) -> tensor<2x7x4xf32>
  // CHECK: graph.split %[[X]] {axis = 2 : i64, sizes = array<i64: 1, 3, 0>} : (tensor<2x3x4xf32>) -> (tensor<2x3x1xf32>, tensor<2x3x3xf32>, tensor<2x3x0xf32>)
  %5:3 = graph.split %x {axis = 2 : i64, sizes = array<i64: 1, 3, 0>} : (tensor<2x3x4xf32>) -> (tensor<2x3x1xf32>, tensor<2x3x3xf32>, tensor<2x3x0xf32>)
  // CHECK: graph.gather %[[X]][%[[I]]] {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x3x5xf32>
  %6 = graph.gather %x[%i] {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x3x5xf32>
  // CHECK: graph.gather %[[X]][%[[J]]] {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x2xi32>) -> tensor<2x2x2x4xf32>
  %7 = graph.gather %x[%j] {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x2xi32>) -> tensor<2x2x2x4xf32>
  // CHECK: graph.constant dense<0> : tensor<2x2x4xi64>
  %k = graph.constant dense<0> : tensor<2x2x4xi64>
  // CHECK: graph.gather_elements %[[X]][%{{.*}}] {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x2x4xi64>) -> tensor<2x2x4xf32>
  %8 = graph.gather_elements %x[%k] {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x2x4xi64>) -> tensor<2x2x4xf32>
  // CHECK: graph.trilu %[[X]] : tensor<2x3x4xf32>
  %9 = graph.trilu %x : tensor<2x3x4xf32>
  // CHECK: graph.trilu %[[X]] {k = -1 : i64, upper = false} : tensor<2x3x4xf32>
  %10 = graph.trilu %x {upper = false, k = -1 : i64} : tensor<2x3x4xf32>
  return
}

// CHECK-LABEL: func.func @paged_cache
func.func @paged_cache(%cache: tensor<6x2x4x8xf32>, %rows: tensor<1x2x3x8xf32>, %q: tensor<1x4x3x8xf32>,
                       %slots: tensor<3xi64>, %positions: tensor<3xi64>, %tables: tensor<2x3xi64>) -> tensor<1x4x3x8xf32> {
  // CHECK: %[[C:.*]] = graph.cache_write %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<6x2x4x8xf32>, tensor<1x2x3x8xf32>, tensor<3xi64>, tensor<3xi64>, tensor<2x3xi64>) -> tensor<6x2x4x8xf32>
  %c = graph.cache_write %cache, %rows, %slots, %positions, %tables : (tensor<6x2x4x8xf32>, tensor<1x2x3x8xf32>, tensor<3xi64>, tensor<3xi64>, tensor<2x3xi64>) -> tensor<6x2x4x8xf32>
  // CHECK: graph.paged_attention %{{.*}}, %[[C]], %[[C]], %{{.*}}, %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f32} : (tensor<1x4x3x8xf32>, tensor<6x2x4x8xf32>, tensor<6x2x4x8xf32>, tensor<3xi64>, tensor<3xi64>, tensor<2x3xi64>) -> tensor<1x4x3x8xf32>
  %o = graph.paged_attention %q, %c, %c, %slots, %positions, %tables {scale = 0.5 : f32} : (tensor<1x4x3x8xf32>, tensor<6x2x4x8xf32>, tensor<6x2x4x8xf32>, tensor<3xi64>, tensor<3xi64>, tensor<2x3xi64>) -> tensor<1x4x3x8xf32>
  return %o : tensor<1x4x3x8xf32>
}

// Attention sinks (one logit per query head) beside a bias, and beside
// ALiBi's slopes in the paged op.
// CHECK-LABEL: func.func @attention_sinks
func.func @attention_sinks(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %bias: tensor<1x1x3x3xf32>, %s: tensor<4xf32>,
                           %c: tensor<6x2x4x8xf32>, %slots: tensor<3xi64>, %tables: tensor<2x3xi64>) {
  // CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} sinks %{{.*}} {causal, scale = 5.000000e-01 : f32} : (tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x1x3x3xf32>, tensor<4xf32>)
  %o, %lse = graph.attention %q, %k, %k, %bias sinks %s {causal, scale = 0.5 : f32} : (tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x1x3x3xf32>, tensor<4xf32>) -> (tensor<1x4x3x8xf32>, tensor<1x4x3xf32>)
  // CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}} sinks %{{.*}} {scale
  %o2, %lse2 = graph.attention %q, %k, %k sinks %s {scale = 0.5 : f32} : (tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<4xf32>) -> (tensor<1x4x3x8xf32>, tensor<1x4x3xf32>)
  // CHECK: graph.paged_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} sinks %{{.*}} {scale
  %p = graph.paged_attention %q, %c, %c, %slots, %slots, %tables, %s sinks %s {scale = 0.5 : f32} : (tensor<1x4x3x8xf32>, tensor<6x2x4x8xf32>, tensor<6x2x4x8xf32>, tensor<3xi64>, tensor<3xi64>, tensor<2x3xi64>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x3x8xf32>
  // CHECK: graph.paged_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} sinks %{{.*}} {scale
  %p2 = graph.paged_attention %q, %c, %c, %slots, %slots, %tables sinks %s {scale = 0.5 : f32} : (tensor<1x4x3x8xf32>, tensor<6x2x4x8xf32>, tensor<6x2x4x8xf32>, tensor<3xi64>, tensor<3xi64>, tensor<2x3xi64>, tensor<4xf32>) -> tensor<1x4x3x8xf32>
  return
}
