// RUN: pcc-opt %s -split-input-file -verify-diagnostics

// One case per verifier or type-inference error of the Graph dialect. Type
// inference failures report the reason at the op, then the generic
// "failed to infer returned types".

//===----------------------------------------------------------------------===//
// graph.constant
//===----------------------------------------------------------------------===//

func.func @constant_type_mismatch() {
  // expected-error @+1 {{'graph.constant' op failed to verify that all of {value, output} have same type}}
  %0 = "graph.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>
  return
}

// -----

func.func @weight_type_mismatch() {
  // expected-error @+1 {{'graph.weight' op failed to verify that all of {value, output} have same type}}
  %0 = "graph.weight"() {name = "w", value = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>
  return
}

//===----------------------------------------------------------------------===//
// Element-wise operations
//===----------------------------------------------------------------------===//

// -----

func.func @unary_type_changes(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.relu' op requires the same type for all operands and results}}
  %0 = "graph.relu"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @unranked_operand(%x: tensor<*xf32>) {
  // expected-error @+1 {{'graph.exp' op operand #0 must be ranked tensor of any type values, but got 'tensor<*xf32>'}}
  %0 = "graph.exp"(%x) : (tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @add_not_broadcastable(%x: tensor<2x3xf32>, %y: tensor<4xf32>) {
  // expected-error @+2 {{graph.add: shapes [2,3] and [4] do not broadcast}}
  // expected-error @+1 {{'graph.add' op failed to infer returned types}}
  %0 = graph.add %x, %y : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @mul_not_broadcastable(%x: tensor<2x3xf32>, %y: tensor<3x3xf32>) {
  // expected-error @+2 {{graph.mul: shapes [2,3] and [3,3] do not broadcast}}
  // expected-error @+1 {{'graph.mul' op failed to infer returned types}}
  %0 = graph.mul %x, %y : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @add_wrong_result_shape(%x: tensor<2x3xf32>, %y: tensor<3xf32>) {
  // expected-error @+2 {{'graph.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{'graph.add' op failed to infer returned types}}
  %0 = graph.add %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @add_wrong_result_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'graph.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf16>'}}
  // expected-error @+1 {{'graph.add' op failed to infer returned types}}
  %0 = graph.add %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf16>
  return
}

// -----

func.func @add_dynamic(%x: tensor<2x3xf32>, %d: tensor<?x3xf32>) {
  // expected-error @+2 {{graph.add: operands must be static tensors}}
  // expected-error @+1 {{'graph.add' op failed to infer returned types}}
  %0 = graph.add %x, %d : (tensor<2x3xf32>, tensor<?x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @compare_result_not_i1(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'graph.less' op inferred type(s) 'tensor<2x3xi1>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{'graph.less' op failed to infer returned types}}
  %0 = graph.less %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @compare_not_broadcastable(%x: tensor<2x3xi64>, %y: tensor<2xi64>) {
  // expected-error @+2 {{graph.equal: shapes [2,3] and [2] do not broadcast}}
  // expected-error @+1 {{'graph.equal' op failed to infer returned types}}
  %0 = graph.equal %x, %y : (tensor<2x3xi64>, tensor<2xi64>) -> tensor<2x3xi1>
  return
}

// -----

func.func @where_condition_not_i1(%c: tensor<2x3xi64>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.where' op operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<2x3xi64>'}}
  %0 = graph.where %c, %x, %x : (tensor<2x3xi64>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @where_branch_types(%c: tensor<2x3xi1>, %x: tensor<2x3xf32>, %y: tensor<2x3xf16>) {
  // expected-error @+1 {{'graph.where' op branches have different element types}}
  %0 = graph.where %c, %x, %y : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @where_not_broadcastable(%c: tensor<4xi1>, %x: tensor<2x3xf32>) {
  // expected-error @+2 {{graph.where: shapes [4] and [2,3] do not broadcast}}
  // expected-error @+1 {{'graph.where' op failed to infer returned types}}
  %0 = graph.where %c, %x, %x : (tensor<4xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @cast_changes_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.cast' op requires the same shape for all operands and results}}
  %0 = graph.cast %x : tensor<2x3xf32> to tensor<6xi64>
  return
}

//===----------------------------------------------------------------------===//
// Contractions and normalizations
//===----------------------------------------------------------------------===//

// -----

func.func @matmul_contraction(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) {
  // expected-error @+2 {{MatMul: contraction sizes differ ([2,3] x [4,5])}}
  // expected-error @+1 {{'graph.matmul' op failed to infer returned types}}
  %0 = graph.matmul %x, %y : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_vector_contraction(%x: tensor<3xf32>, %y: tensor<4xf32>) {
  // expected-error @+2 {{MatMul: contraction sizes differ ([3] x [4])}}
  // expected-error @+1 {{'graph.matmul' op failed to infer returned types}}
  %0 = graph.matmul %x, %y : (tensor<3xf32>, tensor<4xf32>) -> tensor<f32>
  return
}

// -----

func.func @matmul_scalar(%x: tensor<f32>, %y: tensor<4xf32>) {
  // expected-error @+2 {{MatMul: operands must have rank >= 1}}
  // expected-error @+1 {{'graph.matmul' op failed to infer returned types}}
  %0 = graph.matmul %x, %y : (tensor<f32>, tensor<4xf32>) -> tensor<f32>
  return
}

// -----

func.func @matmul_element_types(%x: tensor<2x3xf32>, %y: tensor<3x2xf16>) {
  // expected-error @+2 {{MatMul: element types differ}}
  // expected-error @+1 {{'graph.matmul' op failed to infer returned types}}
  %0 = graph.matmul %x, %y : (tensor<2x3xf32>, tensor<3x2xf16>) -> tensor<2x2xf32>
  return
}

// -----

func.func @matmul_batch(%x: tensor<2x2x3xf32>, %y: tensor<3x3x4xf32>) {
  // expected-error @+2 {{MatMul: batch dimensions do not broadcast}}
  // expected-error @+1 {{'graph.matmul' op failed to infer returned types}}
  %0 = graph.matmul %x, %y : (tensor<2x2x3xf32>, tensor<3x3x4xf32>) -> tensor<2x2x4xf32>
  return
}

// -----

func.func @matmul_wrong_result(%x: tensor<2x3xf32>, %y: tensor<3x5xf32>) {
  // expected-error @+2 {{'graph.matmul' op inferred type(s) 'tensor<2x5xf32>' are incompatible with return type(s) of operation 'tensor<5x2xf32>'}}
  // expected-error @+1 {{'graph.matmul' op failed to infer returned types}}
  %0 = graph.matmul %x, %y : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<5x2xf32>
  return
}

// -----

func.func @gemm_not_matrix(%x: tensor<2x3x4xf32>, %y: tensor<4x5xf32>) {
  // expected-error @+2 {{Gemm: operands must be matrices}}
  // expected-error @+1 {{'graph.gemm' op failed to infer returned types}}
  %0 = graph.gemm %x, %y : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @gemm_vector(%x: tensor<2x3xf32>, %y: tensor<3xf32>) {
  // expected-error @+2 {{Gemm: operands must be matrices}}
  // expected-error @+1 {{'graph.gemm' op failed to infer returned types}}
  %0 = graph.gemm %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2xf32>
  return
}

// -----

// transB makes the contraction 3 vs 2.
func.func @gemm_contraction(%x: tensor<2x3xf32>, %y: tensor<3x2xf32>) {
  // expected-error @+2 {{Gemm: contraction sizes differ (3 vs 2)}}
  // expected-error @+1 {{'graph.gemm' op failed to infer returned types}}
  %0 = graph.gemm %x, %y {transB = true} : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @gemm_trans_a_contraction(%x: tensor<2x3xf32>, %y: tensor<3x2xf32>) {
  // expected-error @+2 {{Gemm: contraction sizes differ (2 vs 3)}}
  // expected-error @+1 {{'graph.gemm' op failed to infer returned types}}
  %0 = graph.gemm %x, %y {transA = true} : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @gemm_bias(%x: tensor<2x3xf32>, %y: tensor<3x4xf32>, %c: tensor<3xf32>) {
  // expected-error @+2 {{Gemm: C does not broadcast to [2,4]}}
  // expected-error @+1 {{'graph.gemm' op failed to infer returned types}}
  %0 = graph.gemm %x, %y, %c : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

// A bias of higher rank would grow the result.
func.func @gemm_bias_rank(%x: tensor<2x3xf32>, %y: tensor<3x4xf32>, %c: tensor<1x2x4xf32>) {
  // expected-error @+2 {{Gemm: C does not broadcast to [2,4]}}
  // expected-error @+1 {{'graph.gemm' op failed to infer returned types}}
  %0 = graph.gemm %x, %y, %c : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<1x2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.softmax' op axis 2 out of range for rank 2}}
  %0 = graph.softmax %x {axis = 2 : i64} : tensor<2x3xf32>
  return
}

// -----

// Axes are normalized by the importer: negative ones are invalid here.
func.func @softmax_negative_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.softmax' op axis -1 out of range for rank 2}}
  %0 = graph.softmax %x {axis = -1 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @log_softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.log_softmax' op axis 5 out of range for rank 2}}
  %0 = graph.log_softmax %x {axis = 5 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @softmax_type_changes(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.softmax' op requires the same type for all operands and results}}
  %0 = "graph.softmax"(%x) {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf16>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{LayerNormalization: axis 2 out of range for rank 2}}
  // expected-error @+1 {{'graph.layer_norm' op failed to infer returned types}}
  %0:3 = graph.layer_norm %x, %s {axis = 2 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return
}

// -----

func.func @layer_norm_negative_axis(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{LayerNormalization: axis -1 out of range for rank 2}}
  // expected-error @+1 {{'graph.layer_norm' op failed to infer returned types}}
  %0:3 = graph.layer_norm %x, %s {axis = -1 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x3xf32>, %s: tensor<2xf32>) {
  // expected-error @+2 {{LayerNormalization: scale/bias shape [2] does not broadcast to the normalized shape [3]}}
  // expected-error @+1 {{'graph.layer_norm' op failed to infer returned types}}
  %0:3 = graph.layer_norm %x, %s {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2xf32>) -> (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<2x3xf32>, %s: tensor<3xf32>, %b: tensor<2x3xf32>) {
  // expected-error @+2 {{LayerNormalization: scale/bias shape [2,3] does not broadcast to the normalized shape [3]}}
  // expected-error @+1 {{'graph.layer_norm' op failed to infer returned types}}
  %0:3 = graph.layer_norm %x, %s, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return
}

// -----

func.func @layer_norm_statistics_shape(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{'graph.layer_norm' op inferred type(s) 'tensor<2x3xf32>', 'tensor<2x1xf32>', 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>', 'tensor<2xf32>', 'tensor<2xf32>'}}
  // expected-error @+1 {{'graph.layer_norm' op failed to infer returned types}}
  %0:3 = graph.layer_norm %x, %s {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @reduce_unsorted(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{reduce: axes must be sorted, unique and in [0, rank)}}
  // expected-error @+1 {{'graph.reduce_sum' op failed to infer returned types}}
  %0 = graph.reduce_sum %x {axes = array<i64: 2, 0>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return
}

// -----

func.func @reduce_duplicate(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{reduce: axes must be sorted, unique and in [0, rank)}}
  // expected-error @+1 {{'graph.reduce_mean' op failed to infer returned types}}
  %0 = graph.reduce_mean %x {axes = array<i64: 1, 1>} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  return
}

// -----

func.func @reduce_out_of_range(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{reduce: axes must be sorted, unique and in [0, rank)}}
  // expected-error @+1 {{'graph.reduce_max' op failed to infer returned types}}
  %0 = graph.reduce_max %x {axes = array<i64: 3>} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_negative(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{reduce: axes must be sorted, unique and in [0, rank)}}
  // expected-error @+1 {{'graph.reduce_min' op failed to infer returned types}}
  %0 = graph.reduce_min %x {axes = array<i64: -1>} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  return
}

// -----

func.func @reduce_keepdims_result(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{'graph.reduce_sum' op inferred type(s) 'tensor<2x4xf32>' are incompatible with return type(s) of operation 'tensor<2x1x4xf32>'}}
  // expected-error @+1 {{'graph.reduce_sum' op failed to infer returned types}}
  %0 = graph.reduce_sum %x {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  return
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// -----

func.func @reshape_element_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.reshape' op element counts differ: [2,3] vs [4]}}
  %0 = graph.reshape %x : tensor<2x3xf32> to tensor<4xf32>
  return
}

// -----

func.func @reshape_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.reshape' op changes the element type}}
  %0 = graph.reshape %x : tensor<2x3xf32> to tensor<6xi32>
  return
}

// -----

func.func @reshape_dynamic(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.reshape' op element counts differ: [2,3] vs}}
  %0 = graph.reshape %x : tensor<2x3xf32> to tensor<?xf32>
  return
}

// -----

func.func @expand_not_broadcastable(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.expand' op cannot broadcast [2,3] to [4,3]}}
  %0 = graph.expand %x : tensor<2x3xf32> to tensor<4x3xf32>
  return
}

// -----

// Expand never lowers the rank or shrinks a dimension.
func.func @expand_shrinks(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.expand' op cannot broadcast [2,3] to [3]}}
  %0 = graph.expand %x : tensor<2x3xf32> to tensor<3xf32>
  return
}

// -----

func.func @expand_element_type(%x: tensor<1x3xf32>) {
  // expected-error @+1 {{'graph.expand' op changes the element type}}
  %0 = graph.expand %x : tensor<1x3xf32> to tensor<2x3xf64>
  return
}

// -----

func.func @transpose_not_permutation(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{Transpose: perm is not a permutation}}
  // expected-error @+1 {{'graph.transpose' op failed to infer returned types}}
  %0 = graph.transpose %x {perm = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @transpose_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{Transpose: perm is not a permutation}}
  // expected-error @+1 {{'graph.transpose' op failed to infer returned types}}
  %0 = graph.transpose %x {perm = array<i64: 1, 2>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_perm_length(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{Transpose: perm has 3 entries for rank 2}}
  // expected-error @+1 {{'graph.transpose' op failed to infer returned types}}
  %0 = graph.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_wrong_result(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'graph.transpose' op inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{'graph.transpose' op failed to infer returned types}}
  %0 = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_out_of_bounds(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op dimension 1: slice out of bounds}}
  %0 = graph.slice %x {starts = array<i64: 0, 1>, sizes = array<i64: 2, 3>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_start_out_of_bounds(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op dimension 0: slice out of bounds}}
  %0 = graph.slice %x {starts = array<i64: 2, 0>, sizes = array<i64: 1, 3>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<1x3xf32>
  return
}

// -----

func.func @slice_negative_start(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op dimension 1: slice out of bounds}}
  %0 = graph.slice %x {starts = array<i64: 0, -1>, sizes = array<i64: 2, 1>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return
}

// -----

// Walking backwards from 1 by 1 reaches -1 on the third element.
func.func @slice_negative_step_out_of_bounds(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op dimension 1: slice out of bounds}}
  %0 = graph.slice %x {starts = array<i64: 0, 1>, sizes = array<i64: 2, 3>, steps = array<i64: 1, -1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_stride_out_of_bounds(%x: tensor<2x7xf32>) {
  // expected-error @+1 {{'graph.slice' op dimension 1: slice out of bounds}}
  %0 = graph.slice %x {starts = array<i64: 0, 1>, sizes = array<i64: 2, 3>, steps = array<i64: 1, 3>} : (tensor<2x7xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_zero_step(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op dimension 1: zero step or negative size}}
  %0 = graph.slice %x {starts = array<i64: 0, 0>, sizes = array<i64: 2, 1>, steps = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @slice_negative_size(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op dimension 0: zero step or negative size}}
  %0 = "graph.slice"(%x) {starts = array<i64: 0, 0>, sizes = array<i64: -1, 1>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<?x1xf32>
  return
}

// -----

func.func @slice_starts_length(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op needs one start, size and step per dimension}}
  %0 = graph.slice %x {starts = array<i64: 0>, sizes = array<i64: 1, 1>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<1x1xf32>
  return
}

// -----

func.func @slice_steps_length(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op needs one start, size and step per dimension}}
  %0 = graph.slice %x {starts = array<i64: 0, 0>, sizes = array<i64: 1, 1>, steps = array<i64: 1, 1, 1>} : (tensor<2x3xf32>) -> tensor<1x1xf32>
  return
}

// -----

func.func @slice_wrong_result(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'graph.slice' op inferred type(s) 'tensor<1x1xf32>' are incompatible with return type(s) of operation 'tensor<1x2xf32>'}}
  // expected-error @+1 {{'graph.slice' op failed to infer returned types}}
  %0 = graph.slice %x {starts = array<i64: 0, 0>, sizes = array<i64: 1, 1>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<1x2xf32>
  return
}

// -----

func.func @concat_shape_mismatch(%x: tensor<2x3xf32>, %y: tensor<3x3xf32>) {
  // expected-error @+2 {{Concat: input shapes [2,3] and [3,3] differ off axis}}
  // expected-error @+1 {{'graph.concat' op failed to infer returned types}}
  %0 = graph.concat %x, %y {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_rank_mismatch(%x: tensor<2x3xf32>, %y: tensor<3xf32>) {
  // expected-error @+2 {{Concat: inputs differ in rank or type}}
  // expected-error @+1 {{'graph.concat' op failed to infer returned types}}
  %0 = graph.concat %x, %y {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_type_mismatch(%x: tensor<2x3xf32>, %y: tensor<2x3xi64>) {
  // expected-error @+2 {{Concat: inputs differ in rank or type}}
  // expected-error @+1 {{'graph.concat' op failed to infer returned types}}
  %0 = graph.concat %x, %y {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{Concat: axis 2 out of range}}
  // expected-error @+1 {{'graph.concat' op failed to infer returned types}}
  %0 = graph.concat %x, %x {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_negative_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{Concat: axis -1 out of range}}
  // expected-error @+1 {{'graph.concat' op failed to infer returned types}}
  %0 = graph.concat %x, %x {axis = -1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_no_inputs() {
  // expected-error @+2 {{Concat: no inputs}}
  // expected-error @+1 {{'graph.concat' op failed to infer returned types}}
  %0 = graph.concat {axis = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

func.func @split_sizes_sum(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{Split: sizes add up to 3 but the axis has 4}}
  // expected-error @+1 {{'graph.split' op failed to infer returned types}}
  %0:2 = graph.split %x {axis = 0 : i64, sizes = array<i64: 1, 2>} : (tensor<4x3xf32>) -> (tensor<1x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @split_negative_size(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{Split: negative size}}
  // expected-error @+1 {{'graph.split' op failed to infer returned types}}
  %0:2 = "graph.split"(%x) {axis = 0 : i64, sizes = array<i64: 5, -1>} : (tensor<4x3xf32>) -> (tensor<5x3xf32>, tensor<?x3xf32>)
  return
}

// -----

func.func @split_axis(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{Split: axis 2 out of range}}
  // expected-error @+1 {{'graph.split' op failed to infer returned types}}
  %0:2 = graph.split %x {axis = 2 : i64, sizes = array<i64: 2, 2>} : (tensor<4x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @split_result_count(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'graph.split' op inferred type(s) 'tensor<1x3xf32>', 'tensor<1x3xf32>' are incompatible with return type(s) of operation 'tensor<1x3xf32>'}}
  // expected-error @+1 {{'graph.split' op failed to infer returned types}}
  %0 = graph.split %x {axis = 0 : i64, sizes = array<i64: 1, 1>} : (tensor<2x3xf32>) -> (tensor<1x3xf32>)
  return
}

// -----

func.func @gather_axis(%x: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{Gather: axis 2 out of range}}
  // expected-error @+1 {{'graph.gather' op failed to infer returned types}}
  %0 = graph.gather %x[%i] {axis = 2 : i64} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @gather_negative_axis(%x: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{Gather: axis -1 out of range}}
  // expected-error @+1 {{'graph.gather' op failed to infer returned types}}
  %0 = graph.gather %x[%i] {axis = -1 : i64} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x4xf32>
  return
}

// -----

func.func @gather_float_indices(%x: tensor<2x3xf32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{'graph.gather' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = graph.gather %x[%i] {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @gather_wrong_result(%x: tensor<2x3xf32>, %i: tensor<4x5xi32>) {
  // expected-error @+2 {{'graph.gather' op inferred type(s) 'tensor<2x4x5xf32>' are incompatible with return type(s) of operation 'tensor<4x5x3xf32>'}}
  // expected-error @+1 {{'graph.gather' op failed to infer returned types}}
  %0 = graph.gather %x[%i] {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4x5xi32>) -> tensor<4x5x3xf32>
  return
}

// -----

func.func @gather_elements_rank(%x: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{GatherElements: axis out of range or ranks differ}}
  // expected-error @+1 {{'graph.gather_elements' op failed to infer returned types}}
  %0 = graph.gather_elements %x[%i] {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<4xf32>
  return
}

// -----

func.func @gather_elements_axis(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>) {
  // expected-error @+2 {{GatherElements: axis out of range or ranks differ}}
  // expected-error @+1 {{'graph.gather_elements' op failed to infer returned types}}
  %0 = graph.gather_elements %x[%i] {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
  return
}

// -----

func.func @trilu_rank(%x: tensor<3xf32>) {
  // expected-error @+1 {{'graph.trilu' op needs rank >= 2}}
  %0 = graph.trilu %x : tensor<3xf32>
  return
}

// -----

func.func @trilu_k_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.trilu' op attribute 'k' failed to satisfy constraint: 64-bit signless integer attribute}}
  %0 = graph.trilu %x {k = 0 : i32} : tensor<2x3xf32>
  return
}

// -----

func.func @cache_write_rows(%cache: tensor<6x2x4x8xf32>, %rows: tensor<1x3x3x8xf32>, %i: tensor<3xi64>, %t: tensor<2x3xi64>) {
  // expected-error @+2 {{cache_write: cache [6,2,4,8] and rows [1,3,3,8] do not fit [blocks, G, block_size, D] and [1, G, N, D] of one type}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = graph.cache_write %cache, %rows, %i, %i, %t : (tensor<6x2x4x8xf32>, tensor<1x3x3x8xf32>, tensor<3xi64>, tensor<3xi64>, tensor<2x3xi64>) -> tensor<6x2x4x8xf32>
  return
}

// -----

func.func @cache_write_read_again(%cache: tensor<6x2x4x8xf32>, %rows: tensor<1x2x3x8xf32>, %i: tensor<3xi64>, %t: tensor<2x3xi64>) -> tensor<6x2x4x8xf32> {
  // expected-error @+1 {{updates its cache in place, so nothing else may read the cache operand}}
  %c = graph.cache_write %cache, %rows, %i, %i, %t : (tensor<6x2x4x8xf32>, tensor<1x2x3x8xf32>, tensor<3xi64>, tensor<3xi64>, tensor<2x3xi64>) -> tensor<6x2x4x8xf32>
  %s = graph.add %c, %cache : (tensor<6x2x4x8xf32>, tensor<6x2x4x8xf32>) -> tensor<6x2x4x8xf32>
  return %s : tensor<6x2x4x8xf32>
}

// -----

func.func @paged_attention_indices(%q: tensor<1x4x3x8xf32>, %c: tensor<6x2x4x8xf32>, %i: tensor<2xi64>, %t: tensor<2x3xi64>) {
  // expected-error @+2 {{paged_attention: slots and positions must be [3] and block_tables [S, M], all i64}}
  // expected-error @+1 {{failed to infer returned types}}
  %o = graph.paged_attention %q, %c, %c, %i, %i, %t {scale = 0.5 : f32} : (tensor<1x4x3x8xf32>, tensor<6x2x4x8xf32>, tensor<6x2x4x8xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2x3xi64>) -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @paged_attention_heads(%q: tensor<1x3x3x8xf32>, %c: tensor<6x2x4x8xf32>, %i: tensor<3xi64>, %t: tensor<2x3xi64>) {
  // expected-error @+2 {{paged_attention: query [1,3,3,8], key cache [6,2,4,8] and value cache [6,2,4,8] do not fit [1, H, N, D], [blocks, G, block_size, D] and [blocks, G, block_size, E] of one type, H a multiple of G}}
  // expected-error @+1 {{failed to infer returned types}}
  %o = graph.paged_attention %q, %c, %c, %i, %i, %t {scale = 0.5 : f32} : (tensor<1x3x3x8xf32>, tensor<6x2x4x8xf32>, tensor<6x2x4x8xf32>, tensor<3xi64>, tensor<3xi64>, tensor<2x3xi64>) -> tensor<1x3x3x8xf32>
  return
}

// -----

// Sequence-first operands are [B, T, H, D]: these keys (read as [B, T, H,
// D]) have 4 heads, which do not divide the queries' 2.
func.func @attention_sequence_first_heads(%q: tensor<1x4x2x8xf32>, %k: tensor<1x2x4x8xf32>) {
  // expected-error @+2 {{attention: query [1,4,2,8], key [1,2,4,8] and value [1,2,4,8] do not fit [B, Tq, H, D], [B, Tk, G, D], [B, Tk, G, E] with H a multiple of G}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %lse = graph.attention %q, %k, %k {scale = 0.5 : f32, sequence_first} : (tensor<1x4x2x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// Attention sinks are one logit per query head (4 here), of the query's
// type.
func.func @attention_sinks_heads(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %s: tensor<2xf32>) {
  // expected-error @+2 {{attention: sinks [2] are not one per query head, of the query's element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %lse = graph.attention %q, %k, %k sinks %s {causal, scale = 0.5 : f32} : (tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<2xf32>) -> (tensor<1x4x3x8xf32>, tensor<1x4x3xf32>)
  return
}

// -----

func.func @paged_attention_sinks_type(%q: tensor<1x4x3x8xf32>, %c: tensor<6x2x4x8xf32>, %i: tensor<3xi64>, %t: tensor<2x3xi64>, %s: tensor<4xf16>) {
  // expected-error @+2 {{paged_attention: sinks [4] are not one per query head, of the query's element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %o = graph.paged_attention %q, %c, %c, %i, %i, %t sinks %s {scale = 0.5 : f32} : (tensor<1x4x3x8xf32>, tensor<6x2x4x8xf32>, tensor<6x2x4x8xf32>, tensor<3xi64>, tensor<3xi64>, tensor<2x3xi64>, tensor<4xf16>) -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @cumsum_axis_past_rank(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{axis 2 out of range for rank 2}}
  %0 = graph.cumsum %x {axis = 2 : i64} : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @cumsum_negative_axis(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{axis -1 out of range for rank 2}}
  %0 = graph.cumsum %x {axis = -1 : i64} : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
