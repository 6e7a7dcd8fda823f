//===- LoopNest.h - Loop nests over static shapes ---------------*- C++ -*-===//
//
// Element-wise ops, reductions and data movement all run one loop nest over
// a static iteration space, in which every tensor they touch is read or
// written at an affine offset: a base plus one stride per dimension (0 where
// the tensor is broadcast). The index arithmetic is the same whether a
// target prints the nest as C++ loops or as a GPU kernel; only the printing
// differs (TargetHooks).
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_LOOPNEST_H
#define PCC_TARGET_LOOPNEST_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace pcc {

/// The number of elements of a static shape.
int64_t getNumElements(llvm::ArrayRef<int64_t> shape);

/// Row-major strides of a dense tensor of `shape`, in elements.
llvm::SmallVector<int64_t> getContiguousStrides(llvm::ArrayRef<int64_t> shape);

/// How a loop nest indexes one tensor: the element offset of the first
/// iteration and, per dimension of the iteration space, the step in
/// elements (0 along a dimension the tensor is broadcast over).
struct Access {
  int64_t base = 0;
  llvm::SmallVector<int64_t> strides;

  /// A dense tensor of `shape` walked in its own order.
  static Access contiguous(llvm::ArrayRef<int64_t> shape);
  /// A dense tensor of `shape` read in the iteration space `space` with
  /// numpy broadcasting (trailing alignment; extent-1 dimensions repeat).
  static Access broadcast(llvm::ArrayRef<int64_t> shape,
                          llvm::ArrayRef<int64_t> space);
  /// The same for a tensor laid out with `strides` (one per dimension of
  /// `shape`) from `base`.
  static Access broadcast(llvm::ArrayRef<int64_t> shape,
                          llvm::ArrayRef<int64_t> space,
                          llvm::ArrayRef<int64_t> strides, int64_t base);
};

/// A loop nest over a static iteration space with one access per tensor,
/// normalized for code: unit dimensions are dropped, and a dimension merges
/// into the next one wherever every access is contiguous across the two
/// (so a dense element-wise op is one flat loop). The bounds may be empty:
/// one iteration at the accesses' bases.
class LoopNest {
public:
  /// One iteration, no access.
  LoopNest() : LoopNest({}, {}) {}
  LoopNest(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<Access> accesses);

  /// The extents of the normalized dimensions, outermost first.
  llvm::ArrayRef<int64_t> getBounds() const { return bounds; }
  unsigned getNumAccesses() const { return accesses.size(); }
  /// Access `k` over the normalized dimensions.
  const Access &getAccess(unsigned k) const { return accesses[k]; }
  /// Whether the nest runs no iteration at all (an empty tensor).
  bool isEmpty() const { return numIterations == 0; }
  int64_t getNumIterations() const { return numIterations; }

  /// The element offset of access `k` as an expression of the induction
  /// variables `ivs` (one name per bound): "base + i0 * s0 + i1".
  std::string getOffset(unsigned k, llvm::ArrayRef<std::string> ivs) const;

private:
  llvm::SmallVector<int64_t> bounds;
  llvm::SmallVector<Access> accesses;
  int64_t numIterations;
};

} // namespace pcc

#endif // PCC_TARGET_LOOPNEST_H
