//===- CostModel.h - Time of ops and transfers for a target -----*- C++ -*-===//
//
// Turns what ops declare through CostOpInterface (flops, bytes accessed)
// into seconds with a target's throughput constants, which a measured
// table can recalibrate (`pcc compile --cost-table FILE`). The stage
// partition balances stages with it and the schedule verifier computes the
// bubble and the timeline from it.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TRANSFORMS_PIPELINE_COSTMODEL_H
#define PCC_TRANSFORMS_PIPELINE_COSTMODEL_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <string>

namespace pcc {

struct OpThroughput {
  double flopsPerSecond = 0, bytesPerSecond = 0;
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

  /// Seconds of one execution of `op`: its flops and bytes at the op's (or
  /// the target's) throughput, whichever is slower, plus a fixed overhead.
  /// Communication ops take their bytes at the point-to-point bandwidth.
  double time(mlir::Operation *op) const;
  /// Seconds to send `bytes` to another rank: a latency, then the bytes at
  /// the point-to-point bandwidth, or at the network's between nodes.
  double transferTime(int64_t bytes, bool betweenNodes = false) const;
  /// Whether ranks `a` and `b` (of the whole mesh, numbered row-major) are
  /// on different nodes.
  bool betweenNodes(int64_t a, int64_t b) const {
    return devicesPerNode > 0 && a / devicesPerNode != b / devicesPerNode;
  }

  double flopsPerSecond = 0, bytesPerSecond = 0, p2pBytesPerSecond = 0;
  double opOverheadSeconds = 0;
  /// A transfer's fixed cost; the bandwidth between nodes, and the devices
  /// a node holds (0: one node holds every rank).
  double p2pLatencySeconds = 0, interNodeBytesPerSecond = 0;
  int64_t devicesPerNode = 0;
  llvm::StringMap<OpThroughput> ops;
};

/// Bytes of a statically shaped tensor type (0 for anything else).
int64_t tensorBytes(mlir::Type type);

} // namespace pcc

#endif // PCC_TRANSFORMS_PIPELINE_COSTMODEL_H
