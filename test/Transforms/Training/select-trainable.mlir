// RUN: pcc-opt %s --pcc-select-trainable="remarks=true" --split-input-file -verify-diagnostics | FileCheck %s
// RUN: pcc-opt %s --pcc-select-trainable="trainable=^scale$ freeze=^w$" --split-input-file | FileCheck %s --check-prefix=OVERRIDE

// The exporter's record decides: a parameter trains, a buffer and a
// constant tensor do not, whatever their role.

// CHECK-LABEL: func.func @records
// CHECK: graph.weight "p" trainable {exported_as = "parameter"}
// CHECK: graph.weight "b" {exported_as = "buffer"}
// CHECK: graph.weight "c" {exported_as = "constant"}
func.func @records(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-remark @+1 {{trainable: exported as a parameter}}
  %p = graph.weight "p" {exported_as = "parameter"} dense<1.0> : tensor<4x4xf32>
  // expected-remark @+1 {{constant: exported as a buffer}}
  %b = graph.weight "b" {exported_as = "buffer"} dense<1.0> : tensor<4x4xf32>
  // expected-remark @+1 {{constant: exported as a constant}}
  %c = graph.weight "c" {exported_as = "constant"} dense<1.0> : tensor<4xf32>
  %y = graph.matmul %x, %p : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %z = graph.matmul %y, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %o = graph.add %z, %c : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %o : tensor<2x4xf32>
}

// -----

// Without records, the structural rule: parameters are the operands of
// matrix products (also through a transpose), tables looked up by the
// inputs, normalizations' scales and biases, per-feature scales and biases,
// and additive tables that do not feed a softmax.

// CHECK-LABEL: func.func @parameters
// CHECK-COUNT-6: graph.weight {{.*}} trainable
func.func @parameters(%ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  // expected-remark @+1 {{trainable: a table looked up by the model's inputs}}
  %emb = graph.weight "emb" dense<1.0> : tensor<10x4xf32>
  // expected-remark @+1 {{trainable: an additive table (a position embedding)}}
  %pos = graph.weight "pos" dense<1.0> : tensor<1x3x4xf32>
  // expected-remark @+1 {{trainable: the scale or bias of a normalization}}
  %ln = graph.weight "ln" dense<1.0> : tensor<4xf32>
  // expected-remark @+1 {{trainable: an operand of a matrix product}}
  %wt = graph.weight "wt" dense<1.0> : tensor<4x4xf32>
  // expected-remark @+1 {{trainable: a per-feature bias}}
  %bias = graph.weight "bias" dense<1.0> : tensor<4xf32>
  // expected-remark @+1 {{trainable: a per-feature scale}}
  %scale = graph.weight "scale" dense<1.0> : tensor<1x1x4xf32>
  %e = graph.gather %emb[%ids] {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %h = graph.add %e, %pos : (tensor<2x3x4xf32>, tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  %n:3 = graph.layer_norm %h, %ln {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  %w = graph.transpose %wt {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = graph.matmul %n#0, %w : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %b = graph.add %m, %bias : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %s = graph.mul %b, %scale : (tensor<2x3x4xf32>, tensor<1x1x4xf32>) -> tensor<2x3x4xf32>
  return %s : tensor<2x3x4xf32>
}

// -----

// Constants: a scalar, an additive mask feeding a softmax, a table that
// multiplies activations (rotary), a mask's fill value, and a tensor never
// combined with the inputs in float arithmetic (a mask compared to 0).

// CHECK-LABEL: func.func @constants
// CHECK-NOT: trainable
// CHECK: return
func.func @constants(%q: tensor<1x2x3x4xf32>) -> tensor<1x2x3x3xf32> {
  // expected-remark @+1 {{constant: a scalar}}
  %scale = graph.weight "scale" dense<0.5> : tensor<f32>
  // expected-remark @+1 {{constant: a table that scales activations (rotary cos/sin)}}
  %cos = graph.weight "cos" dense<1.0> : tensor<1x1x3x4xf32>
  // expected-remark @+1 {{constant: an additive attention mask or bias}}
  %mask = graph.weight "mask" dense<0.0> : tensor<1x1x3x3xf32>
  // expected-remark @+1 {{constant: a value selected by a condition (a mask's fill)}}
  %fill = graph.weight "fill" dense<-1.0e9> : tensor<f32>
  // expected-remark @+1 {{constant: never combined with the model's inputs}}
  %tril = graph.weight "tril" dense<1.0> : tensor<1x1x3x3xf32>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %r = graph.mul %q, %cos : (tensor<1x2x3x4xf32>, tensor<1x1x3x4xf32>) -> tensor<1x2x3x4xf32>
  %kt = graph.transpose %r {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x3x4xf32>) -> tensor<1x2x4x3xf32>
  %a = graph.matmul %r, %kt : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32>
  %as = graph.mul %a, %scale : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %am = graph.add %as, %mask : (tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32>
  %keep = graph.equal %tril, %zero : (tensor<1x1x3x3xf32>, tensor<f32>) -> tensor<1x1x3x3xi1>
  %f = graph.where %keep, %fill, %am : (tensor<1x1x3x3xi1>, tensor<f32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %p = graph.softmax %f {axis = 3 : i64} : tensor<1x2x3x3xf32>
  return %p : tensor<1x2x3x3xf32>
}

// -----

// Exports that lost parameters: an annotated export with an unannotated
// initializer that the rule trains (a transposed copy the exporter folded),
// and one initializer that is the scale of several normalizations (the
// exporter merged equal parameters of a fresh model).

// expected-warning @+2 {{the export lost its parameter records: 1 float initializer(s) without one ('val_7') are trained by pcc's structural rule; export the model for training with torch.onnx.export(model, args, dynamo=True, optimize=False)}}
// expected-warning @+1 {{initializer(s) 'ln.weight' serve as the scale or bias of several layers}}
func.func @lost(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-remark @+1 {{trainable: exported as a parameter}}
  %p = graph.weight "p" {exported_as = "parameter"} dense<1.0> : tensor<4x4xf32>
  // expected-remark @+1 {{trainable: an operand of a matrix product}}
  %folded = graph.weight "val_7" dense<2.0> : tensor<4x4xf32>
  // expected-remark @+1 {{trainable: exported as a parameter}}
  %ln = graph.weight "ln.weight" {exported_as = "parameter"} dense<1.0> : tensor<4xf32>
  %y = graph.matmul %x, %p : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %n1:3 = graph.layer_norm %y, %ln {axis = 1 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %z = graph.matmul %n1#0, %folded : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %n2:3 = graph.layer_norm %z, %ln {axis = 1 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %n2#0 : tensor<2x4xf32>
}

// -----

// --freeze removes, --trainable adds; --freeze wins.

// OVERRIDE-LABEL: func.func @overrides
// OVERRIDE: graph.weight "w" {exported_as = "parameter"}
// OVERRIDE: graph.weight "scale" trainable
func.func @overrides(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-remark @+1 {{trainable: exported as a parameter}}
  %w = graph.weight "w" {exported_as = "parameter"} dense<1.0> : tensor<4x4xf32>
  // expected-remark @+1 {{constant: a scalar}}
  %scale = graph.weight "scale" dense<0.5> : tensor<f32>
  %y = graph.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %z = graph.mul %y, %scale : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return %z : tensor<2x4xf32>
}

// -----

// A fixed sinusoidal position table added to the activations (CTRL's,
// which the dynamo exporter's optimizer folds into an initializer without
// a record) is a constant; the same table with one entry moved by 0.01 is
// an additive table the rule trains.

// CHECK-LABEL: func.func @sinusoid
// CHECK: graph.weight "sinusoid" dense
// CHECK: graph.weight "learned" trainable
func.func @sinusoid(%x: tensor<2x6x4xf32>) -> tensor<2x6x4xf32> {
  // expected-remark @+1 {{constant: a fixed sinusoidal position table}}
  %s = graph.weight "sinusoid" dense<[[0.00000000e+00, 0.00000000e+00, 1.00000000e+00, 1.00000000e+00], [8.41471016e-01, 9.98334214e-02, 5.40302277e-01, 9.95004177e-01], [9.09297407e-01, 1.98669329e-01, -4.16146815e-01, 9.80066597e-01], [1.41120002e-01, 2.95520216e-01, -9.89992499e-01, 9.55336511e-01], [-7.56802499e-01, 3.89418334e-01, -6.53643608e-01, 9.21060979e-01], [-9.58924294e-01, 4.79425550e-01, 2.83662170e-01, 8.77582550e-01]]> : tensor<6x4xf32>
  // expected-remark @+1 {{trainable: an additive table (a position embedding)}}
  %l = graph.weight "learned" dense<[[0.00000000e+00, 0.00000000e+00, 1.00000000e+00, 1.00000000e+00], [8.41471016e-01, 9.98334214e-02, 5.40302277e-01, 9.95004177e-01], [9.09297407e-01, 1.98669329e-01, -4.16146815e-01, 9.80066597e-01], [1.41120002e-01, 3.05520207e-01, -9.89992499e-01, 9.55336511e-01], [-7.56802499e-01, 3.89418334e-01, -6.53643608e-01, 9.21060979e-01], [-9.58924294e-01, 4.79425550e-01, 2.83662170e-01, 8.77582550e-01]]> : tensor<6x4xf32>
  %a = graph.add %x, %s : (tensor<2x6x4xf32>, tensor<6x4xf32>) -> tensor<2x6x4xf32>
  %b = graph.add %a, %l : (tensor<2x6x4xf32>, tensor<6x4xf32>) -> tensor<2x6x4xf32>
  return %b : tensor<2x6x4xf32>
}
