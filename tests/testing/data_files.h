// Small dataset files in the real formats for the data tests: a fresh
// folder, raw and gzipped files, idx headers and labels, CIFAR-10 batches,
// and reading one example back.
#ifndef SPILL_TESTS_TESTING_DATA_FILES_H_
#define SPILL_TESTS_TESTING_DATA_FILES_H_

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/augment.h"
#include "data/dataset.h"

namespace spill {
namespace testing {

using Bytes = std::vector<uint8_t>;

// A fresh, empty folder for one test.
inline std::string TempDir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / ("spill_data_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void WriteFile(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ASSERT_TRUE(out.good()) << path;
}

inline void WriteTextFile(const std::string& path, const std::string& text) {
  WriteFile(path, Bytes(text.begin(), text.end()));
}

inline void WriteGzip(const std::string& path, const Bytes& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(gzwrite(file, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

inline void PutBigEndian(Bytes* bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes->push_back((value >> shift) & 0xff);
}

inline Bytes IdxImages(uint32_t count, uint32_t rows, uint32_t cols, const Bytes& pixels,
                       uint32_t magic = 2051) {
  Bytes bytes;
  for (uint32_t value : {magic, count, rows, cols}) PutBigEndian(&bytes, value);
  bytes.insert(bytes.end(), pixels.begin(), pixels.end());
  return bytes;
}

inline Bytes IdxLabels(const Bytes& labels) {
  Bytes bytes;
  PutBigEndian(&bytes, 2049);
  PutBigEndian(&bytes, labels.size());
  bytes.insert(bytes.end(), labels.begin(), labels.end());
  return bytes;
}

// Pixel i of a test set: distinct-ish values that cover 0..255.
inline Bytes Ramp(size_t count, int salt) {
  Bytes pixels(count);
  for (size_t i = 0; i < count; ++i) pixels[i] = static_cast<uint8_t>((i * 7 + salt) % 256);
  return pixels;
}

inline Augmentation Raw() {  // pixels scaled to [0, 1], no normalization
  Augmentation augment;
  augment.mean = {0.0f};
  augment.std = {1.0f};
  return augment;
}

inline std::vector<float> GetImage(const Dataset& dataset, int64_t index, uint64_t seed,
                                   int* label) {
  std::vector<float> image(dataset.example_shape().sample_size());
  StatusOr<int> got = dataset.Get(index, seed, image.data());
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  if (label != nullptr) *label = got.ok() ? *got : -1;
  return image;
}

constexpr int kCifarRecord = 3073;

// Record r of batch file b: label (b + r) % 10; R = 1 + 7y, G = 1 + 7x, B = 10b + r.
inline Bytes CifarBatch(int b, int records) {
  Bytes bytes;
  for (int r = 0; r < records; ++r) {
    bytes.push_back((b + r) % 10);
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 32; ++y) {
        for (int x = 0; x < 32; ++x)
          bytes.push_back(c == 0 ? 1 + 7 * y : c == 1 ? 1 + 7 * x : 10 * b + r);
      }
    }
  }
  return bytes;
}

// Five training batches of 2 records (b = 1..5) and a test batch of 3 (b = 0).
inline std::string WriteCifar(const std::string& name) {
  std::string dir = TempDir(name);
  for (int b = 1; b <= 5; ++b) {
    WriteFile(dir + "/data_batch_" + std::to_string(b) + ".bin", CifarBatch(b, 2));
  }
  WriteFile(dir + "/test_batch.bin", CifarBatch(0, 3));
  return dir;
}

}  // namespace testing
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_DATA_FILES_H_
