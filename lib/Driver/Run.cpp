//===- Run.cpp - The `pcc run` command ------------------------------------===//

#include "pcc/Driver/Driver.h"

#include "pccrt/Runtime.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>

using namespace pcc;

llvm::LogicalResult pcc::run(const RunOptions &options,
                             llvm::raw_ostream &summary) {
  try {
    if (!llvm::sys::fs::is_directory(options.dir))
      throw pccrt::Error(options.dir + ": not a compiled pcc output folder");
    std::string lib = options.dir + "/libmodel.so";
    std::string weights = options.dir + "/weights.safetensors";
    if (!llvm::sys::fs::exists(lib))
      throw pccrt::Error(options.dir +
                         ": no libmodel.so (not a pcc compile output)");
    auto model = pccrt::Model::load(
        lib, llvm::sys::fs::exists(weights) ? weights : "");
    if (options.steps < 1)
      throw pccrt::Error("--steps must be at least 1");
    std::vector<pccrt::Tensor> inputs =
        pccrt::bindInputs(model->info(), options.inputs);
    std::vector<pccrt::Tensor> outputs, first;
    double total = 0;
    for (int64_t step = 0; step < options.steps; ++step) {
      auto start = std::chrono::steady_clock::now();
      outputs = model->run(inputs);
      double ms = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
      total += ms;
      if (step == 0)
        first = outputs;
      if (options.steps > 1)
        summary << llvm::formatv("step {0}: {1:F3} ms\n", step + 1, ms);
    }
    for (const pccrt::Tensor &t : first)
      summary << "output '" << t.name << "': "
              << pccrt::describeType(t.dtype, t.shape) << "\n";
    summary << llvm::formatv("pcc: ran {0} step(s) of {1} in {2:F3} ms\n",
                             options.steps, options.dir, total);
    if (!options.dumpDir.empty()) {
      pccrt::dumpOutputs(options.dumpDir, first);
      summary << "pcc: wrote " << options.dumpDir << "/outputs.safetensors\n";
    }
    return llvm::success();
  } catch (const pccrt::Error &e) {
    llvm::errs() << "pcc: error: " << e.what() << "\n";
    return llvm::failure();
  }
}
