//===- EmitCommunication.cpp - Communication and calls --------------------===//
//
// The program emitter's Dist ops and calls: collectives, started where
// they are (their dist.wait completes them), point-to-point transfers,
// the rank's block of a whole tensor (dist.all_slice) and its position
// along mesh axes, and func.call of another function of the program in
// the workspace after the caller's own.
//
//===----------------------------------------------------------------------===//

#include "FunctionEmitter.h"

#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::detail;
using namespace pcc::graph;

std::optional<LogicalResult>
FunctionEmitter::emitCommunicationOp(Operation *op) {
  auto result = [&](unsigned i = 0) { return op->getResult(i); };
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](dist::AllReduceOp r) {
        hooks.emitCollective(
            {CollectiveCall::Kind::AllReduce, mesh.getAxesMask(r.getAxes()),
             ptr(r.getInput()), ptr(result()),
             getNumElements(shapeOf(r.getInput())), elemOf(result()),
             int32_t(r.getKind()), requestOf(op)});
        return success();
      })
      .Case([&](dist::AllGatherOp g) -> LogicalResult {
        // Blocks are joined along the outermost dimension (partitioning
        // moves the gathered dimension there).
        ArrayRef<int64_t> in = shapeOf(g.getInput());
        if (g.getDimAttr().getInt() != 0 &&
            llvm::any_of(in.take_front(g.getDimAttr().getInt()),
                         [](int64_t d) { return d != 1; }))
          return g.emitError() << hooks.getTargetName()
                               << " gathers along the outermost dimension "
                                  "only";
        hooks.emitCollective({CollectiveCall::Kind::AllGather,
                              mesh.getAxesMask(g.getAxes()), ptr(g.getInput()),
                              ptr(result()), getNumElements(in),
                              elemOf(result()), 0, requestOf(op)});
        return success();
      })
      .Case([&](dist::ReduceScatterOp r) -> LogicalResult {
        ArrayRef<int64_t> out = shapeOf(result());
        int64_t dim = r.getDimAttr().getInt();
        if (dim != 0 &&
            llvm::any_of(out.take_front(dim), [](int64_t d) { return d != 1; }))
          return r.emitError() << hooks.getTargetName()
                               << " scatters along the outermost dimension "
                                  "only";
        hooks.emitCollective(
            {CollectiveCall::Kind::ReduceScatter, mesh.getAxesMask(r.getAxes()),
             ptr(r.getInput()), ptr(result()), getNumElements(out),
             elemOf(result()), int32_t(r.getKind()), requestOf(op)});
        return success();
      })
      .Case([&](dist::AllSliceOp sl) {
        if (loadedSlices.contains(op))
          return success();
        // Viewed as [outer * groups, shards, block * inner]: keep this
        // rank's block of every group.
        ArrayRef<int64_t> in = shapeOf(sl.getInput());
        int64_t dim = sl.getDimAttr().getInt();
        int64_t groups = sl.getGroupsAttr().getInt();
        int64_t shards = sl.getGroupSize();
        int64_t outer = getNumElements(in.take_front(dim)) * groups;
        int64_t inner = getNumElements(in.drop_front(dim + 1));
        int64_t chunk = in[dim] / groups / shards * inner;
        // The rank's block starts at its group position times the block.
        std::string src =
            llvm::formatv("({0} + {1} * {2})", ptr(sl.getInput()),
                          mesh.getGroupPosition(sl.getAxes()), chunk);
        copyFrom(src, sl.getInput(), Access{0, {shards * chunk, 1}}, result(),
                 Access{0, {chunk, 1}}, {outer, chunk});
        return success();
      })
      .Case([&](func::CallOp call) -> LogicalResult {
        // What the callee writes in place is the call's alone: a partial
        // sum in this function's workspace (no constant; pcc-lower-schedule
        // passes the previous call's result), or a state this function
        // updates with the result, which nothing reads after the call.
        for (auto [k, operand] : getAccumulatedOperands(call))
          if (!mayWriteIntoOperand(call, k, operand) ||
              (isa<OpResult>(operand) &&
               !bufferPlan->getWorkspaceOffset(bufferPlan->getRoot(operand))))
            return call.emitError("result ")
                   << k << " of '" << call.getCallee()
                   << "' is written into an operand that is not the call's "
                      "alone (a partial sum in this function's workspace, "
                      "or a state that it updates with the result)";
        SmallVector<std::string> args, results;
        for (Value v : call.getOperands())
          args.push_back(ptr(v));
        for (Value v : call.getResults())
          results.push_back(ptr(v));
        // A scheduled action (a pipeline step's F0, B1, O) is traced.
        auto action = call->getAttrOfType<StringAttr>(dist::kActionAttr);
        if (action)
          hooks.emitTrace(action.getValue(), /*begin=*/true);
        // The callee works in the workspace after this function's own.
        hooks.emitCall(
            program.functionNames.lookup(program.graph.getCallee(call)), args,
            results, "ws + " + std::to_string(ownWorkspace));
        if (action)
          hooks.emitTrace(action.getValue(), /*begin=*/false);
        return success();
      })
      .Case<dist::SendOp, dist::RecvOp>([&](auto op) -> LogicalResult {
        if (mesh.isSingleRank())
          return op.emitError("a transfer in a program of one rank");
        bool isSend = isa<dist::SendOp>(op);
        Value v = op->getNumResults() ? op->getResult(0) : op->getOperand(0);
        // A send that a dist.wait_send completes gets a request; the others
        // complete at the end.
        std::string request = sendRequests.lookup(op);
        hooks.emitTransfer(
            {isSend ? TransferCall::Kind::Send : TransferCall::Kind::Recv,
             mesh.getAxesMask(op.getAxes()), int64_t(op.getPeer()),
             int64_t(op.getTag()), ptr(v), getNumElements(shapeOf(v)),
             elemOf(v), request});
        startedSends |= isSend && request.empty();
        return success();
      })
      .Case([&](dist::WaitSendOp w) {
        hooks.emitSendWait(sendRequests.lookup(w));
        return success();
      })
      .Case([&](dist::AxisIndexOp a) {
        hooks.emitFill(ptr(result()), 1, mesh.getGroupPosition(a.getAxes()));
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
