//===- SafetensorsFuzzer.cpp - libFuzzer entry for parseSafetensors -------===//
//
// Build: clang++ -fsanitize=fuzzer,address -std=c++17 -Iruntime/include
//        runtime/lib/fuzz/SafetensorsFuzzer.cpp runtime/lib/*.cpp -ldl
//
//===----------------------------------------------------------------------===//

#include "pccrt/Runtime.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<pccrt::Tensor> tensors;
  try {
    tensors = pccrt::parseSafetensors(data, size, "fuzz");
  } catch (const pccrt::Error &) {
    return 0;
  }
  // Accepted tensors must be self-consistent: callers trust data's size.
  for (const pccrt::Tensor &tensor : tensors)
    if (tensor.data.size() !=
        uint64_t(tensor.numElements()) * pccrt::dtypeSize(tensor.dtype))
      std::abort();
  return 0;
}
