// Dataset readers on small files in the real formats (idx raw and gzipped,
// CIFAR-10 binary batches) written to a temp folder and read back exactly;
// one test per error class; and the real Fashion-MNIST when it is installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>
#include <string>
#include <vector>

#include "data/augment.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "tests/testing/data_files.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using testing::Bytes;
using testing::CifarBatch;
using testing::GetImage;
using ::testing::HasSubstr;
using testing::IdxImages;
using testing::IdxLabels;
using testing::kCifarRecord;
using testing::Ramp;
using testing::Raw;
using testing::TempDir;
using testing::WriteCifar;
using testing::WriteFile;
using testing::WriteGzip;

// ---------------------------------------------------------------- idx files

constexpr int kRows = 4, kCols = 5;

// Writes 3 training and 2 test images of 4x5; the test split is gzipped.
std::string WriteIdxSet(const std::string& name) {
  std::string dir = TempDir(name);
  WriteFile(dir + "/train-images-idx3-ubyte", IdxImages(3, kRows, kCols, Ramp(3 * 20, 0)));
  WriteFile(dir + "/train-labels-idx1-ubyte", IdxLabels({7, 0, 9}));
  WriteGzip(dir + "/t10k-images-idx3-ubyte.gz", IdxImages(2, kRows, kCols, Ramp(2 * 20, 100)));
  WriteGzip(dir + "/t10k-labels-idx1-ubyte.gz", IdxLabels({3, 5}));
  return dir;
}

TEST(IdxTest, ReadsRawValuesAndLabelsExactly) {
  std::string dir = WriteIdxSet("idx_raw");
  auto dataset = OpenIdx(dir, Split::kTrain, Raw());
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  EXPECT_EQ((*dataset)->size(), 3);
  EXPECT_EQ((*dataset)->num_classes(), 10);
  EXPECT_EQ((*dataset)->example_shape(), Shape(1, 1, kRows, kCols));
  Bytes pixels = Ramp(3 * 20, 0);
  const int expected_labels[] = {7, 0, 9};
  for (int i = 0; i < 3; ++i) {
    int label = -1;
    std::vector<float> image = GetImage(**dataset, i, 42, &label);
    EXPECT_EQ(label, expected_labels[i]);
    for (int p = 0; p < 20; ++p) ASSERT_EQ(image[p], pixels[i * 20 + p] / 255.0f) << i << " " << p;
  }
}

TEST(IdxTest, GzippedTestSplitAndDefaultNormalization) {
  std::string dir = WriteIdxSet("idx_gz");
  auto test = OpenIdx(dir, Split::kTest, Augmentation());
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  EXPECT_EQ((*test)->size(), 2);
  Bytes pixels = Ramp(2 * 20, 100);
  int label = -1;
  std::vector<float> image = GetImage(**test, 1, 0, &label);
  EXPECT_EQ(label, 5);
  for (int p = 0; p < 20; ++p) {
    EXPECT_FLOAT_EQ(image[p], (pixels[20 + p] / 255.0f - 0.2860f) / 0.3530f);
  }
  // MNIST's own statistics when fashion is false; explicit ones override both.
  auto mnist = OpenIdx(dir, Split::kTest, Augmentation(), /*fashion=*/false);
  ASSERT_TRUE(mnist.ok());
  EXPECT_FLOAT_EQ(GetImage(**mnist, 0, 0, nullptr)[0], (pixels[0] / 255.0f - 0.1307f) / 0.3081f);
  Augmentation custom;
  custom.mean = {0.5f};
  custom.std = {0.25f};
  auto explicit_stats = OpenIdx(dir, Split::kTest, custom);
  ASSERT_TRUE(explicit_stats.ok());
  EXPECT_FLOAT_EQ(GetImage(**explicit_stats, 0, 0, nullptr)[0],
                  (pixels[0] / 255.0f - 0.5f) / 0.25f);
}

TEST(IdxTest, GzippedAndRawFilesReadTheSame) {
  std::string dir = WriteIdxSet("idx_same");
  std::string gz_dir = TempDir("idx_same_gz");
  WriteGzip(gz_dir + "/train-images-idx3-ubyte.gz", IdxImages(3, kRows, kCols, Ramp(60, 0)));
  WriteGzip(gz_dir + "/train-labels-idx1-ubyte.gz", IdxLabels({7, 0, 9}));
  auto raw = OpenIdx(dir, Split::kTrain, Augmentation());
  auto gz = OpenIdx(gz_dir, Split::kTrain, Augmentation());
  ASSERT_TRUE(raw.ok() && gz.ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(GetImage(**raw, i, 5, nullptr), GetImage(**gz, i, 5, nullptr));
  }
}

TEST(IdxTest, MissingFileNamesThePath) {
  std::string dir = TempDir("idx_missing");
  auto dataset = OpenIdx(dir, Split::kTrain, Augmentation());
  ASSERT_FALSE(dataset.ok());
  EXPECT_EQ(dataset.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(dataset.status().message(), HasSubstr(dir + "/train-images-idx3-ubyte"));
}

TEST(IdxTest, TruncatedPixelsNameThePathAndSizes) {
  std::string dir = WriteIdxSet("idx_truncated");
  Bytes images = IdxImages(3, kRows, kCols, Ramp(60, 0));
  images.resize(images.size() - 7);
  WriteFile(dir + "/train-images-idx3-ubyte", images);
  auto dataset = OpenIdx(dir, Split::kTrain, Augmentation());
  ASSERT_FALSE(dataset.ok());
  EXPECT_THAT(dataset.status().message(), HasSubstr(dir + "/train-images-idx3-ubyte"));
  EXPECT_THAT(dataset.status().message(), HasSubstr("truncated"));
  EXPECT_THAT(dataset.status().message(), HasSubstr("69 bytes, expected 76"));
}

TEST(IdxTest, TruncatedGzipStreamIsAnError) {
  std::string dir = TempDir("idx_truncated_gz");
  std::string path = dir + "/t10k-images-idx3-ubyte.gz";
  WriteGzip(path, IdxImages(50, 20, 20, Ramp(50 * 400, 3)));
  WriteGzip(dir + "/t10k-labels-idx1-ubyte.gz", IdxLabels(Bytes(50, 1)));
  fs::resize_file(path, fs::file_size(path) / 2);
  auto dataset = OpenIdx(dir, Split::kTest, Augmentation());
  ASSERT_FALSE(dataset.ok());
  EXPECT_THAT(dataset.status().message(), HasSubstr(path));
}

TEST(IdxTest, BadMagicNamesThePathAndTheExpectedMagic) {
  std::string dir = WriteIdxSet("idx_magic");
  WriteFile(dir + "/train-images-idx3-ubyte", IdxImages(3, kRows, kCols, Ramp(60, 0), 2049));
  auto dataset = OpenIdx(dir, Split::kTrain, Augmentation());
  ASSERT_FALSE(dataset.ok());
  EXPECT_THAT(dataset.status().message(), HasSubstr(dir + "/train-images-idx3-ubyte"));
  EXPECT_THAT(dataset.status().message(), HasSubstr("2051"));
}

TEST(IdxTest, CountMismatchNamesBothFiles) {
  std::string dir = WriteIdxSet("idx_count");
  WriteFile(dir + "/train-labels-idx1-ubyte", IdxLabels({1, 2}));
  auto dataset = OpenIdx(dir, Split::kTrain, Augmentation());
  ASSERT_FALSE(dataset.ok());
  EXPECT_THAT(dataset.status().message(), HasSubstr(dir + "/train-labels-idx1-ubyte"));
  EXPECT_THAT(dataset.status().message(), HasSubstr(dir + "/train-images-idx3-ubyte"));
}

TEST(IdxTest, MalformedHeaderAndLabelsAreErrors) {
  std::string dir = WriteIdxSet("idx_malformed");
  WriteFile(dir + "/train-labels-idx1-ubyte", IdxLabels({1, 12, 2}));
  auto bad_label = OpenIdx(dir, Split::kTrain, Augmentation());
  ASSERT_FALSE(bad_label.ok());
  EXPECT_THAT(bad_label.status().message(), HasSubstr(dir + "/train-labels-idx1-ubyte"));
  EXPECT_THAT(bad_label.status().message(), HasSubstr("label 12"));

  WriteFile(dir + "/train-images-idx3-ubyte", IdxImages(0, 0, kCols, {}));
  auto bad_dims = OpenIdx(dir, Split::kTrain, Augmentation());
  ASSERT_FALSE(bad_dims.ok());
  EXPECT_THAT(bad_dims.status().message(), HasSubstr(dir + "/train-images-idx3-ubyte"));

  Bytes long_file = IdxImages(3, kRows, kCols, Ramp(61, 0));  // one stray byte
  WriteFile(dir + "/train-images-idx3-ubyte", long_file);
  auto extra = OpenIdx(dir, Split::kTrain, Augmentation());
  ASSERT_FALSE(extra.ok());
  EXPECT_THAT(extra.status().message(), HasSubstr("expected exactly 76"));

  WriteFile(dir + "/train-images-idx3-ubyte", {0, 0, 8});
  auto tiny = OpenIdx(dir, Split::kTrain, Augmentation());
  ASSERT_FALSE(tiny.ok());
  EXPECT_THAT(tiny.status().message(), HasSubstr("truncated"));
}

// ----------------------------------------------------------------- CIFAR-10
TEST(Cifar10Test, ReadsPlanesAndLabelsExactlyAcrossBatches) {
  std::string dir = WriteCifar("cifar_read");
  auto train = OpenCifar10(dir, Split::kTrain, Raw());
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_EQ((*train)->size(), 10);
  EXPECT_EQ((*train)->num_classes(), 10);
  EXPECT_EQ((*train)->example_shape(), Shape(1, 3, 32, 32));
  for (int i = 0; i < 10; ++i) {
    const int b = 1 + i / 2, r = i % 2;
    int label = -1;
    std::vector<float> image = GetImage(**train, i, 9, &label);
    EXPECT_EQ(label, (b + r) % 10);
    for (int y = 0; y < 32; ++y) {
      for (int x = 0; x < 32; ++x) {
        ASSERT_EQ(image[y * 32 + x], (1 + 7 * y) / 255.0f);
        ASSERT_EQ(image[1024 + y * 32 + x], (1 + 7 * x) / 255.0f);
        ASSERT_EQ(image[2048 + y * 32 + x], (10 * b + r) / 255.0f);
      }
    }
  }
  auto test = OpenCifar10(dir, Split::kTest, Augmentation());
  ASSERT_TRUE(test.ok());
  EXPECT_EQ((*test)->size(), 3);
  int label = -1;
  std::vector<float> image = GetImage(**test, 2, 0, &label);
  EXPECT_EQ(label, 2);
  EXPECT_FLOAT_EQ(image[5 * 32 + 3], ((1 + 35) / 255.0f - 0.4914f) / 0.2470f);
  EXPECT_FLOAT_EQ(image[1024 + 3], ((1 + 21) / 255.0f - 0.4822f) / 0.2435f);
  EXPECT_FLOAT_EQ(image[2048], (2 / 255.0f - 0.4465f) / 0.2616f);
}

TEST(Cifar10Test, MissingFileNamesPathAndSource) {
  std::string dir = WriteCifar("cifar_missing");
  fs::remove(dir + "/data_batch_4.bin");
  auto train = OpenCifar10(dir, Split::kTrain, Augmentation());
  ASSERT_FALSE(train.ok());
  EXPECT_EQ(train.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(train.status().message(), HasSubstr(dir + "/data_batch_4.bin"));
  EXPECT_THAT(train.status().message(),
              HasSubstr("https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"));
  EXPECT_THAT(train.status().message(), HasSubstr("binary version"));
  EXPECT_TRUE(OpenCifar10(dir, Split::kTest, Augmentation()).ok());  // other split intact
}

TEST(Cifar10Test, TruncatedFileNamesPathExpectedAndActualSize) {
  std::string dir = WriteCifar("cifar_truncated");
  Bytes bytes = CifarBatch(0, 3);
  bytes.resize(2 * kCifarRecord + 100);
  WriteFile(dir + "/test_batch.bin", bytes);
  auto test = OpenCifar10(dir, Split::kTest, Augmentation());
  ASSERT_FALSE(test.ok());
  const std::string& message = test.status().message();
  EXPECT_THAT(message, HasSubstr(dir + "/test_batch.bin"));
  EXPECT_THAT(message, HasSubstr(std::to_string(2 * kCifarRecord + 100) + " bytes"));
  EXPECT_THAT(message, HasSubstr("expected " + std::to_string(3 * kCifarRecord)));
  EXPECT_THAT(message, HasSubstr("cifar-10-binary.tar.gz"));
}

TEST(Cifar10Test, LabelOutOfRangeIsAnError) {
  std::string dir = WriteCifar("cifar_label");
  Bytes bytes = CifarBatch(0, 3);
  bytes[kCifarRecord] = 57;  // a CIFAR-100 fine label
  WriteFile(dir + "/test_batch.bin", bytes);
  auto test = OpenCifar10(dir, Split::kTest, Augmentation());
  ASSERT_FALSE(test.ok());
  EXPECT_THAT(test.status().message(), HasSubstr(dir + "/test_batch.bin"));
  EXPECT_THAT(test.status().message(), HasSubstr("label 57"));
}

// ------------------------------------------------------------ Fashion-MNIST

TEST(FashionMnistTest, ReadsTheInstalledDataset) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/train-images-idx3-ubyte.gz") &&
      !fs::exists(dir + "/train-images-idx3-ubyte")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed at " << dir;
  }
  auto train = OpenIdx(dir, Split::kTrain, Raw());
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  auto test = OpenIdx(dir, Split::kTest, Augmentation());
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  EXPECT_EQ((*train)->size(), 60000);
  EXPECT_EQ((*test)->size(), 10000);
  EXPECT_EQ((*train)->num_classes(), 10);
  EXPECT_EQ((*train)->example_shape(), Shape(1, 1, 28, 28));

  std::vector<int> counts(10, 0);
  std::vector<float> image(28 * 28);
  double sum = 0;
  for (int64_t i = 0; i < 60000; ++i) {
    StatusOr<int> label = (*train)->Get(i, 0, image.data());
    ASSERT_TRUE(label.ok());
    ASSERT_GE(*label, 0);
    ASSERT_LT(*label, 10);
    ++counts[*label];
    for (float v : image) sum += v;
    if (i == 0) {
      EXPECT_EQ(*label, 9);  // an ankle boot
      EXPECT_EQ(image[14 * 28 + 12], 0xed / 255.0f);
    }
  }
  EXPECT_EQ(counts, std::vector<int>(10, 6000));
  EXPECT_NEAR(sum / (60000.0 * 784), 0.2860, 1e-4);  // the default mean
}

}  // namespace
}  // namespace spill
