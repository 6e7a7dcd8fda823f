// RUN: pcc-translate --graph-to-cpp --split-input-file %s | FileCheck %s

// A training step: the state arguments (a parameter, its moment, the step
// counter) become STATE entries of the weights table, read through w[j];
// the gradient is a GRAD output named by its parameter; the loss is an
// OUTPUT; the state updates are no outputs but land in their state buffers
// at the very end, after the outputs (a copy, unless computed in place).

func.func @step(%x: tensor<2x3xf32> {onnx.name = "x"},
                %w: tensor<3xf32> {graph.state = "w", graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>},
                %m: tensor<3xf32> {graph.state = "w.adamw.m", graph.init = dense<0.0> : tensor<3xf32>},
                %step: tensor<f32> {graph.state = "pcc.step", graph.init = dense<0.0> : tensor<f32>})
    -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 1 : i64},
        tensor<3xf32> {graph.update = 1 : i64},
        tensor<3xf32> {graph.update = 2 : i64},
        tensor<f32> {graph.update = 3 : i64}) {
  %d = graph.add %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %sq = graph.mul %d, %d : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %loss = graph.reduce_mean %sq {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  %k = graph.constant dense<0.333333343> : tensor<f32>
  %gd = graph.mul %d, %k : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %g = graph.reduce_sum %gd {axes = array<i64: 0>, keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
  %beta = graph.constant dense<0.9> : tensor<f32>
  %mb = graph.mul %m, %beta : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %m1 = graph.add %mb, %g : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %lr = graph.constant dense<0.1> : tensor<f32>
  %u = graph.mul %m1, %lr : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %w1 = graph.sub %w, %u : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %s1 = graph.add %step, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss, %g, %w1, %m1, %s1 : tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// CHECK:      static const pccrt_tensor_info inputs[] = {
// CHECK-NEXT:   {"x", 1, 2, pcc_in_shape0, PCCRT_KIND_INPUT, 0u, 0, 0, 0, 0ull, 0u, 0u},
// CHECK-NEXT: };
// CHECK-NEXT: static const pccrt_tensor_info outputs[] = {
// CHECK-NEXT:   {"loss", 1, 0, pcc_out_shape0, PCCRT_KIND_OUTPUT, 0u, 0, 0, 0, 0ull, 0u, 0u},
// CHECK-NEXT:   {"w", 1, 1, pcc_out_shape1, PCCRT_KIND_GRAD, 0u, 0, 0, 0, 0ull, 0u, 0u},
// CHECK-NEXT: };
// CHECK-NEXT: static const pccrt_tensor_info weights[] = {
// CHECK-NEXT:   {"w", 1, 1, pcc_w_shape0, PCCRT_KIND_STATE, 0u, 0, 0, 0, 0ull, 0u, 0u},
// CHECK-NEXT:   {"w.adamw.m", 1, 1, pcc_w_shape1, PCCRT_KIND_STATE, 0u, 0, 0, 0, 0ull, 0u, 0u},
// CHECK-NEXT:   {"pcc.step", 1, 0, pcc_w_shape2, PCCRT_KIND_STATE, 0u, 0, 0, 0, 0ull, 0u, 0u},
// CHECK-NEXT: };
// CHECK:      static const pccrt_model_info info = {PCCRT_ABI_VERSION, 1, inputs, 2, outputs, 3, weights, {{[0-9]+}}ULL, 0, nullptr, nullptr, -1, PCCRT_DEVICE_HOST, 0, nullptr, 1, entries, nullptr};
// CHECK:      float* [[X:a[0-9]+]] = (float*)in[0];
// CHECK-NEXT: float* [[W:a[0-9]+]] = (float*)w[0];
// CHECK-NEXT: float* [[M:a[0-9]+]] = (float*)w[1];
// CHECK-NEXT: float* [[S:a[0-9]+]] = (float*)w[2];
// The loss is computed in place in its output; the gradient in the
// workspace, copied out at the end where the caller gave it a buffer
// (ABI 16: a run that does not read it passes null). The updates of w and
// of the step counter, which read the old value once, at the same
// elements, and last, in place in their states (the kernel reads and
// writes the one buffer); the moment's, whose op does not read it, into
// the workspace, copied at the end.
// CHECK:      float* [[LOSS:v[0-9]+]] = (float*)out[0];
// CHECK:      float* [[W1:v[0-9]+]] = (float*)[[W]];
// CHECK-NEXT: float* [[S1:v[0-9]+]] = (float*)[[S]];
// CHECK:      // graph.reduce_sum
// CHECK-NEXT: pcc_loop{{[0-9]+}}([[G:v[0-9]+]], {{v[0-9]+}});
// CHECK:      // graph.add
// CHECK:      pcc_loop{{[0-9]+}}([[M1:v[0-9]+]], {{.*}}, [[G]]);
// CHECK:      // graph.sub
// CHECK:      pcc_loop{{[0-9]+}}([[W1]], {{v[0-9]+}});
// CHECK:      pcc_loop{{[0-9]+}}([[S1]], {{c[0-9]+}});
// CHECK-NEXT: if ((void*)((float*)out[0]) != (void*)[[LOSS]]) std::memcpy(((float*)out[0]), [[LOSS]], 4);
// CHECK-NEXT: if (out[1]) {
// CHECK-NEXT: if ((void*)((float*)out[1]) != (void*)[[G]]) std::memcpy(((float*)out[1]), [[G]], 12);
// CHECK-NEXT: }
// CHECK-NEXT: // state update 'w'
// CHECK-NEXT: if ((void*)((float*)w[0]) != (void*)[[W1]]) std::memcpy(((float*)w[0]), [[W1]], 12);
// CHECK-NEXT: // state update 'w.adamw.m'
// CHECK-NEXT: if ((void*)((float*)w[1]) != (void*)[[M1]]) std::memcpy(((float*)w[1]), [[M1]], 12);
// CHECK-NEXT: // state update 'pcc.step'
// CHECK-NEXT: if ((void*)((float*)w[2]) != (void*)[[S1]]) std::memcpy(((float*)w[2]), [[S1]], 4);
// CHECK-NEXT: return PCCRT_OK;

// -----

// State updates that read states: "a" takes b's old value, which b's own
// update overwrites, so it is snapshot first; "c" keeps its value (no copy
// needed at run time); the output "old_a" is copied before any update.

func.func @swap(%a: tensor<4xf32> {graph.state = "a", graph.init = dense<1.0> : tensor<4xf32>},
                %b: tensor<4xf32> {graph.state = "b", graph.init = dense<2.0> : tensor<4xf32>},
                %c: tensor<2x2xf32> {graph.state = "c", graph.init = dense<3.0> : tensor<2x2xf32>})
    -> (tensor<4xf32> {onnx.name = "old_a"},
        tensor<4xf32> {graph.update = 0 : i64}, tensor<4xf32> {graph.update = 1 : i64},
        tensor<2x2xf32> {graph.update = 2 : i64}) {
  %r = graph.reshape %c : tensor<2x2xf32> to tensor<4xf32>
  %ab = graph.add %a, %r : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a, %b, %ab, %c : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>
}

// CHECK:      static const pccrt_tensor_info inputs[] = {
// CHECK-NEXT:   {nullptr, 0, 0, nullptr, 0, 0u, 0, 0, 0, 0ull, 0u},
// CHECK:      static const pccrt_model_info info = {PCCRT_ABI_VERSION, 0, inputs, 1, outputs, 3, weights, 128ULL, 0, nullptr, nullptr, -1, PCCRT_DEVICE_HOST, 0, nullptr, 1, entries, nullptr};
// CHECK:      float* [[A:a[0-9]+]] = (float*)w[0];
// CHECK-NEXT: float* [[B:a[0-9]+]] = (float*)w[1];
// CHECK-NEXT: float* [[C:a[0-9]+]] = (float*)w[2];
// CHECK:      float* [[AB:v[0-9]+]] = (float*)(ws + 0);
// CHECK-NEXT: float* [[SNAP:snap[0-9]+]] = (float*)(ws + 64);
// CHECK:      if ((void*)((float*)out[0]) != (void*)[[A]]) std::memcpy(((float*)out[0]), [[A]], 16);
// CHECK-NEXT: std::memcpy([[SNAP]], [[B]], 16);
// CHECK-NEXT: // state update 'a'
// CHECK-NEXT: if ((void*)((float*)w[0]) != (void*)[[SNAP]]) std::memcpy(((float*)w[0]), [[SNAP]], 16);
// CHECK-NEXT: // state update 'b'
// CHECK-NEXT: if ((void*)((float*)w[1]) != (void*)[[AB]]) std::memcpy(((float*)w[1]), [[AB]], 16);
// CHECK-NEXT: // state update 'c'
// CHECK-NEXT: if ((void*)((float*)w[2]) != (void*)[[C]]) std::memcpy(((float*)w[2]), [[C]], 16);

// -----

// An op that may fail (a gather's index check) after an update keeps the
// update out of place, so that a failed step leaves the state as it was.

func.func @later_gather(%i: tensor<2xi64> {onnx.name = "i"},
                        %w: tensor<3xf32> {graph.state = "w", graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>})
    -> (tensor<2xf32> {onnx.name = "y"}, tensor<3xf32> {graph.update = 1 : i64}) {
  %one = graph.constant dense<1.0> : tensor<f32>
  %w1 = graph.add %w, %one : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %y = graph.gather %w1[%i] {axis = 0 : i64} : (tensor<3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %y, %w1 : tensor<2xf32>, tensor<3xf32>
}

// CHECK:      float* [[GW:a[0-9]+]] = (float*)w[0];
// CHECK-NEXT: float* [[GW1:v[0-9]+]] = (float*)(ws + 0);
// CHECK:      pcc_loop{{[0-9]+}}([[GW1]], [[GW]], {{c[0-9]+}});
// CHECK:      if (pcc_k::gather(
// CHECK:      if ((void*)((float*)w[0]) != (void*)[[GW1]]) std::memcpy(((float*)w[0]), [[GW1]], 12);

// -----

// A scatter after the update whose indices a gather before it checked
// against the same extent cannot fail (the gather would have failed
// first): the update is computed in place (an embedding's backward
// scatter, after the other parameters' updates that pcc-hoist-updates
// moves up to their gradients). Against another extent it may fail, and
// the update stays out of place.

func.func @checked_scatter(%i: tensor<2xi64> {onnx.name = "i"},
                           %e: tensor<3x2xf32> {onnx.name = "e"},
                           %w: tensor<3xf32> {graph.state = "w", graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>})
    -> (tensor<3x2xf32> {onnx.name = "s"}, tensor<3xf32> {graph.update = 2 : i64}) {
  %y = graph.gather %e[%i] {axis = 0 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %w1 = graph.add %w, %one : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %s = graph.scatter_add %y[%i] {axis = 0 : i64} : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<3x2xf32>
  return %s, %w1 : tensor<3x2xf32>, tensor<3xf32>
}

// CHECK:      float* [[SW:a[0-9]+]] = (float*)w[0];
// CHECK-NEXT: float* {{v[0-9]+}} = (float*)(ws + 0);
// CHECK-NEXT: float* [[SW1:v[0-9]+]] = (float*)[[SW]];
// CHECK:      if (pcc_k::gather(
// CHECK:      pcc_loop{{[0-9]+}}([[SW1]], {{c[0-9]+}});
// CHECK:      if (pcc_k::scatterAdd(

// -----

func.func @unchecked_scatter(%i: tensor<2xi64> {onnx.name = "i"},
                             %e: tensor<3x2xf32> {onnx.name = "e"},
                             %w: tensor<3xf32> {graph.state = "w", graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>})
    -> (tensor<4x2xf32> {onnx.name = "s"}, tensor<3xf32> {graph.update = 2 : i64}) {
  %y = graph.gather %e[%i] {axis = 0 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %w1 = graph.add %w, %one : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %s = graph.scatter_add %y[%i] {axis = 0 : i64} : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  return %s, %w1 : tensor<4x2xf32>, tensor<3xf32>
}

// CHECK:      float* [[UW:a[0-9]+]] = (float*)w[0];
// CHECK-NEXT: float* {{v[0-9]+}} = (float*)(ws + 0);
// CHECK-NEXT: float* [[UW1:v[0-9]+]] = (float*)(ws + 64);
// CHECK:      pcc_loop{{[0-9]+}}([[UW1]], [[UW]], {{c[0-9]+}});
// CHECK:      if (pcc_k::scatterAdd(
// CHECK:      if ((void*)((float*)w[0]) != (void*)[[UW1]]) std::memcpy(((float*)w[0]), [[UW1]], 12);

// -----

// A collective after the update does not keep it out of place: a failed
// collective ends the run on every rank, whatever the state (a
// data-parallel step's updates follow their buckets' waits).

dist.mesh @mesh(dp = 2)

func.func @later_collective(%g: tensor<3xf32> {onnx.name = "g"},
                            %w: tensor<3xf32> {graph.state = "w", graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>})
    -> (tensor<3xf32> {onnx.name = "y"}, tensor<3xf32> {graph.update = 1 : i64}) {
  %one = graph.constant dense<1.0> : tensor<f32>
  %w1 = graph.add %w, %one : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %r = dist.all_reduce %g on @mesh axes ["dp"] sum : tensor<3xf32>
  %y = dist.wait %r : tensor<3xf32>
  return %y, %w1 : tensor<3xf32>, tensor<3xf32>
}

// CHECK:      float* [[CW:a[0-9]+]] = (float*)w[0];
// CHECK-NEXT: float* [[CW1:v[0-9]+]] = (float*)[[CW]];
// CHECK:      pcc_loop{{[0-9]+}}([[CW1]], {{c[0-9]+}});
// CHECK:      start_all_reduce
// CHECK:      if ((void*)((float*)w[0]) != (void*)[[CW1]]) std::memcpy(((float*)w[0]), [[CW1]], 12);

// -----

// Code that only gradients read (optional results: the caller may give
// them no buffer) runs only where the caller asks for one of them; code
// that a state update reads too, or a collective, always runs. A value
// computed only when its one result is asked for is computed in the
// caller's buffer.

dist.mesh @mesh(dp = 2)

func.func @averaged(%g: tensor<3xf32> {onnx.name = "g"},
                    %w: tensor<3xf32> {graph.state = "w", graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>},
                    %v: tensor<3xf32> {graph.state = "v", graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>})
    -> (tensor<3xf32> {graph.grad = 1 : i64}, tensor<3xf32> {graph.grad = 2 : i64},
        tensor<3xf32> {graph.update = 1 : i64}) {
  %two = graph.constant dense<2.0> : tensor<f32>
  %r = dist.all_reduce %g on @mesh axes ["dp"] sum : tensor<3xf32>
  %sum = dist.wait %r : tensor<3xf32>
  %w1 = graph.sub %w, %sum : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %e = graph.exp %sum : tensor<3xf32>
  %gw = graph.div %e, %two : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %gv = graph.mul %e, %two : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %gw, %gv, %w1 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// CHECK:      float* [[GW:v[0-9]+]] = (float*)out[0];
// CHECK-NEXT: float* [[GV:v[0-9]+]] = (float*)out[1];
// CHECK:      start_all_reduce
// CHECK:      // graph.sub
// CHECK-NEXT: pcc_loop
// CHECK-NEXT: if (out[0] || out[1]) {
// CHECK-NEXT: // graph.exp
// CHECK-NEXT: pcc_loop{{[0-9]+}}([[E:v[0-9]+]],
// CHECK-NEXT: }
// CHECK-NEXT: if (out[0]) {
// CHECK-NEXT: // graph.div
// CHECK-NEXT: pcc_loop{{[0-9]+}}([[GW]], [[E]],
// CHECK-NEXT: }
// CHECK-NEXT: if (out[1]) {
// CHECK-NEXT: // graph.mul
// CHECK-NEXT: pcc_loop{{[0-9]+}}([[GV]], [[E]],
// CHECK-NEXT: }
