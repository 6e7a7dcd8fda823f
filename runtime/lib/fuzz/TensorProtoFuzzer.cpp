//===- TensorProtoFuzzer.cpp - libFuzzer entry for parseTensorProto -------===//
//
// Build: clang++ -fsanitize=fuzzer,address -std=c++17 -Iruntime/include
//        runtime/lib/fuzz/TensorProtoFuzzer.cpp runtime/lib/*.cpp -ldl
//
//===----------------------------------------------------------------------===//

#include "pccrt/Runtime.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pccrt::Tensor tensor;
  try {
    tensor = pccrt::parseTensorProto(data, size, "fuzz");
  } catch (const pccrt::Error &) {
    return 0;
  }
  // Whatever parses must survive a round trip unchanged.
  std::vector<uint8_t> bytes = pccrt::serializeTensorProto(tensor);
  pccrt::Tensor again =
      pccrt::parseTensorProto(bytes.data(), bytes.size(), "round trip");
  if (again.name != tensor.name || again.dtype != tensor.dtype ||
      again.shape != tensor.shape || again.data != tensor.data)
    std::abort();
  return 0;
}
