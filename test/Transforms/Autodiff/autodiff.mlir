// RUN: pcc-opt %s --pcc-autodiff --split-input-file | FileCheck %s
// RUN: pcc-opt %s --pcc-autodiff --canonicalize --split-input-file | FileCheck %s --check-prefix=CANON
// RUN: pcc-opt %s --pcc-select-trainable="trainable=. freeze=^emb\." --pcc-autodiff --split-input-file | FileCheck %s --check-prefix=FREEZE

// Each function is a trainable graph.weight, the op under test and a
// `graph.loss` result (mostly the sum of everything). The first RUN shows
// every vector-Jacobian product as built: each parameter becomes a state
// argument (`graph.state`, `graph.init`), the backward ops are appended
// before the return and carry `graph.backward`, and each parameter's
// gradient is a new result with `graph.grad` = the index of its argument.
// Within one VJP the op order depends on the C++ compiler's argument
// evaluation order, hence CHECK-DAG.

//===----------------------------------------------------------------------===//
// The seed and the unary ops
//===----------------------------------------------------------------------===//

// The seed is d loss / d loss = 1; reduce_sum's VJP broadcasts it back
// (reshape to the kept rank, then expand). sqrt: g * 0.5 / y.

// CHECK-LABEL: func.func @sqrt(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x3xf32> {graph.grad = 0 : i64})
// CHECK-NEXT:    %[[Y:.*]] = graph.sqrt %[[W]] : tensor<2x3xf32>
// CHECK-NEXT:    %[[L:.*]] = graph.reduce_sum %[[Y]] {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[ONE:.*]] = graph.constant {graph.backward} dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %[[ONE]] {graph.backward} : tensor<f32> to tensor<1x1xf32>
// CHECK-NEXT:    %[[G:.*]] = graph.expand %[[R]] {graph.backward} : tensor<1x1xf32> to tensor<2x3xf32>
// CHECK-DAG:     %[[HALF:.*]] = graph.constant {graph.backward} dense<5.000000e-01> : tensor<f32>
// CHECK-DAG:     %[[GH:.*]] = graph.mul %[[G]], %[[HALF]] {graph.backward} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK-DAG:     %[[DW:.*]] = graph.div %[[GH]], %[[Y]] {graph.backward} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK:         return %[[L]], %[[DW]] : tensor<f32>, tensor<2x3xf32>

// Canonicalization folds the broadcast seed into the constant factor.
// CANON-LABEL: func.func @sqrt(
// CANON-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CANON-DAG:     %[[HALF:.*]] = graph.constant dense<5.000000e-01> : tensor<2x3xf32>
// CANON:         %[[Y:.*]] = graph.sqrt %[[W]]
// CANON:         %[[DW:.*]] = graph.div %[[HALF]], %[[Y]] {graph.backward}
// CANON-NEXT:    return %{{.*}}, %[[DW]]
func.func @sqrt() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.sqrt %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// reciprocal: -(g * y * y).

// CHECK-LABEL: func.func @reciprocal(
// CHECK:         %[[Y:.*]] = graph.reciprocal %[[W:[^ ,]+]] : tensor<2x3xf32>
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-DAG:     %[[YY:.*]] = graph.mul %[[Y]], %[[Y]] {graph.backward}
// CHECK-DAG:     %[[GYY:.*]] = graph.mul %[[G]], %[[YY]] {graph.backward}
// CHECK-DAG:     %[[DW:.*]] = graph.neg %[[GYY]] {graph.backward} : tensor<2x3xf32>
// CHECK:         return %{{.*}}, %[[DW]]
func.func @reciprocal() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.reciprocal %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// neg: -g.

// CHECK-LABEL: func.func @neg(
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.neg %[[G]] {graph.backward} : tensor<2x3xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @neg() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.neg %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// abs: g * (x < 0 ? -1 : 1).

// CHECK-LABEL: func.func @abs(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-DAG:     %[[ZERO:.*]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[M1:.*]] = graph.constant {graph.backward} dense<-1.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[P1:.*]] = graph.constant {graph.backward} dense<1.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[NEG:.*]] = graph.less %[[W]], %[[ZERO]] {graph.backward} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xi1>
// CHECK-DAG:     %[[SIGN:.*]] = graph.where %[[NEG]], %[[M1]], %[[P1]] {graph.backward} : (tensor<2x3xi1>, tensor<f32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK-DAG:     %[[DW:.*]] = graph.mul %[[G]], %[[SIGN]] {graph.backward}
// CHECK:         return %{{.*}}, %[[DW]]
func.func @abs() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.abs %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// erf: g * 2/sqrt(pi) * exp(-x^2).

// CHECK-LABEL: func.func @erf(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-DAG:     %[[XX:.*]] = graph.mul %[[W]], %[[W]] {graph.backward}
// CHECK-DAG:     %[[NXX:.*]] = graph.neg %[[XX]] {graph.backward}
// CHECK-DAG:     %[[E:.*]] = graph.exp %[[NXX]] {graph.backward}
// CHECK-DAG:     %[[K:.*]] = graph.constant {graph.backward} dense<1.12837923> : tensor<f32>
// CHECK-DAG:     %[[KE:.*]] = graph.mul %[[K]], %[[E]] {graph.backward}
// CHECK-DAG:     %[[DW:.*]] = graph.mul %[[G]], %[[KE]] {graph.backward}
// CHECK:         return %{{.*}}, %[[DW]]
func.func @erf() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.erf %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// tanh: g * (1 - y^2).

// CHECK-LABEL: func.func @tanh(
// CHECK:         %[[Y:.*]] = graph.tanh
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-DAG:     %[[YY:.*]] = graph.mul %[[Y]], %[[Y]] {graph.backward}
// CHECK-DAG:     %[[ONE:.*]] = graph.constant {graph.backward} dense<1.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[D:.*]] = graph.sub %[[ONE]], %[[YY]] {graph.backward}
// CHECK-DAG:     %[[DW:.*]] = graph.mul %[[G]], %[[D]] {graph.backward}
// CHECK:         return %{{.*}}, %[[DW]]
func.func @tanh() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.tanh %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// sigmoid: g * y * (1 - y).

// CHECK-LABEL: func.func @sigmoid(
// CHECK:         %[[Y:.*]] = graph.sigmoid
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-DAG:     %[[ONE:.*]] = graph.constant {graph.backward} dense<1.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[OMY:.*]] = graph.sub %[[ONE]], %[[Y]] {graph.backward}
// CHECK-DAG:     %[[D:.*]] = graph.mul %[[Y]], %[[OMY]] {graph.backward}
// CHECK-DAG:     %[[DW:.*]] = graph.mul %[[G]], %[[D]] {graph.backward}
// CHECK:         return %{{.*}}, %[[DW]]
func.func @sigmoid() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.sigmoid %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// exp: g * y.

// CHECK-LABEL: func.func @exp(
// CHECK:         %[[Y:.*]] = graph.exp
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.mul %[[G]], %[[Y]] {graph.backward}
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @exp() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.exp %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// log: g / x.

// CHECK-LABEL: func.func @log(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.div %[[G]], %[[W]] {graph.backward}
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @log() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.log %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// relu: x > 0 ? g : 0.

// CHECK-LABEL: func.func @relu(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-DAG:     %[[DW:.*]] = graph.where %[[POS:[^ ,]+]], %[[G]], %[[Z2:[^ ,]+]] {graph.backward}
// CHECK-DAG:     %[[POS]] = graph.greater %[[W]], %[[Z1:[^ ,]+]] {graph.backward} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xi1>
// CHECK-DAG:     %[[Z1]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[Z2]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<f32>
// CHECK:         return %{{.*}}, %[[DW]]
func.func @relu() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.relu %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// sin: g * cos(x).

// CHECK-LABEL: func.func @sin(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[C:.*]] = graph.cos %[[W]] {graph.backward}
// CHECK-NEXT:    %[[DW:.*]] = graph.mul %[[G]], %[[C]] {graph.backward}
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @sin() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.sin %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// cos: -(g * sin(x)).

// CHECK-LABEL: func.func @cos(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[S:.*]] = graph.sin %[[W]] {graph.backward}
// CHECK-NEXT:    %[[GS:.*]] = graph.mul %[[G]], %[[S]] {graph.backward}
// CHECK-NEXT:    %[[DW:.*]] = graph.neg %[[GS]] {graph.backward}
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @cos() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.cos %w : tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// floor and ceil have a zero derivative: only the exp term reaches w.

// CHECK-LABEL: func.func @zero_derivative(
// CHECK:         %[[E:.*]] = graph.exp
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.mul %[[G]], %[[E]] {graph.backward}
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @zero_derivative() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %f = graph.floor %w : tensor<2x3xf32>
  %c = graph.ceil %w : tensor<2x3xf32>
  %e = graph.exp %w : tensor<2x3xf32>
  %fc = graph.add %f, %c : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = graph.add %e, %fc : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//===----------------------------------------------------------------------===//
// Binary ops: broadcasting is undone by reduce_sum (keepdims) + reshape
//===----------------------------------------------------------------------===//

// -----

// add: [2,1] + [3] -> [2,3]. The [2,1] operand sums over the stretched
// dimension 1 (no reshape needed); the [3] operand over the added
// dimension 0, then drops it.

// CHECK-LABEL: func.func @add(
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x1xf32> {graph.grad = 0 : i64}, tensor<3xf32> {graph.grad = 1 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[DA:.*]] = graph.reduce_sum %[[G]] {axes = array<i64: 1>, graph.backward} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK-NEXT:    %[[SB:.*]] = graph.reduce_sum %[[G]] {axes = array<i64: 0>, graph.backward} : (tensor<2x3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT:    %[[DB:.*]] = graph.reshape %[[SB]] {graph.backward} : tensor<1x3xf32> to tensor<3xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DA]], %[[DB]] : tensor<f32>, tensor<2x1xf32>, tensor<3xf32>
func.func @add() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %a = graph.weight "a" trainable dense<1.0> : tensor<2x1xf32>
  %b = graph.weight "b" trainable dense<1.0> : tensor<3xf32>
  %y = graph.add %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// sub: [2,3] - [] -> the rhs gets -g summed over everything.

// CHECK-LABEL: func.func @sub(
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x3xf32> {graph.grad = 0 : i64}, tensor<f32> {graph.grad = 1 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[NG:.*]] = graph.neg %[[G]] {graph.backward}
// CHECK-NEXT:    %[[SB:.*]] = graph.reduce_sum %[[NG]] {axes = array<i64: 0, 1>, graph.backward} : (tensor<2x3xf32>) -> tensor<1x1xf32>
// CHECK-NEXT:    %[[DB:.*]] = graph.reshape %[[SB]] {graph.backward} : tensor<1x1xf32> to tensor<f32>
// CHECK-NEXT:    return %{{.*}}, %[[G]], %[[DB]] : tensor<f32>, tensor<2x3xf32>, tensor<f32>
func.func @sub() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %a = graph.weight "a" trainable dense<1.0> : tensor<2x3xf32>
  %b = graph.weight "b" trainable dense<1.0> : tensor<f32>
  %y = graph.sub %a, %b : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// mul: [2,3] * [3]: d lhs = g * rhs, d rhs = sum_0(g * lhs).

// CHECK-LABEL: func.func @mul(
// CHECK-SAME:      %[[A:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "a"}
// CHECK-SAME:      %[[B:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "b"}
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x3xf32> {graph.grad = 0 : i64}, tensor<3xf32> {graph.grad = 1 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[DA:.*]] = graph.mul %[[G]], %[[B]] {graph.backward} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[GA:.*]] = graph.mul %[[G]], %[[A]] {graph.backward} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[SB:.*]] = graph.reduce_sum %[[GA]] {axes = array<i64: 0>, graph.backward} : (tensor<2x3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT:    %[[DB:.*]] = graph.reshape %[[SB]] {graph.backward} : tensor<1x3xf32> to tensor<3xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DA]], %[[DB]]
func.func @mul() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %a = graph.weight "a" trainable dense<1.0> : tensor<2x3xf32>
  %b = graph.weight "b" trainable dense<1.0> : tensor<3xf32>
  %y = graph.mul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// div: [2,3] / [2,1]: d lhs = g / rhs, d rhs = sum_1(-(g * y / rhs)).

// CHECK-LABEL: func.func @div(
// CHECK-SAME:      %[[A:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "a"}
// CHECK-SAME:      %[[B:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "b"}
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x3xf32> {graph.grad = 0 : i64}, tensor<2x1xf32> {graph.grad = 1 : i64})
// CHECK-NEXT:    %[[Y:.*]] = graph.div %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[DA:.*]] = graph.div %[[G]], %[[B]] {graph.backward} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[GY:.*]] = graph.mul %[[G]], %[[Y]] {graph.backward}
// CHECK-NEXT:    %[[Q:.*]] = graph.div %[[GY]], %[[B]] {graph.backward}
// CHECK-NEXT:    %[[NQ:.*]] = graph.neg %[[Q]] {graph.backward}
// CHECK-NEXT:    %[[DB:.*]] = graph.reduce_sum %[[NQ]] {axes = array<i64: 1>, graph.backward} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DA]], %[[DB]]
func.func @div() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %a = graph.weight "a" trainable dense<1.0> : tensor<2x3xf32>
  %b = graph.weight "b" trainable dense<2.0> : tensor<2x1xf32>
  %y = graph.div %a, %b : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// pow: d base = g * r * base^(r - 1). The exponent gets no gradient, even
// when it is a parameter.

// CHECK-LABEL: func.func @pow(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x3xf32> {graph.grad = 0 : i64})
// CHECK-NEXT:    %[[E:.*]] = graph.weight "e"
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-DAG:     %[[ONE:.*]] = graph.constant {graph.backward} dense<1.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[EM1:.*]] = graph.sub %[[E]], %[[ONE]] {graph.backward}
// CHECK-DAG:     %[[P:.*]] = graph.pow %[[W]], %[[EM1]] {graph.backward} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK-DAG:     %[[RP:.*]] = graph.mul %[[E]], %[[P]] {graph.backward}
// CHECK-DAG:     %[[DW:.*]] = graph.mul %[[G]], %[[RP]] {graph.backward}
// CHECK-NOT:     graph.log
// CHECK:         return %{{.*}}, %[[DW]] : tensor<f32>, tensor<2x3xf32>
func.func @pow() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %e = graph.weight "e" trainable dense<3.0> : tensor<f32>
  %y = graph.pow %w, %e : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An integer exponent is cast to the base's type first.

// CHECK-LABEL: func.func @pow_int_exponent(
// CHECK:         %[[E:.*]] = graph.constant dense<3> : tensor<i64>
// CHECK:         %[[EF:.*]] = graph.cast %[[E]] {graph.backward} : tensor<i64> to tensor<f32>
// CHECK-DAG:     %[[ONE:.*]] = graph.constant {graph.backward} dense<1.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[EM1:.*]] = graph.sub %[[EF]], %[[ONE]] {graph.backward}
// CHECK-DAG:     %[[P:.*]] = graph.pow %{{.*}}, %[[EM1]] {graph.backward}
// CHECK-DAG:     graph.mul %[[EF]], %[[P]] {graph.backward}
func.func @pow_int_exponent() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %e = graph.constant dense<3> : tensor<i64>
  %y = graph.pow %w, %e : (tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// max: the lhs gets g where lhs >= rhs (ties go to the lhs), the rhs the
// rest, summed back to [3].

// CHECK-LABEL: func.func @max(
// CHECK-SAME:      %[[A:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "a"}
// CHECK-SAME:      %[[B:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "b"}
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x3xf32> {graph.grad = 0 : i64}, tensor<3xf32> {graph.grad = 1 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-DAG:     %[[DA:.*]] = graph.where %[[GE1:[^ ,]+]], %[[G]], %[[Z1:[^ ,]+]] {graph.backward}
// CHECK-DAG:     %[[GE1]] = graph.greater_or_equal %[[A]], %[[B]] {graph.backward} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-DAG:     %[[Z1]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[GB:.*]] = graph.where %[[GE2:[^ ,]+]], %[[Z2:[^ ,]+]], %[[G]] {graph.backward}
// CHECK-DAG:     %[[GE2]] = graph.greater_or_equal %[[A]], %[[B]] {graph.backward}
// CHECK-DAG:     %[[Z2]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[SB:.*]] = graph.reduce_sum %[[GB]] {axes = array<i64: 0>, graph.backward} : (tensor<2x3xf32>) -> tensor<1x3xf32>
// CHECK-DAG:     %[[DB:.*]] = graph.reshape %[[SB]] {graph.backward} : tensor<1x3xf32> to tensor<3xf32>
// CHECK:         return %{{.*}}, %[[DA]], %[[DB]]
func.func @max() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %a = graph.weight "a" trainable dense<1.0> : tensor<2x3xf32>
  %b = graph.weight "b" trainable dense<1.0> : tensor<3xf32>
  %y = graph.max %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// min: the lhs (an input here) gets g where lhs <= rhs, the rhs the rest,
// summed back to [2,1]. Only the parameter's gradient is returned.

// CHECK-LABEL: func.func @min(
// CHECK-SAME:      %[[X:[^ ,]+]]: tensor<2x3xf32>,
// CHECK-SAME:      %[[B:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "b"}
// CHECK-SAME:      ) -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x1xf32> {graph.grad = 1 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-DAG:     %[[GB:.*]] = graph.where %[[LE:[^ ,]+]], %[[Z:[^ ,]+]], %[[G]] {graph.backward}
// CHECK-DAG:     %[[LE]] = graph.less_or_equal %[[X]], %[[B]] {graph.backward} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xi1>
// CHECK-DAG:     %[[Z]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[DB:.*]] = graph.reduce_sum %[[GB]] {axes = array<i64: 1>, graph.backward} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK:         return %{{.*}}, %[[DB]] : tensor<f32>, tensor<2x1xf32>
func.func @min(%x: tensor<2x3xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %b = graph.weight "b" trainable dense<1.0> : tensor<2x1xf32>
  %y = graph.min %x, %b : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// where: the condition gets nothing; lhs and rhs get g masked by it, the
// scalar rhs summed over everything.

// CHECK-LABEL: func.func @where(
// CHECK-SAME:      %[[C:[^ ,]+]]: tensor<2x3xi1>{{[^)]*}}) -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x3xf32> {graph.grad = 1 : i64}, tensor<f32> {graph.grad = 2 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-DAG:     %[[Z1:.*]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[DA:.*]] = graph.where %[[C]], %[[G]], %[[Z1]] {graph.backward}
// CHECK-DAG:     %[[Z2:.*]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[GB:.*]] = graph.where %[[C]], %[[Z2]], %[[G]] {graph.backward}
// CHECK-DAG:     %[[SB:.*]] = graph.reduce_sum %[[GB]] {axes = array<i64: 0, 1>, graph.backward} : (tensor<2x3xf32>) -> tensor<1x1xf32>
// CHECK-DAG:     %[[DB:.*]] = graph.reshape %[[SB]] {graph.backward} : tensor<1x1xf32> to tensor<f32>
// CHECK:         return %{{.*}}, %[[DA]], %[[DB]]
func.func @where(%c: tensor<2x3xi1>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %a = graph.weight "a" trainable dense<1.0> : tensor<2x3xf32>
  %b = graph.weight "b" trainable dense<0.0> : tensor<f32>
  %y = graph.where %c, %a, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// cast f32 -> f64 -> f32: the gradient is cast back at each step.

// CHECK-LABEL: func.func @cast(
// CHECK:         %[[E:.*]] = graph.exp %{{.*}} : tensor<2x3xf64>
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[G64:.*]] = graph.cast %[[G]] {graph.backward} : tensor<2x3xf32> to tensor<2x3xf64>
// CHECK-NEXT:    %[[GE:.*]] = graph.mul %[[G64]], %[[E]] {graph.backward} : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT:    %[[DW:.*]] = graph.cast %[[GE]] {graph.backward} : tensor<2x3xf64> to tensor<2x3xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DW]] : tensor<f32>, tensor<2x3xf32>
func.func @cast() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %d = graph.cast %w : tensor<2x3xf32> to tensor<2x3xf64>
  %e = graph.exp %d : tensor<2x3xf64>
  %f = graph.cast %e : tensor<2x3xf64> to tensor<2x3xf32>
  %l = graph.reduce_sum %f {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//===----------------------------------------------------------------------===//
// Contractions and normalizations
//===----------------------------------------------------------------------===//

// -----

// Batched activations times a 2-D weight: dW = x^T g over every row of
// the batch, one product with no sum after it. The input's gradient g W^T
// is built too; canonicalization drops it.

// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:      %[[X:[^ ,]+]]: tensor<4x2x3xf32>,
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK-SAME:      ) -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3x5xf32> {graph.grad = 1 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<4x2x5xf32>
// CHECK-DAG:     %[[WT:.*]] = graph.transpose %[[W]] {graph.backward, perm = array<i64: 1, 0>} : (tensor<3x5xf32>) -> tensor<5x3xf32>
// CHECK-DAG:     %[[DX:.*]] = graph.matmul %[[G]], %[[WT]] {graph.backward} : (tensor<4x2x5xf32>, tensor<5x3xf32>) -> tensor<4x2x3xf32>
// CHECK-DAG:     %[[XR:.*]] = graph.reshape %[[X]] {graph.backward} : tensor<4x2x3xf32> to tensor<8x3xf32>
// CHECK-DAG:     %[[GR:.*]] = graph.reshape %[[G]] {graph.backward} : tensor<4x2x5xf32> to tensor<8x5xf32>
// CHECK-DAG:     %[[XT:.*]] = graph.transpose %[[XR]] {graph.backward, perm = array<i64: 1, 0>} : (tensor<8x3xf32>) -> tensor<3x8xf32>
// CHECK-DAG:     %[[DW:.*]] = graph.matmul %[[XT]], %[[GR]] {graph.backward} : (tensor<3x8xf32>, tensor<8x5xf32>) -> tensor<3x5xf32>
// CHECK-NOT:     graph.reduce_sum
// CHECK:         return %{{.*}}, %[[DW]] : tensor<f32>, tensor<3x5xf32>

// CANON-LABEL: func.func @matmul(
// CANON-NOT:     -> tensor<4x2x3xf32>
// CANON-NOT:     graph.reduce_sum {{.*}}graph.backward
// CANON:         graph.matmul %{{.*}}, %{{.*}} {graph.backward} : (tensor<3x8xf32>, tensor<8x5xf32>) -> tensor<3x5xf32>
func.func @matmul(%x: tensor<4x2x3xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<3x5xf32>
  %y = graph.matmul %x, %w : (tensor<4x2x3xf32>, tensor<3x5xf32>) -> tensor<4x2x5xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<4x2x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A 2-D weight on the left of batched inputs: dW = g x^T, summed over the
// batch.

// CHECK-LABEL: func.func @matmul_lhs(
// CHECK-SAME:      %[[X:[^ ,]+]]: tensor<4x3x5xf32>{{[^)]*}}) -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x3xf32> {graph.grad = 1 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<4x2x5xf32>
// CHECK-DAG:     %[[XT:.*]] = graph.transpose %[[X]] {graph.backward, perm = array<i64: 0, 2, 1>} : (tensor<4x3x5xf32>) -> tensor<4x5x3xf32>
// CHECK-DAG:     %[[GW:.*]] = graph.matmul %[[G]], %[[XT]] {graph.backward} : (tensor<4x2x5xf32>, tensor<4x5x3xf32>) -> tensor<4x2x3xf32>
// CHECK-DAG:     %[[SW:.*]] = graph.reduce_sum %[[GW]] {axes = array<i64: 0>, graph.backward} : (tensor<4x2x3xf32>) -> tensor<1x2x3xf32>
// CHECK-DAG:     %[[DW:.*]] = graph.reshape %[[SW]] {graph.backward} : tensor<1x2x3xf32> to tensor<2x3xf32>
// CHECK:         return %{{.*}}, %[[DW]]
func.func @matmul_lhs(%x: tensor<4x3x5xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.matmul %w, %x : (tensor<2x3xf32>, tensor<4x3x5xf32>) -> tensor<4x2x5xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<4x2x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// gemm with transA, transB, alpha and a bias C: with A' = A^T and B' = B^T,
// dA' = alpha g B'^T = alpha g B and dB' = alpha A'^T g = alpha A g, each
// transposed back; dC = beta g, summed to C's shape.

// CHECK-LABEL: func.func @gemm_trans(
// CHECK-SAME:      %[[X:[^ ,]+]]: tensor<3x2xf32>,
// CHECK-SAME:      %[[B:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "b"}
// CHECK-SAME:      %[[C:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "c"}
// CHECK-SAME:      ) -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<5x3xf32> {graph.grad = 1 : i64}, tensor<5xf32> {graph.grad = 2 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x5xf32>
// CHECK-NEXT:    %[[GA:.*]] = graph.gemm %[[G]], %[[B]] {alpha = 2.000000e+00 : f32, beta = 0.000000e+00 : f32, graph.backward} : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[GB:.*]] = graph.gemm %[[X]], %[[G]] {alpha = 2.000000e+00 : f32, beta = 0.000000e+00 : f32, graph.backward} : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
// CHECK-NEXT:    %[[DX:.*]] = graph.transpose %[[GA]] {graph.backward, perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:    %[[DB:.*]] = graph.transpose %[[GB]] {graph.backward, perm = array<i64: 1, 0>} : (tensor<3x5xf32>) -> tensor<5x3xf32>
// CHECK-DAG:     %[[BETA:.*]] = graph.constant {graph.backward} dense<5.000000e-01> : tensor<f32>
// CHECK-DAG:     %[[GC:.*]] = graph.mul %[[G]], %[[BETA]] {graph.backward}
// CHECK-DAG:     %[[SC:.*]] = graph.reduce_sum %[[GC]] {axes = array<i64: 0>, graph.backward} : (tensor<2x5xf32>) -> tensor<1x5xf32>
// CHECK-DAG:     %[[DC:.*]] = graph.reshape %[[SC]] {graph.backward} : tensor<1x5xf32> to tensor<5xf32>
// CHECK:         return %{{.*}}, %[[DB]], %[[DC]] : tensor<f32>, tensor<5x3xf32>, tensor<5xf32>
func.func @gemm_trans(%x: tensor<3x2xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %b = graph.weight "b" trainable dense<1.0> : tensor<5x3xf32>
  %c = graph.weight "c" trainable dense<1.0> : tensor<5xf32>
  %y = graph.gemm %x, %b, %c {transA = true, transB = true, alpha = 2.0 : f32, beta = 0.5 : f32} : (tensor<3x2xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// gemm without transposes: dA = g B^T and dB = A^T g, as gemms that
// transpose an operand.

// CHECK-LABEL: func.func @gemm(
// CHECK-SAME:      %[[X:[^ ,]+]]: tensor<3x5xf32>,
// CHECK-SAME:      %[[A:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "a"}
// CHECK-SAME:      ) -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x3xf32> {graph.grad = 1 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x5xf32>
// CHECK-NEXT:    %[[DA:.*]] = graph.gemm %[[G]], %[[X]] {beta = 0.000000e+00 : f32, graph.backward, transB = true} : (tensor<2x5xf32>, tensor<3x5xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    graph.gemm %[[A]], %[[G]] {beta = 0.000000e+00 : f32, graph.backward, transA = true} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DA]] : tensor<f32>, tensor<2x3xf32>
func.func @gemm(%x: tensor<3x5xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %a = graph.weight "a" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.gemm %a, %x : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// softmax: y * (g - sum(g * y)) along the axis.

// CHECK-LABEL: func.func @softmax(
// CHECK-SAME:      %[[X:[^ ,]+]]: tensor<2x3xf32>{{[^)]*}})
// CHECK:         %[[Y:.*]] = graph.softmax %{{.*}} {axis = 1 : i64} : tensor<2x3xf32>
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK:         %[[GY:.*]] = graph.mul %[[G]], %[[X]] {graph.backward}
// CHECK-DAG:     %[[P:.*]] = graph.mul %[[GY]], %[[Y]] {graph.backward}
// CHECK-DAG:     %[[DOT:.*]] = graph.reduce_sum %[[P]] {axes = array<i64: 1>, graph.backward} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK-DAG:     %[[D:.*]] = graph.sub %[[GY]], %[[DOT]] {graph.backward} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK-DAG:     %[[DW:.*]] = graph.mul %[[Y]], %[[D]] {graph.backward}
// CHECK:         return %{{.*}}, %[[DW]]
func.func @softmax(%x: tensor<2x3xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.softmax %w {axis = 1 : i64} : tensor<2x3xf32>
  %p = graph.mul %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %p {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A softmax whose NaN rows (every input -inf: a fully masked attention row)
// the graph replaces by zeros, as PyTorch's attention exports do: the
// backward reads the guarded y, so those rows get zero gradient, not NaN.

// CHECK-LABEL: func.func @guarded_softmax(
// CHECK:         %[[Y:.*]] = graph.softmax %{{.*}} {axis = 1 : i64} : tensor<2x3xf32>
// CHECK:         %[[NAN:.*]] = graph.is_nan %[[Y]] {graph.backward} : tensor<2x3xf32> -> tensor<2x3xi1>
// CHECK:         %[[SAFE:.*]] = graph.where %[[NAN]], %{{.*}}, %[[Y]] {graph.backward}
// CHECK-DAG:     graph.mul %{{.*}}, %[[SAFE]] {graph.backward}
// CHECK-DAG:     %[[DW:.*]] = graph.mul %[[SAFE]], %{{.*}} {graph.backward}
// CHECK:         return %{{.*}}, %[[DW]]
func.func @guarded_softmax(%x: tensor<2x3xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.softmax %w {axis = 1 : i64} : tensor<2x3xf32>
  %nan = graph.is_nan %y : tensor<2x3xf32> -> tensor<2x3xi1>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %g = graph.where %nan, %zero, %y : (tensor<2x3xi1>, tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %p = graph.mul %g, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %p {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// log_softmax: g - exp(y) * sum(g) along the axis.

// CHECK-LABEL: func.func @log_softmax(
// CHECK-SAME:      %[[X:[^ ,]+]]: tensor<2x3xf32>{{[^)]*}})
// CHECK:         %[[Y:.*]] = graph.log_softmax %{{.*}} {axis = 0 : i64} : tensor<2x3xf32>
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK:         %[[GY:.*]] = graph.mul %[[G]], %[[X]] {graph.backward}
// CHECK-DAG:     %[[S:.*]] = graph.reduce_sum %[[GY]] {axes = array<i64: 0>, graph.backward} : (tensor<2x3xf32>) -> tensor<1x3xf32>
// CHECK-DAG:     %[[E:.*]] = graph.exp %[[Y]] {graph.backward}
// CHECK-DAG:     %[[ES:.*]] = graph.mul %[[E]], %[[S]] {graph.backward} : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
// CHECK-DAG:     %[[DW:.*]] = graph.sub %[[GY]], %[[ES]] {graph.backward}
// CHECK:         return %{{.*}}, %[[DW]]
func.func @log_softmax(%x: tensor<2x3xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %y = graph.log_softmax %w {axis = 0 : i64} : tensor<2x3xf32>
  %p = graph.mul %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %p {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// layer_norm over the last dimension, from the saved mean and inverse
// standard deviation: xhat = (x - mean) * invstd, gs = g * scale,
// dx = invstd * (gs - mean(gs) - xhat * mean(gs * xhat)),
// dscale = sum(g * xhat) and dbias = sum(g) over the leading dimensions.

// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME:      %[[X:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "x"}
// CHECK-SAME:      %[[S:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "scale"}
// CHECK-SAME:      %[[B:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "bias"}
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x3x4xf32> {graph.grad = 0 : i64}, tensor<4xf32> {graph.grad = 1 : i64}, tensor<4xf32> {graph.grad = 2 : i64})
// CHECK-NEXT:    %[[Y:[^,]*]], %[[MEAN:[^,]*]], %[[ISD:[^ ]*]] = graph.layer_norm %[[X]], %[[S]], %[[B]] {axis = 2 : i64}
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3x4xf32>
// CHECK-DAG:     %[[XC:.*]] = graph.sub %[[X]], %[[MEAN]] {graph.backward} : (tensor<2x3x4xf32>, tensor<2x3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-DAG:     %[[XHAT:.*]] = graph.mul %[[XC]], %[[ISD]] {graph.backward}
// CHECK-DAG:     %[[GS:.*]] = graph.mul %[[G]], %[[S]] {graph.backward} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
// CHECK-DAG:     %[[GSX:.*]] = graph.mul %[[GS]], %[[XHAT]] {graph.backward}
// CHECK-DAG:     %[[M2:.*]] = graph.reduce_mean %[[GSX]] {axes = array<i64: 2>, graph.backward} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
// CHECK-DAG:     %[[T2:.*]] = graph.mul %[[XHAT]], %[[M2]] {graph.backward}
// CHECK-DAG:     %[[M1:.*]] = graph.reduce_mean %[[GS]] {axes = array<i64: 2>, graph.backward} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
// CHECK-DAG:     %[[T1:.*]] = graph.sub %[[GS]], %[[M1]] {graph.backward}
// CHECK-DAG:     %[[T:.*]] = graph.sub %[[T1]], %[[T2]] {graph.backward}
// CHECK-DAG:     %[[DX:.*]] = graph.mul %[[ISD]], %[[T]] {graph.backward} : (tensor<2x3x1xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-DAG:     %[[GX:.*]] = graph.mul %[[G]], %[[XHAT]] {graph.backward}
// CHECK-DAG:     %[[SS:.*]] = graph.reduce_sum %[[GX]] {axes = array<i64: 0, 1>, graph.backward} : (tensor<2x3x4xf32>) -> tensor<1x1x4xf32>
// CHECK-DAG:     %[[DS:.*]] = graph.reshape %[[SS]] {graph.backward} : tensor<1x1x4xf32> to tensor<4xf32>
// CHECK-DAG:     %[[SB:.*]] = graph.reduce_sum %[[G]] {axes = array<i64: 0, 1>, graph.backward} : (tensor<2x3x4xf32>) -> tensor<1x1x4xf32>
// CHECK-DAG:     %[[DB:.*]] = graph.reshape %[[SB]] {graph.backward} : tensor<1x1x4xf32> to tensor<4xf32>
// CHECK:         return %{{.*}}, %[[DX]], %[[DS]], %[[DB]]
func.func @layer_norm() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %x = graph.weight "x" trainable dense<1.0> : tensor<2x3x4xf32>
  %s = graph.weight "scale" trainable dense<1.0> : tensor<4xf32>
  %b = graph.weight "bias" trainable dense<0.0> : tensor<4xf32>
  %y, %mean, %isd = graph.layer_norm %x, %s, %b {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

// -----

// reduce_mean without keepdims: reshape to the kept rank, expand, divide by
// the count (3).

// CHECK-LABEL: func.func @reduce_mean(
// CHECK:         %[[M:.*]] = graph.reduce_mean %{{.*}} {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x4xf32>
// CHECK-DAG:     %[[N:.*]] = graph.constant {graph.backward} dense<3.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[R:.*]] = graph.reshape %[[G]] {graph.backward} : tensor<2x4xf32> to tensor<2x1x4xf32>
// CHECK-DAG:     %[[E:.*]] = graph.expand %[[R]] {graph.backward} : tensor<2x1x4xf32> to tensor<2x3x4xf32>
// CHECK-DAG:     %[[DW:.*]] = graph.div %[[E]], %[[N]] {graph.backward}
// CHECK:         return %{{.*}}, %[[DW]] : tensor<f32>, tensor<2x3x4xf32>
func.func @reduce_mean() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3x4xf32>
  %m = graph.reduce_mean %w {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %l = graph.reduce_sum %m {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// reduce_sum with keepdims: the gradient already has the kept shape, so it
// is only expanded.

// CHECK-LABEL: func.func @reduce_sum_keepdims(
// CHECK:         %[[G:.*]] = graph.expand {{.*}} : tensor<1x1xf32> to tensor<1x3xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.expand %[[G]] {graph.backward} : tensor<1x3xf32> to tensor<2x3xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @reduce_sum_keepdims() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3xf32>
  %s = graph.reduce_sum %w {axes = array<i64: 0>, keepdims = true} : (tensor<2x3xf32>) -> tensor<1x3xf32>
  %l = graph.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<1x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// reduce_max: g goes to every element equal to the maximum.

// CHECK-LABEL: func.func @reduce_max(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK-NEXT:    %[[M:.*]] = graph.reduce_max %[[W]] {axes = array<i64: 0>, keepdims = false} : (tensor<2x4xf32>) -> tensor<4xf32>
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<4xf32>
// CHECK-DAG:     %[[MR:.*]] = graph.reshape %[[M]] {graph.backward} : tensor<4xf32> to tensor<1x4xf32>
// CHECK-DAG:     %[[ME:.*]] = graph.expand %[[MR]] {graph.backward} : tensor<1x4xf32> to tensor<2x4xf32>
// CHECK-DAG:     %[[HIT:.*]] = graph.equal %[[W]], %[[ME]] {graph.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
// CHECK-DAG:     %[[GR:.*]] = graph.reshape %[[G]] {graph.backward} : tensor<4xf32> to tensor<1x4xf32>
// CHECK-DAG:     %[[GE:.*]] = graph.expand %[[GR]] {graph.backward} : tensor<1x4xf32> to tensor<2x4xf32>
// CHECK-DAG:     %[[Z:.*]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[DW:.*]] = graph.where %[[HIT]], %[[GE]], %[[Z]] {graph.backward}
// CHECK:         return %{{.*}}, %[[DW]] : tensor<f32>, tensor<2x4xf32>
func.func @reduce_max() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x4xf32>
  %m = graph.reduce_max %w {axes = array<i64: 0>, keepdims = false} : (tensor<2x4xf32>) -> tensor<4xf32>
  %l = graph.reduce_sum %m {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// reduce_min with keepdims, likewise.

// CHECK-LABEL: func.func @reduce_min(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK-NEXT:    %[[M:.*]] = graph.reduce_min %[[W]] {axes = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x1xf32>
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x1xf32>
// CHECK-DAG:     %[[ME:.*]] = graph.expand %[[M]] {graph.backward} : tensor<2x1xf32> to tensor<2x4xf32>
// CHECK-DAG:     %[[HIT:.*]] = graph.equal %[[W]], %[[ME]] {graph.backward}
// CHECK-DAG:     %[[GE:.*]] = graph.expand %[[G]] {graph.backward} : tensor<2x1xf32> to tensor<2x4xf32>
// CHECK-DAG:     %[[DW:.*]] = graph.where %[[HIT]], %[[GE]], %{{.*}} {graph.backward}
// CHECK:         return %{{.*}}, %[[DW]]
func.func @reduce_min() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x4xf32>
  %m = graph.reduce_min %w {axes = array<i64: 1>, keepdims = true} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %l = graph.reduce_sum %m {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x1xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// -----

// reshape back to the input's shape; transpose by the inverse permutation
// (the inverse of [1, 2, 0] is [2, 0, 1]).

// CHECK-LABEL: func.func @reshape_transpose(
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<12x2xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %[[G]] {graph.backward} : tensor<12x2xf32> to tensor<3x4x2xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.transpose %[[R]] {graph.backward, perm = array<i64: 2, 0, 1>} : (tensor<3x4x2xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @reshape_transpose() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x3x4xf32>
  %t = graph.transpose %w {perm = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %r = graph.reshape %t : tensor<3x4x2xf32> to tensor<12x2xf32>
  %l = graph.reduce_sum %r {axes = array<i64: 0, 1>, keepdims = false} : (tensor<12x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expand [3,1] -> [2,3,4]: sum over the added dimension 0 and the
// stretched dimension 2, then reshape.

// CHECK-LABEL: func.func @expand(
// CHECK:         %[[G:.*]] = graph.expand %{{.*}} {graph.backward} : tensor<1x1x1xf32> to tensor<2x3x4xf32>
// CHECK-NEXT:    %[[S:.*]] = graph.reduce_sum %[[G]] {axes = array<i64: 0, 2>, graph.backward} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.reshape %[[S]] {graph.backward} : tensor<1x3x1xf32> to tensor<3x1xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @expand() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<3x1xf32>
  %e = graph.expand %w : tensor<3x1xf32> to tensor<2x3x4xf32>
  %l = graph.reduce_sum %e {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// slice (with a negative step): insert_slice with the same starts and steps
// into zeros of the input's shape.

// CHECK-LABEL: func.func @slice(
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.insert_slice %[[G]] {graph.backward, starts = array<i64: 1, 5>, steps = array<i64: 1, -2>} : tensor<2x3xf32> to tensor<4x6xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @slice() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<4x6xf32>
  %s = graph.slice %w {starts = array<i64: 1, 5>, sizes = array<i64: 2, 3>, steps = array<i64: 1, -2>} : (tensor<4x6xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// concat: each input gets its slice of the gradient along the axis.

// CHECK-LABEL: func.func @concat(
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<2x2xf32> {graph.grad = 1 : i64}, tensor<2x1xf32> {graph.grad = 2 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x6xf32>
// CHECK-NEXT:    graph.slice %[[G]] {graph.backward, sizes = array<i64: 2, 3>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[DA:.*]] = graph.slice %[[G]] {graph.backward, sizes = array<i64: 2, 2>, starts = array<i64: 0, 3>, steps = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x2xf32>
// CHECK-NEXT:    %[[DB:.*]] = graph.slice %[[G]] {graph.backward, sizes = array<i64: 2, 1>, starts = array<i64: 0, 5>, steps = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x1xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DA]], %[[DB]]
func.func @concat(%x: tensor<2x3xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %a = graph.weight "a" trainable dense<1.0> : tensor<2x2xf32>
  %b = graph.weight "b" trainable dense<1.0> : tensor<2x1xf32>
  %c = graph.concat %x, %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x6xf32>
  %l = graph.reduce_sum %c {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// split: the pieces' gradients concatenated, zeros for the unused pieces.

// CHECK-LABEL: func.func @split(
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3xf32>
// CHECK-DAG:     %[[Z0:.*]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<2x1xf32>
// CHECK-DAG:     %[[Z2:.*]] = graph.constant {graph.backward} dense<0.000000e+00> : tensor<2x1xf32>
// CHECK:         %[[DW:.*]] = graph.concat %[[Z0]], %[[G]], %[[Z2]] {axis = 1 : i64, graph.backward} : (tensor<2x1xf32>, tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x5xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @split() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x5xf32>
  %p:3 = graph.split %w {axis = 1 : i64, sizes = array<i64: 1, 3, 1>} : (tensor<2x5xf32>) -> (tensor<2x1xf32>, tensor<2x3xf32>, tensor<2x1xf32>)
  %l = graph.reduce_sum %p#1 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// gather: scatter_add of the gradient at the same indices (repeated indices
// accumulate); the indices get nothing.

// CHECK-LABEL: func.func @gather(
// CHECK-SAME:      %[[IDS:[^ ,]+]]: tensor<2x3xi64>{{[^)]*}}) -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<10x4xf32> {graph.grad = 1 : i64})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3x4xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.scatter_add %[[G]][%[[IDS]]] {axis = 0 : i64, graph.backward} : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<10x4xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @gather(%ids: tensor<2x3xi64>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<10x4xf32>
  %e = graph.gather %w[%ids] {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %l = graph.reduce_sum %e {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// gather_elements: scatter_elements_add at the same indices.

// CHECK-LABEL: func.func @gather_elements(
// CHECK-SAME:      %[[IDX:[^ ,]+]]: tensor<2x1xi32>{{[^)]*}})
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x1xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.scatter_elements_add %[[G]][%[[IDX]]] {axis = 1 : i64, graph.backward} : (tensor<2x1xf32>, tensor<2x1xi32>) -> tensor<2x5xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @gather_elements(%idx: tensor<2x1xi32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x5xf32>
  %e = graph.gather_elements %w[%idx] {axis = 1 : i64} : (tensor<2x5xf32>, tensor<2x1xi32>) -> tensor<2x1xf32>
  %l = graph.reduce_sum %e {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x1xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// trilu: the same triangle of the gradient.

// CHECK-LABEL: func.func @trilu(
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<3x3xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.trilu %[[G]] {graph.backward, k = 1 : i64, upper = false} : tensor<3x3xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @trilu() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<3x3xf32>
  %t = graph.trilu %w {upper = false, k = 1 : i64} : tensor<3x3xf32>
  %l = graph.reduce_sum %t {axes = array<i64: 0, 1>, keepdims = false} : (tensor<3x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//===----------------------------------------------------------------------===//
// Accumulation, freezing, integer paths, the loss
//===----------------------------------------------------------------------===//

// -----

// A tied embedding and LM head: the gradients of both uses of the weight
// accumulate with graph.add into its single gradient.

// CHECK-LABEL: func.func @tied(
// CHECK-SAME:      %[[IDS:[^ ,]+]]: tensor<2x3xi64>,
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "wte"}
// CHECK-SAME:      ) -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<10x4xf32> {graph.grad = 1 : i64})
// CHECK-NEXT:    %[[H:.*]] = graph.gather %[[W]][%[[IDS]]]
// CHECK-NEXT:    %[[WT:.*]] = graph.transpose %[[W]] {perm = array<i64: 1, 0>}
// CHECK-NEXT:    graph.matmul %[[H]], %[[WT]]
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2x3x10xf32>
// CHECK-DAG:     %[[WTT:.*]] = graph.transpose %[[WT]] {graph.backward, perm = array<i64: 1, 0>} : (tensor<4x10xf32>) -> tensor<10x4xf32>
// CHECK-DAG:     %[[DH:.*]] = graph.matmul %[[G]], %[[WTT]] {graph.backward} : (tensor<2x3x10xf32>, tensor<10x4xf32>) -> tensor<2x3x4xf32>
// CHECK-DAG:     %[[HR:.*]] = graph.reshape %[[H]] {graph.backward} : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK-DAG:     %[[GR:.*]] = graph.reshape %[[G]] {graph.backward} : tensor<2x3x10xf32> to tensor<6x10xf32>
// CHECK-DAG:     %[[HT:.*]] = graph.transpose %[[HR]] {graph.backward, perm = array<i64: 1, 0>}
// CHECK-DAG:     %[[DWT:.*]] = graph.matmul %[[HT]], %[[GR]] {graph.backward} : (tensor<4x6xf32>, tensor<6x10xf32>) -> tensor<4x10xf32>
// CHECK-DAG:     %[[HEAD:.*]] = graph.transpose %[[DWT]] {graph.backward, perm = array<i64: 1, 0>} : (tensor<4x10xf32>) -> tensor<10x4xf32>
// CHECK-DAG:     %[[EMB:.*]] = graph.scatter_add %[[DH]][%[[IDS]]] {axis = 0 : i64, graph.backward} : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<10x4xf32>
// CHECK:         %[[DW:.*]] = graph.add %[[HEAD]], %[[EMB]] {graph.backward} : (tensor<10x4xf32>, tensor<10x4xf32>) -> tensor<10x4xf32>
// CHECK-NEXT:    return %{{.*}}, %[[DW]] : tensor<f32>, tensor<10x4xf32>
func.func @tied(%ids: tensor<2x3xi64>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "wte" trainable dense<1.0> : tensor<10x4xf32>
  %h = graph.gather %w[%ids] {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : (tensor<10x4xf32>) -> tensor<4x10xf32>
  %z = graph.matmul %h, %wt : (tensor<2x3x4xf32>, tensor<4x10xf32>) -> tensor<2x3x10xf32>
  %l = graph.reduce_sum %z {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x10xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A weight used twice by one op: both operand gradients accumulate.

// CHECK-LABEL: func.func @square(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<3xf32>
// CHECK-NEXT:    %[[D1:.*]] = graph.mul %[[G]], %[[W]] {graph.backward}
// CHECK-NEXT:    %[[D2:.*]] = graph.mul %[[G]], %[[W]] {graph.backward}
// CHECK-NEXT:    %[[DW:.*]] = graph.add %[[D1]], %[[D2]] {graph.backward}
// CHECK-NEXT:    return %{{.*}}, %[[DW]]
func.func @square() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<3xf32>
  %y = graph.mul %w, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// freeze is a regular expression searched in the parameter names: with
// `^emb\.`, "emb.weight" is frozen but "pos.emb.weight" is not. A frozen
// parameter's op is still differentiated for the other operand.

// CHECK-LABEL: func.func @freeze(
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 0 : i64}, tensor<3xf32> {graph.grad = 1 : i64}, tensor<3xf32> {graph.grad = 2 : i64})

// FREEZE-LABEL: func.func @freeze(
// FREEZE-SAME:      %[[P:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "pos.emb.weight"}
// FREEZE-SAME:      %[[H:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "head.weight"}
// FREEZE-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 0 : i64}, tensor<3xf32> {graph.grad = 1 : i64})
// FREEZE-NEXT:    %[[E:.*]] = graph.weight "emb.weight" dense
// FREEZE-NEXT:    %[[X:.*]] = graph.add %[[E]], %[[P]]
// FREEZE:         %[[G:.*]] = graph.expand {{.*}} to tensor<3xf32>
// FREEZE-NEXT:    %[[DX:.*]] = graph.mul %[[G]], %[[H]] {graph.backward}
// FREEZE-NEXT:    %[[DH:.*]] = graph.mul %[[G]], %[[X]] {graph.backward}
// FREEZE-NEXT:    return %{{.*}}, %[[DX]], %[[DH]]
func.func @freeze() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %e = graph.weight "emb.weight" trainable dense<1.0> : tensor<3xf32>
  %p = graph.weight "pos.emb.weight" trainable dense<1.0> : tensor<3xf32>
  %h = graph.weight "head.weight" trainable dense<1.0> : tensor<3xf32>
  %x = graph.add %e, %p : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %y = graph.mul %x, %h : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Integer values carry no gradient: the round trip through i64 is a
// constant factor, the integer weight (gather indices) is not trained, and
// no backward op casts.

// CHECK-LABEL: func.func @integer_paths(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 0 : i64})
// CHECK-NEXT:    %[[IDX:.*]] = graph.weight "idx"
// CHECK-NEXT:    graph.cast %[[W]] : tensor<3xf32> to tensor<3xi64>
// CHECK-NEXT:    %[[C:.*]] = graph.cast %{{.*}} : tensor<3xi64> to tensor<3xf32>
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<2xf32>
// CHECK-NEXT:    %[[GY:.*]] = graph.scatter_add %[[G]][%[[IDX]]] {axis = 0 : i64, graph.backward} : (tensor<2xf32>, tensor<2xi64>) -> tensor<3xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.mul %[[GY]], %[[C]] {graph.backward}
// CHECK-NEXT:    graph.mul %[[GY]], %[[W]] {graph.backward}
// CHECK-NEXT:    return %{{.*}}, %[[DW]] : tensor<f32>, tensor<3xf32>
// CHECK-NOT:     graph.grad
func.func @integer_paths() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.5> : tensor<3xf32>
  %idx = graph.weight "idx" dense<[2, 0]> : tensor<2xi64>
  %i = graph.cast %w : tensor<3xf32> to tensor<3xi64>
  %c = graph.cast %i : tensor<3xi64> to tensor<3xf32>
  %y = graph.mul %w, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %s = graph.gather %y[%idx] {axis = 0 : i64} : (tensor<3xf32>, tensor<2xi64>) -> tensor<2xf32>
  %l = graph.reduce_sum %s {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The loss is found by `graph.loss`, wherever it is among the results;
// other results and parameters that do not reach it are left alone.

// CHECK-LABEL: func.func @loss_among_results(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3xf32>{{[^)]*}})
// CHECK-SAME:      -> (tensor<3xf32> {onnx.name = "logits"}, tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {onnx.name = "other"}, tensor<3xf32> {graph.grad = 1 : i64})
// CHECK-NEXT:    graph.weight "unused" trainable
// CHECK:         %[[G:.*]] = graph.expand {{.*}} to tensor<3xf32>
// CHECK-NEXT:    graph.mul %[[G]], %{{.*}} {graph.backward}
// CHECK-NEXT:    %[[DW:.*]] = graph.mul %[[G]], %[[X]] {graph.backward}
// CHECK-NEXT:    return %{{.*}}, %{{.*}}, %{{.*}}, %[[DW]] :
func.func @loss_among_results(%x: tensor<3xf32>)
    -> (tensor<3xf32> {onnx.name = "logits"}, tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {onnx.name = "other"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<3xf32>
  %u = graph.weight "unused" trainable dense<1.0> : tensor<3xf32>
  %y = graph.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %o = graph.add %y, %u : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %y, %l, %o : tensor<3xf32>, tensor<f32>, tensor<3xf32>
}

// -----

// A parameter that is itself the loss: the gradient is the seed.

// CHECK-LABEL: func.func @weight_is_loss(
// CHECK-SAME:      %[[W:arg[0-9]+]]: {{[^{]*}}{graph.init = {{[^}]*}}, graph.state = "w"}
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<f32> {graph.grad = 0 : i64})
// CHECK-NEXT:    %[[ONE:.*]] = graph.constant {graph.backward} dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return %[[W]], %[[ONE]]
func.func @weight_is_loss() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<f32>
  return %w : tensor<f32>
}
