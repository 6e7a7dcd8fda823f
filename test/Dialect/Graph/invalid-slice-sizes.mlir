// BUG: SliceOp::verify (lib/Dialect/Graph/IR/GraphOps.cpp) checks that
// `starts` and `steps` have one entry per dimension but not `sizes`, then
// reads getSizes()[d] for every dimension d: with fewer sizes than the rank
// it reads past the end of the array (undefined behaviour; in practice it
// reports a bogus "slice out of bounds" from whatever memory follows). The
// custom verifier runs before type inference, so the "Slice: one size per
// dimension expected" check of inferReturnTypes never gets the chance.
// RUN: pcc-opt %s -split-input-file -verify-diagnostics

func.func @slice_sizes_too_short(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op needs one start, size and step per dimension}}
  %0 = graph.slice %x {starts = array<i64: 0, 0>, sizes = array<i64: 1>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @slice_sizes_empty(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'graph.slice' op needs one start, size and step per dimension}}
  %0 = graph.slice %x {starts = array<i64: 0, 0>, sizes = array<i64>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<f32>
  return
}
