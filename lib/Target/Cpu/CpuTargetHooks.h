//===- CpuTargetHooks.h - How the CPU target spells code --------*- C++ -*-===//
//
// The CPU's TargetHooks: plain C++17 loops, pcc_kernels.h (GEMM through
// OpenBLAS when available) and the run context's communicator, printed into
// the body of the C++ function being emitted. Names of generated locals
// come from one counter, so that every name of a translation unit is new.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_LIB_TARGET_CPU_CPUTARGETHOOKS_H
#define PCC_LIB_TARGET_CPU_CPUTARGETHOOKS_H

#include "pcc/Target/TargetHooks.h"
#include <map>
#include <set>

namespace pcc {

class CpuTargetHooks : public TargetHooks {
public:
  llvm::StringRef getTargetName() const override { return "the CPU target"; }
  void printFilePrologue(llvm::raw_ostream &os) const override;
  llvm::StringRef getFunctionAttributes() const override {
    return "PCC_PROGRAM";
  }
  std::string getRunPrologue(int64_t threads) const override;
  std::string getRunSuccess() const override { return "return PCCRT_OK;"; }

  llvm::StringRef getKernelNamespace() const override { return "pcc_k"; }
  std::string getTypeName(mlir::Type elementType) const override;
  std::string getMathCall(MathFunction fn, mlir::Type type,
                          llvm::ArrayRef<std::string> args) const override;

  void emitComment(llvm::StringRef text) override;
  void
  emitParallelLoop(const LoopNest &nest, llvm::ArrayRef<LoopBuffer> buffers,
                   llvm::function_ref<std::string(llvm::ArrayRef<std::string>,
                                                  llvm::ArrayRef<std::string>)>
                       statement,
                   llvm::function_ref<std::string(llvm::ArrayRef<std::string>)>
                       prologue) override;
  void emitReduction(const ReductionLoop &reduction) override;
  void emitRowSoftmax(
      const RowSoftmax &softmax, llvm::ArrayRef<LoopBuffer> buffers,
      llvm::function_ref<std::string(llvm::ArrayRef<std::string>,
                                     llvm::ArrayRef<std::string>,
                                     llvm::StringRef)>
          element) override;
  void emitGemm(const GemmCall &gemm) override;
  bool supportsGemmEpilogue() const override { return true; }
  std::string emitIndexArray(llvm::ArrayRef<int64_t> values) override;
  void emitCopy(llvm::StringRef dst, llvm::StringRef src, int64_t bytes,
                bool mayAlias) override;
  void emitFill(llvm::StringRef dst, int64_t count,
                llvm::StringRef value) override;
  std::string getPreparedBytes() const override;
  bool readsPreparedB(const GemmCall &g) const override;
  std::string getPrepareBody() const override;
  void emitPrepareWeight(int64_t index, llvm::StringRef pointer) override;
  int64_t getPreparedRowPitch(int64_t index, int64_t rowLength) const override;
  void emitRowChunks(
      int64_t rows, int64_t chunkRows,
      llvm::function_ref<void(llvm::StringRef, int64_t)> body) override;
  void emitPrepareWeightRows(int64_t index, llvm::StringRef pointer,
                             llvm::StringRef row0, llvm::StringRef row1,
                             int64_t rows, int64_t pitch) override;
  std::string getPrepareWeightFunctions() const override;

private:
  /// Defines the function that runs `epilogue` on a block of C (a
  /// pcc_k::GemmEpilogueFn) and declares the array of its buffers'
  /// pointers; returns their names.
  std::pair<std::string, std::string>
  emitEpilogue(const GemmEpilogue &epilogue);
  /// Runs `nest` as a kernel of its own (see emitParallelLoop), whose
  /// iterations share the run's threads when `parallel`; `prologue` and
  /// `epilogue` are statements before and after the loops, over the
  /// parameters' names.
  void emitLoopKernel(
      const LoopNest &nest, llvm::ArrayRef<LoopBuffer> buffers,
      llvm::function_ref<std::string(llvm::ArrayRef<std::string>,
                                     llvm::ArrayRef<std::string>)>
          statement,
      bool parallel,
      llvm::function_ref<std::string(llvm::ArrayRef<std::string>)> prologue =
          nullptr,
      llvm::function_ref<std::string(llvm::ArrayRef<std::string>)> epilogue =
          nullptr);
  /// Loops over `nest`, `statement` innermost; `parallel`: the iterations
  /// are shared among the run's threads.
  void emitLoops(
      const LoopNest &nest,
      llvm::function_ref<std::string(llvm::ArrayRef<std::string>)> statement,
      bool parallel = false);

  /// Loop nests move at least this many bytes before threads share them.
  static constexpr int64_t kParallelBytes = 256 * 1024;
  /// The side of the tiles in which a transposing nest walks its last two
  /// dimensions: 16 floats are a 64-byte cache line.
  static constexpr int64_t kTile = 16;

  /// A GEMM's B packed from a weight (pcc_k::packB), at the
  /// offset `offset` (a constant of the generated code) of the prepared
  /// operands. Products that read the same weight alike share one.
  struct PreparedB {
    int64_t weight, k, n, ldb;
    bool transB;
    std::string offset;
  };
  /// Where `p` ends in the prepared operands: its offset plus its size, as
  /// the kernel library computes it.
  static std::string getEnd(const PreparedB &p);
  bool emitRowReduction(const ReductionLoop &r);
  /// The statement that packs `p` from `weight` into `prepared` (pointer
  /// expressions).
  static std::string getPackB(const PreparedB &p, llvm::StringRef weight,
                              llvm::StringRef prepared);
  int64_t getPreparedBytesAtLeast() const override;
  int64_t getWeightPreparedBytesAtLeast(int64_t index) const override;
  /// The expression of `g`'s B packed, prepared once.
  std::string getPreparedB(const GemmCall &g);
  /// Whether `g` runs as its transpose (pcc_k::gemmByTranspose), reading
  /// its B, a weight that each run updates, in place.
  bool transposesProduct(const GemmCall &g) const;
  std::vector<PreparedB> preparedBs;
  /// The weights whose prepared operands the runs make again
  /// (emitPrepareWeight).
  std::set<int64_t> updatedPrepared;
  /// The weights whose prepared operands the runs make a range of rows at
  /// a time (emitPrepareWeightRows): the row length the ranges count in,
  /// and the weight's rows of that length.
  struct RowPrepare {
    int64_t pitch, rows;
  };
  std::map<int64_t, RowPrepare> rowPrepared;
};

} // namespace pcc

#endif // PCC_LIB_TARGET_CPU_CPUTARGETHOOKS_H
