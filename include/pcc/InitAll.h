//===- InitAll.h - Registers every pcc dialect and pass ---------*- C++ -*-===//

#ifndef PCC_INITALL_H
#define PCC_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace pcc {

/// Adds every dialect pcc uses (its own and the upstream ones it builds on)
/// to `registry`.
void registerAllDialects(mlir::DialectRegistry &registry);

/// Registers every pcc pass and named pipeline (`pcc-parallelize`) with the
/// global registry, so that `--pcc-...` flags work in pcc-opt and in
/// embedders' tools.
void registerAllPasses();

} // namespace pcc

#endif // PCC_INITALL_H
