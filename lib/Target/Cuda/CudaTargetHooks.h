//===- CudaTargetHooks.h - How the CUDA target spells code ------*- C++ -*-===//
//
// The CUDA target's TargetHooks: every loop nest a __global__ kernel over a
// grid-stride loop, reductions one thread per output element (the CPU's
// order of accumulation), GEMMs through cuBLASLt, the ops that are more than
// one nest through pcc_cuda_kernels.cuh, all on the run's stream; the
// program's functions stay host code. Launches are spelled PCC_LAUNCH, so
// that the file also compiles as host C++ under the CUDA emulation.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_LIB_TARGET_CUDA_CUDATARGETHOOKS_H
#define PCC_LIB_TARGET_CUDA_CUDATARGETHOOKS_H

#include "pcc/Target/TargetHooks.h"

#include <map>

namespace pcc {

class CudaTargetHooks : public TargetHooks {
public:
  llvm::StringRef getTargetName() const override {
    return "the CUDA target";
  }
  void printFilePrologue(llvm::raw_ostream &os) const override;
  llvm::StringRef getFunctionAttributes() const override {
    return "PCC_PROGRAM";
  }
  std::string getRunPrologue(int64_t threads) const override;
  std::string getRunSuccess() const override {
    return "return pcc_cu::finish(ctx);";
  }
  void printRunBody(llvm::raw_ostream &os, llvm::StringRef preamble,
                    llvm::StringRef body, bool singleRank,
                    llvm::StringRef modelInfo) const override;
  llvm::StringRef getDevice() const override { return "PCCRT_DEVICE_CUDA"; }
  void printFileEpilogue(llvm::raw_ostream &os,
                         llvm::StringRef prefix) const override;

  llvm::StringRef getKernelNamespace() const override { return "pcc_cu"; }
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
  void emitKernelCall(llvm::StringRef kernel,
                      llvm::ArrayRef<mlir::Type> typeArgs,
                      llvm::ArrayRef<std::string> args,
                      llvm::StringRef errorCode = {}) override;
  std::string emitIndexArray(llvm::ArrayRef<int64_t> values) override;
  void emitBeforeCollective() override;
  std::string getCommStream() const override { return "pcc_cu::stream()"; }
  void emitTransfer(const TransferCall &transfer) override;
  void emitCopy(llvm::StringRef dst, llvm::StringRef src, int64_t bytes,
                bool mayAlias) override;
  void emitFill(llvm::StringRef dst, int64_t count,
                llvm::StringRef value) override;

private:
  /// Defines (once per signature and body) and launches a kernel whose
  /// threads share the iterations of the `parallel` dimensions of `bounds`
  /// (a prefix of them), each running `body` over the names `ivs` of the
  /// dimensions; `buffers` are its parameters p0, p1, ...
  void emitKernel(llvm::ArrayRef<int64_t> parallelBounds,
                  llvm::ArrayRef<std::string> parallelIvs,
                  llvm::ArrayRef<LoopBuffer> buffers, llvm::StringRef body);
  /// Defines a kernel of parameters `params` and body `text` whose blocks
  /// take the `items` (rows, outputs) in turn, and launches it on
  /// `buffers`.
  void emitBlockPerItemKernel(llvm::ArrayRef<std::string> params,
                              llvm::StringRef text, int64_t items,
                              llvm::ArrayRef<LoopBuffer> buffers);
  /// Host code waits for the device's queued work (before the
  /// communicator reads or writes buffers).
  void emitSynchronize();
  /// Whether `reduction` runs one block per output element (few outputs,
  /// or rows read along the reduction) instead of one thread.
  bool shouldReduceByBlocks(const ReductionLoop &reduction) const;
  /// The block-per-output form of `reduction`, from `init`, its identity.
  void emitBlockReduction(const ReductionLoop &reduction,
                          llvm::StringRef init);

};

} // namespace pcc

#endif // PCC_LIB_TARGET_CUDA_CUDATARGETHOOKS_H
