//===- RuntimeTest.cpp - Unit tests of libpccrt ---------------------------===//

#include "pccrt/Runtime.h"
#include "pccrt/Comm.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

using namespace pccrt;
namespace fs = std::filesystem;

namespace {
const int32_t kAllDtypes[] = {PCCRT_F32, PCCRT_U8,  PCCRT_I8,  PCCRT_U16,
                              PCCRT_I16, PCCRT_I32, PCCRT_I64, PCCRT_BOOL,
                              PCCRT_F16, PCCRT_F64, PCCRT_U32, PCCRT_U64,
                              PCCRT_BF16};

/// Succeeds if \p body throws a one-line pccrt::Error containing \p needle.
testing::AssertionResult failsWith(const std::function<void()> &body,
                                   const std::string &needle) {
  try {
    body();
  } catch (const Error &error) {
    std::string message = error.what();
    if (message.find(needle) == std::string::npos)
      return testing::AssertionFailure()
             << "message '" << message << "' lacks '" << needle << "'";
    if (message.find('\n') != std::string::npos)
      return testing::AssertionFailure() << "multi-line message: " << message;
    return testing::AssertionSuccess();
  }
  return testing::AssertionFailure() << "no error; expected '" << needle << "'";
}

/// Builds protobuf wire-format bytes by hand.
struct Proto {
  std::vector<uint8_t> bytes;

  Proto &varint(uint64_t value) {
    for (; value >= 0x80; value >>= 7)
      bytes.push_back(uint8_t(value | 0x80));
    bytes.push_back(uint8_t(value));
    return *this;
  }
  Proto &tag(unsigned field, unsigned wire) {
    return varint(field << 3 | wire);
  }
  Proto &field(unsigned field, uint64_t value) {
    return tag(field, 0).varint(value);
  }
  template <typename T> Proto &fixed(T value) {
    const uint8_t *p = reinterpret_cast<const uint8_t *>(&value);
    bytes.insert(bytes.end(), p, p + sizeof(T));
    return *this;
  }
  Proto &nested(unsigned field, const Proto &body) {
    tag(field, 2).varint(body.bytes.size());
    bytes.insert(bytes.end(), body.bytes.begin(), body.bytes.end());
    return *this;
  }
  Tensor parse() const {
    return parseTensorProto(bytes.data(), bytes.size(), "test.pb");
  }
};

template <typename T> std::vector<T> elements(const Tensor &tensor) {
  std::vector<T> out(tensor.data.size() / sizeof(T));
  if (!out.empty())
    std::memcpy(out.data(), tensor.data.data(), tensor.data.size());
  return out;
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

/// A fresh directory for each test, removed afterwards.
class RuntimeFiles : public testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "pccrt-test-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string path(const std::string &name) const { return (dir / name); }
  void writeBytes(const std::string &name, const std::vector<uint8_t> &bytes) {
    std::ofstream(path(name), std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  }

  /// Compiles the C \p source into `lib<name>.so` in the test directory and
  /// returns its path, or "" if there is no C compiler.
  std::string buildModel(const std::string &source, const std::string &name) {
    if (std::system("cc --version > /dev/null 2>&1") != 0)
      return "";
    std::ofstream(path(name + ".c")) << source;
    std::string library = path("lib" + name + ".so");
    std::string command = "cc -shared -fPIC -I" PCCRT_TEST_INCLUDE_DIR " -o " +
                          library + " " + path(name + ".c");
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return library;
  }

  fs::path dir;
};
} // namespace

TEST(Dtype, NamesAndSizes) {
  for (int32_t dtype : kAllDtypes) {
    EXPECT_EQ(dtypeFromSafetensorsName(dtypeName(dtype)), dtype);
    EXPECT_GT(dtypeSize(dtype), 0u);
  }
  EXPECT_EQ(dtypeName(PCCRT_BF16), "BF16");
  EXPECT_EQ(dtypeSize(PCCRT_BOOL), 1u);
  EXPECT_EQ(dtypeSize(PCCRT_I64), 8u);
  EXPECT_EQ(dtypeSize(8), 0u); // ONNX STRING
  EXPECT_EQ(dtypeName(99), "dtype(99)");
  EXPECT_EQ(dtypeFromSafetensorsName("F8_E4M3"), 0);
  EXPECT_EQ(describeType(PCCRT_I64, {2, 32}), "[2,32] of I64");
  EXPECT_EQ((Tensor{"", PCCRT_F32, {}, {}}).numElements(), 1);
}

TEST(TensorProto, RoundTripEachDtype) {
  for (int32_t dtype : kAllDtypes) {
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{2, 3}, {}, {0, 4}}) {
      Tensor tensor{"t_" + dtypeName(dtype), dtype, shape, {}};
      tensor.data.resize(tensor.numElements() * dtypeSize(dtype));
      for (size_t i = 0; i < tensor.data.size(); ++i)
        tensor.data[i] = dtype == PCCRT_BOOL ? i % 2 : uint8_t(i * 37 + 11);
      std::vector<uint8_t> bytes = serializeTensorProto(tensor);
      Tensor back = parseTensorProto(bytes.data(), bytes.size(), "rt");
      EXPECT_EQ(back.name, tensor.name);
      EXPECT_EQ(back.dtype, dtype);
      EXPECT_EQ(back.shape, shape);
      EXPECT_EQ(back.data, tensor.data) << dtypeName(dtype);
    }
  }
  Tensor bad{"bad", PCCRT_F32, {2}, {1, 2, 3}};
  EXPECT_TRUE(failsWith([&] { serializeTensorProto(bad); }, "needs 8"));
}

TEST(TensorProto, TypedFields) {
  // float_data packed, dims packed.
  Proto packedDims, packedFloats;
  packedDims.varint(2).varint(2);
  for (float f : {1.5f, -2.0f, 0.25f, 8.0f})
    packedFloats.fixed(f);
  Tensor t = Proto()
                 .nested(1, packedDims)
                 .field(2, PCCRT_F32)
                 .nested(4, packedFloats)
                 .nested(8, Proto{{'w'}})
                 .parse();
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(elements<float>(t), (std::vector<float>{1.5f, -2.0f, 0.25f, 8.0f}));

  // float_data unpacked, with unknown fields of every wire type interleaved.
  t = Proto()
          .field(1, 3)
          .nested(12, Proto{{'d', 'o', 'c'}}) // doc_string
          .field(2, PCCRT_F32)
          .nested(3, Proto().field(1, 0)) // segment
          .tag(4, 5)
          .fixed(1.0f)
          .field(100, 7)
          .tag(101, 1)
          .fixed(uint64_t(1))
          .tag(4, 5)
          .fixed(2.0f)
          .tag(102, 5)
          .fixed(uint32_t(1))
          .tag(4, 5)
          .fixed(3.0f)
          .parse();
  EXPECT_EQ(elements<float>(t), (std::vector<float>{1.0f, 2.0f, 3.0f}));

  // int64_data, unpacked then packed.
  t = Proto()
          .field(1, 3)
          .field(2, PCCRT_I64)
          .field(7, uint64_t(int64_t(-5)))
          .nested(7, Proto().varint(1).varint(uint64_t(1) << 40))
          .parse();
  EXPECT_EQ(elements<int64_t>(t),
            (std::vector<int64_t>{-5, 1, int64_t(1) << 40}));

  // int32_data holds BOOL (normalized to 0/1), INT8 and F16 bits.
  t = Proto()
          .field(1, 3)
          .field(2, PCCRT_BOOL)
          .nested(5, Proto().varint(0).varint(1).varint(7))
          .parse();
  EXPECT_EQ(t.data, (std::vector<uint8_t>{0, 1, 1}));
  t = Proto()
          .field(1, 2)
          .field(2, PCCRT_I8)
          .field(5, uint64_t(int64_t(-3))) // a 10-byte varint
          .field(5, 127)
          .parse();
  EXPECT_EQ(elements<int8_t>(t), (std::vector<int8_t>{-3, 127}));
  t = Proto().field(2, PCCRT_F16).field(5, 0x3c00).parse();
  EXPECT_EQ(t.data, (std::vector<uint8_t>{0x00, 0x3c}));

  // double_data and uint64_data.
  t = Proto()
          .field(1, 2)
          .field(2, PCCRT_F64)
          .nested(10, Proto().fixed(0.5).fixed(-1e300))
          .parse();
  EXPECT_EQ(elements<double>(t), (std::vector<double>{0.5, -1e300}));
  t = Proto().field(1, 1).field(2, PCCRT_U32).field(11, 0xffffffffu).parse();
  EXPECT_EQ(elements<uint32_t>(t), (std::vector<uint32_t>{0xffffffffu}));
}

TEST(TensorProto, MalformedRejected) {
  auto fails = [](const Proto &proto, const std::string &needle) {
    return failsWith([&] { proto.parse(); }, needle);
  };
  EXPECT_TRUE(fails(Proto(), "test.pb: empty file"));
  EXPECT_TRUE(fails(Proto{{0x08, 0x80}}, "truncated TensorProto"));
  EXPECT_TRUE(fails(Proto{{0x08}}, "truncated TensorProto"));
  EXPECT_TRUE(fails(Proto{std::vector<uint8_t>(12, 0xff)}, "malformed varint"));
  EXPECT_TRUE(fails(Proto().field(2, 1).tag(9, 2).varint(100).varint(1),
                    "test.pb: truncated TensorProto (field 9 runs past end)"));
  EXPECT_TRUE(fails(Proto().field(2, 1).nested(4, Proto().fixed(uint16_t(1))),
                    "field 4 runs past end"));
  // Payload does not match dims.
  EXPECT_TRUE(fails(Proto()
                        .field(1, 2)
                        .field(1, 3)
                        .field(2, PCCRT_F32)
                        .nested(9, Proto{std::vector<uint8_t>(20)}),
                    "raw_data has 20 bytes but [2,3] of F32 needs 24"));
  EXPECT_TRUE(
      fails(Proto().field(1, 2).field(2, PCCRT_F32).tag(4, 5).fixed(1.0f),
            "payload has 1 elements but dims [2] need 2"));
  EXPECT_TRUE(fails(Proto().field(1, 4).field(2, PCCRT_F32), "payload has 0"));
  EXPECT_TRUE(
      fails(Proto().field(1, 1).field(2, PCCRT_I64).tag(4, 5).fixed(1.0f),
            "float_data cannot hold I64"));
  EXPECT_TRUE(fails(
      Proto().field(1, 1).field(2, PCCRT_F32).field(5, 1).tag(4, 5).fixed(1.0f),
      "both int32_data and float_data"));
  // Absurd dims.
  EXPECT_TRUE(fails(Proto()
                        .field(1, uint64_t(1) << 40)
                        .field(1, uint64_t(1) << 40)
                        .field(2, PCCRT_F32),
                    "exceeds 16 GiB"));
  EXPECT_TRUE(fails(Proto().field(1, ~uint64_t(0)).field(2, PCCRT_F32),
                    "negative extent"));
  // Data types.
  EXPECT_TRUE(fails(Proto().field(1, 1), "no data_type"));
  EXPECT_TRUE(fails(Proto().field(2, 14), "unsupported data type 14"));
  EXPECT_TRUE(
      fails(Proto().field(2, uint64_t(1) << 33 | 1), "unsupported data type"));
  EXPECT_TRUE(fails(Proto().field(2, 8), "string tensors are not supported"));
  EXPECT_TRUE(fails(Proto().field(2, 1).nested(6, Proto{{'a'}}),
                    "string tensors are not supported"));
  // External data and bad wire types.
  EXPECT_TRUE(fails(Proto().field(2, 1).nested(13, Proto()), "external data"));
  EXPECT_TRUE(fails(Proto().field(2, 1).field(14, 1), "external data"));
  EXPECT_TRUE(fails(Proto().field(2, 1).tag(20, 3), "groups"));
  EXPECT_TRUE(fails(Proto().field(2, 1).tag(20, 7), "wire type 7"));
  EXPECT_TRUE(fails(Proto().field(8, 1), "unexpected wire type 0 for field 8"));
  EXPECT_TRUE(fails(Proto{{0x00}}, "invalid field number 0"));
}

TEST_F(RuntimeFiles, TensorProtoFiles) {
  Tensor tensor = makeTensor<int32_t>("ids", PCCRT_I32, {3}, {1, -2, 3});
  writeBytes("ids.pb", serializeTensorProto(tensor));
  Tensor back = readTensorProto(path("ids.pb"));
  EXPECT_EQ(back.data, tensor.data);
  writeBytes("empty.pb", {});
  EXPECT_TRUE(failsWith([&] { readTensorProto(path("empty.pb")); },
                        path("empty.pb") + ": empty file"));
  EXPECT_TRUE(
      failsWith([&] { readTensorProto(path("none.pb")); }, "cannot open"));
}

TEST_F(RuntimeFiles, SafetensorsRoundTrip) {
  std::vector<Tensor> tensors = {
      makeTensor<float>("z \"quoted\" \\back\\", PCCRT_F32, {2, 3},
                        {1, 2, 3, 4, 5, 6}),
      makeTensor<int64_t>("a/empty\n\x01", PCCRT_I64, {0, 5}, {}),
      makeTensor<uint8_t>("scalar \xc3\xa9", PCCRT_BOOL, {}, {1}),
      makeTensor<uint16_t>("m", PCCRT_BF16, {3}, {0x3f80, 0x4000, 0xbf80}),
      makeTensor<uint8_t>("odd", PCCRT_U8, {3}, {7, 8, 9})};
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"quote\"key", "back\\slash\ttab"}};
  writeSafetensors(path("w.safetensors"), tensors, metadata);

  std::map<std::string, std::string> readMetadata;
  std::vector<Tensor> back =
      readSafetensors(path("w.safetensors"), &readMetadata);
  EXPECT_EQ(readMetadata, metadata);
  ASSERT_EQ(back.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(back[i].name, tensors[i].name); // order kept, not sorted
    EXPECT_EQ(back[i].dtype, tensors[i].dtype);
    EXPECT_EQ(back[i].shape, tensors[i].shape);
    EXPECT_EQ(back[i].data, tensors[i].data);
  }

  // The header is padded so that the data section is 8-byte aligned, and
  // the in-memory parser agrees with the file reader.
  std::ifstream in(path("w.safetensors"), std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t headerLength;
  std::memcpy(&headerLength, bytes.data(), 8);
  EXPECT_EQ(headerLength % 8, 0u);
  std::vector<Tensor> parsed =
      parseSafetensors(bytes.data(), bytes.size(), "m");
  ASSERT_EQ(parsed.size(), tensors.size());
  EXPECT_EQ(parsed[3].data, tensors[3].data);
  // Nothing but the file itself is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), {}), 1);

  writeSafetensors(path("none.safetensors"), {});
  EXPECT_TRUE(readSafetensors(path("none.safetensors")).empty());
  EXPECT_TRUE(failsWith(
      [&] {
        writeSafetensors(path("d.safetensors"), {tensors[0], tensors[0]});
      },
      "duplicate"));
  Tensor short_{"s", PCCRT_F32, {2}, {0, 0}};
  EXPECT_TRUE(
      failsWith([&] { writeSafetensors(path("s.safetensors"), {short_}); },
                "has 2 bytes of data but [2] of F32 needs 8"));
  EXPECT_TRUE(failsWith([&] { readSafetensors(path("missing.safetensors")); },
                        "missing.safetensors: cannot open"));
}

namespace {
std::vector<uint8_t> safetensorsBytes(const std::string &json, size_t dataBytes,
                                      uint64_t claimedLength = 0) {
  uint64_t length = claimedLength ? claimedLength : json.size();
  std::vector<uint8_t> bytes(8);
  std::memcpy(bytes.data(), &length, 8);
  bytes.insert(bytes.end(), json.begin(), json.end());
  bytes.resize(bytes.size() + dataBytes);
  return bytes;
}

std::vector<Tensor> parseJson(const std::string &json, size_t dataBytes) {
  std::vector<uint8_t> bytes = safetensorsBytes(json, dataBytes);
  return parseSafetensors(bytes.data(), bytes.size(), "x.safetensors");
}

testing::AssertionResult jsonFails(const std::string &json, size_t dataBytes,
                                   const std::string &needle) {
  return failsWith([&] { parseJson(json, dataBytes); }, needle);
}
} // namespace

// Tensors that are not in memory: bytes copied from another file at an
// offset (a model's external data), and zeros written as a hole, the last
// one too (the file's length is still the header's).
TEST_F(RuntimeFiles, SafetensorsFromFileAndZeros) {
  std::vector<float> source(1000);
  for (size_t i = 0; i < source.size(); ++i)
    source[i] = float(i) * 0.5f;
  {
    std::ofstream out(path("source.bin"), std::ios::binary);
    out.write(reinterpret_cast<const char *>(source.data()),
              std::streamsize(source.size() * sizeof(float)));
  }
  TensorRef fromFile{"copied", PCCRT_F32, {10, 20}};
  fromFile.size = 200 * sizeof(float);
  fromFile.file = path("source.bin");
  fromFile.fileOffset = 300 * sizeof(float);
  TensorRef zeros{"zeros", PCCRT_F32, {7}};
  zeros.size = 7 * sizeof(float);
  zeros.zeros = true;
  std::vector<uint8_t> middle = {1, 2, 3};
  TensorRef inMemory{"memory", PCCRT_U8, {3}, middle.data(), middle.size()};
  TensorRef last = zeros;
  last.name = "last";
  writeSafetensorRefs(path("mixed.safetensors"),
                      {fromFile, zeros, inMemory, last});
  std::vector<Tensor> back = readSafetensors(path("mixed.safetensors"));
  ASSERT_EQ(back.size(), 4u);
  EXPECT_EQ(elements<float>(back[0]),
            std::vector<float>(source.begin() + 300, source.begin() + 500));
  EXPECT_EQ(elements<float>(back[1]), std::vector<float>(7, 0.0f));
  EXPECT_EQ(back[2].data, middle);
  EXPECT_EQ(elements<float>(back[3]), std::vector<float>(7, 0.0f));

  // A source shorter than the tensor fails, and leaves no file behind.
  fromFile.fileOffset = 900 * sizeof(float);
  EXPECT_THROW(writeSafetensorRefs(path("short.safetensors"), {fromFile}),
               Error);
  EXPECT_FALSE(std::filesystem::exists(path("short.safetensors")));
}

TEST(Safetensors, HeaderParsing) {
  // Unsorted offsets, gaps, escapes, unknown keys and whitespace are fine.
  std::vector<Tensor> tensors = parseJson(
      " {\"b\\u00e9\\ud83d\\ude00\": {\"dtype\":\"I32\", \"shape\":[1], "
      "\"data_offsets\":[8,12], \"extra\":[{\"k\":[]}]},\n"
      "\"a\":{\"shape\":[],\"dtype\":\"U8\",\"data_offsets\":[0,1]}}   ",
      16);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].name, "b\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(tensors[1].name, "a");
  EXPECT_EQ(tensors[1].shape, std::vector<int64_t>{});
}

TEST(Safetensors, MalformedRejected) {
  auto fails = [](const std::vector<uint8_t> &bytes,
                  const std::string &needle) {
    return failsWith(
        [&] { parseSafetensors(bytes.data(), bytes.size(), "x.safetensors"); },
        needle);
  };
  EXPECT_TRUE(fails({}, "x.safetensors: empty file"));
  EXPECT_TRUE(fails({1, 2, 3}, "too short"));
  EXPECT_TRUE(fails(safetensorsBytes("{}", 4, 1000),
                    "header length 1000 runs past end of file"));
  EXPECT_TRUE(fails(safetensorsBytes("{}", 0, ~uint64_t(0)), "runs past end"));

  const char *entry = "\"dtype\":\"F32\",\"shape\":[2]";
  auto one = [&](const std::string &rest) {
    return std::string("{\"a\":{") + entry + rest + "}}";
  };
  EXPECT_TRUE(jsonFails("", 0, "bad safetensors header: unexpected end"));
  EXPECT_TRUE(jsonFails("{\"a\":", 0, "bad safetensors header"));
  EXPECT_TRUE(jsonFails("{\"a\" 1}", 0, "expected ':'"));
  EXPECT_TRUE(jsonFails("{\"a\":1,}", 0, "expected string"));
  EXPECT_TRUE(jsonFails("{} x", 0, "trailing characters"));
  EXPECT_TRUE(jsonFails("{\"a\\q\":1}", 0, "bad escape"));
  EXPECT_TRUE(jsonFails("{\"\\ud800\":1}", 0, "unpaired surrogate"));
  EXPECT_TRUE(jsonFails("{\"a\x01\":1}", 0, "control character"));
  EXPECT_TRUE(jsonFails("{\"a\":true}", 0, "unexpected character"));
  EXPECT_TRUE(jsonFails(std::string(100000, '['), 0, "nesting too deep"));
  EXPECT_TRUE(jsonFails("[1,2]", 0, "not a JSON object"));
  EXPECT_TRUE(jsonFails("{\"a\":[]}", 0, "tensor 'a' is not a JSON object"));
  EXPECT_TRUE(jsonFails("{\"a\":{\"shape\":[1.5]}}", 0, "only integers"));
  EXPECT_TRUE(jsonFails("{\"a\":{\"shape\":[99999999999999999999]}}", 0,
                        "integer too large"));
  // Schema.
  EXPECT_TRUE(jsonFails(one(",\"data_offsets\":[0,8]"), 4,
                        "tensor 'a': data_offsets [0,8] out of range "
                        "(data section has 4 bytes)"));
  EXPECT_TRUE(jsonFails(one(",\"data_offsets\":[4,0]"), 8, "out of range"));
  EXPECT_TRUE(jsonFails(one(",\"data_offsets\":[-4,4]"), 8, "out of range"));
  EXPECT_TRUE(jsonFails(one(",\"data_offsets\":[0,12]"), 12,
                        "span 12 bytes but [2] of F32 needs 8"));
  EXPECT_TRUE(jsonFails(one(""), 8, "\"data_offsets\" must be two integers"));
  EXPECT_TRUE(jsonFails(one(",\"data_offsets\":[0]"), 8, "two integers"));
  EXPECT_TRUE(jsonFails("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[],"
                        "\"data_offsets\":[0,1]}}",
                        1, "tensor 'a': unknown dtype 'F8_E4M3'"));
  EXPECT_TRUE(
      jsonFails("{\"a\":{\"dtype\":1}}", 1, "\"dtype\" must be a string"));
  EXPECT_TRUE(jsonFails("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],"
                        "\"data_offsets\":[0,0]}}",
                        0, "negative extent"));
  EXPECT_TRUE(jsonFails("{\"a\":{\"dtype\":\"F32\",\"shape\":[65536,65536,4],"
                        "\"data_offsets\":[0,0]}}",
                        0, "exceeds 16 GiB"));
  EXPECT_TRUE(jsonFails("{\"a\":{\"dtype\":\"F32\",\"shape\":\"2\"}}", 0,
                        "\"shape\" must be an array of integers"));
  EXPECT_TRUE(jsonFails(one(",\"data_offsets\":[0,8]") + "x", 8, "trailing"));
  std::string twice = "{\"a\":{\"dtype\":\"U8\",\"shape\":[],"
                      "\"data_offsets\":[0,1]},\"a\":{\"dtype\":\"U8\","
                      "\"shape\":[],\"data_offsets\":[1,2]}}";
  EXPECT_TRUE(jsonFails(twice, 2, "duplicate tensor 'a'"));
  std::string overlap = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                        "\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\","
                        "\"shape\":[2],\"data_offsets\":[4,12]}}";
  EXPECT_TRUE(jsonFails(overlap, 12, "data of tensors 'a' and 'b' overlap"));
  EXPECT_TRUE(jsonFails("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__"));
  EXPECT_TRUE(jsonFails("{\"__metadata__\":[]}", 0, "__metadata__"));
}

TEST(Model, LoadMissingLibrary) {
  EXPECT_TRUE(failsWith([] { Model::load("/nonexistent/model.so", ""); },
                        "/nonexistent/model.so: cannot load model library"));
  EXPECT_TRUE(failsWith([] { Model::load("no-such-model.so", ""); },
                        "no-such-model.so: cannot load model library"));
}

TEST(Model, BindInputsWithoutLibrary) {
  const int64_t shapeA[] = {2}, shapeB[] = {1};
  pccrt_tensor_info inputs[] = {{"a", PCCRT_F32, 1, shapeA, PCCRT_KIND_INPUT},
                                {"b", PCCRT_I64, 1, shapeB, PCCRT_KIND_INPUT}};
  pccrt_model_info info = {PCCRT_ABI_VERSION, 2, inputs,  0,
                           nullptr,           0, nullptr, 0};
  std::string dir =
      (fs::temp_directory_path() / ("pccrt-bind-" + std::to_string(getpid())));
  fs::create_directories(dir);
  std::string pb = dir + "/a.pb", st = dir + "/b.safetensors";
  std::vector<uint8_t> bytes =
      serializeTensorProto(makeTensor<float>("other", PCCRT_F32, {2}, {1, 2}));
  std::ofstream(pb, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  writeSafetensors(st, {makeTensor<float>("unused", PCCRT_F32, {1}, {0}),
                        makeTensor<int64_t>("b", PCCRT_I64, {1}, {42})});

  // The safetensors file binds "b" by name; the .pb binds the first free one.
  std::vector<Tensor> bound = bindInputs(info, {st, pb});
  ASSERT_EQ(bound.size(), 2u);
  EXPECT_EQ(bound[0].name, "a");
  EXPECT_EQ(elements<float>(bound[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(elements<int64_t>(bound[1]), std::vector<int64_t>{42});
  EXPECT_TRUE(failsWith(
      [&] { bindInputs(info, {pb}); },
      "missing input 'b': too few input files "
      "(model has 2 inputs, got 1; give one --input per input, or --data "
      "for the token input)"));
  EXPECT_TRUE(failsWith(
      [&] {
        bindInputs(info, {st, pb, pb});
      },
      "a.pb: too many input files: model has 2 inputs"));
  EXPECT_TRUE(failsWith([&] { bindInputs(info, {st}); },
                        "missing input 'a': not found in the .safetensors"));
  EXPECT_TRUE(failsWith(
      [&] {
        bindInputs(info, {st, st});
      },
      "input 'b' is given twice"));
  inputs[1].dtype = PCCRT_I32;
  EXPECT_TRUE(failsWith(
      [&] {
        bindInputs(info, {pb, st});
      },
      "b.safetensors: input 'b': expected shape [1] of I32, "
      "got [1] of I64"));
  fs::remove_all(dir);
}

namespace {
// One F32 [2,3] input x, one F32 [3] weight, y = x + weight. It fails with
// an out-of-range code on negative input, and with code 2 if the runtime
// breaks the workspace contract.
const char *kModelSource = R"(
#include "pccrt/pccrt.h"
static const int64_t xShape[] = {2, 3}, wShape[] = {3};
static const pccrt_tensor_info inputs[] = {
    {"x", PCCRT_F32, 2, xShape, PCCRT_KIND_INPUT}};
static const pccrt_tensor_info weights[] = {
    {"bias", PCCRT_F32, 1, wShape, PCCRT_KIND_CONSTANT}};
static const pccrt_tensor_info outputs[] = {
    {"y", PCCRT_F32, 2, xShape, PCCRT_KIND_OUTPUT}};
static const pccrt_model_info info = {PCCRT_ABI_VERSION, 1, inputs, 1,
                                      outputs, 1, weights, 100};
const pccrt_model_info *test_model_info(void) { return &info; }
int test_model_run(const pccrt_context *ctx) {
  void *const *in = ctx->inputs, *const *out = ctx->outputs,
              *const *w = ctx->weights;
  void *workspace = ctx->workspace;
  const float *x = in[0], *b = w[0];
  float *y = out[0];
  unsigned char *scratch = workspace;
  if ((uintptr_t)workspace % 64 != 0)
    return 2;
  scratch[99] = 1;
  for (int i = 0; i < 6; ++i) {
    if (x[i] < 0)
      return PCCRT_ERR_INDEX_OUT_OF_RANGE;
    y[i] = x[i] + b[i % 3];
  }
  return PCCRT_OK;
}
)";
} // namespace

TEST_F(RuntimeFiles, ModelEndToEnd) {
  if (std::system("cc --version > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "no C compiler";
  std::ofstream(path("model.c")) << kModelSource;
  std::string command = "cc -shared -fPIC -I" PCCRT_TEST_INCLUDE_DIR " -o " +
                        path("libmodel.so") + " " + path("model.c");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::string lib = path("libmodel.so"), weights = path("w.safetensors");
  writeSafetensors(weights,
                   {makeTensor<float>("ignored", PCCRT_I64, {1}, {0, 0}),
                    makeTensor<float>("bias", PCCRT_F32, {3}, {10, 20, 30})});

  std::unique_ptr<Model> model = Model::load(lib, weights, "test");
  EXPECT_EQ(model->info().num_inputs, 1);
  Tensor x = makeTensor<float>("x", PCCRT_F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  for (int i = 0; i < 2; ++i) { // the second run reuses the workspace
    std::vector<Tensor> outputs = model->run({x});
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_EQ(outputs[0].name, "y");
    EXPECT_EQ(outputs[0].kind, PCCRT_KIND_OUTPUT);
    EXPECT_EQ(outputs[0].shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(elements<float>(outputs[0]),
              (std::vector<float>{11, 22, 33, 14, 25, 36}));
  }

  EXPECT_TRUE(failsWith(
      [&] {
        model->run(
            {makeTensor<float>("x", PCCRT_F32, {3, 2}, {1, 2, 3, 4, 5, 6})});
      },
      "input 'x': expected shape [2,3] of F32, got [3,2] of F32"));
  EXPECT_TRUE(
      failsWith([&] { model->run({}); }, "model expects 1 inputs, got 0"));
  EXPECT_TRUE(failsWith(
      [&] {
        model->run(
            {makeTensor<float>("x", PCCRT_F32, {2, 3}, {1, -2, 3, 4, 5, 6})});
      },
      "model run failed: index out of range (code 1)"));

  // Inputs from files, outputs to a directory.
  writeBytes("x.pb", serializeTensorProto(x));
  std::vector<Tensor> outputs =
      model->run(bindInputs(model->info(), {path("x.pb")}));
  dumpOutputs(path("out/nested"), outputs);
  std::vector<Tensor> dumped =
      readSafetensors(path("out/nested/outputs.safetensors"));
  ASSERT_EQ(dumped.size(), 1u);
  EXPECT_EQ(dumped[0].name, "y");
  EXPECT_EQ(dumped[0].data, outputs[0].data);

  // Load errors name the file and the cause.
  EXPECT_TRUE(failsWith([&] { Model::load(lib, weights); },
                        "missing symbol 'pcc_model_info'"));
  EXPECT_TRUE(failsWith([&] { Model::load(lib, "", "test"); },
                        "model needs 1 weights but no weights file was given"));
  writeSafetensors(path("bad.safetensors"),
                   {makeTensor<float>("bias", PCCRT_F32, {4}, {1, 2, 3, 4})});
  EXPECT_TRUE(failsWith(
      [&] { Model::load(lib, path("bad.safetensors"), "test"); },
      "bad.safetensors: weight 'bias': expected shape [3] of F32, got [4] of "
      "F32"));
  writeSafetensors(path("other.safetensors"),
                   {makeTensor<float>("b", PCCRT_F32, {3}, {1, 2, 3})});
  EXPECT_TRUE(
      failsWith([&] { Model::load(lib, path("other.safetensors"), "test"); },
                "other.safetensors: missing weight 'bias'"));
}

namespace {
// Operands prepared from a CONSTANT weight (ABI 9): `prepare` writes twice
// the bias into the prepared buffer and counts its calls; y = x + that, and
// the output "prepares" reports the count.
const char *kPreparedModelSource = R"(
#include "pccrt/pccrt.h"
#include <stdint.h>
static const int64_t xShape[] = {3};
static const pccrt_tensor_info inputs[] = {
    {"x", PCCRT_F32, 1, xShape, PCCRT_KIND_INPUT}};
static const pccrt_tensor_info weights[] = {
    {"bias", PCCRT_F32, 1, xShape, PCCRT_KIND_CONSTANT}};
static const pccrt_tensor_info outputs[] = {
    {"y", PCCRT_F32, 1, xShape, PCCRT_KIND_OUTPUT},
    {"prepares", PCCRT_F32, 0, 0, PCCRT_KIND_OUTPUT}};
static int prepares = 0;
static int prepare(const pccrt_context *ctx) {
  const float *b = ctx->weights[0];
  float *twice = ctx->prepared;
  if ((uintptr_t)twice % 64 != 0)
    return 2;
  for (int i = 0; i < 3; ++i)
    twice[i] = 2 * b[i];
  ++prepares;
  return PCCRT_OK;
}
static const pccrt_model_info info = {
    PCCRT_ABI_VERSION, 1, inputs, 2, outputs, 1, weights, 0, 0, 0, 0, -1,
    PCCRT_DEVICE_HOST, 12, &prepare};
const pccrt_model_info *prep_model_info(void) { return &info; }
int prep_model_run(const pccrt_context *ctx) {
  const float *x = ctx->inputs[0], *twice = ctx->prepared;
  float *y = ctx->outputs[0], *count = ctx->outputs[1];
  for (int i = 0; i < 3; ++i)
    y[i] = x[i] + twice[i];
  *count = (float)prepares;
  return PCCRT_OK;
}
)";
} // namespace

TEST_F(RuntimeFiles, PreparedOperandsFollowTheWeights) {
  std::string lib = buildModel(kPreparedModelSource, "prep");
  if (lib.empty())
    GTEST_SKIP() << "no C compiler";
  std::string weights = path("prep.safetensors");
  writeSafetensors(weights,
                   {makeTensor<float>("bias", PCCRT_F32, {3}, {1, 2, 3})});
  std::unique_ptr<Model> model = Model::load(lib, weights, "prep");
  Tensor x = makeTensor<float>("x", PCCRT_F32, {3}, {10, 20, 30});
  // Prepared once, before the first run, and kept.
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> outputs = model->run({x});
    EXPECT_EQ(elements<float>(outputs[0]), (std::vector<float>{12, 24, 36}));
    EXPECT_EQ(elements<float>(outputs[1]), (std::vector<float>{1}));
  }
  // New weights (a checkpoint serving the forward build): prepared again.
  EXPECT_EQ(model->loadParameters(
                {makeTensor<float>("bias", PCCRT_F32, {3}, {5, 5, 5})},
                {"bias"}, "ck.safetensors"),
            1u);
  std::vector<Tensor> outputs = model->run({x});
  EXPECT_EQ(elements<float>(outputs[0]), (std::vector<float>{20, 30, 40}));
  EXPECT_EQ(elements<float>(outputs[1]), (std::vector<float>{2}));
}

namespace {
// The same product, with "bias" read by the run only through its prepared
// operand (PCCRT_FLAG_PREPARED_ONLY): prepare doubles the non-null weights
// only; the run says whether it was given the weight itself.
const char *kPreparedOnlyModelSource = R"(
#include "pccrt/pccrt.h"
#include <stdint.h>
static const int64_t xShape[] = {3};
static const pccrt_tensor_info inputs[] = {
    {"x", PCCRT_F32, 1, xShape, PCCRT_KIND_INPUT}};
static const pccrt_tensor_info weights[] = {
    {"bias", PCCRT_F32, 1, xShape, PCCRT_KIND_CONSTANT, 0, 0, 0, 0, 0,
     PCCRT_FLAG_PREPARED_ONLY}};
static const pccrt_tensor_info outputs[] = {
    {"y", PCCRT_F32, 1, xShape, PCCRT_KIND_OUTPUT},
    {"prepares", PCCRT_F32, 0, 0, PCCRT_KIND_OUTPUT},
    {"held", PCCRT_F32, 0, 0, PCCRT_KIND_OUTPUT}};
static int prepares = 0;
static int prepare(const pccrt_context *ctx) {
  const float *b = ctx->weights[0];
  float *twice = ctx->prepared;
  if (!b)
    return PCCRT_OK;
  for (int i = 0; i < 3; ++i)
    twice[i] = 2 * b[i];
  ++prepares;
  return PCCRT_OK;
}
static const pccrt_model_info info = {
    PCCRT_ABI_VERSION, 1, inputs, 3, outputs, 1, weights, 0, 0, 0, 0, -1,
    PCCRT_DEVICE_HOST, 12, &prepare};
const pccrt_model_info *once_model_info(void) { return &info; }
int once_model_run(const pccrt_context *ctx) {
  const float *x = ctx->inputs[0], *twice = ctx->prepared;
  float *y = ctx->outputs[0], *count = ctx->outputs[1];
  for (int i = 0; i < 3; ++i)
    y[i] = x[i] + twice[i];
  *count = (float)prepares;
  *(float *)ctx->outputs[2] = ctx->weights[0] ? 1.0f : 0.0f;
  return PCCRT_OK;
}
)";
} // namespace

TEST_F(RuntimeFiles, PreparedOnlyWeightsAreHeldOnce) {
  std::string lib = buildModel(kPreparedOnlyModelSource, "once");
  if (lib.empty())
    GTEST_SKIP() << "no C compiler";
  std::string weights = path("once.safetensors");
  writeSafetensors(weights,
                   {makeTensor<float>("bias", PCCRT_F32, {3}, {1, 2, 3})});
  std::unique_ptr<Model> model = Model::load(lib, weights, "once");
  Tensor x = makeTensor<float>("x", PCCRT_F32, {3}, {10, 20, 30});
  // Prepared alone as it was read, then freed: the runs get a null pointer
  // and the operand prepared at load.
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> outputs = model->run({x});
    EXPECT_EQ(elements<float>(outputs[0]), (std::vector<float>{12, 24, 36}));
    EXPECT_EQ(elements<float>(outputs[1]), (std::vector<float>{1}));
    EXPECT_EQ(elements<float>(outputs[2]), (std::vector<float>{0}));
  }
  // Its value, when asked for, is read again from the weights file.
  std::vector<Tensor> state = model->state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(elements<float>(state[0]), (std::vector<float>{1, 2, 3}));
  // A new value, which the file does not have, is held (and prepared
  // before the next run).
  EXPECT_EQ(model->loadParameters(
                {makeTensor<float>("bias", PCCRT_F32, {3}, {5, 5, 5})},
                {"bias"}, "ck.safetensors"),
            1u);
  std::vector<Tensor> outputs = model->run({x});
  EXPECT_EQ(elements<float>(outputs[0]), (std::vector<float>{20, 30, 40}));
  EXPECT_EQ(elements<float>(outputs[1]), (std::vector<float>{2}));
  EXPECT_EQ(elements<float>(outputs[2]), (std::vector<float>{1}));
  state = model->state();
  EXPECT_EQ(elements<float>(state[0]), (std::vector<float>{5, 5, 5}));
}

namespace {
// A training step as the emitter lays it out: input x F32 [3], STATE
// "w" F32 [N] and "pcc.step" I64 [], CONSTANT "lr" F32 []; outputs "loss" =
// sum((w - x)^2) and GRAD "w" = 2 (w - x); then w -= lr * grad and the step
// counter increments, written only once everything is computed. N is 3 for
// the model the tests train, 4 for the "other" model whose checkpoints must
// not fit. A negative x fails the run before any state is written.
std::string trainingModelSource(int n, const std::string &prefix) {
  std::string source = R"(
#include "pccrt/pccrt.h"
#include <string.h>
#define N @N@
static const int64_t xShape[] = {3}, wShape[] = {N};
static const pccrt_tensor_info inputs[] = {
    {"x", PCCRT_F32, 1, xShape, PCCRT_KIND_INPUT}};
static const pccrt_tensor_info outputs[] = {
    {"loss", PCCRT_F32, 0, 0, PCCRT_KIND_OUTPUT},
    {"w", PCCRT_F32, 1, wShape, PCCRT_KIND_GRAD}};
static const pccrt_tensor_info weights[] = {
    {"w", PCCRT_F32, 1, wShape, PCCRT_KIND_STATE},
    {"lr", PCCRT_F32, 0, 0, PCCRT_KIND_CONSTANT},
    {"pcc.step", PCCRT_I64, 0, 0, PCCRT_KIND_STATE}};
static const pccrt_model_info info = {PCCRT_ABI_VERSION, 1, inputs, 2,
                                      outputs, 3, weights, 64};
const pccrt_model_info *@P@_model_info(void) { return &info; }
int @P@_model_run(const pccrt_context *ctx) {
  void *const *in = ctx->inputs, *const *out = ctx->outputs,
              *const *w = ctx->weights;
  void *workspace = ctx->workspace;
  const float *x = in[0], *lr = w[1];
  float *loss = out[0], *grad = out[1], *state = w[0];
  float *updated = workspace;
  long long *step = w[2];
  *loss = 0;
  for (int i = 0; i < N; ++i) {
    if (x[i % 3] < 0)
      return PCCRT_ERR_INDEX_OUT_OF_RANGE;
    float d = state[i] - x[i % 3];
    *loss += d * d;
    grad[i] = 2 * d;
    updated[i] = state[i] - *lr * grad[i];
  }
  memcpy(state, updated, sizeof(float) * N);
  *step += 1;
  return PCCRT_OK;
}
)";
  auto replace = [&](const std::string &key, const std::string &value) {
    for (size_t at; (at = source.find(key)) != std::string::npos;)
      source.replace(at, key.size(), value);
  };
  replace("@N@", std::to_string(n));
  replace("@P@", prefix);
  return source;
}

float scalarOf(const Tensor &tensor) { return elements<float>(tensor).at(0); }
} // namespace

class TrainingFiles : public RuntimeFiles {
protected:
  void SetUp() override {
    RuntimeFiles::SetUp();
    library = buildModel(trainingModelSource(3, "train"), "train");
    if (library.empty())
      GTEST_SKIP() << "no C compiler";
    weights = path("weights.safetensors");
    writeSafetensors(weights,
                     {makeTensor<float>("w", PCCRT_F32, {3}, {1, 2, 3}),
                      makeTensor<float>("lr", PCCRT_F32, {}, {0.25f}),
                      makeTensor<int64_t>("pcc.step", PCCRT_I64, {}, {0})});
  }
  std::unique_ptr<Model> load() {
    return Model::load(library, weights, "train");
  }

  std::string library, weights;
  Tensor x = makeTensor<float>("x", PCCRT_F32, {3}, {0, 0, 0});
};

TEST_F(TrainingFiles, StateUpdatesAcrossRuns) {
  std::unique_ptr<Model> model = load();
  EXPECT_TRUE(model->isTraining());
  std::vector<Tensor> outputs = model->run({x});
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].name, "loss");
  EXPECT_EQ(outputs[0].kind, PCCRT_KIND_OUTPUT);
  EXPECT_EQ(outputs[1].name, "w");
  EXPECT_EQ(outputs[1].kind, PCCRT_KIND_GRAD);
  EXPECT_FLOAT_EQ(scalarOf(outputs[0]), 14);
  EXPECT_EQ(elements<float>(outputs[1]), (std::vector<float>{2, 4, 6}));

  // The second run sees the first one's update.
  outputs = model->run({x});
  EXPECT_FLOAT_EQ(scalarOf(outputs[0]), 3.5f);
  EXPECT_EQ(elements<float>(outputs[1]), (std::vector<float>{1, 2, 3}));

  std::vector<Tensor> state = model->state();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].name, "w");
  EXPECT_EQ(state[0].kind, PCCRT_KIND_STATE);
  EXPECT_EQ(elements<float>(state[0]), (std::vector<float>{0.25, 0.5, 0.75}));
  EXPECT_EQ(state[1].kind, PCCRT_KIND_CONSTANT);
  EXPECT_EQ(elements<int64_t>(state[2]), std::vector<int64_t>{2});

  // A failed run leaves the state alone.
  EXPECT_TRUE(failsWith(
      [&] {
        model->run({makeTensor<float>("x", PCCRT_F32, {3}, {-1, 0, 0})});
      },
      "index out of range"));
  EXPECT_EQ(elements<float>(model->state()[0]),
            (std::vector<float>{0.25, 0.5, 0.75}));

  // A fresh model starts from the weights file again.
  EXPECT_FLOAT_EQ(scalarOf(load()->run({x})[0]), 14);
}

TEST_F(TrainingFiles, LoadState) {
  std::unique_ptr<Model> model = load();
  std::vector<Tensor> state = model->state();
  state[0] = makeTensor<float>("w", PCCRT_F32, {3}, {0, 0, 1});
  model->loadState(state);
  EXPECT_FLOAT_EQ(scalarOf(model->run({x})[0]), 1);

  // Errors change nothing.
  std::vector<Tensor> missing = {state[2]};
  EXPECT_TRUE(failsWith([&] { model->loadState(missing, "c.safetensors"); },
                        "checkpoint c.safetensors does not match this model: "
                        "missing 'w'"));
  std::vector<Tensor> wrong = {makeTensor<float>("w", PCCRT_F32, {2}, {0, 0}),
                               state[2]};
  EXPECT_TRUE(failsWith([&] { model->loadState(wrong); },
                        "checkpoint does not match this model: mismatched "
                        "'w': expected shape [3] of F32, got [2] of F32"));
  EXPECT_EQ(elements<float>(model->state()[0]),
            (std::vector<float>{0, 0, 0.5}));
  // CONSTANT weights are not part of the state and are not replaced.
  std::vector<Tensor> withLr = model->state();
  withLr[1] = makeTensor<float>("lr", PCCRT_F32, {}, {100});
  model->loadState(withLr);
  EXPECT_FLOAT_EQ(scalarOf(model->state()[1]), 0.25f);
}

TEST_F(TrainingFiles, CheckpointRoundTrip) {
  // Two steps in one go equal one step, save, load, one step.
  std::unique_ptr<Model> straight = load();
  straight->run({x});
  std::vector<Tensor> expected = straight->run({x});

  std::unique_ptr<Model> first = load();
  first->run({x});
  std::string checkpoint = path("ckpt.safetensors");
  saveCheckpoint(checkpoint, *first, {{"step", "1"}});

  std::map<std::string, std::string> metadata;
  std::vector<Tensor> saved = readSafetensors(checkpoint, &metadata);
  EXPECT_EQ(metadata.at("format"), "pcc-checkpoint");
  EXPECT_EQ(metadata.at("model"), first->fingerprint());
  EXPECT_EQ(metadata.at("step"), "1");
  ASSERT_EQ(saved.size(), 2u); // the STATE weights only
  EXPECT_EQ(saved[0].name, "w");
  EXPECT_EQ(saved[1].name, "pcc.step");

  std::unique_ptr<Model> resumed = load();
  EXPECT_EQ(loadCheckpoint(checkpoint, *resumed).at("step"), "1");
  std::vector<Tensor> got = resumed->run({x});
  EXPECT_EQ(got[0].data, expected[0].data);
  EXPECT_EQ(got[1].data, expected[1].data);
  EXPECT_EQ(resumed->state()[0].data, straight->state()[0].data);
  EXPECT_EQ(elements<int64_t>(resumed->state()[2]), std::vector<int64_t>{2});
}

TEST_F(TrainingFiles, CheckpointOfAnotherModelRefused) {
  std::string other = buildModel(trainingModelSource(4, "other"), "other");
  writeSafetensors(path("other.safetensors"),
                   {makeTensor<float>("w", PCCRT_F32, {4}, {1, 2, 3, 4}),
                    makeTensor<float>("lr", PCCRT_F32, {}, {0.25f}),
                    makeTensor<int64_t>("pcc.step", PCCRT_I64, {}, {0})});
  std::unique_ptr<Model> otherModel =
      Model::load(other, path("other.safetensors"), "other");
  std::unique_ptr<Model> model = load();
  EXPECT_NE(model->fingerprint(), otherModel->fingerprint());
  EXPECT_EQ(model->fingerprint(), load()->fingerprint());
  EXPECT_EQ(model->fingerprint().size(), 16u);

  std::string checkpoint = path("other.ckpt");
  saveCheckpoint(checkpoint, *otherModel);
  EXPECT_TRUE(failsWith([&] { loadCheckpoint(checkpoint, *model); },
                        checkpoint + ": checkpoint of a different model"));
  // The weights file is no checkpoint.
  EXPECT_TRUE(failsWith([&] { loadCheckpoint(weights, *model); },
                        weights + ": not a pcc checkpoint"));
  EXPECT_TRUE(failsWith([&] { loadCheckpoint(path("none"), *model); },
                        "none: cannot open"));
  // A checkpoint whose fingerprint matches but whose tensors do not (edited
  // by hand) is still refused by loadState.
  writeSafetensors(
      checkpoint, {makeTensor<float>("w", PCCRT_F32, {3}, {0, 0, 0})},
      {{"format", "pcc-checkpoint"}, {"model", model->fingerprint()}});
  EXPECT_TRUE(failsWith([&] { loadCheckpoint(checkpoint, *model); },
                        "checkpoint " + checkpoint +
                            " does not match this model: missing 'pcc.step'"));
  EXPECT_EQ(elements<float>(model->state()[0]), (std::vector<float>{1, 2, 3}));
}

TEST_F(RuntimeFiles, ModelInfoKindsChecked) {
  std::string source = trainingModelSource(3, "bad");
  // The GRAD output moved to the weights table.
  size_t at = source.find("{\"lr\", PCCRT_F32, 0, 0, PCCRT_KIND_CONSTANT}");
  ASSERT_NE(at, std::string::npos);
  source.replace(
      at, std::string("{\"lr\", PCCRT_F32, 0, 0, PCCRT_KIND_CONSTANT}").size(),
      "{\"lr\", PCCRT_F32, 0, 0, PCCRT_KIND_GRAD}");
  std::string library = buildModel(source, "bad");
  if (library.empty())
    GTEST_SKIP() << "no C compiler";
  EXPECT_TRUE(failsWith([&] { Model::load(library, "", "bad"); },
                        "weight 'lr': malformed model info: kind GRAD is not "
                        "allowed in the weight table"));
  EXPECT_EQ(kindName(PCCRT_KIND_STATE), "STATE");
  EXPECT_EQ(kindName(0), "kind(0)");
}

TEST_F(RuntimeFiles, StageWorkspacesNeedAPipeline) {
  std::string source = trainingModelSource(3, "stagews");
  std::string tail = "outputs, 3, weights, 64};";
  size_t at = source.find(tail);
  ASSERT_NE(at, std::string::npos);
  // Workspaces per pipeline rank in a program without a pipeline.
  source.replace(at, tail.size(),
                 "outputs, 3, weights, 64, 0, 0, 0, -1, PCCRT_DEVICE_HOST, "
                 "0, 0, 0, 0, stage_ws};");
  source = "#include <stdint.h>\nstatic const uint64_t stage_ws[] = {32};\n" +
           source;
  std::string library = buildModel(source, "stagews");
  if (library.empty())
    GTEST_SKIP() << "no C compiler";
  EXPECT_TRUE(failsWith([&] { Model::load(library, "", "stagews"); },
                        "malformed model info: stage workspaces without a "
                        "stage axis"));
}

namespace {
/// A model info with a 2 x 3 mesh whose one output is \p entry, for the
/// sharding functions, which read only the mesh and the entry.
struct MeshInfo {
  int64_t mesh[2] = {2, 3};
  pccrt_model_info info{};
  explicit MeshInfo(const pccrt_tensor_info &entry) {
    info.abi_version = PCCRT_ABI_VERSION;
    info.num_outputs = 1;
    info.outputs = &entry;
    info.mesh_rank = 2;
    info.mesh_shape = mesh;
  }
};

Tensor iota(const std::string &name, std::vector<int64_t> shape) {
  Tensor tensor{name, PCCRT_F32, std::move(shape), {}};
  std::vector<float> values(size_t(tensor.numElements()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = float(i);
  tensor.data.resize(values.size() * 4);
  std::memcpy(tensor.data.data(), values.data(), tensor.data.size());
  return tensor;
}
} // namespace

TEST(Shard, GroupsOfBlocks) {
  // 8 elements in 2 groups over 2 ranks: each rank holds its half of each
  // group, as a fused [q; k] weight split by heads.
  const int64_t local[] = {4};
  pccrt_tensor_info entry{"t", PCCRT_F32, 1, local, PCCRT_KIND_OUTPUT,
                          1,   0,         2, 0};
  MeshInfo mesh(entry);
  EXPECT_EQ(meshGroupSize(mesh.info, 1), 2);
  EXPECT_EQ(meshGroupSize(mesh.info, 3), 6);
  EXPECT_EQ(wholeShape(mesh.info, entry), std::vector<int64_t>{8});
  Tensor whole = iota("t", {8});
  Tensor p0 = sliceShard(mesh.info, entry, 0, whole);
  Tensor p1 = sliceShard(mesh.info, entry, 1, whole);
  EXPECT_EQ(elements<float>(p0), (std::vector<float>{0, 1, 4, 5}));
  EXPECT_EQ(elements<float>(p1), (std::vector<float>{2, 3, 6, 7}));
  EXPECT_EQ(p0.shape, std::vector<int64_t>{4});
  Tensor joined = joinShards(mesh.info, entry, {p0, p1});
  EXPECT_EQ(joined.shape, std::vector<int64_t>{8});
  EXPECT_EQ(joined.data, whole.data);
  EXPECT_TRUE(failsWith([&] { joinShards(mesh.info, entry, {p0}); },
                        "1 parts for a group of 2"));
  EXPECT_TRUE(failsWith([&] { sliceShard(mesh.info, entry, 2, whole); },
                        "cannot take part 2 of 2"));
}

TEST(Shard, OuterAxes) {
  // 12 elements over both axes of the 2 x 3 mesh, the second axis nesting
  // the first's blocks (ZeRO's data-parallel blocks of a tensor-parallel
  // block): the rank at coordinates (a, b), group position 3a + b, holds
  // block 2b + a of 6.
  const int64_t local[] = {2};
  pccrt_tensor_info entry{"t", PCCRT_F32, 1, local, PCCRT_KIND_OUTPUT, 3, 0, 0,
                          0,   0,         0, 2};
  MeshInfo mesh(entry);
  Tensor whole = iota("t", {12});
  std::vector<Tensor> parts;
  for (int64_t p = 0; p < 6; ++p)
    parts.push_back(sliceShard(mesh.info, entry, p, whole));
  EXPECT_EQ(elements<float>(parts[0]), (std::vector<float>{0, 1}));
  EXPECT_EQ(elements<float>(parts[1]), (std::vector<float>{4, 5}));
  EXPECT_EQ(elements<float>(parts[2]), (std::vector<float>{8, 9}));
  EXPECT_EQ(elements<float>(parts[3]), (std::vector<float>{2, 3}));
  EXPECT_EQ(elements<float>(parts[5]), (std::vector<float>{10, 11}));
  EXPECT_EQ(joinShards(mesh.info, entry, parts).data, whole.data);
}

TEST(Shard, InnerDimensionWithGroups) {
  // [2, 8, 3] per rank, split along dimension 1 over both axes (6 ranks) in
  // 2 groups: the whole is [2, 48, 3].
  const int64_t local[] = {2, 8, 3};
  pccrt_tensor_info entry{"t", PCCRT_F32, 3, local, PCCRT_KIND_OUTPUT,
                          3,   1,         2, 0};
  MeshInfo mesh(entry);
  EXPECT_EQ(wholeShape(mesh.info, entry), (std::vector<int64_t>{2, 48, 3}));
  Tensor whole = iota("t", {2, 48, 3});
  std::vector<float> all = elements<float>(whole);
  std::vector<Tensor> parts;
  for (int64_t p = 0; p < 6; ++p) {
    parts.push_back(sliceShard(mesh.info, entry, p, whole));
    std::vector<float> part = elements<float>(parts.back());
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t g = 0; g < 2; ++g)
        for (int64_t j = 0; j < 4; ++j)
          for (int64_t k = 0; k < 3; ++k)
            ASSERT_EQ(part[(o * 8 + g * 4 + j) * 3 + k],
                      all[(o * 48 + g * 24 + p * 4 + j) * 3 + k])
                << "part " << p;
  }
  EXPECT_EQ(joinShards(mesh.info, entry, parts).data, whole.data);
}

TEST(Shard, Padding) {
  // A vocabulary of 16 over 6 ranks: 3 rows each, the last 2 rows padding.
  const int64_t local[] = {3, 2};
  pccrt_tensor_info entry{"t", PCCRT_F32, 2, local, PCCRT_KIND_OUTPUT,
                          3,   0,         0, 16};
  MeshInfo mesh(entry);
  EXPECT_EQ(wholeShape(mesh.info, entry), (std::vector<int64_t>{16, 2}));
  Tensor whole = iota("t", {16, 2});
  std::vector<Tensor> parts;
  for (int64_t p = 0; p < 6; ++p)
    parts.push_back(sliceShard(mesh.info, entry, p, whole));
  EXPECT_EQ(elements<float>(parts[0]), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(elements<float>(parts[5]),
            (std::vector<float>{30, 31, 0, 0, 0, 0}));
  Tensor joined = joinShards(mesh.info, entry, parts);
  EXPECT_EQ(joined.shape, (std::vector<int64_t>{16, 2}));
  EXPECT_EQ(joined.data, whole.data);
  // A whole tensor passes through.
  const int64_t shape[] = {5};
  pccrt_tensor_info plain{"p", PCCRT_F32, 1, shape, PCCRT_KIND_OUTPUT};
  Tensor five = iota("p", {5});
  EXPECT_EQ(sliceShard(mesh.info, plain, 0, five).data, five.data);
  EXPECT_EQ(joinShards(mesh.info, plain, {five}).data, five.data);
}

TEST_F(RuntimeFiles, SplitModelNeedsAValidMeshAndACommunicator) {
  if (std::system("cc --version > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "no C compiler";
  auto build = [&](const std::string &name, const std::string &defines) {
    std::string library = path("lib" + name + ".so");
    std::string command = "cc -shared -fPIC -I" PCCRT_TEST_INCLUDE_DIR " " +
                          defines + " -o " + library +
                          " " PCCRT_TEST_MODEL_SOURCE;
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return library;
  };
  std::string split =
      build("split", "-DN=2 -DSPLIT=1 -DMESH=2 -DMESH_RANK=1 -DMASK=1");
  std::string single = build("single", "-DN=2 -DSPLIT=0");
  std::string weights = path("w.safetensors");
  writeSafetensors(weights,
                   {iota("w", {8}), iota("v", {5}),
                    makeTensor<int64_t>("pcc.step", PCCRT_I64, {}, {0})});
  EXPECT_EQ(Model::meshOf(split), std::vector<int64_t>{2});
  EXPECT_TRUE(Model::meshOf(single).empty());
  EXPECT_TRUE(failsWith([&] { Model::load(split, weights); },
                        "libsplit.so: a program of 2 ranks (mesh [2]) needs a "
                        "communicator"));
  // The single-rank build reads the same whole tensors.
  EXPECT_EQ(Model::load(single, weights)->localWeights()[1].shape,
            std::vector<int64_t>{5});
  // Sharding fields are checked when the library is loaded.
  std::string badMask =
      build("badmask", "-DN=2 -DSPLIT=1 -DMESH=2 -DMESH_RANK=1 -DMASK=2");
  EXPECT_TRUE(failsWith([&] { Model::meshOf(badMask); },
                        "input 'u': malformed model info: split over axes "
                        "mask 2 of a mesh of 1 axes"));
  std::string badMesh =
      build("badmesh", "-DN=2 -DSPLIT=1 -DMESH=0 -DMESH_RANK=1 -DMASK=1");
  EXPECT_TRUE(failsWith([&] { Model::meshOf(badMesh); },
                        "malformed model info: mesh axis 0 has size 0"));
}

TEST_F(RuntimeFiles, RankMonitorSharesItsStatus) {
  std::string file = path("rank-0");
  std::ofstream(file, std::ios::binary)
      .write(std::string(sizeof(RankMonitor::Status), '\0').data(),
             sizeof(RankMonitor::Status));
  RankMonitor writer(file), reader(file);
  EXPECT_TRUE(writer.sharedWithLauncher());
  writer.setStep(4);
  CommOp previous = writer.enter(CommOp::AllGather);
  EXPECT_EQ(previous, CommOp::None);
  EXPECT_EQ(reader.status().step.load(), 4);
  EXPECT_EQ(CommOp(reader.status().op.load()), CommOp::AllGather);
  EXPECT_EQ(reader.status().pid.load(), int32_t(getpid()));
  writer.leave(previous);
  writer.setError(RankMonitor::Phase::Error, "it broke", false);
  EXPECT_EQ(RankMonitor::Phase(reader.status().phase.load()),
            RankMonitor::Phase::Error);
  EXPECT_STREQ(reader.status().message, "it broke");
  EXPECT_EQ(CommOp(reader.status().op.load()), CommOp::None);
  // Not a status file of this build.
  writeBytes("short", {1, 2, 3});
  EXPECT_TRUE(failsWith([&] { RankMonitor bad(path("short")); },
                        "short: rank status file has 3 bytes"));
  // In memory when no launcher named a folder.
  unsetenv("PCCRT_STATUS_DIR");
  EXPECT_FALSE(RankMonitor::forRank(0)->sharedWithLauncher());
}

TEST_F(RuntimeFiles, DumpGrads) {
  std::vector<Tensor> grads = {
      makeTensor<float>("a", PCCRT_F32, {2}, {1.5f, -2}),
      makeTensor<uint16_t>("h", PCCRT_F16, {3}, {0x3c00, 0xc000, 0x0001}),
      makeTensor<uint16_t>("b", PCCRT_BF16, {2}, {0x3f80, 0xc040}),
      makeTensor<double>("d", PCCRT_F64, {}, {0.125})};
  dumpGrads(path("dump"), grads);
  std::vector<Tensor> back = readSafetensors(path("dump/grads.safetensors"));
  ASSERT_EQ(back.size(), 4u);
  for (const Tensor &t : back)
    EXPECT_EQ(t.dtype, PCCRT_F32) << t.name;
  EXPECT_EQ(back[0].name, "a");
  EXPECT_EQ(elements<float>(back[0]), (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(elements<float>(back[1]),
            (std::vector<float>{1, -2, 5.9604644775390625e-08f}));
  EXPECT_EQ(elements<float>(back[2]), (std::vector<float>{1, -3}));
  EXPECT_EQ(back[3].shape, std::vector<int64_t>{});
  EXPECT_EQ(elements<float>(back[3]), std::vector<float>{0.125f});
  EXPECT_TRUE(failsWith(
      [&] {
        dumpGrads(path("dump2"),
                  {makeTensor<int64_t>("i", PCCRT_I64, {1}, {1})});
      },
      "gradient 'i' has dtype I64, not a float type"));
}

namespace {
template <typename T>
void writeTokens(const std::string &file, const std::vector<T> &tokens,
                 const std::vector<int32_t> &header = {}) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char *>(header.data()),
            header.size() * sizeof(int32_t));
  out.write(reinterpret_cast<const char *>(tokens.data()),
            tokens.size() * sizeof(T));
}
} // namespace

TEST_F(RuntimeFiles, TokenDataSamples) {
  std::vector<uint16_t> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = uint16_t(i + 60000); // above int16: read as unsigned
  writeTokens(path("tokens.bin"), tokens);
  const int64_t shape[] = {4, 8};
  pccrt_tensor_info input = {"input_ids", PCCRT_I64, 2, shape,
                             PCCRT_KIND_INPUT};

  TokenData data(path("tokens.bin"));
  EXPECT_EQ(data.numTokens(), 1000);
  Tensor batch = data.batch(input, 0);
  EXPECT_EQ(batch.name, "input_ids");
  EXPECT_EQ(batch.dtype, PCCRT_I64);
  EXPECT_EQ(batch.shape, (std::vector<int64_t>{4, 8}));
  std::vector<int64_t> ids = elements<int64_t>(batch);
  for (int r = 0; r < 4; ++r) {
    EXPECT_GE(ids[r * 8], 60000);
    EXPECT_LE(ids[r * 8], 60000 + 1000 - 8);
    for (int t = 1; t < 8; ++t) // each row is a window of the file
      EXPECT_EQ(ids[r * 8 + t], ids[r * 8] + t);
  }
  // Deterministic per (seed, step), whatever was drawn before.
  EXPECT_EQ(TokenData(path("tokens.bin")).batch(input, 0).data, batch.data);
  Tensor step5 = data.batch(input, 5);
  EXPECT_NE(step5.data, batch.data);
  EXPECT_EQ(TokenData(path("tokens.bin")).batch(input, 5).data, step5.data);
  EXPECT_NE(TokenData(path("tokens.bin"), PCCRT_U16, 7).batch(input, 0).data,
            batch.data);
  // A replica's rows alone: the same rows, the others left zero.
  std::vector<int64_t> part = elements<int64_t>(data.batch(input, 0, 2, 2));
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(part[i], i < 16 ? 0 : ids[i]);

  // int32 tokens; a window as long as the file.
  writeTokens<int32_t>(path("i32.bin"), {70000, 70001, 70002, 70003, 70004,
                                         70005, 70006, 70007});
  TokenData wide(path("i32.bin"), PCCRT_I32);
  EXPECT_EQ(elements<int64_t>(wide.batch(input, 3)),
            (std::vector<int64_t>{
                70000, 70001, 70002, 70003, 70004, 70005, 70006, 70007,
                70000, 70001, 70002, 70003, 70004, 70005, 70006, 70007,
                70000, 70001, 70002, 70003, 70004, 70005, 70006, 70007,
                70000, 70001, 70002, 70003, 70004, 70005, 70006, 70007}));

  // llm.c's header is skipped.
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = 8;
  writeTokens<uint16_t>(path("llmc.bin"), {1, 2, 3, 4, 5, 6, 7, 8}, header);
  TokenData llmc(path("llmc.bin"));
  EXPECT_EQ(llmc.numTokens(), 8);
  EXPECT_EQ(elements<int64_t>(llmc.batch(input, 0))[0], 1);

  EXPECT_EQ(TokenData::dtypeFromName("uint16"), PCCRT_U16);
  EXPECT_EQ(TokenData::dtypeFromName("int32"), PCCRT_I32);
  EXPECT_EQ(TokenData::dtypeFromName("int64"), 0);
}

TEST_F(RuntimeFiles, TokenDataErrors) {
  const int64_t shape[] = {2, 8};
  pccrt_tensor_info input = {"ids", PCCRT_I64, 2, shape, PCCRT_KIND_INPUT};
  writeBytes("empty.bin", {});
  EXPECT_TRUE(failsWith([&] { TokenData data(path("empty.bin")); },
                        "empty.bin: empty token file"));
  EXPECT_TRUE(failsWith([&] { TokenData data(path("none.bin")); },
                        "none.bin: cannot open"));
  EXPECT_TRUE(
      failsWith([&] { TokenData data(dir.string()); }, "not a regular file"));
  writeBytes("odd.bin", {1, 2, 3});
  EXPECT_TRUE(failsWith([&] { TokenData data(path("odd.bin")); },
                        "odd.bin: 3 bytes of tokens is not a multiple of 2"));
  EXPECT_TRUE(failsWith([&] { TokenData data(path("odd.bin"), PCCRT_I64); },
                        "token dtype must be uint16 or int32"));

  writeTokens<uint16_t>(path("short.bin"), {1, 2, 3, 4, 5});
  TokenData shortData(path("short.bin"));
  EXPECT_TRUE(failsWith([&] { shortData.batch(input, 0); },
                        "short.bin: too short: 5 tokens, a batch row of input "
                        "'ids' needs 8"));

  writeTokens<uint16_t>(path("ok.bin"), std::vector<uint16_t>(100, 1));
  TokenData data(path("ok.bin"));
  pccrt_tensor_info floats = {"x", PCCRT_F32, 2, shape, PCCRT_KIND_INPUT};
  EXPECT_TRUE(failsWith([&] { data.check(floats); },
                        "--data needs a model whose first input is int64 "
                        "[B,T] token ids; input 'x' is [2,8] of F32"));
  pccrt_tensor_info flat = {"ids", PCCRT_I64, 1, shape, PCCRT_KIND_INPUT};
  EXPECT_TRUE(
      failsWith([&] { data.batch(flat, 0); }, "input 'ids' is [2] of I64"));

  writeTokens<int32_t>(path("neg.bin"), std::vector<int32_t>(8, -3));
  TokenData negative(path("neg.bin"), PCCRT_I32);
  EXPECT_TRUE(failsWith([&] { negative.batch(input, 0); },
                        "neg.bin: negative token -3 at token 0"));
}
