//===- CallGraph.cpp - The functions one generated program holds ----------===//

#include "pcc/Target/CallGraph.h"

#include "pcc/Dialect/Dist/IR/DistOps.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace pcc;

/// The functions of one entry point, `publics`: one, or one per pipeline
/// rank in coordinate order.
static FailureOr<SmallVector<func::FuncOp>>
orderEntryFunctions(ModuleOp module, MutableArrayRef<func::FuncOp> publics,
                    int64_t numStages) {
  if (!isPipeline(publics)) {
    if (publics.size() > 1)
      return publics[1].emitError(
                 "a second public function: the program's entry is '")
             << publics[0].getSymName()
             << "', and the functions it calls must be private";
    return SmallVector<func::FuncOp>(publics);
  }
  // One entry per pipeline rank, in coordinate order.
  SmallVector<func::FuncOp> byStage(numStages);
  for (func::FuncOp f : publics) {
    auto rank = f->getAttrOfType<IntegerAttr>(dist::kRankAttr);
    if (!rank)
      return f.emitError("a public function without ")
             << dist::kRankAttr
             << ": a program of several entries has one per pipeline rank, "
                "each marked with its rank";
    int64_t r = rank.getInt();
    if (r < 0 || r >= numStages)
      return f.emitError() << dist::kRankAttr << " = " << r
                           << " is no rank of the pipeline axis '"
                           << dist::kPipelineAxis << "' (" << numStages
                           << " ranks)";
    if (byStage[r])
      return f.emitError() << dist::kRankAttr << " = " << r << " again: '"
                           << byStage[r].getSymName()
                           << "' is that pipeline rank's entry";
    byStage[r] = f;
  }
  // A missing rank is reported at the mesh that has it.
  Operation *mesh = module;
  for (auto m : module.getOps<dist::MeshOp>())
    if (m.getAxisSize(dist::kPipelineAxis))
      mesh = m;
  for (auto [r, f] : llvm::enumerate(byStage))
    if (!f)
      return mesh->emitError("no entry for pipeline rank ")
             << r << " of " << numStages << " (a public function with "
             << dist::kRankAttr << " = " << r << ")";
  return byStage;
}

FailureOr<SmallVector<EntryPoint>> pcc::getEntryPoints(ModuleOp module,
                                                       int64_t numStages) {
  SmallVector<EntryPoint> points;
  SmallVector<SmallVector<func::FuncOp>> publics;
  for (auto f : module.getOps<func::FuncOp>()) {
    if (!f.isPublic() || f.isDeclaration())
      continue;
    std::string name = "main";
    if (Attribute attr = f->getAttr(kEntryPointAttr)) {
      auto text = dyn_cast<StringAttr>(attr);
      if (!text || text.getValue().empty())
        return f.emitError() << kEntryPointAttr
                             << " must name the entry point, got " << attr;
      name = text.getValue().str();
    }
    auto it = llvm::find_if(points,
                            [&](const EntryPoint &p) { return p.name == name; });
    if (it == points.end()) {
      points.push_back({name, {}});
      publics.emplace_back();
      it = std::prev(points.end());
    }
    publics[it - points.begin()].push_back(f);
  }
  if (points.empty())
    return module.emitError("no public function to compile as the entry");
  for (auto [point, functions] : llvm::zip(points, publics)) {
    FailureOr<SmallVector<func::FuncOp>> ordered =
        orderEntryFunctions(module, functions, numStages);
    if (failed(ordered))
      return failure();
    point.functions = std::move(*ordered);
  }
  return points;
}

FailureOr<SmallVector<func::FuncOp>> pcc::getEntryFunctions(ModuleOp module,
                                                            int64_t numStages) {
  FailureOr<SmallVector<EntryPoint>> points = getEntryPoints(module, numStages);
  if (failed(points))
    return failure();
  SmallVector<func::FuncOp> functions;
  for (EntryPoint &point : *points)
    functions.append(point.functions);
  return functions;
}

FailureOr<ProgramCallGraph>
ProgramCallGraph::build(ArrayRef<func::FuncOp> entries) {
  assert(!entries.empty() && "a program has an entry");
  auto module = entries.front()->getParentOfType<ModuleOp>();
  ProgramCallGraph graph;
  graph.entries.assign(entries.begin(), entries.end());
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
      if (graph.isEntry(callee))
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
  // Every private function is compiled, called or not; the entries last.
  if (module)
    for (auto f : module.getOps<func::FuncOp>())
      if (!graph.isEntry(f) && f.isPrivate() && !f.isDeclaration() &&
          !state.count(f) && failed(visit(f)))
        return failure();
  for (func::FuncOp entry : entries)
    if (failed(visit(entry)))
      return failure();
  return graph;
}

llvm::SetVector<func::FuncOp>
ProgramCallGraph::getReachable(func::FuncOp from) const {
  llvm::SetVector<func::FuncOp> reached;
  reached.insert(from);
  // The set grows while it is walked.
  for (size_t i = 0; i < reached.size(); ++i) {
    func::FuncOp f = reached[i];
    f.walk([&](func::CallOp call) {
      if (func::FuncOp callee = getCallee(call))
        reached.insert(callee);
    });
  }
  return reached;
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

llvm::DenseMap<func::FuncOp, int64_t> ProgramCallGraph::getCallsPerRun() const {
  llvm::DenseMap<func::FuncOp, int64_t> most;
  for (func::FuncOp entry : entries) {
    // Callers before their callees: a function's count is whole when its
    // own calls are counted.
    llvm::DenseMap<func::FuncOp, int64_t> calls{{entry, 1}};
    for (func::FuncOp f : llvm::reverse(functions)) {
      int64_t runs = calls.lookup(f);
      if (!runs)
        continue;
      most[f] = std::max(most.lookup(f), runs);
      f.walk([&](func::CallOp call) { calls[getCallee(call)] += runs; });
    }
  }
  return most;
}
