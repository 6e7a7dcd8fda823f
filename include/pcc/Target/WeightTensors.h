//===- WeightTensors.h - A program's weights file ---------------*- C++ -*-===//
//
// The weights an emitted program reads, as the runtime's safetensors writer
// takes them: what `pcc compile` and `pcc-translate --weights` write next
// to the generated code.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_WEIGHTTENSORS_H
#define PCC_TARGET_WEIGHTTENSORS_H

#include "pcc/Target/ProgramEmitter.h"

#include "pccrt/Runtime.h"

#include <cstdint>
#include <deque>
#include <vector>

namespace pcc {

/// The emitter's weights, ready for writeSafetensors: the bytes of a dense
/// weight are the IR's own; those that need converting (splats, booleans, a
/// padded vocabulary cut back) are made in `storage`, which must outlive the
/// result.
std::vector<pccrt::TensorRef>
getWeightTensors(const CppEmitResult &emitted,
                 std::deque<std::vector<uint8_t>> &storage);

} // namespace pcc

#endif // PCC_TARGET_WEIGHTTENSORS_H
