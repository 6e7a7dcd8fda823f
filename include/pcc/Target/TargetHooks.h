//===- TargetHooks.h - What each code-generating target spells --*- C++ -*-===//
//
// The lowering of Graph and Dist ops is decided once for every target: the
// buffers (BufferPlan), the loop nests and their index arithmetic
// (LoopNest), the per-element expressions (ScalarExpr), the shapes of GEMMs
// and reductions, the collectives' groups and counts. What a target prints
// for each of these differs: C++ loops and pcc_kernels.h on the CPU, kernels
// and cuBLAS/NCCL on CUDA. TargetHooks is that seam; each target implements
// it once and prints into the body of the function being emitted.
//
// Tensors are named by pointer expressions of the generated code (a buffer
// of the BufferPlan); offsets and counts are in elements unless they say
// bytes.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_TARGETHOOKS_H
#define PCC_TARGET_TARGETHOOKS_H

#include "pcc/Target/LoopNest.h"

#include "mlir/IR/Types.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <map>
#include <string>

namespace pcc {

/// The C++ name of an element type in generated code; the 16-bit floats are
/// `<kernelNamespace>::f16` and `::bf16`, the kernel library's types.
std::string getCppTypeName(mlir::Type elementType,
                           llvm::StringRef kernelNamespace);

/// Scalar math the element-wise ops need, spelled per target.
enum class MathFunction {
  Abs,
  Ceil,
  Cos,
  Erf,
  Exp,
  Floor,
  IsNaN,
  Log,
  Max,
  Min,
  Pow,
  Sigmoid,
  Sin,
  Sqrt,
  Tanh,
};

/// A buffer that a loop nest reads or writes: its pointer expression in the
/// function being emitted and its element type.
struct LoopBuffer {
  std::string pointer;
  mlir::Type elementType;
  bool written = false;
};

/// Element-wise work that follows a product and reads its C element by
/// element (a bias, an activation, a residual add): the target runs it on
/// each block of C as the product finishes the block, while the block is
/// in cache, instead of as a loop nest over C afterwards. Buffer 0 is C
/// itself; buffer k's element (i, j) of C's iteration space is at
/// rowStrides[k] * i + columnStrides[k] * j. `element` gives the
/// statements for one element from each buffer's name and offset
/// expression; they read C's element, which then holds the product, from
/// buffer 0.
struct GemmEpilogue {
  llvm::SmallVector<LoopBuffer> buffers;
  llvm::SmallVector<int64_t> rowStrides, columnStrides;
  std::function<std::string(llvm::ArrayRef<std::string> names,
                            llvm::ArrayRef<std::string> offsets)>
      element;
};

/// C = alpha * op(A) * op(B) + beta * C on row-major matrices, once per
/// iteration of `batch`, whose accesses 0, 1 and 2 give the element offsets
/// of A, B and C (a nest of no bounds: one product).
struct GemmCall {
  mlir::Type elementType;
  int64_t m = 0, n = 0, k = 0;
  /// Scalar expressions of the element type.
  std::string alpha, beta;
  std::string a, b, c;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool transA = false, transB = false;
  LoopNest batch;
  /// The weights-table index of B when B is a weight read whole from its
  /// start that a target may prepare ahead (pack for its micro-kernel),
  /// else -1: a CONSTANT weight, which the runtime prepares before the
  /// runs, or a STATE weight that this function updates (a training step's
  /// parameter), whose prepared operands the function makes again once the
  /// update has landed (emitPrepareWeight).
  int64_t preparableB = -1;
  /// Whether preparableB is a STATE weight, whose prepared operands each
  /// run makes again: a target prepares it only where that pays.
  bool updatedB = false;
  /// How many times one run of the program executes this product: its
  /// function's calls per run (ProgramCallGraph::getCallsPerRun), a
  /// pipeline stage's once per microbatch.
  int64_t runs = 1;
  /// What follows the product on each block of C (one product only, where
  /// the target supportsGemmEpilogue()); null: nothing.
  const GemmEpilogue *epilogue = nullptr;
};

/// output[j] = reduce(input[i] for every i that maps to j): the nest runs
/// over the input; access 0 is the output's (stride 0 along reduced
/// dimensions), access 1 the input's.
struct ReductionLoop {
  enum class Kind { Sum, Mean, Max, Min };
  Kind kind;
  mlir::Type elementType;
  std::string input, output;
  LoopNest nest;
  int64_t outputElements = 0;
  /// Input elements per output element (the divisor of a mean).
  int64_t count = 0;

  /// What an output starts from, as an expression of C++ type `typeName`:
  /// 0 for a sum or a mean, -inf and +inf (a float's) or the lowest and
  /// highest value (an integer's) for a max and a min. It is also the
  /// reduction of an empty set, as ONNX defines it; a mean of one is 0 / 0.
  std::string getIdentity(llvm::StringRef typeName) const;
};

/// Softmax (or log-softmax) of `rows` rows of `n` elements whose elements
/// are computed on the fly by an element-wise prologue (a fusion's body:
/// scale and mask before an attention softmax) instead of read from a
/// buffer. The nest runs over the rows: access 0 is the output's row start
/// (rows are contiguous, n apart), access k > 0 the row start of buffer k;
/// `columnStrides[k]` is buffer k's step along a row (0 where broadcast).
struct RowSoftmax {
  mlir::Type elementType;
  LoopNest rows;
  llvm::SmallVector<int64_t> columnStrides;
  int64_t n = 0;
  bool log = false;
};

/// The offset expression of buffer `k`'s element `j` of the row at the
/// induction variables `ivs` of `softmax.rows` (j is the row's index
/// variable, named "j").
std::string getRowElementOffset(const RowSoftmax &softmax, unsigned k,
                                llvm::ArrayRef<std::string> ivs);

/// A collective over the group of mesh axes `axes` (a pccrt axis mask).
struct CollectiveCall {
  enum class Kind { AllReduce, AllGather, ReduceScatter };
  Kind kind;
  uint32_t axes = 0;
  std::string input, output;
  /// Elements: of the whole tensor (all-reduce), of this rank's block
  /// (all-gather's input, reduce-scatter's output).
  int64_t count = 0;
  mlir::Type elementType;
  /// A pccrt_reduction, for all-reduce and reduce-scatter.
  int32_t reduction = 0;
  /// The variable that holds the collective's request, which
  /// emitCollectiveWait completes.
  std::string request;
};

/// A transfer between this rank and the rank at position `peer` of its
/// group along `axes` (a pccrt axis mask), matched by `tag`. A send only
/// starts: its buffer must stay unchanged until emitWaitForSends, or, when
/// it names a `request` variable, until emitSendWait of that request.
struct TransferCall {
  enum class Kind { Send, Recv };
  Kind kind;
  uint32_t axes = 0;
  int64_t peer = 0, tag = 0;
  std::string buffer;
  int64_t count = 0;
  mlir::Type elementType;
  std::string request;
};

class TargetHooks {
public:
  virtual ~TargetHooks();

  //===--------------------------------------------------------------------===//
  // The text being printed
  //===--------------------------------------------------------------------===//

  /// A new name `<prefix><n>` for a local or global of the generated code;
  /// one counter serves the translation unit, so every name is new.
  std::string makeName(llvm::StringRef prefix) {
    return prefix.str() + std::to_string(counter++);
  }
  /// Prints into the body of `newBody`'s function from now on.
  void setBody(std::string &newBody) { body = &newBody; }
  /// Prints a definition at file scope, before the functions.
  void emitGlobal(llvm::StringRef text) { globals += text.str(); }
  /// The file-scope definitions printed so far.
  const std::string &getGlobals() const { return globals; }
  /// Prints one line of the body, indented as a statement of the function.
  void emitLine(llvm::StringRef line) { *body += "  " + line.str() + "\n"; }

  //===--------------------------------------------------------------------===//
  // The program's frame
  //===--------------------------------------------------------------------===//

  /// "the CPU target", for diagnostics.
  virtual llvm::StringRef getTargetName() const = 0;
  /// The start of the translation unit: what it includes.
  virtual void printFilePrologue(llvm::raw_ostream &os) const = 0;
  /// What precedes the return type of every function of the program.
  virtual llvm::StringRef getFunctionAttributes() const = 0;
  /// Statements of `<prefix>_model_run` after the ABI check, before the
  /// entry's code: `threads` is the run's thread count (0: the context's).
  virtual std::string getRunPrologue(int64_t threads) const = 0;
  /// The statement that ends a run that succeeded (all its work done).
  virtual std::string getRunSuccess() const = 0;
  /// The rest of `<prefix>_model_run` for a program with one entry (not a
  /// pipeline): `preamble` (the context's buffers), the entry's `body`, and
  /// the end of a successful run. `singleRank`: the program makes no
  /// communicator call. `modelInfo` names the library's info function. The
  /// default prints them in that order.
  virtual void printRunBody(llvm::raw_ostream &os, llvm::StringRef preamble,
                            llvm::StringRef body, bool singleRank,
                            llvm::StringRef modelInfo) const;
  /// The pccrt_device enumerator of a target whose buffers are on a device;
  /// empty for the host.
  virtual llvm::StringRef getDevice() const { return {}; }
  /// Bytes of the operands the program derives from its weights
  /// (pccrt_model_info.prepared_bytes) as a constant expression of the
  /// generated code; empty when there are none.
  virtual std::string getPreparedBytes() const { return {}; }
  /// The bytes those operands take at least (their elements, unpadded): what
  /// the compiler counts in a rank's memory, the panel padding aside.
  virtual int64_t getPreparedBytesAtLeast() const { return 0; }
  /// Those of weight `index` (its entry in the weights table).
  virtual int64_t getWeightPreparedBytesAtLeast(int64_t index) const {
    return 0;
  }
  /// Statements of the prepare function (`ctx`, `w` and `prepared` are in
  /// scope) that make the prepared operands from the weights; only called
  /// when getPreparedBytes() is not empty.
  virtual std::string getPrepareBody() const { return {}; }
  /// Makes weight `index`'s prepared operands again from `pointer` (its
  /// buffer; `ctx` in scope), where a run has just updated it: a call of
  /// a function of the file that getPrepareWeightFunctions() defines once
  /// the whole program is emitted (the products that read it prepared may
  /// come later, in its callees). Nothing where the target prepares none.
  virtual void emitPrepareWeight(int64_t index, llvm::StringRef pointer) {}
  /// The row length, in elements, of the rows of weight `index` that its
  /// prepared operands are made from where the target can make them a
  /// range of rows at a time (emitPrepareWeightRows), else 0: they read it
  /// with different row lengths. Where no product emitted so far reads it
  /// prepared (one in a function emitted later may), `rowLength`, the
  /// length of the weight's own rows, which such products read.
  virtual int64_t getPreparedRowPitch(int64_t index, int64_t rowLength) const {
    return 0;
  }
  /// Makes the parts of weight `index`'s prepared operands that its rows
  /// [row0, row1) of `rows` give (expressions; rows of `pitch` elements,
  /// a getPreparedRowPitch) from `pointer`, the weight's buffer, where a
  /// run has just updated those rows and no later ones: an operand that
  /// reads the weight with other rows is made whole once row1 reaches
  /// `rows`. Only where getPreparedRowPitch is not 0.
  virtual void emitPrepareWeightRows(int64_t index, llvm::StringRef pointer,
                                     llvm::StringRef row0, llvm::StringRef row1,
                                     int64_t rows, int64_t pitch) {}
  /// Emits `body` for rows [0, rows) in chunks of `chunkRows` rows (its
  /// arguments: the expression of the chunk's first row, and its rows),
  /// the last chunk shorter where `chunkRows` does not divide `rows`: a
  /// loop over the whole chunks (its first line, which a target may
  /// annotate before), then the rest. Statements `body` emits for
  /// different chunks must touch different data.
  virtual void
  emitRowChunks(int64_t rows, int64_t chunkRows,
                llvm::function_ref<void(llvm::StringRef, int64_t)> body) {
    int64_t whole = rows / chunkRows * chunkRows;
    emitLine("for (int64_t pcc_row = 0; pcc_row < " + std::to_string(whole) +
             "; pcc_row += " + std::to_string(chunkRows) + ") {");
    body("pcc_row", chunkRows);
    emitLine("}");
    if (rows > whole)
      body(std::to_string(whole), rows - whole);
  }
  /// The functions that emitPrepareWeight's and emitPrepareWeightRows'
  /// calls call, for the file's globals.
  virtual std::string getPrepareWeightFunctions() const { return {}; }
  /// Whether emitGemm(`g`) reads B only through a prepared operand (B's
  /// own pointer passed along for a build that prepares nothing), so that
  /// a weight read by such products alone need not stay in memory.
  virtual bool readsPreparedB(const GemmCall &g) const { return false; }
  /// The end of the translation unit, after `<prefix>_model_run`.
  virtual void printFileEpilogue(llvm::raw_ostream &os,
                                 llvm::StringRef prefix) const {}

  //===--------------------------------------------------------------------===//
  // Spelling
  //===--------------------------------------------------------------------===//

  /// The namespace of the target's kernel library (pcc_k on the CPU).
  virtual llvm::StringRef getKernelNamespace() const = 0;
  /// The name of a scalar element type in generated code.
  virtual std::string getTypeName(mlir::Type elementType) const = 0;
  /// `fn` applied to scalar expressions of element type `type`.
  virtual std::string getMathCall(MathFunction fn, mlir::Type type,
                                  llvm::ArrayRef<std::string> args) const = 0;

  //===--------------------------------------------------------------------===//
  // Statements, printed into the function being emitted
  //===--------------------------------------------------------------------===//

  /// A comment before the code of one op.
  virtual void emitComment(llvm::StringRef text) = 0;
  /// `statement(names, offsets)` for every iteration of `nest`; the
  /// iterations are independent, so a target may run them in parallel.
  /// The statement reads and writes only `buffers`, under `names` (one per
  /// buffer: a target may run the nest as a kernel whose parameters they
  /// are), and `offsets` holds each access's offset expression. Buffers
  /// written by the nest overlap no other buffer of the list. `prologue`
  /// (may be null) gives statements, over the same names, whose locals
  /// every iteration may read: a target runs them once before the
  /// iterations, or before each.
  virtual void emitParallelLoop(
      const LoopNest &nest, llvm::ArrayRef<LoopBuffer> buffers,
      llvm::function_ref<std::string(llvm::ArrayRef<std::string> names,
                                     llvm::ArrayRef<std::string> offsets)>
          statement,
      llvm::function_ref<std::string(llvm::ArrayRef<std::string> names)>
          prologue) = 0;
  virtual void emitReduction(const ReductionLoop &reduction) = 0;
  /// `softmax` over `buffers` (the output first, written); `element(names,
  /// offsets, var)` gives the statements that set the local `var` to one
  /// element of a row, reading buffer k at offsets[k] under names[k].
  virtual void emitRowSoftmax(
      const RowSoftmax &softmax, llvm::ArrayRef<LoopBuffer> buffers,
      llvm::function_ref<std::string(llvm::ArrayRef<std::string> names,
                                     llvm::ArrayRef<std::string> offsets,
                                     llvm::StringRef var)>
          element) = 0;
  virtual void emitGemm(const GemmCall &gemm) = 0;
  /// Whether emitGemm runs a GemmCall's epilogue; where it does not, the
  /// work after a product is a loop nest of its own.
  virtual bool supportsGemmEpilogue() const { return false; }
  /// A call of the target's kernel library (pcc_kernels.h on the CPU) with
  /// explicit template arguments `typeArgs`. A kernel that reports failure
  /// makes the function return `errorCode` (a pccrt code; empty when the
  /// kernel cannot fail).
  virtual void emitKernelCall(llvm::StringRef kernel,
                              llvm::ArrayRef<mlir::Type> typeArgs,
                              llvm::ArrayRef<std::string> args,
                              llvm::StringRef errorCode = {});
  /// The op whose code follows, in words ("graph.gather node 'x', of 512
  /// positions"): a kernel call that fails names it to the run context
  /// (pccrt_context.error_op) before it returns its code. Empty: none.
  void setErrorSite(std::string site) { errorSite = std::move(site); }
  /// A constant array of integers that kernel calls can pass (shapes);
  /// returns the expression that passes it.
  virtual std::string emitIndexArray(llvm::ArrayRef<int64_t> values) = 0;
  /// Communication through the run context's communicator; a failure makes
  /// the function return PCCRT_ERR_COMM. The default implementations of
  /// this and the hooks below are the host calls every target makes.
  /// The collective is started (`start_*`, its request in
  /// `collective.request`), and completed later by emitCollectiveWait, so
  /// that what does not depend on it runs meanwhile.
  virtual void emitCollective(const CollectiveCall &collective);
  /// Completes the collective whose request is in the variable `request`.
  virtual void emitCollectiveWait(llvm::StringRef request);
  /// What precedes the start of a collective, once its input is in place
  /// (a device target waits for its queued work unless the communicator
  /// orders collectives on its stream).
  virtual void emitBeforeCollective() {}
  /// The expression of the run's CUDA stream that communicators order
  /// device collectives on ("nullptr" on the host).
  virtual std::string getCommStream() const { return "nullptr"; }
  /// A send (started, not finished) or a receive (finished) through the
  /// run context's communicator; a failure makes the function return
  /// PCCRT_ERR_COMM.
  virtual void emitTransfer(const TransferCall &transfer);
  /// Waits until every send the function started is finished (its buffers
  /// may change again); a failure makes the function return PCCRT_ERR_COMM.
  virtual void emitWaitForSends();
  /// Completes the send started with `request` (TransferCall::request).
  virtual void emitSendWait(llvm::StringRef request);
  /// Tells the run context's tracer, if any, that the scheduled action
  /// `action` (a pipeline step's "F0", "B1", "O") begins or ends.
  virtual void emitTrace(llvm::StringRef action, bool begin);
  /// Copies `bytes` bytes; `mayAlias`: the two may be the same buffer, in
  /// which case nothing is copied.
  virtual void emitCopy(llvm::StringRef dst, llvm::StringRef src, int64_t bytes,
                        bool mayAlias) = 0;
  /// dst[k] = value for k < count (`value` already of dst's element type).
  virtual void emitFill(llvm::StringRef dst, int64_t count,
                        llvm::StringRef value) = 0;
  /// A call of `callee`, another function of the program: it reads the
  /// buffers `args`, computes its results into the buffers `results` and
  /// works in the workspace starting at `workspace`. A failure it returns
  /// is returned by the caller.
  virtual void emitCall(llvm::StringRef callee,
                        llvm::ArrayRef<std::string> args,
                        llvm::ArrayRef<std::string> results,
                        llvm::StringRef workspace);

protected:
  /// A kernel over `buffers`: the names of its parameters (p0, p1, ...) and
  /// their declarations, const where only read, with the target's restrict
  /// qualifier (a written buffer overlaps no other).
  void getKernelParameters(llvm::ArrayRef<LoopBuffer> buffers,
                           llvm::StringRef restrictQualifier,
                           llvm::SmallVectorImpl<std::string> &names,
                           llvm::SmallVectorImpl<std::string> &params) const;
  /// What a row kernel of emitRowSoftmax over `buffers` starts from: its
  /// parameters (getKernelParameters), the induction variables of the rows
  /// ("i0", "i1", ...), each buffer's offset of the row's element `j`
  /// (getRowElementOffset), and the name of the element type.
  struct RowKernelParts {
    llvm::SmallVector<std::string> names, params, ivs, offsets;
    std::string typeName;
  };
  RowKernelParts getRowKernelParts(const RowSoftmax &softmax,
                                   llvm::ArrayRef<LoopBuffer> buffers,
                                   llvm::StringRef restrictQualifier) const;
  /// Defines `<declaration> NAME(params) {body}` at file scope once per
  /// parameters and body (every layer of a model runs the same kernels)
  /// and returns NAME.
  std::string defineKernel(llvm::StringRef declaration,
                           llvm::ArrayRef<std::string> params,
                           llvm::StringRef body);
  /// The buffers' pointers, as a kernel call's arguments.
  static std::string getKernelArguments(llvm::ArrayRef<LoopBuffer> buffers);

  std::string *body = nullptr;
  std::string globals;
  std::string errorSite;

private:
  int counter = 0;
  /// The kernel defined for each signature and body.
  std::map<std::string, std::string> kernels;
};

} // namespace pcc

#endif // PCC_TARGET_TARGETHOOKS_H
