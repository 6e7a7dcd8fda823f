//===- CallGraph.cpp - The functions one generated program holds ----------===//

#include "pcc/Target/CallGraph.h"

using namespace mlir;
using namespace pcc;

FailureOr<func::FuncOp> pcc::getEntryFunction(ModuleOp module) {
  func::FuncOp entry;
  for (auto f : module.getOps<func::FuncOp>()) {
    if (!f.isPublic() || f.isDeclaration())
      continue;
    if (entry)
      return f.emitError("a second public function: the program's entry is '")
             << entry.getSymName()
             << "', and the functions it calls must be private";
    entry = f;
  }
  if (!entry)
    return module.emitError("no public function to compile as the entry");
  return entry;
}

FailureOr<ProgramCallGraph> ProgramCallGraph::build(func::FuncOp entry) {
  auto module = entry->getParentOfType<ModuleOp>();
  ProgramCallGraph graph;
  // Depth first, callees before callers; a function on the stack that is
  // called again is recursion.
  enum class State { OnStack, Done };
  llvm::DenseMap<func::FuncOp, State> state;
  std::function<LogicalResult(func::FuncOp)> visit =
      [&](func::FuncOp f) -> LogicalResult {
    state[f] = State::OnStack;
    WalkResult walk = f.walk([&](func::CallOp call) {
      auto callee =
          module ? module.lookupSymbol<func::FuncOp>(call.getCalleeAttr())
                 : func::FuncOp();
      auto fail = [&](const Twine &why) {
        call.emitError("call of '") << call.getCallee() << "': " << why;
        return WalkResult::interrupt();
      };
      if (!callee)
        return fail("no function of that name in the module");
      if (callee == entry)
        return fail("it is the program's entry, which only the runtime calls");
      if (callee.isPublic())
        return fail("a public function; a program has one public function, "
                    "its entry, and calls private ones");
      if (callee.isDeclaration())
        return fail("a declaration without a body; the callee must be "
                    "defined in the module");
      auto it = state.find(callee);
      if (it != state.end() && it->second == State::OnStack)
        return fail("recursion; a call runs in the workspace after its "
                    "caller's, so calls must not recurse");
      graph.callees[call] = callee;
      if (it == state.end() && failed(visit(callee)))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    state[f] = State::Done;
    graph.functions.push_back(f);
    return success();
  };
  // Every private function is compiled, called or not; the entry last.
  if (module)
    for (auto f : module.getOps<func::FuncOp>())
      if (f != entry && f.isPrivate() && !f.isDeclaration() &&
          !state.count(f) && failed(visit(f)))
        return failure();
  if (failed(visit(entry)))
    return failure();
  return graph;
}

llvm::DenseMap<func::FuncOp, int64_t> ProgramCallGraph::getWorkspaceWithCallees(
    const llvm::DenseMap<func::FuncOp, int64_t> &ownBytes) const {
  llvm::DenseMap<func::FuncOp, int64_t> total;
  // Callees come first, so their totals are known at their callers.
  for (func::FuncOp f : functions) {
    int64_t deepest = 0;
    f.walk([&](func::CallOp call) {
      deepest = std::max(deepest, total.lookup(getCallee(call)));
    });
    total[f] = ownBytes.lookup(f) + deepest;
  }
  return total;
}
