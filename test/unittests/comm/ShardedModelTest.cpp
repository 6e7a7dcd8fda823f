//===- ShardedModelTest.cpp - A split model on 2 or 4 ranks ---------------===//
//
// Run by ctest under mpirun with 2 ranks (mesh [2]) and 4 ranks (mesh
// [2,2], the weights split over both axes). The model is the handwritten
// training step of test/e2e/multirank/Inputs/model.c, built for this mesh
// and for one rank: each rank must hold exactly its part of each weight
// (groups, padding), a run must all_reduce through the context's
// communicator, gathers and checkpoints must give whole tensors equal to
// the single-rank model's, and checkpoints must move between the two.
//
//===----------------------------------------------------------------------===//

#include "pccrt/Comm.h"
#include "pccrt/Runtime.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>

using namespace pccrt;
namespace fs = std::filesystem;

namespace {
int worldRank = 0, worldSize = 1;
std::unique_ptr<Communicator> comm;
/// A folder all ranks share, made by rank 0.
std::string dir;
std::string splitLibrary, singleLibrary, weightsFile;

std::vector<int64_t> meshOfWorld() {
  return worldSize == 4 ? std::vector<int64_t>{2, 2}
                        : std::vector<int64_t>{worldSize};
}

template <typename T>
Tensor makeTensor(const std::string &name, int32_t dtype,
                  std::vector<int64_t> shape, const std::vector<T> &values) {
  Tensor tensor{name, dtype, std::move(shape), {}};
  tensor.data.resize(values.size() * sizeof(T));
  if (!values.empty())
    std::memcpy(tensor.data.data(), values.data(), tensor.data.size());
  return tensor;
}

template <typename T> std::vector<T> elements(const Tensor &tensor) {
  std::vector<T> out(tensor.data.size() / sizeof(T));
  if (!out.empty())
    std::memcpy(out.data(), tensor.data.data(), tensor.data.size());
  return out;
}

const Tensor &named(const std::vector<Tensor> &tensors,
                    const std::string &name) {
  for (const Tensor &t : tensors)
    if (t.name == name)
      return t;
  throw Error("no tensor " + name);
}

// Whole tensors of the model for N ranks.
int64_t n() { return worldSize; }
std::vector<float> wholeW() {
  std::vector<float> w(size_t(4 * n()));
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = float(i + 1);
  return w;
}
std::vector<float> wholeV() {
  std::vector<float> v(size_t(3 * n() - 1));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = float(100 + i);
  return v;
}
std::vector<Tensor> wholeInputs() {
  std::vector<float> u(size_t(2 * n()));
  for (size_t i = 0; i < u.size(); ++i)
    u[i] = float(1000 * (i + 1));
  return {makeTensor<float>("x", PCCRT_F32, {4}, {1, 2, 3, 4}),
          makeTensor<float>("u", PCCRT_F32, {2 * n()}, u)};
}
/// The loss the first step computes from the whole tensors.
float expectedLoss() {
  float loss = 10;
  for (float w : wholeW())
    loss += w * w;
  for (float v : wholeV())
    loss += v;
  for (int64_t i = 0; i < 2 * n(); ++i)
    loss += float(1000 * (i + 1));
  return loss;
}

/// Builds model.c for this mesh and for one rank (rank 0 only; the others
/// wait).
void buildLibraries() {
  char name[] = "/tmp/pccrt-sharded-XXXXXX";
  char path[64] = {};
  if (worldRank == 0) {
    if (!mkdtemp(name))
      std::abort();
    std::strcpy(path, name);
  }
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  dir = path;
  splitLibrary = dir + "/libsplit.so";
  singleLibrary = dir + "/libsingle.so";
  weightsFile = dir + "/weights.safetensors";
  int ok = 1;
  if (worldRank == 0) {
    std::string mesh = worldSize == 4 ? "2,2" : std::to_string(worldSize);
    std::string meshRank = worldSize == 4 ? "2" : "1";
    std::string mask = worldSize == 4 ? "3" : "1";
    std::string common = "cc -shared -fPIC -I" PCCRT_TEST_INCLUDE_DIR " " +
                         std::string(PCCRT_TEST_MODEL_SOURCE) +
                         " -DN=" + std::to_string(worldSize);
    std::string split = common + " -DSPLIT=1 -DMESH=" + mesh +
                        " -DMESH_RANK=" + meshRank + " -DMASK=" + mask +
                        " -o " + splitLibrary;
    std::string single = common + " -DSPLIT=0 -o " + singleLibrary;
    ok = std::system(split.c_str()) == 0 && std::system(single.c_str()) == 0;
    writeSafetensors(
        weightsFile,
        {makeTensor<float>("w", PCCRT_F32, {4 * n()}, wholeW()),
         makeTensor<float>("v", PCCRT_F32, {3 * n() - 1}, wholeV()),
         makeTensor<int64_t>("pcc.step", PCCRT_I64, {}, {0})});
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) {
    std::fprintf(stderr, "cannot build the test model libraries\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

std::unique_ptr<Model> loadSplit() {
  return Model::load(splitLibrary, weightsFile, "pcc", comm.get());
}
} // namespace

TEST(ShardedModel, EachRankHoldsItsPart) {
  std::unique_ptr<Model> model = loadSplit();
  EXPECT_EQ(model->mesh(), meshOfWorld());
  EXPECT_EQ(Model::meshOf(splitLibrary), meshOfWorld());
  EXPECT_TRUE(Model::meshOf(singleLibrary).empty());
  int64_t c = comm->groupPosition(comm->allAxes());
  EXPECT_EQ(c, worldRank);
  // w: 4N rows in 2 groups of 2N; this rank holds rows 2c, 2c+1 of each.
  std::vector<float> w = wholeW(), v = wholeV();
  std::vector<float> wantW = {w[2 * c], w[2 * c + 1], w[2 * n() + 2 * c],
                              w[2 * n() + 2 * c + 1]};
  EXPECT_EQ(elements<float>(model->localWeights()[0]), wantW);
  // v: 3N rows, the last one padding; this rank holds rows 3c..3c+2.
  std::vector<float> wantV;
  for (int64_t i = 3 * c; i < 3 * c + 3; ++i)
    wantV.push_back(i < int64_t(v.size()) ? v[i] : 0.0f);
  EXPECT_EQ(elements<float>(model->localWeights()[1]), wantV);
  EXPECT_EQ(model->localWeights()[1].shape, std::vector<int64_t>{3});
}

TEST(ShardedModel, RunGatherAndStateEqualOneRank) {
  std::unique_ptr<Model> split = loadSplit();
  std::unique_ptr<Model> single = Model::load(singleLibrary, weightsFile);
  EXPECT_EQ(split->fingerprint(), single->fingerprint());

  std::vector<Tensor> local = split->run(wholeInputs());
  std::vector<Tensor> reference = single->run(wholeInputs());
  EXPECT_EQ(elements<float>(local[0]), std::vector<float>{expectedLoss()});
  EXPECT_EQ(local[1].shape, std::vector<int64_t>{4});
  std::vector<Tensor> whole = split->gather(local);
  ASSERT_EQ(whole.size(), reference.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(whole[i].name, reference[i].name);
    EXPECT_EQ(whole[i].kind, reference[i].kind);
    EXPECT_EQ(whole[i].shape, reference[i].shape) << whole[i].name;
    EXPECT_EQ(whole[i].data, reference[i].data) << whole[i].name;
  }
  // z drops the padding row.
  EXPECT_EQ(named(whole, "z").shape, std::vector<int64_t>{3 * n() - 1});

  std::vector<Tensor> state = split->state(), singleState = single->state();
  ASSERT_EQ(state.size(), 3u);
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(state[i].shape, singleState[i].shape) << state[i].name;
    EXPECT_EQ(state[i].data, singleState[i].data) << state[i].name;
    EXPECT_EQ(state[i].kind, singleState[i].kind) << state[i].name;
  }
}

TEST(ShardedModel, CheckpointsMoveBetweenRankCounts) {
  std::string fromSplit = dir + "/split.ckpt", fromSingle = dir + "/one.ckpt";
  // N ranks train one step and save (rank 0 writes).
  std::unique_ptr<Model> split = loadSplit();
  split->run(wholeInputs());
  saveCheckpoint(fromSplit, *split, {{"step", "1"}});
  MPI_Barrier(MPI_COMM_WORLD);
  // The file holds whole tensors, exactly what one rank saves.
  if (worldRank == 0) {
    std::unique_ptr<Model> single = Model::load(singleLibrary, weightsFile);
    single->run(wholeInputs());
    saveCheckpoint(fromSingle, *single, {{"step", "1"}});
    std::map<std::string, std::string> a, b;
    std::vector<Tensor> ta = readSafetensors(fromSplit, &a),
                        tb = readSafetensors(fromSingle, &b);
    EXPECT_EQ(a, b);
    ASSERT_EQ(ta.size(), tb.size());
    for (size_t i = 0; i < ta.size(); ++i) {
      EXPECT_EQ(ta[i].shape, tb[i].shape) << ta[i].name;
      EXPECT_EQ(ta[i].data, tb[i].data) << ta[i].name;
    }
    // One rank resumes from the checkpoint of N and matches N ranks.
    std::unique_ptr<Model> resumed = Model::load(singleLibrary, weightsFile);
    EXPECT_EQ(loadCheckpoint(fromSplit, *resumed).at("step"), "1");
    EXPECT_EQ(resumed->run(wholeInputs())[0].data,
              single->run(wholeInputs())[0].data);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // N ranks resume from the checkpoint of one rank.
  std::unique_ptr<Model> resumed = loadSplit();
  loadCheckpoint(fromSingle, *resumed);
  std::vector<Tensor> a = resumed->gather(resumed->run(wholeInputs()));
  std::vector<Tensor> b = split->gather(split->run(wholeInputs()));
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].data, b[i].data) << a[i].name;
  // loadParameters slices a whole parameter too.
  std::vector<float> w(size_t(4 * n()), 7.0f);
  resumed->loadParameters({makeTensor<float>("w", PCCRT_F32, {4 * n()}, w)},
                          {"w"}, "test");
  EXPECT_EQ(elements<float>(resumed->localWeights()[0]),
            std::vector<float>(4, 7.0f));
  // A part's shape is no whole shape.
  std::vector<Tensor> state = resumed->state();
  state[0] = makeTensor<float>("w", PCCRT_F32, {4}, {1, 2, 3, 4});
  try {
    resumed->loadState(state, "c");
    ADD_FAILURE() << "a part loaded as a whole tensor";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("mismatched 'w': expected shape [" +
                                         std::to_string(4 * n()) +
                                         "] of F32, got [4] of F32"),
              std::string::npos)
        << e.what();
  }
}

TEST(ShardedModel, LoadChecksTheCommunicator) {
  try {
    Model::load(splitLibrary, weightsFile);
    ADD_FAILURE() << "loaded without a communicator";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "ranks (mesh [" + std::string(worldSize == 4 ? "2,2" : "2") +
                  "]) needs a communicator"),
              std::string::npos)
        << e.what();
  }
  try {
    Model::load(singleLibrary, weightsFile, "pcc", comm.get());
    ADD_FAILURE() << "a single-rank program loaded on several ranks";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("cannot run on a communicator of"),
              std::string::npos)
        << e.what();
  }
}

TEST(ShardedModel, MonitorRecordsOperations) {
  RankMonitor monitor;
  comm->setMonitor(&monitor);
  monitor.setStep(3);
  EXPECT_EQ(CommOp(monitor.status().op.load()), CommOp::None);
  // The watchdog sees the operation this rank waits in: ranks enter an
  // all_reduce that rank 0 joins late.
  std::atomic<int> fired{0};
  std::atomic<int32_t> seenOp{0};
  monitor.startWatchdog(0.2, [&](CommOp op, double) {
    seenOp = int32_t(op);
    fired = 1;
  });
  if (worldRank == 0)
    usleep(600 * 1000);
  float x = 1;
  comm->allReduce(comm->allAxes(), &x, 1, PCCRT_F32, PCCRT_REDUCE_SUM);
  EXPECT_EQ(x, float(worldSize));
  EXPECT_EQ(CommOp(monitor.status().op.load()), CommOp::None);
  if (worldRank != 0) {
    EXPECT_EQ(fired.load(), 1);
    EXPECT_EQ(CommOp(seenOp.load()), CommOp::AllReduce);
  }
  std::vector<std::string> errors = comm->agree(worldRank == 1 ? "bad" : "");
  ASSERT_EQ(errors.size(), size_t(worldSize));
  for (int r = 0; r < worldSize; ++r)
    EXPECT_EQ(errors[r], r == 1 ? "bad" : "");
  comm->setMonitor(nullptr);
  EXPECT_STREQ(commOpName(CommOp::AllReduce), "all_reduce");
}

namespace {
/// Prints only failures, with the rank: the other ranks' progress would
/// repeat rank 0's.
class FailurePrinter : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult &result) override {
    if (result.failed())
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", worldRank,
                   result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
  }
};
} // namespace

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  comm =
      createMpiCommunicator((initMpi(&worldRank, &worldSize), meshOfWorld()));
  if (worldRank != 0) {
    testing::TestEventListeners &listeners =
        testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  buildLibraries();
  int failed = RUN_ALL_TESTS() != 0, anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (worldRank == 0) {
    std::printf("%s sharded model on %d ranks\n", anyFailed ? "FAIL" : "ok",
                worldSize);
    fs::remove_all(dir);
  }
  comm.reset();
  finalizeMpi();
  return anyFailed;
}
