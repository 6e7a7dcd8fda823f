//===- FunctionEmitter.h - Emits one function of the program ----*- C++ -*-===//
//
// The private interface of the program emitter's files: what the functions
// of one translation unit share (Program) and the emitter of one function
// (FunctionEmitter). ProgramEmitter.cpp drives it and emits what every op
// shares; each family of ops is emitted in a file of its own
// (EmitElementwise.cpp, EmitProducts.cpp, EmitReductions.cpp,
// EmitMovement.cpp, EmitCommunication.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PCC_LIB_TARGET_COMMON_FUNCTIONEMITTER_H
#define PCC_LIB_TARGET_COMMON_FUNCTIONEMITTER_H

#include "pcc/Analysis/BufferPlan.h"
#include "pcc/Dialect/Graph/IR/GemmOperands.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Target/AbiTables.h"
#include "pcc/Target/CallGraph.h"
#include "pcc/Target/LoopNest.h"
#include "pcc/Target/ProgramEmitter.h"
#include "pcc/Target/TargetHooks.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <optional>
#include <string>

namespace pcc::detail {

/// The static shape of tensor `v`.
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getShape();
}
/// The element type of tensor `v`.
inline mlir::Type elemOf(mlir::Value v) {
  return mlir::getElementTypeOrSelf(v.getType());
}

/// What the functions of one translation unit share.
struct Program {
  const CppEmitOptions &options;
  const ProgramCallGraph &graph;
  const MeshLayout &mesh;
  AbiTables &tables;
  TargetHooks &hooks;
  /// The C++ name of every function.
  llvm::DenseMap<mlir::func::FuncOp, std::string> functionNames;
  /// Per function: the pipeline ranks whose entry reaches it, a mask of
  /// coordinates along the pipeline axis (0 when not pipelined).
  llvm::DenseMap<mlir::func::FuncOp, uint64_t> holders;
  /// Per entry function: its entry point's index in the tables.
  llvm::DenseMap<mlir::func::FuncOp, unsigned> entryPoints;
  /// Arguments of the functions that are a STATE weight which their entry
  /// updates (a training step's parameters and moments, not a KV cache):
  /// the entry's own, and a callee's that every call passes the same one
  /// (collectUpdatedStates). Their weights-table index. Products may read
  /// them prepared (GemmCall::preparableB): the weight's buffer keeps its
  /// value until its update lands, after every read of it, and the entry
  /// makes the prepared operands again then.
  llvm::DenseMap<mlir::Value, int64_t> updatedStates{};
  /// Per entry: the weights-table indices of the states in updatedStates
  /// that a product it reaches may read prepared (found as the entries
  /// are emitted, before any other function). A pipeline rank reads its
  /// copy of a tied embedding as a lookup table, the last rank as the
  /// head's B: only the last packs it.
  llvm::DenseMap<mlir::func::FuncOp, llvm::DenseSet<int64_t>> preparedStates{};
  /// Per function, the most times one run of an entry calls it
  /// (ProgramCallGraph::getCallsPerRun).
  llvm::DenseMap<mlir::func::FuncOp, int64_t> callsPerRun = graph.getCallsPerRun();
};

/// Emits one function of the program: its constants, the declarations of
/// its buffers, its ops and the copies of its results. An entry's
/// signature maps onto the ABI's tables (inputs, outputs, state in the
/// weights table), which it reads through `in`, `out` and `w`; any other
/// function takes its arguments and result buffers as arrays of pointers.
class FunctionEmitter {
public:
  FunctionEmitter(Program &program, mlir::func::FuncOp func, std::string &body)
      : func(func), isEntry(program.graph.isEntry(func)), program(program),
        options(program.options), tables(program.tables), mesh(program.mesh),
        hooks(program.hooks), body(body) {}

  /// Maps an entry's signature onto the ABI's tables; every entry's before
  /// any function is emitted, so that the tables are complete.
  mlir::LogicalResult collectInterface();
  /// Adds the entry's arguments that are a STATE weight it updates to
  /// Program::updatedStates; after collectInterface.
  void collectUpdatedStates();
  /// Finds the entry's updates of states that a product it reaches may
  /// read prepared (Program::preparedStates); after every entry's
  /// collectUpdatedStates and their propagation to the callees.
  void collectPreparedStates();
  /// Emits the function; returns the workspace it needs for itself (its
  /// calls get the workspace after that).
  mlir::FailureOr<int64_t> emit();

private:
  /// What a result of the entry is for.
  enum class Role { Output, Grad, StateUpdate };

  /// Arguments and results of any other function are plain buffers.
  void collectCalleeInterface();
  mlir::LogicalResult emitConstants();
  void declareBuffers(const BufferPlan &plan);
  /// Emits `op`: what every op shares, then its family's code.
  mlir::LogicalResult emitOp(mlir::Operation *op);
  /// The families of ops that emitOp tries in turn, each in a file of its
  /// own: each emits `op` if it is of the family, else returns
  /// std::nullopt.
  /// graph.fusion, and the constants and weights (EmitElementwise.cpp).
  std::optional<mlir::LogicalResult> emitElementwiseOp(mlir::Operation *op);
  /// The matrix products (EmitProducts.cpp).
  std::optional<mlir::LogicalResult> emitProductOp(mlir::Operation *op);
  /// Softmax, normalization, reductions and scans (EmitReductions.cpp).
  std::optional<mlir::LogicalResult> emitReductionOp(mlir::Operation *op);
  /// Copies, gathers and scatters (EmitMovement.cpp).
  std::optional<mlir::LogicalResult> emitMovementOp(mlir::Operation *op);
  /// Collectives, transfers and calls (EmitCommunication.cpp).
  std::optional<mlir::LogicalResult> emitCommunicationOp(mlir::Operation *op);
  /// Fused attention and its backward (EmitAttention.cpp).
  std::optional<mlir::LogicalResult> emitAttentionOp(mlir::Operation *op);
  void emitResultCopies(const BufferPlan &plan);
  /// The outputs-table entry of result `k` of the entry (an output or a
  /// gradient): its key in the tables.
  mlir::FailureOr<unsigned> addOutput(unsigned k);
  /// Whether result k goes out only where the caller gives it a buffer (an
  /// entry's gradients, pccrt.h ABI 16): a training step need not write a
  /// copy of the model each step.
  bool isOptionalResult(unsigned k) const;
  /// Result k's entry of the results table (`out[i]`): its buffer, and
  /// for an optional result the test that the caller gave it one.
  std::string resultSlot(unsigned k) const;
  /// Per op whose results only optional results read, directly or through
  /// other such ops: those results, sorted. Its code runs only where the
  /// caller asks for one of them (a pipeline rank's averaged gradients,
  /// which a training step seldom reads back). Ops that communicate, call,
  /// may fail or write in place always run.
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<unsigned>>
  getOptionalOnlyOps();

  /// The name of `v`'s buffer, for code that reads or writes it: a read of
  /// the weight it lies in is counted (AbiTables::noteWeightRead).
  std::string ptr(mlir::Value v) {
    mlir::Value root =
        bufferPlan && bufferPlan->isView(v) ? bufferPlan->getRoot(v) : v;
    if (int64_t index = constantIndex.lookup_or(root, -1); index >= 0)
      tables.noteWeightRead(index, /*prepared=*/false);
    return names.lookup(v);
  }
  /// Emits product `call`, counting a read of B through its prepared
  /// operand where the target makes one.
  void emitGemm(const GemmCall &call);
  std::string type(mlir::Value v) { return hooks.getTypeName(elemOf(v)); }
  /// Declares `name`, a pointer to `v`'s element type, as `init`.
  void declare(mlir::Value v, llvm::StringRef name, llvm::StringRef init) {
    body += llvm::formatv("  {0}* {1} = ({0}*){2};\n", type(v), name, init);
  }

  /// out[...] = f(in0[...], in1[...], ...), with broadcasting.
  void
  elementwise(mlir::Operation *op, llvm::ArrayRef<mlir::Value> ins,
              llvm::function_ref<std::string(llvm::ArrayRef<std::string>)> f);
  /// Strided copy of `src` into `dst` over `shape`.
  void copy(mlir::Value src, const Access &srcAccess, mlir::Value dst,
            const Access &dstAccess, llvm::ArrayRef<int64_t> shape);
  /// The same from a pointer expression into `src`'s buffer.
  void copyFrom(llvm::StringRef srcPointer, mlir::Value src,
                const Access &srcAccess, mlir::Value dst,
                const Access &dstAccess, llvm::ArrayRef<int64_t> shape);
  /// A graph.fusion: its body per element of one loop nest.
  void fusion(graph::FusionOp fusion);
  /// The statements, appended to `text`, that compute `fusion`'s body for
  /// one element whose operands are read by the expressions `inputs`; the
  /// names of the locals that hold its results. `given` names the body's
  /// values computed already (fusionInvariants), and takes the others.
  llvm::SmallVector<std::string>
  fusionScalars(graph::FusionOp fusion, llvm::ArrayRef<std::string> inputs,
                std::string &text,
                llvm::DenseMap<mlir::Value, std::string> given =
                    llvm::DenseMap<mlir::Value, std::string>());
  /// Appends to `text` a local (declared with `qualifier`) for each value
  /// of `fusion`'s body that `include` accepts and `scalar` does not name
  /// yet, its arguments read by the expressions `inputs`, and names it in
  /// `scalar`.
  void fusionLocals(graph::FusionOp fusion, llvm::ArrayRef<std::string> inputs,
                    llvm::function_ref<bool(mlir::Value)> include,
                    llvm::StringRef qualifier,
                    llvm::DenseMap<mlir::Value, std::string> &scalar,
                    std::string &text);
  /// The body's values of `fusion` that are the same for every element:
  /// those of its one-element inputs and what only they and constants
  /// compute (a bias correction's powers in an optimizer update). Empty
  /// unless one of them is a one-element input or an operation (constants
  /// alone stay in the loop).
  llvm::DenseSet<mlir::Value> fusionInvariants(graph::FusionOp fusion);
  void rowSoftmax(mlir::Operation *softmax, graph::FusionOp fusion, bool log);
  /// The epilogue of `product` (M x N, its C contiguous): `bias` (a
  /// graph.gemm's C, scaled by `beta`), then `consumer`; either may be
  /// null.
  GemmEpilogue getEpilogue(mlir::Operation *product, int64_t m, int64_t n,
                           mlir::Value bias, float beta,
                           mlir::Operation *consumer);
  /// One loop nest writing `results` (of one shape, contiguous) and reading
  /// `ins` broadcast to it; `statement` gets a name and an offset per
  /// result, then per operand.
  void elementwiseNest(
      mlir::ValueRange results, mlir::ValueRange ins,
      llvm::function_ref<std::string(llvm::ArrayRef<std::string>,
                                     llvm::ArrayRef<std::string>)>
          statement,
      llvm::function_ref<std::string(llvm::ArrayRef<std::string>)> prologue =
          nullptr);
  /// Emits a nest over `space` with `accesses` of `buffers` (emitNest) a
  /// chunk of rows at a time, each followed by the part of the prepared
  /// operands its rows give, where one of `results` is the in-place update
  /// of a state that products read prepared, the target makes its prepared
  /// operands by rows, and every access walks `space` whole or reads one
  /// element; returns false, having emitted nothing, otherwise.
  bool emitInPreparedChunks(
      mlir::ValueRange results, llvm::ArrayRef<int64_t> space,
      llvm::ArrayRef<Access> accesses, llvm::ArrayRef<LoopBuffer> buffers,
      llvm::function_ref<void(const LoopNest &, llvm::ArrayRef<LoopBuffer>)>
          emitNest);
  /// `v`'s buffer as a loop nest reads (or writes) it.
  LoopBuffer buffer(mlir::Value v, bool written = false) {
    return {ptr(v), elemOf(v), written};
  }
  /// A call of a gather/scatter kernel over slices of `shape` ([outer, k,
  /// inner] around `axis`) at the indices, into `op`'s result; `extra`, if
  /// any, is one more argument.
  void slicesAlongAxis(llvm::StringRef kernel, mlir::Operation *op,
                       mlir::Value src, mlir::Value idx,
                       llvm::ArrayRef<int64_t> shape, int64_t axis,
                       llvm::StringRef extra = "");
  /// A call of an element-wise gather/scatter kernel, which walks the
  /// indices' shape and needs both shapes as arrays, into `op`'s result;
  /// `extra`, if any, is one more argument.
  mlir::LogicalResult elementsAlongAxis(llvm::StringRef kernel,
                                        mlir::Operation *op, mlir::Value src,
                                        mlir::Value idx,
                                        llvm::ArrayRef<int64_t> dataShape,
                                        int64_t axis,
                                        llvm::StringRef extra = "");
  /// The padded dimension and real extent of argument `arg` ({-1, 0}).
  std::pair<int64_t, int64_t> paddingOfArg(unsigned arg);

  mlir::func::FuncOp func;
  bool isEntry;
  Program &program;
  const CppEmitOptions &options;
  AbiTables &tables;
  const MeshLayout &mesh;
  TargetHooks &hooks;
  std::string &body;

  /// The pointer expression of every value.
  llvm::DenseMap<mlir::Value, std::string> names;
  /// The function's buffer plan, while it is emitted.
  const BufferPlan *bufferPlan = nullptr;
  /// The data movement that products read in place, and how they read
  /// their operands.
  std::optional<GemmOperands> gemmOperands;
  bool isReadInPlace(mlir::Operation *op) const {
    return gemmOperands && gemmOperands->isReadInPlace(op);
  }
  /// Values held outside the workspace: constants in the code and weights
  /// (and blocks of them) in the weights table.
  llvm::DenseSet<mlir::Value> external;
  /// Large anonymous splat constants, filled into the workspace.
  llvm::DenseSet<mlir::Operation *> splatsInWorkspace;
  /// CONSTANT weights (and the blocks of them loaded as such): their index
  /// in the weights table.
  llvm::DenseMap<mlir::Value, int64_t> constantIndex;
  /// The weights-table index of the CONSTANT weight whose buffer `v` is
  /// (itself or a view of it from its start), else -1.
  int64_t getConstantIndex(mlir::Value v) const {
    if (bufferPlan && bufferPlan->isView(v))
      v = bufferPlan->getRoot(v);
    return constantIndex.lookup_or(v, -1);
  }
  /// Per value the entry returns as the update of a state in
  /// Program::updatedStates that a product may read (feedsProductB), or
  /// that a called function returns into the buffer of such a state passed
  /// to it (calleePrepares): the state's argument.
  llvm::DenseMap<mlir::Value, mlir::Value> stateUpdateArg;
  /// Whether `call`'s result `k` is the update of a state that the callee
  /// computes into that state's buffer, its argument (dist.accumulates),
  /// and that every entry reaching the callee reads prepared
  /// (Program::preparedStates): the callee then makes the prepared
  /// operands again itself, where it computes the update.
  bool calleePrepares(mlir::func::CallOp call, unsigned k) const;
  /// The updates whose prepared operands were made where they were
  /// computed; the others' are made after their copies at the end.
  llvm::DenseSet<mlir::Value> preparedUpdates;
  /// The weights-table index of the weight that product operand `v`, read
  /// as `m`, is the whole of (from its start) and that the target may read
  /// prepared (GemmCall::preparableB), else -1.
  int64_t getProductPreparableIndex(const MatrixOperand &m,
                                    mlir::Value v) const {
    if (m.offset != 0 ||
        getNumElements(shapeOf(v)) != getNumElements(shapeOf(m.buffer)))
      return -1;
    if (int64_t index = getConstantIndex(m.buffer); index >= 0)
      return index;
    mlir::Value root = m.buffer;
    if (bufferPlan && bufferPlan->isView(root))
      root = bufferPlan->getRoot(root);
    return program.updatedStates.lookup_or(root, -1);
  }
  /// Sets `call`'s preparableB (and updatedB) from its B, `v`, read as `m`.
  void setPreparableB(GemmCall &call, const MatrixOperand &m,
                      mlir::Value v) const {
    call.preparableB = getProductPreparableIndex(m, v);
    call.updatedB = call.preparableB >= 0 && getConstantIndex(m.buffer) < 0;
    call.runs = std::max<int64_t>(1, program.callsPerRun.lookup(func));
  }
  /// Makes the prepared operands of the state that `update` is the new
  /// value of again from `pointer`, its buffer, where it has any.
  void emitPrepareUpdated(mlir::Value update, llvm::StringRef pointer);
  /// Per product or scatter_add that adds itself into a partial sum in
  /// place (BufferPlan::isAccumulated: a gradient accumulated over
  /// microbatches, dist.accumulates): the add that reads it, which then has
  /// no code of its own; and those adds.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> accumulateInto;
  llvm::DenseSet<mlir::Operation *> accumulatedSums;
  /// Fusions that the softmax reading them computes on the fly, and the
  /// softmax of each.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> absorbed;
  /// Per product: the element-wise op that runs as its epilogue; per such
  /// op, its product.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> epilogueConsumer,
      epilogueProduct;
  /// dist.all_slice ops of a weight that the weights table holds as the
  /// rank's block: no code, no buffer.
  llvm::DenseSet<mlir::Operation *> loadedSlices;
  /// The workspace the function needs for itself.
  int64_t ownWorkspace = 0;
  /// Whether the function started sends, which it waits for at the end.
  bool startedSends = false;
  /// Collectives are started where they are and completed just before the
  /// first op that reads their result (or communicates, or calls), else at
  /// the end, so that what does not depend on them runs meanwhile: the
  /// collectives each op waits for first, those waited for at the end, and
  /// each one's request variable.
  llvm::DenseMap<mlir::Operation *, std::string> requests;
  /// The request variables of the sends that a dist.wait_send completes,
  /// by send and by wait.
  llvm::DenseMap<mlir::Operation *, std::string> sendRequests;
  /// The variable of a collective's request, named when it is started.
  std::string requestOf(mlir::Operation *collective) {
    std::string &name = requests[collective];
    if (name.empty())
      name = "q" + std::to_string(requests.size() - 1);
    return name;
  }
  /// The arrays of argument and result buffers: the ABI's inputs and
  /// outputs for the entry, the caller's for any other function.
  llvm::StringRef argArray() const { return isEntry ? "in" : "args"; }
  llvm::StringRef resultArray() const { return isEntry ? "out" : "results"; }
  /// Per argument: its index in the inputs table, or, for a state, in the
  /// weights table (argWeight >= 0).
  llvm::SmallVector<int64_t> argInput, argWeight;
  /// Per result: its role, and its index in the outputs table (its key in
  /// the tables until every entry's interface is known) or, for a state
  /// update, the weights table index of the state it updates.
  llvm::SmallVector<Role> resultRole;
  llvm::SmallVector<int64_t> resultIndex;
  /// State updates that read another updated state's old value, which that
  /// state's own update may overwrite first: result index -> the name of a
  /// workspace copy taken before any update lands.
  llvm::DenseMap<int64_t, std::string> updateSnapshots;
};
} // namespace pcc::detail

#endif // PCC_LIB_TARGET_COMMON_FUNCTIONEMITTER_H
