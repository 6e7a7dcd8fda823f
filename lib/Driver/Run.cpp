//===- Run.cpp - The `pcc run` command ------------------------------------===//

#include "pcc/Driver/Driver.h"

#include "pccrt/Runtime.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cstring>
#include <optional>

using namespace pcc;

/// The value of the scalar float32 output "loss", if the model has one.
static std::optional<float> lossOf(const std::vector<pccrt::Tensor> &outputs) {
  for (const pccrt::Tensor &t : outputs)
    if (t.name == "loss" && t.kind == PCCRT_KIND_OUTPUT &&
        t.dtype == PCCRT_F32 && t.data.size() == sizeof(float)) {
      float loss;
      std::memcpy(&loss, t.data.data(), sizeof loss);
      return loss;
    }
  return std::nullopt;
}

static std::vector<pccrt::Tensor> ofKind(const std::vector<pccrt::Tensor> &all,
                                         int32_t kind) {
  std::vector<pccrt::Tensor> selected;
  for (const pccrt::Tensor &t : all)
    if (t.kind == kind)
      selected.push_back(t);
  return selected;
}

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
    auto model =
        pccrt::Model::load(lib, llvm::sys::fs::exists(weights) ? weights : "");
    const pccrt_model_info &info = model->info();
    if (options.steps < 1)
      throw pccrt::Error("--steps must be at least 1");
    bool training = model->isTraining();
    bool hasState = false;
    for (int32_t i = 0; i < info.num_weights; ++i)
      hasState |= info.weights[i].kind == PCCRT_KIND_STATE;
    if (!options.saveCheckpoint.empty() && !hasState)
      throw pccrt::Error("--save needs a training build (pcc compile "
                         "--train): " +
                         options.dir + " has no state to checkpoint");
    // Where results go is checked before the first step, so that a long
    // run never ends in a path it cannot write.
    if (!options.saveCheckpoint.empty())
      pccrt::checkWritableFile(options.saveCheckpoint);
    if (!options.dumpDir.empty())
      pccrt::checkWritableDirectory(options.dumpDir);

    // Inputs: --data feeds the first one a batch per step, --input files
    // bind the others.
    std::unique_ptr<pccrt::TokenData> data;
    std::vector<pccrt::Tensor> inputs;
    if (!options.dataFile.empty()) {
      int32_t dtype = pccrt::TokenData::dtypeFromName(options.dataDtype);
      if (!dtype)
        throw pccrt::Error("--data-dtype must be uint16 or int32, got '" +
                           options.dataDtype + "'");
      if (info.num_inputs < 1)
        throw pccrt::Error("--data: " + options.dir + " takes no inputs");
      pccrt::TokenData::checkInput(info.inputs[0]);
      data = std::make_unique<pccrt::TokenData>(options.dataFile, dtype,
                                                options.seed);
      data->check(info.inputs[0]);
      // Every token must index the vocabulary: the logits' last dimension
      // (the first float output of rank 3, as for the loss).
      for (int32_t i = 0; i < info.num_outputs; ++i) {
        const pccrt_tensor_info &out = info.outputs[i];
        if (out.kind == PCCRT_KIND_OUTPUT && out.rank == 3 &&
            (out.dtype == PCCRT_F32 || out.dtype == PCCRT_F16 ||
             out.dtype == PCCRT_BF16 || out.dtype == PCCRT_F64)) {
          data->checkVocabulary(out.shape[2]);
          break;
        }
      }
      if (info.num_inputs == 1 && !options.inputs.empty())
        throw pccrt::Error("--input " + options.inputs.front() +
                           ": the model's only input is fed by --data");
      pccrt_model_info rest = info;
      rest.num_inputs -= 1;
      rest.inputs += 1;
      inputs = pccrt::bindInputs(rest, options.inputs);
      inputs.insert(inputs.begin(), pccrt::Tensor());
    } else {
      inputs = pccrt::bindInputs(info, options.inputs);
    }

    // Steps count on from the checkpoint, so that a resumed run samples
    // and reports what an uninterrupted one would.
    uint64_t firstStep = 0;
    if (!options.loadCheckpoint.empty() && !hasState) {
      // A forward build serves the trained parameters.
      size_t loaded =
          pccrt::loadCheckpointParameters(options.loadCheckpoint, *model);
      summary << "pcc: loaded " << loaded << " trained parameter(s) from "
              << options.loadCheckpoint << "\n";
    } else if (!options.loadCheckpoint.empty()) {
      std::map<std::string, std::string> metadata =
          pccrt::loadCheckpoint(options.loadCheckpoint, *model);
      auto step = metadata.find("step");
      if (step != metadata.end() &&
          llvm::StringRef(step->second).getAsInteger(10, firstStep))
        throw pccrt::Error(options.loadCheckpoint +
                           ": bad \"step\" in checkpoint metadata: '" +
                           step->second + "'");
      summary << "pcc: loaded checkpoint " << options.loadCheckpoint
              << " (step " << firstStep << ")\n";
    }

    std::vector<pccrt::Tensor> outputs, first;
    double total = 0;
    for (int64_t step = 0; step < options.steps; ++step) {
      uint64_t number = firstStep + uint64_t(step);
      if (data)
        inputs[0] = data->batch(info.inputs[0], number);
      auto start = std::chrono::steady_clock::now();
      outputs = model->run(inputs);
      double ms = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
      total += ms;
      if (step == 0)
        first = outputs;
      std::optional<float> loss = training ? lossOf(outputs) : std::nullopt;
      if (loss)
        summary << llvm::formatv("step {0}: loss {1:F6}, {2:F3} ms\n",
                                 number + 1, *loss, ms);
      else if (training || options.steps > 1)
        summary << llvm::formatv("step {0}: {1:F3} ms\n", number + 1, ms);
    }
    if (!training)
      for (const pccrt::Tensor &t : first)
        summary << "output '" << t.name
                << "': " << pccrt::describeType(t.dtype, t.shape) << "\n";
    summary << llvm::formatv("pcc: ran {0} step(s) of {1} in {2:F3} ms\n",
                             options.steps, options.dir, total);
    if (!options.dumpDir.empty()) {
      pccrt::dumpOutputs(options.dumpDir, ofKind(first, PCCRT_KIND_OUTPUT));
      summary << "pcc: wrote " << options.dumpDir << "/outputs.safetensors\n";
      if (training) {
        pccrt::dumpGrads(options.dumpDir, ofKind(first, PCCRT_KIND_GRAD));
        summary << "pcc: wrote " << options.dumpDir << "/grads.safetensors\n";
      }
    }
    if (!options.saveCheckpoint.empty()) {
      uint64_t last = firstStep + uint64_t(options.steps);
      pccrt::saveCheckpoint(options.saveCheckpoint, *model,
                            {{"step", std::to_string(last)}});
      summary << "pcc: saved checkpoint " << options.saveCheckpoint << " (step "
              << last << ")\n";
    }
    return llvm::success();
  } catch (const pccrt::Error &e) {
    llvm::errs() << "pcc: error: " << e.what() << "\n";
    return llvm::failure();
  }
}
