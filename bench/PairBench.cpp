//===- PairBench.cpp - Step times of pcc builds run in turns, step by step -===//
//
// pcc-bench-pairs times several builds of one model (folders made by `pcc
// compile`) in one process, their steps in turns: step s runs every build
// once, starting with a different one each step, so that a virtual
// machine's slow seconds fall on all of them alike. It prints each build's
// median step and the median of its ratios to the first build's step of
// the same turn: how a change to the kernels or to the generated code
// moves a whole model, to within about 2% on the 2-core development VM,
// where runs of `pcc run` a minute apart differ by more than 10%.
//
//   pcc-bench-pairs --steps N --input FILE [--input FILE...] DIR DIR...
//
// Each input is an ONNX TensorProto (`pcc run --input`'s files), in the
// order of the model's inputs. Each build's library keeps its own copy of
// the kernels (the runtime loads it with RTLD_LOCAL); a folder named twice
// is loaded once and run as two models.
//
//===----------------------------------------------------------------------===//

#include "pccrt/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {
constexpr int kWarmup = 3;

[[noreturn]] void usage(const std::string &message) {
  std::fprintf(stderr,
               "pcc-bench-pairs: %s\nusage: pcc-bench-pairs --steps N --input "
               "FILE [--input FILE...] DIR DIR...\n",
               message.c_str());
  std::exit(1);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}
} // namespace

int main(int argc, char **argv) {
  int steps = 0;
  std::vector<std::string> inputFiles, dirs;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--steps" || arg == "--input") {
      if (i + 1 >= argc)
        usage(arg + " needs a value");
      std::string value = argv[++i];
      if (arg == "--input") {
        inputFiles.push_back(value);
        continue;
      }
      char *end = nullptr;
      long n = std::strtol(value.c_str(), &end, 10);
      if (*end || n < 1 || n > 100000)
        usage("--steps takes a count from 1 to 100000, not '" + value + "'");
      steps = int(n);
    } else if (!arg.empty() && arg[0] == '-') {
      usage("unknown option '" + arg + "'");
    } else {
      dirs.push_back(arg);
    }
  }
  if (steps == 0 || inputFiles.empty() || dirs.empty())
    usage("--steps, --input and at least one build folder are needed");

  try {
    std::vector<pccrt::Tensor> inputs;
    for (const std::string &file : inputFiles)
      inputs.push_back(pccrt::readTensorProto(file));
    std::vector<std::unique_ptr<pccrt::Model>> models;
    for (const std::string &dir : dirs)
      models.push_back(pccrt::Model::load(dir + "/libmodel.so",
                                          dir + "/weights.safetensors"));
    size_t count = models.size();
    std::vector<std::vector<pccrt::Tensor>> outputs(count);
    for (size_t m = 0; m < count; ++m)
      for (int w = 0; w < kWarmup; ++w)
        outputs[m] = models[m]->run(inputs);
    std::vector<std::vector<double>> times(count), ratios(count);
    std::vector<double> turn(count);
    for (int s = 0; s < steps; ++s) {
      for (size_t j = 0; j < count; ++j) {
        size_t m = (j + size_t(s)) % count;
        auto start = std::chrono::steady_clock::now();
        models[m]->run(inputs, outputs[m]);
        turn[m] = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
      }
      for (size_t m = 0; m < count; ++m) {
        times[m].push_back(turn[m]);
        ratios[m].push_back(turn[m] / turn[0]);
      }
    }
    std::printf("%d steps in turns after %d of warm-up (ms)\n", steps,
                kWarmup);
    for (size_t m = 0; m < count; ++m)
      std::printf("%-40s median %8.2f  min %8.2f  / first %.4f\n",
                  dirs[m].c_str(), median(times[m]),
                  *std::min_element(times[m].begin(), times[m].end()),
                  median(ratios[m]));
  } catch (const pccrt::Error &e) {
    std::fprintf(stderr, "pcc-bench-pairs: %s\n", e.what());
    return 1;
  }
  return 0;
}
