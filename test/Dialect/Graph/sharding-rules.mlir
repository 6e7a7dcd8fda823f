// The factor-based sharding rule of every Graph op (ShardingRuleOpInterface),
// in Shardy's notation; an op without one is replicated and says so.
// RUN: pcc-opt %s --pcc-print-sharding-rules -split-input-file -verify-diagnostics

// Element-wise ops share one factor per result dimension; broadcast
// dimensions of extent 1 get none (expand is a broadcast too).
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2x1xf32>) -> tensor<2x3xf32> {
  // expected-remark @+1 {{sharding rule: ([i, j], [j]) -> ([i, j]) {i=2, j=3}}}
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // expected-remark @+1 {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=2, j=3}}}
  %m = graph.greater %0, %0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // expected-remark @+1 {{sharding rule: ([i, j], [j], [i, _]) -> ([i, j]) {i=2, j=3}}}
  %1 = graph.where %m, %b, %c : (tensor<2x3xi1>, tensor<3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  // expected-remark @+1 {{sharding rule: ([i, j]) -> ([i, j]) {i=2, j=3}}}
  %n = graph.is_nan %1 : tensor<2x3xf32> -> tensor<2x3xi1>
  // expected-remark @+1 {{sharding rule: ([j, _]) -> ([i, j, k]) {i=4, j=2, k=3}}}
  %e = graph.expand %c : tensor<2x1xf32> to tensor<4x2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// The contraction dimension is a reduction factor (a sum): sharding it
// leaves partial sums. A 2-D weight does not take part in the batch factors.
func.func @matmul(%x: tensor<4x2x3xf32>, %w: tensor<3x5xf32>) -> tensor<4x2x5xf32> {
  // expected-remark @+1 {{sharding rule: ([l, j, i], [i, k]) -> ([l, j, k]) {i=3, j=2, k=5, l=4} reduction={i}}}
  %0 = graph.matmul %x, %w : (tensor<4x2x3xf32>, tensor<3x5xf32>) -> tensor<4x2x5xf32>
  return %0 : tensor<4x2x5xf32>
}

// -----

func.func @gemm(%a: tensor<3x2xf32>, %b: tensor<5x3xf32>, %c: tensor<5xf32>) -> tensor<2x5xf32> {
  // expected-remark @+1 {{sharding rule: ([k, i], [j, k], [j]) -> ([i, j]) {i=2, j=5, k=3} reduction={k}}}
  %0 = graph.gemm %a, %b, %c {transA = true, transB = true} : (tensor<3x2xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// Normalized dimensions must stay whole (the layer norm's scale shares
// them); reductions carry their kind: a partial max is combined with a max,
// a partial mean with a mean.
func.func @normalizations(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x1x4xf32>) {
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([i, j, k]) {i=2, j=3, k=4} need_replication={j}}}
  %0 = graph.softmax %x {axis = 1 : i64} : tensor<2x3x4xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, k], [k]) -> ([i, j, k], [i, j, _], [i, j, _]) {i=2, j=3, k=4} need_replication={k}}}
  %1, %m, %r = graph.layer_norm %x, %s {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([i, _, k]) {i=2, j=3, k=4} reduction={j}}}
  %2 = graph.reduce_sum %x {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([i, j]) {i=2, j=3, k=4} reduction={k:max}}}
  %3 = graph.reduce_max %x {axes = array<i64: 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([i, j]) {i=2, j=3, k=4} reduction={k:mean}}}
  %4 = graph.reduce_mean %x {axes = array<i64: 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([i, j, k]) {i=2, j=3, k=4} need_replication={j}}}
  %5 = graph.cumsum %x {axis = 1 : i64} : tensor<2x3x4xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([i, j, k]) {i=2, j=3, k=4} need_replication={j, k}}}
  %6 = graph.trilu %x : tensor<2x3x4xf32>
  // A log-softmax may split its axis: its partition all-reduces the
  // maximum and the sum (the vocabulary-parallel cross-entropy).
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([i, j, k]) {i=2, j=3, k=4}}}
  %7 = graph.log_softmax %x {axis = 2 : i64} : tensor<2x3x4xf32>
  return %0, %1, %2 : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x1x4xf32>
}

// -----

// Reshapes keep a head sharding through compound factors ([H*D] <-> [H, D]);
// a reshape that both splits and merges stays whole. Equal splits and
// concats make the axis a compound [parts, chunk] whose chunk the parts
// share (fused QKV by heads); an aligned half-slice (rotary) likewise; any
// other cut stays whole.
func.func @movement(%x: tensor<2x3x4xf32>, %q: tensor<2x5x24xf32>) -> tensor<4x2x3xf32> {
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([k, i, j]) {i=2, j=3, k=4}}}
  %0 = graph.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, kl]) -> ([i, j, k, l]) {i=2, j=5, k=4, l=6}}}
  %1 = graph.reshape %q : tensor<2x5x24xf32> to tensor<2x5x4x6xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, k, l]) -> ([ij, kl]) {i=2, j=5, k=4, l=6}}}
  %2 = graph.reshape %1 : tensor<2x5x4x6xf32> to tensor<10x24xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([i, l, m]) {i=2, j=3, k=4, l=4, m=3} need_replication={j, k, l, m}}}
  %3 = graph.reshape %x : tensor<2x3x4xf32> to tensor<2x4x3xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, lk]) -> ([i, j, k], [i, j, k], [i, j, k]) {i=2, j=5, k=8, l=3} permutation={l}}}
  %4:3 = graph.split %q {axis = 2 : i64, sizes = array<i64: 8, 8, 8>} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>)
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([i, j, l], [i, j, m]) {i=2, j=5, k=24, l=16, m=8} need_replication={k, l, m}}}
  %5:2 = graph.split %q {axis = 2 : i64, sizes = array<i64: 16, 8>} : (tensor<2x5x24xf32>) -> (tensor<2x5x16xf32>, tensor<2x5x8xf32>)
  // expected-remark @+1 {{sharding rule: ([i, j, k], [i, j, k]) -> ([i, j, lk]) {i=2, j=5, k=8, l=2} permutation={l}}}
  %6 = graph.concat %4#0, %4#1 {axis = 2 : i64} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x16xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, lk]) -> ([i, j, k]) {i=2, j=5, k=12, l=2} need_replication={l}}}
  %7 = graph.slice %q {starts = array<i64: 0, 0, 12>, sizes = array<i64: 2, 5, 12>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x24xf32>) -> tensor<2x5x12xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, l]) -> ([i, k, l]) {i=2, j=5, k=3, l=24} need_replication={j, k}}}
  %8 = graph.slice %q {starts = array<i64: 0, 1, 0>, sizes = array<i64: 2, 3, 24>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x24xf32>) -> tensor<2x3x24xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, l]) -> ([i, k, l]) {i=2, j=3, k=5, l=24} need_replication={j, k}}}
  %9 = graph.insert_slice %8 {starts = array<i64: 0, 1, 0>, steps = array<i64: 1, 1, 1>} : tensor<2x3x24xf32> to tensor<2x5x24xf32>
  return %0 : tensor<4x2x3xf32>
}

// -----

// A gather may shard its table: each rank looks up its rows and the partial
// results sum (the vocabulary-parallel embedding); scatter_add, its adjoint,
// fills only its rows. Element-wise gathers keep the data's axis whole,
// except when they pick one element per position (a cross-entropy's label):
// then the picks are partial sums of each rank's block, and the adjoint
// scatter fills only the rank's block. Constants and weights can be cut
// anywhere at compile time.
func.func @lookups(%t: tensor<10x4xf32>, %i: tensor<2x3xi64>, %g: tensor<2x3x4xf32>, %e: tensor<3x4xf32>, %ei: tensor<3x2xi64>, %l: tensor<3x1xi64>) -> tensor<2x3x4xf32> {
  // expected-remark @+1 {{sharding rule: ([i, l], [j, k]) -> ([j, k, l]) {i=10, j=2, k=3, l=4} reduction={i}}}
  %0 = graph.gather %t[%i] {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  // expected-remark @+1 {{sharding rule: ([j, k, l], [j, k]) -> ([i, l]) {i=10, j=2, k=3, l=4}}}
  %1 = graph.scatter_add %g[%i] {axis = 0 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<10x4xf32>
  // expected-remark @+1 {{sharding rule: ([i, k], [i, j]) -> ([i, j]) {i=3, j=2, k=4} need_replication={k}}}
  %2 = graph.gather_elements %e[%ei] {axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
  // expected-remark @+1 {{sharding rule: ([i, j], [i, j]) -> ([i, k]) {i=3, j=2, k=4} need_replication={k}}}
  %3 = graph.scatter_elements_add %2[%ei] {axis = 1 : i64} : (tensor<3x2xf32>, tensor<3x2xi64>) -> tensor<3x4xf32>
  // expected-remark @+1 {{sharding rule: ([i, j], [i, _]) -> ([i, _]) {i=3, j=4} reduction={j}}}
  %4 = graph.gather_elements %e[%l] {axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x1xi64>) -> tensor<3x1xf32>
  // expected-remark @+1 {{sharding rule: ([i, _], [i, _]) -> ([i, j]) {i=3, j=4}}}
  %5 = graph.scatter_elements_add %4[%l] {axis = 1 : i64} : (tensor<3x1xf32>, tensor<3x1xi64>) -> tensor<3x4xf32>
  // expected-remark @+1 {{sharding rule: () -> ([i, j]) {i=2, j=4}}}
  %c = graph.constant dense<1.0> : tensor<2x4xf32>
  // expected-remark @+1 {{sharding rule: () -> ([i, _]) {i=4}}}
  %w = graph.weight "w" dense<1.0> : tensor<4x1xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// An op without a rule (every Graph op has one; func.call stands in)
// is replicated, with a remark.
func.func private @callee(tensor<2xf32>) -> tensor<2xf32>
func.func @no_rule(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-remark @+1 {{no sharding rule: replicated}}
  %0 = func.call @callee(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Attention's heads split with their key/value groups (jk: group j, query
// head k of it); sequence-first operands and output carry the same factors
// with the sequence before the heads, the log-sum-exp stays [B, H, T].
func.func @attention_layouts(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %qs: tensor<2x3x4x8xf32>, %ks: tensor<2x3x2x8xf32>) {
  // expected-remark @+1 {{sharding rule: ([i, jk, l, n], [i, j, m, n], [i, j, m, o]) -> ([i, jk, l, o], [i, jk, l]) {i=2, j=2, k=2, l=3, m=3, n=8, o=8} need_replication={l, m, n, o}}}
  %o, %lse = graph.attention %q, %k, %k {causal, scale = 0.5 : f32} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
  // expected-remark @+1 {{sharding rule: ([i, l, jk, n], [i, m, j, n], [i, m, j, o]) -> ([i, l, jk, o], [i, jk, l]) {i=2, j=2, k=2, l=3, m=3, n=8, o=8} need_replication={l, m, n, o}}}
  %o2, %lse2 = graph.attention %qs, %ks, %ks {causal, scale = 0.5 : f32, sequence_first} : (tensor<2x3x4x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>) -> (tensor<2x3x4x8xf32>, tensor<2x4x3xf32>)
  return
}

// Attention sinks split with the query heads.
func.func @attention_sinks(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %s: tensor<4xf32>) {
  // expected-remark @+1 {{sharding rule: ([i, jk, l, n], [i, j, m, n], [i, j, m, o], [jk]) -> ([i, jk, l, o], [i, jk, l]) {i=2, j=2, k=2, l=3, m=3, n=8, o=8} need_replication={l, m, n, o}}}
  %o, %lse = graph.attention %q, %k, %k sinks %s {causal, scale = 0.5 : f32} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>, tensor<4xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
  return
}
