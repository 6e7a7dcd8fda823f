// RUN: pcc-opt %s --canonicalize --split-input-file | FileCheck %s

// Constant folding of every op family on small anonymous constants, with
// broadcasting, and the identities that fold on any operand. Named constants
// (model parameters) are never folded through: see the end of the file.

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

// [2,1] against [3] broadcasts to [2,3].
// CHECK-LABEL: func.func @arith_f32
// CHECK-DAG: %[[ADD:.*]] = graph.constant dense<{{\[\[}}1.500000e+00, 3.000000e+00, 5.000000e+00], [-1.500000e+00, 0.000000e+00, 2.000000e+00]]> : tensor<2x3xf32>
// CHECK-DAG: %[[SUB:.*]] = graph.constant dense<{{\[\[}}5.000000e-01, -1.000000e+00, -3.000000e+00], [-2.500000e+00, -4.000000e+00, -6.000000e+00]]> : tensor<2x3xf32>
// CHECK-DAG: %[[MUL:.*]] = graph.constant dense<{{\[\[}}5.000000e-01, 2.000000e+00, 4.000000e+00], [-1.000000e+00, -4.000000e+00, -8.000000e+00]]> : tensor<2x3xf32>
// CHECK-DAG: %[[DIV:.*]] = graph.constant dense<{{\[\[}}2.000000e+00, 5.000000e-01, 2.500000e-01], [-4.000000e+00, -1.000000e+00, -5.000000e-01]]> : tensor<2x3xf32>
// CHECK-DAG: %[[POW:.*]] = graph.constant dense<{{\[\[}}1.000000e+00, 1.000000e+00, 1.000000e+00], [0xFFC00000, 4.000000e+00, 1.600000e+01]]> : tensor<2x3xf32>
// CHECK-DAG: %[[MAX:.*]] = graph.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00, 4.000000e+00], [5.000000e-01, 2.000000e+00, 4.000000e+00]]> : tensor<2x3xf32>
// CHECK-DAG: %[[MIN:.*]] = graph.constant dense<{{\[\[}}5.000000e-01, 1.000000e+00, 1.000000e+00], [-2.000000e+00, -2.000000e+00, -2.000000e+00]]> : tensor<2x3xf32>
// CHECK-NOT: graph.{{add|sub|mul|div|pow|max|min}}
// CHECK: return %[[ADD]], %[[SUB]], %[[MUL]], %[[DIV]], %[[POW]], %[[MAX]], %[[MIN]]
func.func @arith_f32() -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %a = graph.constant dense<[[1.0], [-2.0]]> : tensor<2x1xf32>
  %b = graph.constant dense<[0.5, 2.0, 4.0]> : tensor<3xf32>
  %0 = graph.add %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = graph.sub %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = graph.mul %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %3 = graph.div %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %4 = graph.pow %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %5 = graph.max %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %6 = graph.min %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Integer division truncates toward zero; a scalar broadcasts.
// CHECK-LABEL: func.func @arith_i64
// CHECK-DAG: %[[DIV:.*]] = graph.constant dense<[3, -3, 4, 1]> : tensor<4xi64>
// CHECK-DAG: %[[POW:.*]] = graph.constant dense<[49, 49, 81, 9]> : tensor<4xi64>
// CHECK-DAG: %[[SUB:.*]] = graph.constant dense<[-5, 9, -7, -1]> : tensor<4xi64>
// CHECK-DAG: %[[MAX:.*]] = graph.constant dense<[7, 2, 9, 3]> : tensor<4xi64>
// CHECK-DAG: %[[ADD:.*]] = graph.constant dense<[9, -5, 11, 5]> : tensor<4xi64>
// CHECK-NOT: graph.{{div|pow|sub|max|add}}
// CHECK: return %[[DIV]], %[[POW]], %[[SUB]], %[[MAX]], %[[ADD]]
func.func @arith_i64() -> (tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>) {
  %a = graph.constant dense<[7, -7, 9, 3]> : tensor<4xi64>
  %b = graph.constant dense<2> : tensor<i64>
  %0 = graph.div %a, %b : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>
  %1 = graph.pow %a, %b : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>
  %2 = graph.sub %b, %a : (tensor<i64>, tensor<4xi64>) -> tensor<4xi64>
  %3 = graph.max %a, %b : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>
  %4 = graph.add %b, %a : (tensor<i64>, tensor<4xi64>) -> tensor<4xi64>
  return %0, %1, %2, %3, %4 : tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>
}

// -----

// Integer division by zero is left to run time.
// CHECK-LABEL: func.func @int_div_by_zero
// CHECK: %[[R:.*]] = graph.div
// CHECK: return %[[R]]
func.func @int_div_by_zero() -> tensor<4xi64> {
  %a = graph.constant dense<[7, -7, 9, 3]> : tensor<4xi64>
  %z = graph.constant dense<[1, 0, 1, 1]> : tensor<4xi64>
  %0 = graph.div %a, %z : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// Narrow integers wrap around.
// CHECK-LABEL: func.func @arith_i8_wraps
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<[-128, 0]> : tensor<2xi8>
// CHECK-NEXT: return %[[C]]
func.func @arith_i8_wraps() -> tensor<2xi8> {
  %a = graph.constant dense<[127, -1]> : tensor<2xi8>
  %b = graph.constant dense<1> : tensor<i8>
  %0 = graph.add %a, %b : (tensor<2xi8>, tensor<i8>) -> tensor<2xi8>
  return %0 : tensor<2xi8>
}

// -----

// CHECK-LABEL: func.func @unary_f32
// CHECK-DAG: %[[NEG:.*]] = graph.constant dense<[1.500000e+00, -0.000000e+00, -2.250000e+00, -4.000000e+00]> : tensor<4xf32>
// CHECK-DAG: %[[ABS:.*]] = graph.constant dense<[1.500000e+00, 0.000000e+00, 2.250000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-DAG: %[[RELU:.*]] = graph.constant dense<[0.000000e+00, 0.000000e+00, 2.250000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-DAG: %[[FLOOR:.*]] = graph.constant dense<[-2.000000e+00, 0.000000e+00, 2.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-DAG: %[[CEIL:.*]] = graph.constant dense<[-1.000000e+00, 0.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-DAG: %[[SIG:.*]] = graph.constant dense<[0.182425529, 5.000000e-01, 0.904650509, 0.982013761]> : tensor<4xf32>
// CHECK-DAG: %[[EXP:.*]] = graph.constant dense<[0.223130167, 1.000000e+00, 9.48773574, 54.5981483]> : tensor<4xf32>
// CHECK-DAG: %[[REC:.*]] = graph.constant dense<[-0.666666686, 0x7F800000, 0.444444448, 2.500000e-01]> : tensor<4xf32>
// CHECK-DAG: %[[SQRT:.*]] = graph.constant dense<[0xFFC00000, 0.000000e+00, 1.500000e+00, 2.000000e+00]> : tensor<4xf32>
// CHECK-DAG: %[[TANH:.*]] = graph.constant dense<[-0.905148268, 0.000000e+00, 0.978026092, 0.999329328]> : tensor<4xf32>
// CHECK-NOT: graph.{{neg|abs|relu|floor|ceil|sigmoid|exp|reciprocal|sqrt|tanh}}
// CHECK: return %[[NEG]], %[[ABS]], %[[RELU]], %[[FLOOR]], %[[CEIL]], %[[SIG]], %[[EXP]], %[[REC]], %[[SQRT]], %[[TANH]]
func.func @unary_f32() -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a = graph.constant dense<[-1.5, 0.0, 2.25, 4.0]> : tensor<4xf32>
  %0 = graph.neg %a : tensor<4xf32>
  %1 = graph.abs %a : tensor<4xf32>
  %2 = graph.relu %a : tensor<4xf32>
  %3 = graph.floor %a : tensor<4xf32>
  %4 = graph.ceil %a : tensor<4xf32>
  %5 = graph.sigmoid %a : tensor<4xf32>
  %6 = graph.exp %a : tensor<4xf32>
  %7 = graph.reciprocal %a : tensor<4xf32>
  %8 = graph.sqrt %a : tensor<4xf32>
  %9 = graph.tanh %a : tensor<4xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @unary_special
// CHECK-DAG: %[[LOG:.*]] = graph.constant dense<[0xFF800000, 0.000000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[ERF:.*]] = graph.constant dense<[0.000000e+00, 0.842700779]> : tensor<2xf32>
// CHECK-DAG: %[[SIN:.*]] = graph.constant dense<[0.000000e+00, 0.841470957]> : tensor<2xf32>
// CHECK-DAG: %[[COS:.*]] = graph.constant dense<[1.000000e+00, 0.540302277]> : tensor<2xf32>
// CHECK: return %[[LOG]], %[[ERF]], %[[SIN]], %[[COS]]
func.func @unary_special() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %a = graph.constant dense<[0.0, 1.0]> : tensor<2xf32>
  %0 = graph.log %a : tensor<2xf32>
  %1 = graph.erf %a : tensor<2xf32>
  %2 = graph.sin %a : tensor<2xf32>
  %3 = graph.cos %a : tensor<2xf32>
  return %0, %1, %2, %3 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @unary_i64
// CHECK-DAG: %[[ABS:.*]] = graph.constant dense<[3, 0, 5, 1]> : tensor<4xi64>
// CHECK-DAG: %[[NEG:.*]] = graph.constant dense<[3, 0, -5, 1]> : tensor<4xi64>
// CHECK-DAG: %[[RELU:.*]] = graph.constant dense<[0, 0, 5, 0]> : tensor<4xi64>
// CHECK: return %[[ABS]], %[[NEG]], %[[RELU]]
func.func @unary_i64() -> (tensor<4xi64>, tensor<4xi64>, tensor<4xi64>) {
  %i = graph.constant dense<[-3, 0, 5, -1]> : tensor<4xi64>
  %0 = graph.abs %i : tensor<4xi64>
  %1 = graph.neg %i : tensor<4xi64>
  %2 = graph.relu %i : tensor<4xi64>
  return %0, %1, %2 : tensor<4xi64>, tensor<4xi64>, tensor<4xi64>
}

// -----

// CHECK-LABEL: func.func @logic
// CHECK-DAG: %[[AND:.*]] = graph.constant dense<[true, false, false, false]> : tensor<4xi1>
// CHECK-DAG: %[[OR:.*]] = graph.constant dense<[true, true, true, false]> : tensor<4xi1>
// CHECK-DAG: %[[XOR:.*]] = graph.constant dense<[false, true, true, false]> : tensor<4xi1>
// CHECK-DAG: %[[NOT:.*]] = graph.constant dense<[false, false, true, true]> : tensor<4xi1>
// CHECK-NOT: graph.{{and|or|xor|not}}
// CHECK: return %[[AND]], %[[OR]], %[[XOR]], %[[NOT]]
func.func @logic() -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %a = graph.constant dense<[true, true, false, false]> : tensor<4xi1>
  %b = graph.constant dense<[true, false, true, false]> : tensor<4xi1>
  %0 = graph.and %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %1 = graph.or %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %2 = graph.xor %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %3 = graph.not %a : tensor<4xi1>
  return %0, %1, %2, %3 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

//===----------------------------------------------------------------------===//
// Comparisons and selection
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @compare_f32
// CHECK-DAG: %[[EQ:.*]] = graph.constant dense<{{\[\[}}true, false, false], [false, false, false]]> : tensor<2x3xi1>
// CHECK-DAG: %[[LT:.*]] = graph.constant dense<{{\[\[}}false, true, true], [false, false, true]]> : tensor<2x3xi1>
// CHECK-DAG: %[[LE:.*]] = graph.constant dense<{{\[\[}}true, true, true], [false, false, true]]> : tensor<2x3xi1>
// CHECK-DAG: %[[GT:.*]] = graph.constant dense<{{\[\[}}false, false, false], [true, true, false]]> : tensor<2x3xi1>
// CHECK-DAG: %[[GE:.*]] = graph.constant dense<{{\[\[}}true, false, false], [true, true, false]]> : tensor<2x3xi1>
// CHECK-NOT: graph.{{equal|less|greater}}
// CHECK: return %[[EQ]], %[[LT]], %[[LE]], %[[GT]], %[[GE]]
func.func @compare_f32() -> (tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>) {
  %a = graph.constant dense<[[1.0], [2.5]]> : tensor<2x1xf32>
  %b = graph.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %0 = graph.equal %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %1 = graph.less %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %2 = graph.less_or_equal %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %3 = graph.greater %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %4 = graph.greater_or_equal %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  return %0, %1, %2, %3, %4 : tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>
}

// -----

// Fractional values compare as floats, not truncated to integers.
// CHECK-LABEL: func.func @compare_fraction
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<[false, true]> : tensor<2xi1>
// CHECK-NEXT: return %[[C]]
func.func @compare_fraction() -> tensor<2xi1> {
  %a = graph.constant dense<[0.25, 0.5]> : tensor<2xf32>
  %b = graph.constant dense<[0.75, 0.5]> : tensor<2xf32>
  %0 = graph.equal %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
  return %0 : tensor<2xi1>
}

// -----

// CHECK-LABEL: func.func @compare_i64
// CHECK-DAG: %[[LT:.*]] = graph.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-DAG: %[[GE:.*]] = graph.constant dense<[false, true, true]> : tensor<3xi1>
// CHECK: return %[[LT]], %[[GE]]
func.func @compare_i64() -> (tensor<3xi1>, tensor<3xi1>) {
  %i = graph.constant dense<[-1, 0, 1]> : tensor<3xi64>
  %z = graph.constant dense<0> : tensor<i64>
  %0 = graph.less %i, %z : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %1 = graph.greater_or_equal %i, %z : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  return %0, %1 : tensor<3xi1>, tensor<3xi1>
}

// -----

// All three operands broadcast against each other.
// CHECK-LABEL: func.func @where
// CHECK-DAG: %[[F:.*]] = graph.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00, 3.000000e+00], [-1.000000e+00, -1.000000e+00, -1.000000e+00]]> : tensor<2x3xf32>
// CHECK-DAG: %[[I:.*]] = graph.constant dense<[-10, 20, -30]> : tensor<3xi64>
// CHECK-NOT: graph.where
// CHECK: return %[[F]], %[[I]]
func.func @where() -> (tensor<2x3xf32>, tensor<3xi64>) {
  %c = graph.constant dense<[[true], [false]]> : tensor<2x1xi1>
  %x = graph.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %y = graph.constant dense<-1.0> : tensor<f32>
  %0 = graph.where %c, %x, %y : (tensor<2x1xi1>, tensor<3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %d = graph.constant dense<[false, true, false]> : tensor<3xi1>
  %i = graph.constant dense<[10, 20, 30]> : tensor<3xi64>
  %j = graph.constant dense<[-10, -20, -30]> : tensor<3xi64>
  %1 = graph.where %d, %i, %j : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %0, %1 : tensor<2x3xf32>, tensor<3xi64>
}

// -----

// Where does not fold while the condition is unknown.
// CHECK-LABEL: func.func @where_unknown_condition
// CHECK: graph.where %arg0
func.func @where_unknown_condition(%c: tensor<3xi1>) -> tensor<3xi64> {
  %i = graph.constant dense<[10, 20, 30]> : tensor<3xi64>
  %j = graph.constant dense<[-10, -20, -30]> : tensor<3xi64>
  %0 = graph.where %c, %i, %j : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

// -----

// Float to integer truncates toward zero; anything non-zero is true; integers
// wrap to the narrower type.
// CHECK-LABEL: func.func @cast
// CHECK-DAG: %[[F2I:.*]] = graph.constant dense<[-1, 0, 2, 0]> : tensor<4xi64>
// CHECK-DAG: %[[F2B:.*]] = graph.constant dense<[true, false, true, true]> : tensor<4xi1>
// CHECK-DAG: %[[B2F:.*]] = graph.constant dense<[1.000000e+00, 0.000000e+00, 1.000000e+00]> : tensor<3xf32>
// CHECK-DAG: %[[I2F:.*]] = graph.constant dense<[-2.000000e+00, 0.000000e+00, 7.000000e+00]> : tensor<3xf32>
// CHECK-DAG: %[[I2I:.*]] = graph.constant dense<[1, -1, -2147483648, 5]> : tensor<4xi32>
// CHECK-DAG: %[[I2U:.*]] = graph.constant dense<[255, 1]> : tensor<2xui8>
// CHECK-NOT: graph.cast
// CHECK: return %[[F2I]], %[[F2B]], %[[B2F]], %[[I2F]], %[[I2I]], %[[I2U]]
func.func @cast() -> (tensor<4xi64>, tensor<4xi1>, tensor<3xf32>, tensor<3xf32>, tensor<4xi32>, tensor<2xui8>) {
  %a = graph.constant dense<[-1.5, 0.0, 2.75, 0.25]> : tensor<4xf32>
  %0 = graph.cast %a : tensor<4xf32> to tensor<4xi64>
  %1 = graph.cast %a : tensor<4xf32> to tensor<4xi1>
  %b = graph.constant dense<[true, false, true]> : tensor<3xi1>
  %2 = graph.cast %b : tensor<3xi1> to tensor<3xf32>
  %i = graph.constant dense<[-2, 0, 7]> : tensor<3xi64>
  %3 = graph.cast %i : tensor<3xi64> to tensor<3xf32>
  %l = graph.constant dense<[4294967297, -1, 2147483648, 5]> : tensor<4xi64>
  %4 = graph.cast %l : tensor<4xi64> to tensor<4xi32>
  %s = graph.constant dense<[-1, 1]> : tensor<2xi8>
  %5 = graph.cast %s : tensor<2xi8> to tensor<2xui8>
  return %0, %1, %2, %3, %4, %5 : tensor<4xi64>, tensor<4xi1>, tensor<3xf32>, tensor<3xf32>, tensor<4xi32>, tensor<2xui8>
}

// -----

// A cast to the operand's own type is the operand.
// CHECK-LABEL: func.func @cast_identity
// CHECK-NEXT: return %arg0
func.func @cast_identity(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = graph.cast %x : tensor<2xf32> to tensor<2xf32>
  return %0 : tensor<2xf32>
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @reshape
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<{{\[\[}}1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
// CHECK-NEXT: return %[[C]]
func.func @reshape() -> tensor<3x2xi64> {
  %a = graph.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = graph.reshape %a : tensor<2x3xi64> to tensor<3x2xi64>
  return %0 : tensor<3x2xi64>
}

// -----

// A reshape of a reshape reads the original operand.
// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-NEXT: %[[R:.*]] = graph.reshape %arg0 : tensor<2x3xf32> to tensor<3x2xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_of_reshape(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = graph.reshape %x : tensor<2x3xf32> to tensor<6xf32>
  %1 = graph.reshape %0 : tensor<6xf32> to tensor<3x2xf32>
  return %1 : tensor<3x2xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-NEXT: return %arg0
func.func @reshape_round_trip(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.reshape %x : tensor<2x3xf32> to tensor<6xf32>
  %1 = graph.reshape %0 : tensor<6xf32> to tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @transpose
// CHECK-DAG: %[[T2:.*]] = graph.constant dense<{{\[\[}}1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK-DAG: %[[T3:.*]] = graph.constant dense<{{\[\[\[}}1, 4], [7, 10]], {{\[\[}}2, 5], [8, 11]], {{\[\[}}3, 6], [9, 12]]]> : tensor<3x2x2xi64>
// CHECK-NOT: graph.transpose
// CHECK: return %[[T2]], %[[T3]]
func.func @transpose() -> (tensor<3x2xi64>, tensor<3x2x2xi64>) {
  %a = graph.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = graph.transpose %a {perm = array<i64: 1, 0>} : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %b = graph.constant dense<[[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]> : tensor<2x2x3xi64>
  %1 = graph.transpose %b {perm = array<i64: 2, 0, 1>} : (tensor<2x2x3xi64>) -> tensor<3x2x2xi64>
  return %0, %1 : tensor<3x2xi64>, tensor<3x2x2xi64>
}

// -----

// A splat stays a splat whatever the movement.
// CHECK-LABEL: func.func @transpose_splat
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<7> : tensor<3x2xi32>
// CHECK-NEXT: return %[[C]]
func.func @transpose_splat() -> tensor<3x2xi32> {
  %a = graph.constant dense<7> : tensor<2x3xi32>
  %0 = graph.transpose %a {perm = array<i64: 1, 0>} : (tensor<2x3xi32>) -> tensor<3x2xi32>
  return %0 : tensor<3x2xi32>
}

// -----

// CHECK-LABEL: func.func @slice
// CHECK-DAG: %[[REV:.*]] = graph.constant dense<{{\[\[}}6, 4], [3, 1]]> : tensor<2x2xi64>
// CHECK-DAG: %[[FLIP:.*]] = graph.constant dense<{{\[\[}}6, 5, 4], [3, 2, 1]]> : tensor<2x3xi64>
// CHECK-DAG: %[[STRIDE:.*]] = graph.constant dense<{{\[\[}}1, 3], [4, 6]]> : tensor<2x2xi64>
// CHECK-DAG: %[[ROW:.*]] = graph.constant dense<{{\[\[}}5, 6]]> : tensor<1x2xi64>
// CHECK-NOT: graph.slice
// CHECK: return %[[REV]], %[[FLIP]], %[[STRIDE]], %[[ROW]]
func.func @slice() -> (tensor<2x2xi64>, tensor<2x3xi64>, tensor<2x2xi64>, tensor<1x2xi64>) {
  %a = graph.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  // Negative steps: rows 1, 0 and columns 2, 0.
  %0 = graph.slice %a {starts = array<i64: 1, 2>, sizes = array<i64: 2, 2>, steps = array<i64: -1, -2>} : (tensor<2x3xi64>) -> tensor<2x2xi64>
  // Both dimensions reversed.
  %1 = graph.slice %a {starts = array<i64: 1, 2>, sizes = array<i64: 2, 3>, steps = array<i64: -1, -1>} : (tensor<2x3xi64>) -> tensor<2x3xi64>
  %2 = graph.slice %a {starts = array<i64: 0, 0>, sizes = array<i64: 2, 2>, steps = array<i64: 1, 2>} : (tensor<2x3xi64>) -> tensor<2x2xi64>
  %3 = graph.slice %a {starts = array<i64: 1, 1>, sizes = array<i64: 1, 2>, steps = array<i64: 1, 1>} : (tensor<2x3xi64>) -> tensor<1x2xi64>
  return %0, %1, %2, %3 : tensor<2x2xi64>, tensor<2x3xi64>, tensor<2x2xi64>, tensor<1x2xi64>
}

// -----

// A slice that keeps everything is its operand; a reversing one is not.
// CHECK-LABEL: func.func @slice_identity
// CHECK-NEXT: %[[R:.*]] = graph.slice %arg0 {sizes = array<i64: 2, 3>, starts = array<i64: 0, 2>, steps = array<i64: 1, -1>}
// CHECK-NEXT: return %arg0, %[[R]]
func.func @slice_identity(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = graph.slice %x {starts = array<i64: 0, 0>, sizes = array<i64: 2, 3>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = graph.slice %x {starts = array<i64: 0, 2>, sizes = array<i64: 2, 3>, steps = array<i64: 1, -1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @expand
// CHECK-DAG: %[[ROWS:.*]] = graph.constant dense<{{\[\[}}7, 8, 9], [7, 8, 9]]> : tensor<2x3xi64>
// CHECK-DAG: %[[COLS:.*]] = graph.constant dense<{{\[\[}}7, 7, 7], [8, 8, 8]]> : tensor<2x3xi64>
// CHECK-DAG: %[[BOTH:.*]] = graph.constant dense<{{\[\[\[}}1, 1], [2, 2]], {{\[\[}}1, 1], [2, 2]]]> : tensor<2x2x2xi64>
// CHECK-NOT: graph.expand
// CHECK: return %[[ROWS]], %[[COLS]], %[[BOTH]]
func.func @expand() -> (tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x2x2xi64>) {
  %r = graph.constant dense<[7, 8, 9]> : tensor<3xi64>
  %0 = graph.expand %r : tensor<3xi64> to tensor<2x3xi64>
  %c = graph.constant dense<[[7], [8]]> : tensor<2x1xi64>
  %1 = graph.expand %c : tensor<2x1xi64> to tensor<2x3xi64>
  %d = graph.constant dense<[[1], [2]]> : tensor<2x1xi64>
  %2 = graph.expand %d : tensor<2x1xi64> to tensor<2x2x2xi64>
  return %0, %1, %2 : tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x2x2xi64>
}

// -----

// CHECK-LABEL: func.func @concat
// CHECK-DAG: %[[ROWS:.*]] = graph.constant dense<{{\[\[}}1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6]]> : tensor<4x3xi64>
// CHECK-DAG: %[[COLS:.*]] = graph.constant dense<{{\[\[}}1, 2, 3, 10, 11], [4, 5, 6, 12, 13]]> : tensor<2x5xi64>
// CHECK-DAG: %[[SPLAT:.*]] = graph.constant dense<[0, 0, 1, 2, 3]> : tensor<5xi64>
// CHECK-NOT: graph.concat
// CHECK: return %[[ROWS]], %[[COLS]], %[[SPLAT]]
func.func @concat() -> (tensor<4x3xi64>, tensor<2x5xi64>, tensor<5xi64>) {
  %a = graph.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = graph.concat %a, %a {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<4x3xi64>
  %b = graph.constant dense<[[10, 11], [12, 13]]> : tensor<2x2xi64>
  %1 = graph.concat %a, %b {axis = 1 : i64} : (tensor<2x3xi64>, tensor<2x2xi64>) -> tensor<2x5xi64>
  %z = graph.constant dense<0> : tensor<2xi64>
  %r = graph.constant dense<[1, 2, 3]> : tensor<3xi64>
  %2 = graph.concat %z, %r {axis = 0 : i64} : (tensor<2xi64>, tensor<3xi64>) -> tensor<5xi64>
  return %0, %1, %2 : tensor<4x3xi64>, tensor<2x5xi64>, tensor<5xi64>
}

// -----

// CHECK-LABEL: func.func @concat_single
// CHECK-NEXT: return %arg0
func.func @concat_single(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.concat %x {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Negative indices count from the end.
// CHECK-LABEL: func.func @gather
// CHECK-DAG: %[[VEC:.*]] = graph.constant dense<[40, 10, 10]> : tensor<3xi64>
// CHECK-DAG: %[[COLS:.*]] = graph.constant dense<{{\[\[}}3, 1], [6, 4]]> : tensor<2x2xi64>
// CHECK-DAG: %[[ROW:.*]] = graph.constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK-DAG: %[[ROWS:.*]] = graph.constant dense<{{\[\[\[}}4, 5, 6], [1, 2, 3]], {{\[\[}}4, 5, 6], [4, 5, 6]]]> : tensor<2x2x3xi64>
// CHECK-NOT: graph.gather
// CHECK: return %[[VEC]], %[[COLS]], %[[ROW]], %[[ROWS]]
func.func @gather() -> (tensor<3xi64>, tensor<2x2xi64>, tensor<3xi64>, tensor<2x2x3xi64>) {
  %a = graph.constant dense<[10, 20, 30, 40]> : tensor<4xi64>
  %i = graph.constant dense<[-1, 0, -4]> : tensor<3xi64>
  %0 = graph.gather %a[%i] {axis = 0 : i64} : (tensor<4xi64>, tensor<3xi64>) -> tensor<3xi64>
  %m = graph.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %j = graph.constant dense<[2, -3]> : tensor<2xi32>
  %1 = graph.gather %m[%j] {axis = 1 : i64} : (tensor<2x3xi64>, tensor<2xi32>) -> tensor<2x2xi64>
  // A scalar index drops the dimension.
  %s = graph.constant dense<-2> : tensor<i64>
  %2 = graph.gather %m[%s] {axis = 0 : i64} : (tensor<2x3xi64>, tensor<i64>) -> tensor<3xi64>
  %k = graph.constant dense<[[1, 0], [1, 1]]> : tensor<2x2xi64>
  %3 = graph.gather %m[%k] {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x2xi64>) -> tensor<2x2x3xi64>
  return %0, %1, %2, %3 : tensor<3xi64>, tensor<2x2xi64>, tensor<3xi64>, tensor<2x2x3xi64>
}

// -----

// An index out of range is left for run time to report.
// CHECK-LABEL: func.func @gather_out_of_range
// CHECK: %[[G:.*]] = graph.gather
// CHECK: return %[[G]]
func.func @gather_out_of_range() -> tensor<2x3xi64> {
  %m = graph.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %o = graph.constant dense<[0, -3]> : tensor<2xi64>
  %0 = graph.gather %m[%o] {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2xi64>) -> tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

// Shape arithmetic chains fold all the way down.
// CHECK-LABEL: func.func @shape_chain
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<[2, 16, 4, 8]> : tensor<4xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_chain() -> tensor<4xi64> {
  %shape = graph.constant dense<[2, 16, 32]> : tensor<3xi64>
  %i = graph.constant dense<[0, 1]> : tensor<2xi64>
  %bs = graph.gather %shape[%i] {axis = 0 : i64} : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
  %last = graph.slice %shape {starts = array<i64: 2>, sizes = array<i64: 1>, steps = array<i64: 1>} : (tensor<3xi64>) -> tensor<1xi64>
  %heads = graph.constant dense<4> : tensor<1xi64>
  %hd = graph.div %last, %heads : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %0 = graph.concat %bs, %heads, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

//===----------------------------------------------------------------------===//
// Limits
//===----------------------------------------------------------------------===//

// -----

// Results of up to 65536 elements fold; larger ones are left alone.
// CHECK-LABEL: func.func @fold_size_limit
// CHECK-DAG: %[[SMALL:.*]] = graph.constant dense<2.000000e+00> : tensor<65536xf32>
// CHECK-DAG: %[[BIG:.*]] = graph.add
// CHECK: return %[[SMALL]], %[[BIG]]
func.func @fold_size_limit() -> (tensor<65536xf32>, tensor<65537xf32>) {
  %a = graph.constant dense<1.0> : tensor<65536xf32>
  %0 = graph.add %a, %a : (tensor<65536xf32>, tensor<65536xf32>) -> tensor<65536xf32>
  %b = graph.constant dense<1.0> : tensor<65537xf32>
  %1 = graph.add %b, %b : (tensor<65537xf32>, tensor<65537xf32>) -> tensor<65537xf32>
  return %0, %1 : tensor<65536xf32>, tensor<65537xf32>
}

//===----------------------------------------------------------------------===//
// Named constants are parameters: nothing folds through them
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @named_elementwise
// CHECK-DAG: %[[W:.*]] = graph.weight "w" dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[B:.*]] = graph.weight "b" dense<[true, false]> : tensor<2xi1>
// CHECK-DAG: %[[ONE:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-DAG: %[[ADD:.*]] = graph.add %[[W]], %[[ONE]]
// CHECK-DAG: %[[NEG:.*]] = graph.neg %[[W]]
// CHECK-DAG: %[[LT:.*]] = graph.less %[[W]], %[[ONE]]
// CHECK-DAG: %[[CAST:.*]] = graph.cast %[[W]] : tensor<2xf32> to tensor<2xi64>
// CHECK-DAG: %[[SEL:.*]] = graph.where %[[B]], %[[ONE]], %[[ONE]]
// CHECK: return %[[ADD]], %[[NEG]], %[[LT]], %[[CAST]], %[[SEL]]
func.func @named_elementwise() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xi1>, tensor<2xi64>, tensor<2xf32>) {
  %w = graph.weight "w" dense<[1.0, 2.0]> : tensor<2xf32>
  %b = graph.weight "b" dense<[true, false]> : tensor<2xi1>
  %one = graph.constant dense<1.0> : tensor<f32>
  %0 = graph.add %w, %one : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %1 = graph.neg %w : tensor<2xf32>
  %2 = graph.less %w, %one : (tensor<2xf32>, tensor<f32>) -> tensor<2xi1>
  %3 = graph.cast %w : tensor<2xf32> to tensor<2xi64>
  %4 = graph.where %b, %one, %one : (tensor<2xi1>, tensor<f32>, tensor<f32>) -> tensor<2xf32>
  return %0, %1, %2, %3, %4 : tensor<2xf32>, tensor<2xf32>, tensor<2xi1>, tensor<2xi64>, tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @named_movement
// CHECK-DAG: %[[W:.*]] = graph.weight "emb" dense<{{\[\[}}1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
// CHECK-DAG: %[[I:.*]] = graph.constant dense<1> : tensor<1xi64>
// CHECK-DAG: %[[R:.*]] = graph.reshape %[[W]] : tensor<2x3xi64> to tensor<6xi64>
// CHECK-DAG: %[[T:.*]] = graph.transpose %[[W]]
// CHECK-DAG: %[[S:.*]] = graph.slice %[[W]]
// CHECK-DAG: %[[E:.*]] = graph.expand %[[W]]
// CHECK-DAG: %[[C:.*]] = graph.concat %[[W]], %[[W]]
// CHECK-DAG: %[[G:.*]] = graph.gather %[[W]][%[[I]]]
// CHECK: return %[[R]], %[[T]], %[[S]], %[[E]], %[[C]], %[[G]]
func.func @named_movement() -> (tensor<6xi64>, tensor<3x2xi64>, tensor<1x3xi64>, tensor<2x2x3xi64>, tensor<4x3xi64>, tensor<1x3xi64>) {
  %w = graph.weight "emb" dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = graph.reshape %w : tensor<2x3xi64> to tensor<6xi64>
  %1 = graph.transpose %w {perm = array<i64: 1, 0>} : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %2 = graph.slice %w {starts = array<i64: 1, 0>, sizes = array<i64: 1, 3>, steps = array<i64: 1, 1>} : (tensor<2x3xi64>) -> tensor<1x3xi64>
  %3 = graph.expand %w : tensor<2x3xi64> to tensor<2x2x3xi64>
  %4 = graph.concat %w, %w {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<4x3xi64>
  %i = graph.constant dense<1> : tensor<1xi64>
  %5 = graph.gather %w[%i] {axis = 0 : i64} : (tensor<2x3xi64>, tensor<1xi64>) -> tensor<1x3xi64>
  return %0, %1, %2, %3, %4, %5 : tensor<6xi64>, tensor<3x2xi64>, tensor<1x3xi64>, tensor<2x2x3xi64>, tensor<4x3xi64>, tensor<1x3xi64>
}

// -----

// Named indices are parameters as well.
// CHECK-LABEL: func.func @named_indices
// CHECK: %[[I:.*]] = graph.weight "idx"
// CHECK: graph.gather %{{.*}}[%[[I]]]
func.func @named_indices() -> tensor<1xi64> {
  %a = graph.constant dense<[10, 20]> : tensor<2xi64>
  %i = graph.weight "idx" dense<1> : tensor<1xi64>
  %0 = graph.gather %a[%i] {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  return %0 : tensor<1xi64>
}

// -----

// Identities still apply to parameters: they do not copy them.
// CHECK-LABEL: func.func @named_identity
// CHECK-NEXT: %[[W:.*]] = graph.weight "w"
// CHECK-NEXT: return %[[W]], %[[W]]
func.func @named_identity() -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %w = graph.weight "w" dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %0 = graph.transpose %w {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = graph.reshape %w : tensor<2x3xf32> to tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}
