//===- GraphTraining.h - The training-step contract --------*- C++ -*-===//
//
// A training step is a func.func whose persistent state arrives as
// arguments and leaves as results. The ties between them are Graph dialect
// attributes that the dialect verifies (GraphTraining.cpp), so that every
// pass and target sees a consistent step:
//
//   argument  graph.state = "<name>"   persistent state, its checkpoint name
//             graph.init = <elements>  its initial value (the argument's type)
//             graph.state_of = <i>     optimizer state of the parameter held
//                                      by argument i (moments, momentum)
//             graph.previous_version   with graph.state_of: that parameter
//                                      one update old (PipeDream-2BW)
//   result    graph.update = <i>       the new value of state argument i
//             graph.grad = <i>         the gradient of the parameter held by
//                                      state argument i
//             graph.loss               the loss (a float scalar)
//   op        graph.backward           built by reverse-mode autodiff
//
// Indices, not names, tie them: sharding gives a parameter, its gradient,
// its moments and its update one layout by following them.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_DIALECT_GRAPH_IR_GRAPHTRAINING_H
#define PCC_DIALECT_GRAPH_IR_GRAPHTRAINING_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace pcc::graph {

inline constexpr llvm::StringLiteral kStateAttr = "graph.state";
inline constexpr llvm::StringLiteral kInitAttr = "graph.init";
/// On a `graph.state` argument: the state is scratch that the runs keep
/// between them (a generation step's KV cache), not part of the model's
/// state; checkpoints leave it out (PCCRT_FLAG_CACHE).
inline constexpr llvm::StringLiteral kCacheAttr = "graph.cache";
inline constexpr llvm::StringLiteral kStateOfAttr = "graph.state_of";
/// On a `graph.state_of` argument: it is its parameter one update old
/// (PipeDream-2BW's weights, from pcc-delay-weights), which the step's
/// forward and backward read in place of the parameter.
inline constexpr llvm::StringLiteral kPreviousVersionAttr =
    "graph.previous_version";
inline constexpr llvm::StringLiteral kUpdateAttr = "graph.update";
inline constexpr llvm::StringLiteral kGradAttr = "graph.grad";
inline constexpr llvm::StringLiteral kLossAttr = "graph.loss";
inline constexpr llvm::StringLiteral kBackwardAttr = "graph.backward";
/// On the step, from pcc-attach-loss: the pieces of the sequence that the
/// LM head and the loss are computed in, when more than one.
inline constexpr llvm::StringLiteral kLossPiecesAttr = "graph.loss_pieces";
/// On the op that sums the squares of every trained gradient (gradient
/// clipping's global norm, squared): a pipeline sums each rank's part and
/// all-reduces the parts over its stages.
inline constexpr llvm::StringLiteral kGradientNormAttr = "graph.gradient_norm";
/// On the module, from pcc-recompute: {ops, flops, bytes}, the ops the
/// backward recomputes, the flops they add to a step and the bytes of
/// forward values the backward no longer reads.
inline constexpr llvm::StringLiteral kRecomputeAttr = "graph.recompute";

/// The name of state argument `arg`, or empty when it is no state.
llvm::StringRef getStateName(mlir::FunctionOpInterface func, unsigned arg);
/// The argument a result's `attrName` (graph.update, graph.grad) refers to.
std::optional<unsigned> getStateIndex(mlir::FunctionOpInterface func,
                                      unsigned result,
                                      llvm::StringRef attrName);
/// The index of the result marked graph.loss, if any.
std::optional<unsigned> getLossIndex(mlir::FunctionOpInterface func);

/// Appends a state argument to `func`: named `name` (graph.state), starting
/// at `init` (graph.init, whose type it takes), the optimizer state or the
/// version of the parameter argument `of` where given (graph.state_of),
/// with `extra` attributes besides.
mlir::BlockArgument
addStateArgument(mlir::FunctionOpInterface func, llvm::StringRef name,
                 mlir::ElementsAttr init, std::optional<unsigned> of,
                 mlir::Location loc,
                 llvm::ArrayRef<mlir::NamedAttribute> extra = {});

} // namespace pcc::graph

#endif // PCC_DIALECT_GRAPH_IR_GRAPHTRAINING_H
