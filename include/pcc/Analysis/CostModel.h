//===- CostModel.h - Time of ops and transfers for a target -----*- C++ -*-===//
//
// Turns what ops declare through CostOpInterface (flops, bytes accessed)
// into seconds with a target's throughput constants, which a measured
// table can recalibrate (`pcc compile --cost-table FILE`). The stage
// partition balances stages with it and the schedule verifier computes the
// bubble and the timeline from it.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_ANALYSIS_COSTMODEL_H
#define PCC_ANALYSIS_COSTMODEL_H

#include "pcc/Analysis/TensorBytes.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace pcc {

/// One op kind's own costs, in place of the general ones where set: its
/// throughputs (0: the general) and its fixed cost per op (negative: the
/// general op overhead).
struct OpThroughput {
  double flopsPerSecond = 0, bytesPerSecond = 0;
  double overheadSeconds = -1;
  /// Where positive, the kind's bytes take their time at this rate after
  /// its flops rather than beside them (a CPU product packs its operands,
  /// then multiplies them).
  double serialBytesPerSecond = 0;
};

class CostModel {
public:
  /// The defaults of a target ("cpu" or "cuda").
  static CostModel forTarget(llvm::StringRef target);
  /// Reads a table written as JSON:
  ///   {"flops_per_second": F, "bytes_per_second": B,
  ///    "p2p_bytes_per_second": P, "op_overhead_seconds": O,
  ///    "p2p_latency_seconds": L, "inter_node_bytes_per_second": I,
  ///    "devices_per_node": D,
  ///    "ops": {"graph.matmul": {"flops_per_second": F2}, ...}}
  /// Every key is optional; what it gives replaces the target's default.
  /// Fails with a message naming the file and the key.
  static llvm::Expected<CostModel> load(llvm::StringRef path,
                                        llvm::StringRef target = "cpu");
  /// The throughputs of a machine description (docs/Machines.md): one of
  /// getMachineNames(), shipped in machines/, or a JSON file, for products
  /// on `dtype` (f32, bf16 or f16). Fails with a message naming the
  /// description and the key.
  static llvm::Expected<CostModel> forMachine(llvm::StringRef nameOrPath,
                                              llvm::StringRef dtype);
  /// The model the passes use: `machine`'s (for products on `dtype`) when
  /// given, else `costTable`'s over the target's defaults when given, else
  /// the target's defaults.
  static llvm::Expected<CostModel> get(llvm::StringRef target,
                                       llvm::StringRef costTable,
                                       llvm::StringRef machine,
                                       llvm::StringRef dtype);
  /// The machine descriptions pcc ships: a100-80gb, h100-80gb and cpu.
  static llvm::ArrayRef<llvm::StringRef> getMachineNames();

  /// Seconds of one execution of `op`: its flops and bytes at the op's (or
  /// the target's) throughput, whichever is slower, plus a fixed overhead.
  /// Communication ops take their bytes at the point-to-point bandwidth.
  /// A view takes nothing, and an element-wise op fused into its readers
  /// (isFusedIntoReaders) its flops alone.
  double time(mlir::Operation *op) const;
  /// Whether pcc-fuse computes element-wise `op` inside the loop nest of
  /// its readers: each is element-wise over the same shape, in the same
  /// block and the same part of the step (forward or backward), so its
  /// result is never written.
  static bool isFusedIntoReaders(mlir::Operation *op);
  /// What `op` reads through the ops fused into their readers that make
  /// its operands (transitively): the operands and the chain's inputs,
  /// each once, into `inputs`. Whether any operand is made by such an op.
  static bool getFusedChainInputs(mlir::Operation *op,
                                  llvm::SetVector<mlir::Value> &inputs);
  /// Where element-wise `op` ends a chain of ops fused into their readers
  /// (pcc-fuse makes the chain one loop nest, a graph.fusion), the bytes
  /// that loop reads and writes: the chain's inputs once each, and `op`'s
  /// result; else nothing.
  static std::optional<double> getFusedChainBytes(mlir::Operation *op);
  /// Seconds of one execution of an op named `opName` that does `flops`
  /// (products on the matrix units where `matrix`, else element-wise at
  /// the vector rate) and accesses `bytes` (what time(op) takes of an op
  /// it has).
  double time(llvm::StringRef opName, double flops, double bytes,
              bool matrix = true) const;
  /// Seconds to send `bytes` to another rank: a latency, then the bytes at
  /// the point-to-point bandwidth, or at the network's between nodes.
  double transferTime(int64_t bytes, bool betweenNodes = false) const;
  /// Whether ranks `a` and `b` (of the whole mesh, numbered row-major) are
  /// on different nodes.
  bool betweenNodes(int64_t a, int64_t b) const {
    return devicesPerNode > 0 && a / devicesPerNode != b / devicesPerNode;
  }

  /// Seconds of a collective of `kind` (all_reduce, all_gather,
  /// reduce_scatter, all_to_all) whose result has `bytes`, over a group of
  /// `ranks`, inside a node or between nodes: the ring algorithms' traffic
  /// at the link's bandwidth, and a latency per step.
  double collectiveTime(llvm::StringRef kind, int64_t bytes, int64_t ranks,
                        bool betweenNodes) const;

  /// The machine description that gave the throughputs (empty: a target's
  /// defaults or a cost table). With one, collectives are timed by
  /// collectiveTime over their group, inside or between nodes.
  std::string machine;
  /// With a machine: the products' peak throughput (what MFU divides by)
  /// and each device's memory.
  double peakFlopsPerSecond = 0;
  int64_t memoryBytes = 0;
  /// With a machine: a transfer's fixed cost between nodes.
  double interNodeLatencySeconds = 0;

  double flopsPerSecond = 0, bytesPerSecond = 0, p2pBytesPerSecond = 0;
  /// Element-wise arithmetic's rate (the vector units'; an op whose flops
  /// do not run on the matrix units, CostOpInterface::runsOnMatrixUnits);
  /// 0: flopsPerSecond.
  double vectorFlopsPerSecond = 0;
  double getVectorFlopsPerSecond() const {
    return vectorFlopsPerSecond > 0 ? vectorFlopsPerSecond : flopsPerSecond;
  }
  /// The flops per second of an op named `opName`: its kind's where `ops`
  /// gives one, else the matrix or the vector rate.
  double getFlopRate(llvm::StringRef opName, bool matrix) const;
  double opOverheadSeconds = 0;
  /// A transfer's fixed cost; the bandwidth between nodes, and the devices
  /// a node holds (0: one node holds every rank).
  double p2pLatencySeconds = 0, interNodeBytesPerSecond = 0;
  int64_t devicesPerNode = 0;
  llvm::StringMap<OpThroughput> ops;
  /// With a machine that gives them (`measured`), the link's times inside
  /// and between nodes: what a rank sent (bytes) and the seconds it took,
  /// by increasing bytes. A link's bandwidth depends on the size (a
  /// buffer in the cache goes faster than one that is not), so a transfer
  /// is timed between the two it lies between rather than at one figure.
  llvm::SmallVector<std::pair<double, double>> intraNodeTimes, interNodeTimes;

private:
  /// Seconds for a rank to send `traffic` bytes over the link inside or
  /// between nodes, with `hops` latencies where the link has no times.
  double linkTime(double traffic, bool betweenNodes, double hops) const;
};

} // namespace pcc

#endif // PCC_ANALYSIS_COSTMODEL_H
