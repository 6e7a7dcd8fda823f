//===- LoopNest.cpp - Loop nests over static shapes, for every target -----===//

#include "pcc/Target/LoopNest.h"

#include "llvm/ADT/STLExtras.h"

using namespace pcc;

int64_t pcc::getNumElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

llvm::SmallVector<int64_t>
pcc::getContiguousStrides(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

Access Access::contiguous(llvm::ArrayRef<int64_t> shape) {
  return broadcast(shape, shape);
}

Access Access::broadcast(llvm::ArrayRef<int64_t> shape,
                         llvm::ArrayRef<int64_t> space) {
  return broadcast(shape, space, getContiguousStrides(shape), 0);
}

Access Access::broadcast(llvm::ArrayRef<int64_t> shape,
                         llvm::ArrayRef<int64_t> space,
                         llvm::ArrayRef<int64_t> strides, int64_t base) {
  Access a;
  a.base = base;
  a.strides.assign(space.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1)
      a.strides[i + space.size() - shape.size()] = strides[i];
  return a;
}

LoopNest::LoopNest(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<Access> in)
    : numIterations(getNumElements(shape)) {
  // Drop unit dimensions, then merge dimension d into d+1 where every
  // access is contiguous across them.
  for (const Access &a : in)
    accesses.push_back({a.base, {}});
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    bounds.push_back(shape[d]);
    for (auto [k, a] : llvm::enumerate(in))
      accesses[k].strides.push_back(a.strides[d]);
  }
  for (int64_t d = int64_t(bounds.size()) - 2; d >= 0; --d) {
    bool mergeable = llvm::all_of(accesses, [&](const Access &a) {
      return a.strides[d] == a.strides[d + 1] * bounds[d + 1];
    });
    if (!mergeable)
      continue;
    bounds[d] *= bounds[d + 1];
    bounds.erase(bounds.begin() + d + 1);
    for (Access &a : accesses) {
      a.strides[d] = a.strides[d + 1];
      a.strides.erase(a.strides.begin() + d + 1);
    }
  }
}

std::string LoopNest::getOffset(unsigned k,
                                llvm::ArrayRef<std::string> ivs) const {
  const Access &a = accesses[k];
  std::string e = std::to_string(a.base);
  for (size_t d = 0; d < bounds.size(); ++d)
    if (a.strides[d] == 1)
      e += " + " + ivs[d];
    else if (a.strides[d] != 0)
      e += " + " + ivs[d] + " * " + std::to_string(a.strides[d]);
  return e;
}
