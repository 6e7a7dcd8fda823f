// RUN: pcc-opt %s --pcc-untie="regex=weight$" | FileCheck %s
// RUN: pcc-opt %s --pcc-select-trainable --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=MERGED
// RUN: pcc-opt %s --pcc-untie="regex=weight$|^bias$" --pcc-select-trainable --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=TRAIN
// RUN: pcc-opt %s --pcc-untie="regex=^once|^nothing" 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not pcc-opt %s --pcc-untie="regex=ln(" 2>&1 | FileCheck %s --check-prefix=BAD

// Each op consuming a matched initializer gets its own copy, named
// <initializer>@<ONNX node>, with the value and the exporter's record of
// the original. Two consumers from one node, or one from none, add #k (the
// consumer's position). An op using the initializer twice has one copy; an
// initializer used once, or not matched, is left alone.

// CHECK-LABEL: func.func @shared
// CHECK-DAG: %[[LN0:.*]] = graph.weight "ln.weight@node_ln" {exported_as = "parameter"} dense<1.000000e+00> : tensor<4xf32>
// CHECK-DAG: %[[LN1:.*]] = graph.weight "ln.weight@node_ln_1" {exported_as = "parameter"} dense<1.000000e+00> : tensor<4xf32>
// CHECK-DAG: %[[G0:.*]] = graph.weight "gemm.weight@node_gemm#0" dense<2.000000e+00> : tensor<4xf32>
// CHECK-DAG: %[[G1:.*]] = graph.weight "gemm.weight@node_gemm#1" dense<2.000000e+00> : tensor<4xf32>
// CHECK-DAG: %[[A0:.*]] = graph.weight "a.weight@#0" dense<3.000000e+00> : tensor<4xf32>
// CHECK-DAG: %[[A1:.*]] = graph.weight "a.weight@node_sq" dense<3.000000e+00> : tensor<4xf32>
// CHECK-DAG: %[[ONCE:.*]] = graph.weight "once.weight" dense<4.000000e+00> : tensor<4xf32>
// CHECK-DAG: %[[BIAS:.*]] = graph.weight "bias" dense<0.000000e+00> : tensor<4xf32>
// CHECK: graph.layer_norm %{{.*}}, %[[LN0]]
// CHECK: graph.layer_norm %{{.*}}, %[[LN1]]
// CHECK: graph.add %{{.*}}, %[[BIAS]]
// CHECK: graph.mul %{{.*}}, %[[G0]]
// CHECK: graph.mul %{{.*}}, %[[G1]]
// CHECK: graph.add %{{.*}}, %[[A0]]
// CHECK: graph.mul %[[A1]], %[[A1]]
// CHECK: graph.add %{{.*}}, %[[BIAS]]
// CHECK: graph.mul %{{.*}}, %[[ONCE]]
// CHECK-NOT: graph.weight

// Shared, they are merged parameters, and the warning names the fix; untied,
// each copy is judged and trained on its own.
// MERGED: warning: initializer(s) 'ln.weight', 'gemm.weight', 'a.weight', 'bias' serve as the scale or bias of several layers: {{.*}}; or untie them with --untie REGEX
// TRAIN-NOT: several layers
// TRAIN: graph.weight "ln.weight@node_ln" trainable
// TRAIN: graph.weight "ln.weight@node_ln_1" trainable
// TRAIN: graph.weight "bias@node_add" trainable
// TRAIN: graph.weight "bias@#1" trainable
// TRAIN-NOT: several layers

// NONE: warning: --untie '^once|^nothing' matched no initializer used more than once
// NONE: graph.weight "ln.weight" {exported_as = "parameter"}

// BAD: error: --untie: invalid regular expression: parentheses not balanced
func.func @shared(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %ln = graph.weight "ln.weight" {exported_as = "parameter"} dense<1.0> : tensor<4xf32>
  %g = graph.weight "gemm.weight" dense<2.0> : tensor<4xf32>
  %a = graph.weight "a.weight" dense<3.0> : tensor<4xf32>
  %once = graph.weight "once.weight" dense<4.0> : tensor<4xf32>
  %b = graph.weight "bias" dense<0.0> : tensor<4xf32>
  %n:3 = graph.layer_norm %x, %ln {axis = 1 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>) loc("node_ln")
  %m:3 = graph.layer_norm %n#0, %ln {axis = 1 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>) loc("node_ln_1")
  %y = graph.add %m#0, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("node_add")
  %c = graph.mul %y, %g : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("node_gemm")
  %d = graph.mul %c, %g : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("node_gemm")
  %e = graph.add %d, %a : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %sq = graph.mul %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("node_sq")
  %f = graph.add %e, %sq : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %h = graph.add %f, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %o = graph.mul %h, %once : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %o : tensor<2x4xf32>
}
