// RUN: not pcc-translate --graph-to-cpp --split-input-file %s 2>&1 | FileCheck %s

// Without --function, the entry is the module's one public function.

func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// CHECK: :[[@LINE+1]]:1: error: a second public function: the program's entry is 'first', and the functions it calls must be private
func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// CHECK: error: no public function to compile as the entry
func.func private @only(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
