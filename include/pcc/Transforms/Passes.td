//===- Passes.td - pcc's passes ----------------------------*- tablegen -*-===//

#ifndef PCC_TRANSFORMS_PASSES
#define PCC_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def CheckStaticShapes : Pass<"pcc-check-static-shapes", "::mlir::func::FuncOp"> {
  let summary = "Checks that every tensor has a static shape";
  let description = [{
    Code generation plans every buffer at compile time, so every value in the
    function must be a ranked tensor of static shape with an element type
    the targets support. Fails naming the operation (its ONNX node) that
    produces the first offending value.
  }];
}

#endif // PCC_TRANSFORMS_PASSES
