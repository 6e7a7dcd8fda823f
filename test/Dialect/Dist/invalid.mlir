// RUN: pcc-opt %s --split-input-file --verify-diagnostics

// expected-error@+1 {{'dist.mesh' op has two axes named 'tp'}}
dist.mesh @mesh(tp = 2, tp = 2)

// -----

// expected-error@+1 {{'dist.mesh' op axis 'tp' has size 0; sizes are at least 1}}
dist.mesh @mesh(tp = 0)

// -----

func.func @no_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'dist.all_reduce' op mesh @mesh is not a dist.mesh}}
  %0 = dist.all_reduce %x on @mesh axes ["tp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @unknown_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'dist.all_reduce' op axis 'pp' is not an axis of mesh @mesh}}
  %0 = dist.all_reduce %x on @mesh axes ["pp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @axis_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'dist.all_reduce' op axis 'tp' is listed twice}}
  %0 = dist.all_reduce %x on @mesh axes ["tp", "tp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @no_axes(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'dist.all_reduce' op needs at least one mesh axis}}
  %0 = dist.all_reduce %x on @mesh axes [] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @gather_shape(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  // expected-error@+1 {{'dist.all_gather' op result 'tensor<2x8xf32>' should have the shape 2x16}}
  %0 = dist.all_gather %x on @mesh axes ["tp"] dim 1 : tensor<2x4xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @gather_dim(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error@+1 {{'dist.all_gather' op dim 2 out of range for rank 2}}
  %0 = dist.all_gather %x on @mesh axes ["tp"] dim 2 : tensor<2x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @scatter_divisibility(%x: tensor<6x4xf32>) -> tensor<1x4xf32> {
  // expected-error@+1 {{'dist.reduce_scatter' op dimension 0 of extent 6 does not divide by the group size 4}}
  %0 = dist.reduce_scatter %x on @mesh axes ["tp"] dim 0 sum : tensor<6x4xf32> -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

dist.mesh @mesh(tp = 2)
func.func @all_to_all_shape(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error@+1 {{'dist.all_to_all' op result 'tensor<4x4xf32>' should have the shape 2x8}}
  %0 = dist.all_to_all %x on @mesh axes ["tp"] split 0 concat 1 : tensor<4x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

dist.mesh @mesh(pp = 2, tp = 2)
func.func @peer_outside(%x: tensor<4xf32>) {
  // expected-error@+1 {{'dist.send' op peer 2 is outside the group of 2 ranks}}
  dist.send %x on @mesh axes ["pp"] to 2 tag 0 : tensor<4xf32>
  return
}

// -----

dist.mesh @mesh(pp = 2)
func.func @negative_tag() -> tensor<4xf32> {
  // expected-error@+1 {{'dist.recv' op tag -1 is negative}}
  %0 = dist.recv on @mesh axes ["pp"] from 0 tag -1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh(tp = 2)
func.func @unknown_reduction(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{unknown reduction 'prod' (sum, max, min or mean)}}
  %0 = dist.all_reduce %x on @mesh axes ["tp"] prod : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error@+1 {{axis 'tp' is used twice}}
func.func @sharding_axis_twice(%a: tensor<8x4xf32> {dist.layout = #dist.sharding<@mesh, [["tp"], ["tp"]]>}) {
  return
}

// -----

// expected-error@+1 {{axis 'tp' is used twice}}
func.func @split_and_partial(%a: tensor<8x4xf32> {dist.layout = #dist.sharding<@mesh, [["tp"], []], partial = ["tp"] sum>}) {
  return
}

// -----

// expected-error@+1 {{groups has 1 entries for 2 dimensions}}
func.func @groups_per_dimension(%a: tensor<8x4xf32> {dist.layout = #dist.sharding<@mesh, [["tp"], []] groups [2]>}) {
  return
}

// -----

dist.mesh @mesh(tp = 2)
func.func @slice_indivisible(%x: tensor<2x9xf32>) -> tensor<2x3xf32> {
  // expected-error@+1 {{dimension 1 of extent 9 does not split into 3 group(s) of 2 blocks}}
  %0 = dist.all_slice %x on @mesh axes ["tp"] dim 1 groups 3 : tensor<2x9xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
