// RUN: pcc-opt %s --pcc-optimizer --split-input-file | FileCheck %s
// RUN: pcc-opt %s --pcc-optimizer="weight-decay=0 lr=0.1" --split-input-file | FileCheck %s --check-prefix=NOWD
// RUN: pcc-opt %s --pcc-optimizer="kind=sgd" --split-input-file | FileCheck %s --check-prefix=SGD
// RUN: pcc-opt %s --pcc-optimizer="kind=sgd momentum=0.9 weight-decay=0.5 lr=0.1" --split-input-file | FileCheck %s --check-prefix=MOM

// The inputs are what pcc-autodiff produces: a loss (`graph.loss`), each
// trained parameter a state argument (`graph.state`, `graph.init`) and its
// gradient a result pointing at it (`graph.grad = <argument index>`). Within one update the op order
// depends on the C++ compiler's argument evaluation order, hence the
// CHECK-DAGs that match a use before its definition.

// AdamW (the default: lr 1e-3, betas 0.9 and 0.999, eps 1e-8, weight decay
// 0.01). The step counter "pcc.step" (f32, from 0), the rate "pcc.lr" (f32,
// from the option: state, so that a resumed run may change it) and the
// moments "w.adamw.m" and "w.adamw.v" (zeros, `graph.state_of` the
// parameter) become state arguments after the existing ones. The updated values are returned,
// each marked `graph.update = <its state argument>`, after the existing
// results:
//   t = step + 1, m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2,
//   p' = p (1 - lr wd) - lr / (1 - b1^t) * m' / (sqrt(v') / sqrt(1 - b2^t) + eps)

// CHECK-LABEL: func.func @one_param(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32> {onnx.name = "x"},
// CHECK-SAME:      %[[P:[^:]*]]: tensor<3xf32> {graph.init = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, graph.state = "w"},
// CHECK-SAME:      %[[STEP:[^:]*]]: tensor<f32> {graph.init = dense<0.000000e+00> : tensor<f32>, graph.state = "pcc.step"},
// CHECK-SAME:      %[[LR:[^:]*]]: tensor<f32> {graph.init = dense<1.000000e-03> : tensor<f32>, graph.state = "pcc.lr"},
// CHECK-SAME:      %[[M:[^:]*]]: tensor<3xf32> {graph.init = dense<0.000000e+00> : tensor<3xf32>, graph.state = "w.adamw.m", graph.state_of = 1 : i64},
// CHECK-SAME:      %[[V:[^:]*]]: tensor<3xf32> {graph.init = dense<0.000000e+00> : tensor<3xf32>, graph.state = "w.adamw.v", graph.state_of = 1 : i64})
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 1 : i64},
// CHECK-SAME:          tensor<f32> {graph.update = 2 : i64}, tensor<3xf32> {graph.update = 4 : i64},
// CHECK-SAME:          tensor<3xf32> {graph.update = 5 : i64}, tensor<3xf32> {graph.update = 1 : i64})
// CHECK-NOT:     graph.weight
// CHECK:         %[[Y:.*]] = graph.mul %[[X]], %[[P]]
// CHECK-NEXT:    %[[L:.*]] = graph.reduce_sum %[[Y]]
// CHECK-NEXT:    %[[G:.*]] = graph.reduce_sum %[[X]] {axes = array<i64: 0>, graph.backward, keepdims = false}
// Bias correction.
// CHECK-DAG:     %[[T:.*]] = graph.add %[[STEP]], %[[ONE:[^ ,]+]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-DAG:     %[[ONE]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[B1T:.*]] = graph.pow %[[B1:[^ ,]+]], %[[T]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-DAG:     %[[B1]] = graph.constant dense<0.899999976> : tensor<f32>
// CHECK-DAG:     %[[C1:.*]] = graph.sub %{{.*}}, %[[B1T]]
// CHECK-DAG:     %[[B2T:.*]] = graph.pow %[[B2:[^ ,]+]], %[[T]]
// CHECK-DAG:     %[[B2]] = graph.constant dense<9.990000e-01> : tensor<f32>
// CHECK-DAG:     %[[C2:.*]] = graph.sub %{{.*}}, %[[B2T]]
// First moment.
// CHECK-DAG:     %[[M2:.*]] = graph.add %[[B1M:[^ ,]+]], %[[GS:[^ ,]+]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-DAG:     %[[B1M]] = graph.mul %[[B1B:[^ ,]+]], %[[M]]
// CHECK-DAG:     %[[B1B]] = graph.constant dense<0.899999976> : tensor<f32>
// CHECK-DAG:     %[[GS]] = graph.mul %[[OMB1:[^ ,]+]], %[[G]]
// CHECK-DAG:     %[[OMB1]] = graph.constant dense<1.000000e-01> : tensor<f32>
// Second moment.
// CHECK-DAG:     %[[V2:.*]] = graph.add %[[B2V:[^ ,]+]], %[[GGS:[^ ,]+]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-DAG:     %[[B2V]] = graph.mul %[[B2B:[^ ,]+]], %[[V]]
// CHECK-DAG:     %[[B2B]] = graph.constant dense<9.990000e-01> : tensor<f32>
// CHECK-DAG:     %[[GGS]] = graph.mul %[[OMB2:[^ ,]+]], %[[GG:[^ ,]+]]
// CHECK-DAG:     %[[GG]] = graph.mul %[[G]], %[[G]]
// CHECK-DAG:     %[[OMB2]] = graph.constant dense<1.000000e-03> : tensor<f32>
// Decoupled weight decay.
// CHECK-DAG:     %[[DEC:.*]] = graph.mul %[[P]], %[[WDF:[^ ,]+]] : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-DAG:     %[[WDF]] = graph.sub %{{.*}}, %[[LRWD:[^ ,]+]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-DAG:     %[[LRWD]] = graph.mul %[[LR]], %[[WD:[^ ,]+]]
// CHECK-DAG:     %[[WD]] = graph.constant dense<0.00999999977> : tensor<f32>
// The step.
// CHECK-DAG:     %[[DEN:.*]] = graph.add %[[VHAT:[^ ,]+]], %[[EPS:[^ ,]+]] : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-DAG:     %[[EPS]] = graph.constant dense<9.99999993E-9> : tensor<f32>
// CHECK-DAG:     %[[VHAT]] = graph.div %[[SV:[^ ,]+]], %[[SC2:[^ ,]+]] : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-DAG:     %[[SV]] = graph.sqrt %[[V2]] : tensor<3xf32>
// CHECK-DAG:     %[[SC2]] = graph.sqrt %[[C2]] : tensor<f32>
// CHECK-DAG:     %[[LRC:.*]] = graph.div %[[LR]], %[[C1]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-DAG:     %[[MD:.*]] = graph.div %[[M2]], %[[DEN]]
// CHECK-DAG:     %[[UPD:.*]] = graph.mul %[[LRC]], %[[MD]] : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-DAG:     %[[P2:.*]] = graph.sub %[[DEC]], %[[UPD]]
// CHECK:         return %[[L]], %[[G]], %[[T]], %[[M2]], %[[V2]], %[[P2]] : tensor<f32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>

// Without weight decay, no decay factor; lr is an option, the rate's
// initial value.
// NOWD-LABEL: func.func @one_param(
// NOWD-SAME:      %[[P:[^:]*]]: tensor<3xf32> {graph.init = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, graph.state = "w"}
// NOWD-SAME:      %[[LR:[^:]*]]: tensor<f32> {graph.init = dense<1.000000e-01> : tensor<f32>, graph.state = "pcc.lr"}
// NOWD-NOT:       graph.mul %[[P]],
// NOWD-DAG:       %[[LRC:.*]] = graph.div %[[LR]], %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// NOWD-DAG:       %[[UPD:.*]] = graph.mul %[[LRC]], %{{.*}} : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
// NOWD-DAG:       %[[P2:.*]] = graph.sub %[[P]], %[[UPD]]
// NOWD:           return {{.*}}, %[[P2]] :

// SGD without momentum keeps no state but the parameter and its rate, which
// no step updates, and counts no steps: p' = p - lr g.
// SGD-LABEL: func.func @one_param(
// SGD-SAME:      %[[X:[^:]*]]: tensor<2x3xf32> {onnx.name = "x"},
// SGD-SAME:      %[[P:[^:]*]]: tensor<3xf32> {graph.init = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, graph.state = "w"},
// SGD-SAME:      %[[LR:[^:]*]]: tensor<f32> {graph.init = dense<1.000000e-03> : tensor<f32>, graph.state = "pcc.lr"})
// SGD-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 1 : i64}, tensor<3xf32> {graph.update = 1 : i64})
// SGD:           %[[G:.*]] = graph.reduce_sum %[[X]] {{.*}}graph.backward
// SGD-NEXT:      %[[U:.*]] = graph.mul %[[LR]], %[[G]]
// SGD-NEXT:      %[[P2:.*]] = graph.sub %[[P]], %[[U]]
// SGD-NEXT:      return %{{.*}}, %[[G]], %[[P2]]

// SGD with momentum and (L2) weight decay: d = g + wd p, buf' = mu buf + d,
// p' = p - lr buf'; the buffer is the state "w.sgd.momentum".
// MOM-LABEL: func.func @one_param(
// MOM-SAME:      %[[X:[^:]*]]: tensor<2x3xf32> {onnx.name = "x"},
// MOM-SAME:      %[[P:[^:]*]]: tensor<3xf32> {graph.init = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, graph.state = "w"},
// MOM-SAME:      %[[LR:[^:]*]]: tensor<f32> {graph.init = dense<1.000000e-01> : tensor<f32>, graph.state = "pcc.lr"},
// MOM-SAME:      %[[BUF:[^:]*]]: tensor<3xf32> {graph.init = dense<0.000000e+00> : tensor<3xf32>, graph.state = "w.sgd.momentum", graph.state_of = 1 : i64})
// MOM-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 1 : i64}, tensor<3xf32> {graph.update = 3 : i64}, tensor<3xf32> {graph.update = 1 : i64})
// MOM:           %[[G:.*]] = graph.reduce_sum %[[X]] {{.*}}graph.backward
// MOM-DAG:       %[[D:.*]] = graph.add %[[G]], %[[WDP:[^ ,]+]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// MOM-DAG:       %[[WDP]] = graph.mul %[[WD:[^ ,]+]], %[[P]]
// MOM-DAG:       %[[WD]] = graph.constant dense<5.000000e-01> : tensor<f32>
// MOM-DAG:       %[[BUF2:.*]] = graph.add %[[MB:[^ ,]+]], %[[D]]
// MOM-DAG:       %[[MB]] = graph.mul %[[MU:[^ ,]+]], %[[BUF]]
// MOM-DAG:       %[[MU]] = graph.constant dense<0.899999976> : tensor<f32>
// MOM-DAG:       %[[U:.*]] = graph.mul %[[LR]], %[[BUF2]]
// MOM-DAG:       %[[P2:.*]] = graph.sub %[[P]], %[[U]]
// MOM:           return %{{.*}}, %[[G]], %[[BUF2]], %[[P2]]
func.func @one_param(%x: tensor<2x3xf32> {onnx.name = "x"},
                     %w: tensor<3xf32> {graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>, graph.state = "w"})
    -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 1 : i64}) {
  %y = graph.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  %g = graph.reduce_sum %x {axes = array<i64: 0>, graph.backward, keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// -----

// Two trained parameters, their moments in the order of their gradient
// results, one step counter; a frozen weight stays a graph.weight.

// CHECK-LABEL: func.func @two_params(
// CHECK-SAME:      %{{[^:]*}}: tensor<3xf32> {onnx.name = "x"},
// CHECK-SAME:      %[[A:[^:]*]]: tensor<3xf32> {graph.init = dense<2.000000e+00> : tensor<3xf32>, graph.state = "a"},
// CHECK-SAME:      %[[B:[^:]*]]: tensor<f32> {graph.init = dense<5.000000e-01> : tensor<f32>, graph.state = "b"},
// CHECK-SAME:      %[[STEP:[^:]*]]: tensor<f32> {{{.*}}graph.state = "pcc.step"},
// CHECK-SAME:      %{{[^:]*}}: tensor<f32> {{{.*}}graph.state = "pcc.lr"},
// CHECK-SAME:      %{{[^:]*}}: tensor<f32> {{{.*}}graph.state = "b.adamw.m", graph.state_of = 2 : i64},
// CHECK-SAME:      %{{[^:]*}}: tensor<f32> {{{.*}}graph.state = "b.adamw.v", graph.state_of = 2 : i64},
// CHECK-SAME:      %{{[^:]*}}: tensor<3xf32> {{{.*}}graph.state = "a.adamw.m", graph.state_of = 1 : i64},
// CHECK-SAME:      %{{[^:]*}}: tensor<3xf32> {{{.*}}graph.state = "a.adamw.v", graph.state_of = 1 : i64})
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<f32> {graph.grad = 2 : i64}, tensor<3xf32> {graph.grad = 1 : i64},
// CHECK-SAME:          tensor<f32> {graph.update = 3 : i64},
// CHECK-SAME:          tensor<f32> {graph.update = 5 : i64}, tensor<f32> {graph.update = 6 : i64}, tensor<f32> {graph.update = 2 : i64},
// CHECK-SAME:          tensor<3xf32> {graph.update = 7 : i64}, tensor<3xf32> {graph.update = 8 : i64}, tensor<3xf32> {graph.update = 1 : i64})
// CHECK-NEXT:    %[[FROZEN:.*]] = graph.weight "frozen"
// CHECK-NOT:     graph.weight
// CHECK:         graph.add %[[STEP]],
// CHECK-NOT:     graph.add %[[STEP]],
// CHECK:         return
func.func @two_params(%x: tensor<3xf32> {onnx.name = "x"},
                      %a: tensor<3xf32> {graph.init = dense<2.0> : tensor<3xf32>, graph.state = "a"},
                      %b: tensor<f32> {graph.init = dense<0.5> : tensor<f32>, graph.state = "b"})
    -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<f32> {graph.grad = 2 : i64}, tensor<3xf32> {graph.grad = 1 : i64}) {
  %f = graph.weight "frozen" dense<1.0> : tensor<3xf32>
  %y = graph.mul %x, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %z = graph.mul %y, %f : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %s = graph.add %z, %b : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %l = graph.reduce_sum %s {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  %one = graph.constant {graph.backward} dense<1.0> : tensor<f32>
  %ga = graph.mul %x, %f {graph.backward} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %l, %one, %ga : tensor<f32>, tensor<f32>, tensor<3xf32>
}

// -----

// A parameter of another float type: its moments and update are in that
// type, the bias corrections (computed in f32 from the step) are cast to
// it, as is the rate.

// CHECK-LABEL: func.func @f16_param(
// CHECK-SAME:      %[[P:[^:]*]]: tensor<3xf16> {graph.init = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf16>, graph.state = "w"},
// CHECK-SAME:      %{{[^:]*}}: tensor<f32> {{{.*}}graph.state = "pcc.step"},
// CHECK-SAME:      %[[LR:[^:]*]]: tensor<f32> {{{.*}}graph.state = "pcc.lr"},
// CHECK-SAME:      %{{[^:]*}}: tensor<3xf16> {graph.init = dense<0.000000e+00> : tensor<3xf16>, graph.state = "w.adamw.m", graph.state_of = 1 : i64},
// CHECK-SAME:      %{{[^:]*}}: tensor<3xf16> {graph.init = dense<0.000000e+00> : tensor<3xf16>, graph.state = "w.adamw.v", graph.state_of = 1 : i64})
// CHECK-DAG:     %[[C1:.*]] = graph.sub %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-DAG:     %[[C1H:.*]] = graph.cast %[[C1]] : tensor<f32> to tensor<f16>
// CHECK-DAG:     graph.cast %[[LR]] : tensor<f32> to tensor<f16>
// CHECK-DAG:     %[[C2H:.*]] = graph.cast %[[C2:[^ ,]+]] : tensor<f32> to tensor<f16>
// CHECK-DAG:     %[[C2]] = graph.sub
// CHECK-DAG:     graph.sqrt %[[C2H]] : tensor<f16>
// CHECK-DAG:     graph.div %{{.*}}, %[[C1H]] : (tensor<f16>, tensor<f16>) -> tensor<f16>
// CHECK:         return {{.*}} : tensor<f16>, tensor<3xf16>, tensor<f32>, tensor<3xf16>, tensor<3xf16>, tensor<3xf16>
func.func @f16_param(%x: tensor<2x3xf16> {onnx.name = "x"},
                     %w: tensor<3xf16> {graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf16>, graph.state = "w"})
    -> (tensor<f16> {graph.loss, onnx.name = "loss"}, tensor<3xf16> {graph.grad = 1 : i64}) {
  %y = graph.mul %x, %w : (tensor<2x3xf16>, tensor<3xf16>) -> tensor<2x3xf16>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf16>) -> tensor<f16>
  %g = graph.reduce_sum %x {axes = array<i64: 0>, graph.backward, keepdims = false} : (tensor<2x3xf16>) -> tensor<3xf16>
  return %l, %g : tensor<f16>, tensor<3xf16>
}
