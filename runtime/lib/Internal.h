//===- Internal.h - Helpers shared by the runtime's sources -----*- C++ -*-===//
//
// Not installed: only the runtime's own sources include this.
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_LIB_INTERNAL_H
#define PCCRT_LIB_INTERNAL_H

#include "pccrt/Runtime.h"

// Tensor bytes are copied between files and generated code without swapping.
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pccrt supports little-endian hosts only"
#endif

namespace pccrt::detail {

/// No tensor may be larger: it bounds what a corrupt header can allocate.
constexpr uint64_t kMaxTensorBytes = uint64_t(16) << 30;

/// Throws Error("<what>: <cause>").
[[noreturn]] void fail(const std::string &what, const std::string &cause);

/// \p s in single quotes with control characters escaped, so that names
/// taken from untrusted files keep error messages on one line.
std::string quote(const std::string &s);

/// Bytes taken by a tensor of \p dtype and \p shape; throws (naming \p what)
/// for an unknown dtype, a negative extent or more than kMaxTensorBytes.
uint64_t checkedByteSize(int32_t dtype, const std::vector<int64_t> &shape,
                         const std::string &what);

/// Throws (naming \p what) unless \p tensor's data has exactly the bytes
/// its dtype and shape take.
void checkDataSize(const Tensor &tensor, const std::string &what);

std::vector<uint8_t> readFile(const std::string &path);

} // namespace pccrt::detail

#endif // PCCRT_LIB_INTERNAL_H
