// The data pipeline: small files in the real formats (idx raw and gzipped,
// CIFAR-10 binary batches, class folders of PNG and JPEG) written to a temp
// folder and read back exactly; augmentation checked against an independent
// reference on a known image; the loader's order, resume, drop_last and
// worker invariance on an in-memory dataset; one test per error class; and
// the real Fashion-MNIST when it is installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

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

namespace spill {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using Bytes = std::vector<uint8_t>;

// A fresh, empty folder for one test.
std::string TempDir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / ("spill_data_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void WriteFile(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ASSERT_TRUE(out.good()) << path;
}

void WriteGzip(const std::string& path, const Bytes& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(gzwrite(file, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

void PutBigEndian(Bytes* bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes->push_back((value >> shift) & 0xff);
}

Bytes IdxImages(uint32_t count, uint32_t rows, uint32_t cols, const Bytes& pixels,
                uint32_t magic = 2051) {
  Bytes bytes;
  for (uint32_t value : {magic, count, rows, cols}) PutBigEndian(&bytes, value);
  bytes.insert(bytes.end(), pixels.begin(), pixels.end());
  return bytes;
}

Bytes IdxLabels(const Bytes& labels) {
  Bytes bytes;
  PutBigEndian(&bytes, 2049);
  PutBigEndian(&bytes, labels.size());
  bytes.insert(bytes.end(), labels.begin(), labels.end());
  return bytes;
}

// Pixel i of a test set: distinct-ish values that cover 0..255.
Bytes Ramp(size_t count, int salt) {
  Bytes pixels(count);
  for (size_t i = 0; i < count; ++i) pixels[i] = static_cast<uint8_t>((i * 7 + salt) % 256);
  return pixels;
}

Augmentation Raw() {  // pixels scaled to [0, 1], no normalization
  Augmentation augment;
  augment.mean = {0.0f};
  augment.std = {1.0f};
  return augment;
}

std::vector<float> GetImage(const Dataset& dataset, int64_t index, uint64_t seed, int* label) {
  std::vector<float> image(dataset.example_shape().sample_size());
  StatusOr<int> got = dataset.Get(index, seed, image.data());
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  if (label != nullptr) *label = got.ok() ? *got : -1;
  return image;
}

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

constexpr int kRecord = 3073;

// Record r of batch file b: label (b + r) % 10; R = 1 + 7y, G = 1 + 7x, B = 10b + r.
Bytes CifarBatch(int b, int records) {
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
std::string WriteCifar(const std::string& name) {
  std::string dir = TempDir(name);
  for (int b = 1; b <= 5; ++b) {
    WriteFile(dir + "/data_batch_" + std::to_string(b) + ".bin", CifarBatch(b, 2));
  }
  WriteFile(dir + "/test_batch.bin", CifarBatch(0, 3));
  return dir;
}

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
  bytes.resize(2 * kRecord + 100);
  WriteFile(dir + "/test_batch.bin", bytes);
  auto test = OpenCifar10(dir, Split::kTest, Augmentation());
  ASSERT_FALSE(test.ok());
  const std::string& message = test.status().message();
  EXPECT_THAT(message, HasSubstr(dir + "/test_batch.bin"));
  EXPECT_THAT(message, HasSubstr(std::to_string(2 * kRecord + 100) + " bytes"));
  EXPECT_THAT(message, HasSubstr("expected " + std::to_string(3 * kRecord)));
  EXPECT_THAT(message, HasSubstr("cifar-10-binary.tar.gz"));
}

TEST(Cifar10Test, LabelOutOfRangeIsAnError) {
  std::string dir = WriteCifar("cifar_label");
  Bytes bytes = CifarBatch(0, 3);
  bytes[kRecord] = 57;  // a CIFAR-100 fine label
  WriteFile(dir + "/test_batch.bin", bytes);
  auto test = OpenCifar10(dir, Split::kTest, Augmentation());
  ASSERT_FALSE(test.ok());
  EXPECT_THAT(test.status().message(), HasSubstr(dir + "/test_batch.bin"));
  EXPECT_THAT(test.status().message(), HasSubstr("label 57"));
}

// ------------------------------------------------------------- augmentation

// The padded-then-cropped-then-flipped CIFAR test record 0 (R = 1 + 7y,
// G = 1 + 7x, B = 0), computed independently of the augmenter.
std::vector<float> ReferenceCrop(int pad, int crop, int top, int left, bool flip) {
  std::vector<float> image(3 * crop * crop);
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < crop; ++y) {
      for (int x = 0; x < crop; ++x) {
        int sy = top + y - pad, sx = left + (flip ? crop - 1 - x : x) - pad;
        bool inside = sy >= 0 && sy < 32 && sx >= 0 && sx < 32;
        int value = !inside ? 0 : c == 0 ? 1 + 7 * sy : c == 1 ? 1 + 7 * sx : 0;
        image[(c * crop + y) * crop + x] = value / 255.0f;
      }
    }
  }
  return image;
}

TEST(AugmentTest, CentreCropIsTheMiddleWindow) {
  std::string dir = WriteCifar("augment_centre");
  Augmentation augment = Raw();
  augment.crop = 24;
  auto test = OpenCifar10(dir, Split::kTest, augment);
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  EXPECT_EQ((*test)->example_shape(), Shape(1, 3, 24, 24));
  for (uint64_t seed : {0, 1, 77}) {
    EXPECT_EQ(GetImage(**test, 0, seed, nullptr), ReferenceCrop(0, 24, 4, 4, false));
  }
  augment.pad = 2;
  augment.crop = 0;  // padding alone grows the image
  auto padded = OpenCifar10(dir, Split::kTest, augment);
  ASSERT_TRUE(padded.ok());
  EXPECT_EQ((*padded)->example_shape(), Shape(1, 3, 36, 36));
  EXPECT_EQ(GetImage(**padded, 0, 3, nullptr), ReferenceCrop(2, 36, 0, 0, false));
}

TEST(AugmentTest, RandomPadCropFlipMatchesReferenceAndIsDeterministic) {
  std::string dir = WriteCifar("augment_random");
  Augmentation augment = Raw();
  augment.pad = 4;
  augment.crop = 32;
  augment.random_crop = true;
  augment.flip = true;
  auto train = OpenCifar10(dir, Split::kTest, augment);
  ASSERT_TRUE(train.ok());
  std::set<int> tops, lefts, flips;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<float> image = GetImage(**train, 0, seed, nullptr);
    // The centre pixels are never padding: read the window back from them.
    int sy = static_cast<int>(std::lround(image[16 * 32 + 16] * 255.0f) - 1) / 7;
    int sx0 = static_cast<int>(std::lround(image[1024 + 16 * 32 + 15] * 255.0f) - 1) / 7;
    int sx1 = static_cast<int>(std::lround(image[1024 + 16 * 32 + 16] * 255.0f) - 1) / 7;
    bool flip = sx1 < sx0;
    int top = sy - 16 + 4, left = (flip ? sx1 - 15 : sx1 - 16) + 4;
    ASSERT_GE(top, 0);
    ASSERT_LE(top, 8);
    ASSERT_GE(left, 0);
    ASSERT_LE(left, 8);
    ASSERT_EQ(image, ReferenceCrop(4, 32, top, left, flip)) << "seed " << seed;
    ASSERT_EQ(image, GetImage(**train, 0, seed, nullptr)) << "seed " << seed;
    tops.insert(top);
    lefts.insert(left);
    flips.insert(flip);
  }
  EXPECT_EQ(tops.size(), 9u);
  EXPECT_EQ(lefts.size(), 9u);
  EXPECT_EQ(flips.size(), 2u);
}

// Apply on a 2x5x7 image against a direct per-pixel reference, for windows
// that lie partly or wholly in the padding, planar and interleaved.
TEST(AugmentTest, ApplyMatchesReferenceEvenInsideThePadding) {
  const int channels = 2, height = 5, width = 7;
  Bytes planar(channels * height * width), interleaved(planar.size());
  for (int c = 0; c < channels; ++c) {
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        uint8_t value = static_cast<uint8_t>(1 + c * 100 + y * 10 + x);
        planar[(c * height + y) * width + x] = value;
        interleaved[(y * width + x) * channels + c] = value;
      }
    }
  }
  const PixelView views[] = {
      PixelView::Planar(planar.data(), height, width),
      PixelView::Interleaved(interleaved.data(), channels, height, width, width * channels)};
  for (int pad : {0, 2, 9}) {
    for (int crop : {0, 3, 5}) {
      Augmentation augment;
      augment.pad = pad;
      augment.crop = crop;
      augment.random_crop = true;
      augment.flip = true;
      auto augmenter = Augmenter::Create(augment, channels, height, width, {0.25f}, {0.5f});
      ASSERT_TRUE(augmenter.ok()) << augmenter.status().ToString();
      const int out_h = augmenter->OutHeight(height), out_w = augmenter->OutWidth(width);
      for (uint64_t seed = 0; seed < 40; ++seed) {
        CropWindow window = augmenter->Choose(height, width, seed);
        std::vector<float> expected(channels * out_h * out_w);
        for (int c = 0; c < channels; ++c) {
          for (int y = 0; y < out_h; ++y) {
            for (int x = 0; x < out_w; ++x) {
              int sy = window.top + y - pad;
              int sx = window.left + (window.flip ? out_w - 1 - x : x) - pad;
              bool inside = sy >= 0 && sy < height && sx >= 0 && sx < width;
              int value = inside ? planar[(c * height + sy) * width + sx] : 0;
              expected[(c * out_h + y) * out_w + x] = (value / 255.0f - 0.25f) / 0.5f;
            }
          }
        }
        for (const PixelView& view : views) {
          std::vector<float> out(expected.size(), -99.0f);
          ASSERT_TRUE(augmenter->Apply(view, seed, out.data()).ok());
          ASSERT_EQ(out, expected) << "pad " << pad << " crop " << crop << " seed " << seed;
        }
      }
    }
  }
}

TEST(AugmentTest, ChooseDependsOnlyOnTheSeed) {
  Augmentation augment;
  augment.pad = 4;
  augment.crop = 32;
  augment.random_crop = true;
  augment.flip = true;
  auto augmenter = Augmenter::Create(augment, 3, 32, 32, {0.5f}, {0.5f});
  ASSERT_TRUE(augmenter.ok());
  int differ = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    CropWindow a = augmenter->Choose(32, 32, seed), b = augmenter->Choose(32, 32, seed);
    CropWindow c = augmenter->Choose(32, 32, seed + 1000);
    EXPECT_TRUE(a.top == b.top && a.left == b.left && a.flip == b.flip);
    differ += a.top != c.top || a.left != c.left || a.flip != c.flip;
  }
  EXPECT_GT(differ, 40);
}

TEST(AugmentTest, InvalidSettingsAreErrors) {
  std::string dir = WriteCifar("augment_invalid");
  Augmentation too_big = Raw();
  too_big.crop = 40;
  EXPECT_FALSE(OpenCifar10(dir, Split::kTest, too_big).ok());
  Augmentation bad_mean;
  bad_mean.mean = {0.1f, 0.2f};
  EXPECT_FALSE(OpenCifar10(dir, Split::kTest, bad_mean).ok());
  Augmentation zero_std;
  zero_std.std = {0.0f};
  EXPECT_FALSE(OpenCifar10(dir, Split::kTest, zero_std).ok());
  Augmentation resize;
  resize.resize = 64;
  EXPECT_FALSE(OpenCifar10(dir, Split::kTest, resize).ok());
}

// ------------------------------------------------------------ image folders

// A 3-channel image whose (b, g, r) at (y, x) is (10 + y, 20 + x, 30 + 5 * salt).
cv::Mat TestImage(int rows, int cols, int salt) {
  cv::Mat bgr(rows, cols, CV_8UC3);
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x)
      bgr.at<cv::Vec3b>(y, x) = cv::Vec3b(10 + y, 20 + x, 30 + 5 * salt);
  }
  return bgr;
}

// root/cat: a.png (6x6), B.PNG (6x12); root/dog: c.jpeg (8x8), d.JPG (8x8);
// plus files and folders that are not images or are hidden.
std::string WriteFolder(const std::string& name) {
  std::string root = TempDir(name);
  fs::create_directories(root + "/cat");
  fs::create_directories(root + "/dog");
  fs::create_directories(root + "/.cache");
  EXPECT_TRUE(cv::imwrite(root + "/cat/a.png", TestImage(6, 6, 0)));
  EXPECT_TRUE(cv::imwrite(root + "/cat/B.PNG", TestImage(6, 12, 1)));
  EXPECT_TRUE(cv::imwrite(root + "/dog/d.JPG", cv::Mat(8, 8, CV_8UC3, cv::Scalar(50, 100, 200))));
  EXPECT_TRUE(cv::imwrite(root + "/dog/c.jpeg", cv::Mat(8, 8, CV_8UC3, cv::Scalar(200, 100, 50))));
  WriteFile(root + "/dog/notes.txt", {'h', 'i'});
  EXPECT_TRUE(cv::imwrite(root + "/dog/.hidden.png", TestImage(8, 8, 2)));
  return root;
}

TEST(ImageFolderTest, ListsSortedClassesAndDecodesRgbExactly) {
  std::string root = WriteFolder("folder_read");
  Augmentation augment = Raw();
  augment.crop = 6;
  auto dataset = OpenImageFolder(root, augment);
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  EXPECT_EQ((*dataset)->size(), 4);
  EXPECT_EQ((*dataset)->num_classes(), 2);
  EXPECT_EQ((*dataset)->example_shape(), Shape(1, 3, 6, 6));
  // Byte order sorts "B.PNG" before "a.png".
  int label = -1;
  std::vector<float> a = GetImage(**dataset, 1, 0, &label);
  EXPECT_EQ(label, 0);
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 6; ++x) {
      ASSERT_EQ(a[y * 6 + x], 30 / 255.0f);             // R
      ASSERT_EQ(a[36 + y * 6 + x], (20 + x) / 255.0f);  // G
      ASSERT_EQ(a[72 + y * 6 + x], (10 + y) / 255.0f);  // B
    }
  }
  // "c.jpeg" then "d.JPG" in class 1; JPEG is lossy, so within a few levels.
  std::vector<float> c = GetImage(**dataset, 2, 0, &label);
  EXPECT_EQ(label, 1);
  EXPECT_NEAR(c[0] * 255.0f, 50, 4);
  EXPECT_NEAR(c[36] * 255.0f, 100, 4);
  EXPECT_NEAR(c[72] * 255.0f, 200, 4);
  std::vector<float> d = GetImage(**dataset, 3, 0, &label);
  EXPECT_EQ(label, 1);
  EXPECT_NEAR(d[0] * 255.0f, 200, 4);
}

TEST(ImageFolderTest, ResizesTheShorterSideThenCropsTheCentre) {
  std::string root = WriteFolder("folder_resize");
  Augmentation augment = Raw();
  augment.resize = 3;
  augment.crop = 3;
  auto dataset = OpenImageFolder(root, augment);
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  std::vector<float> image = GetImage(**dataset, 0, 0, nullptr);  // B.PNG, 6x12 -> 3x6
  cv::Mat resized, rgb;
  cv::resize(TestImage(6, 12, 1), resized, cv::Size(6, 3), 0, 0, cv::INTER_LINEAR);
  cv::cvtColor(resized, rgb, cv::COLOR_BGR2RGB);
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 3; ++y) {
      for (int x = 0; x < 3; ++x) {
        ASSERT_EQ(image[(c * 3 + y) * 3 + x], rgb.at<cv::Vec3b>(y, x + 1)[c] / 255.0f);
      }
    }
  }
  // Default normalization is ImageNet's.
  augment.mean.clear();
  augment.std.clear();
  auto normalized = OpenImageFolder(root, augment);
  ASSERT_TRUE(normalized.ok());
  std::vector<float> n = GetImage(**normalized, 0, 0, nullptr);
  EXPECT_FLOAT_EQ(n[9 + 4], (rgb.at<cv::Vec3b>(1, 2)[1] / 255.0f - 0.456f) / 0.224f);
}

TEST(ImageFolderTest, UndecodableImageNamesThePath) {
  std::string root = WriteFolder("folder_bad");
  std::string bad = root + "/dog/e.jpg";
  WriteFile(bad, {'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'e', 'g'});
  Augmentation augment;
  augment.crop = 4;
  auto dataset = OpenImageFolder(root, augment);
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  std::vector<float> image((*dataset)->example_shape().sample_size());
  StatusOr<int> got = (*dataset)->Get(4, 0, image.data());
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr(bad));
  // The loader hands the error out of Next() in that batch's place.
  LoaderOptions options;
  options.batch = 2;
  options.shuffle = false;
  options.drop_last = false;
  Loader loader(**dataset, options);
  loader.Start(0, 0);
  EXPECT_TRUE(loader.Next().ok());
  EXPECT_TRUE(loader.Next().ok());
  StatusOr<Batch> batch = loader.Next();
  ASSERT_FALSE(batch.ok());
  EXPECT_THAT(batch.status().message(), HasSubstr(bad));
}

TEST(ImageFolderTest, MissingAndEmptyFoldersNameThePath) {
  std::string root = TempDir("folder_empty");
  Augmentation augment;
  augment.crop = 4;
  auto missing = OpenImageFolder(root + "/nope", augment);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(root + "/nope"));
  EXPECT_THAT(missing.status().message(), HasSubstr("image-net.org"));
  EXPECT_THAT(missing.status().message(), HasSubstr("one folder per class"));

  auto no_classes = OpenImageFolder(root, augment);
  ASSERT_FALSE(no_classes.ok());
  EXPECT_THAT(no_classes.status().message(), HasSubstr(root));

  fs::create_directories(root + "/empty_class");
  WriteFile(root + "/empty_class/readme.txt", {'x'});
  auto no_images = OpenImageFolder(root, augment);
  ASSERT_FALSE(no_images.ok());
  EXPECT_THAT(no_images.status().message(), HasSubstr(root + "/empty_class"));

  EXPECT_FALSE(OpenImageFolder(WriteFolder("folder_nocrop"), Augmentation()).ok());
}

TEST(ImageFolderTest, ImageSmallerThanCropIsAnErrorNotACrash) {
  std::string root = WriteFolder("folder_small");
  Augmentation augment;
  augment.crop = 7;  // a.png is 6x6
  auto dataset = OpenImageFolder(root, augment);
  ASSERT_TRUE(dataset.ok());
  std::vector<float> image((*dataset)->example_shape().sample_size());
  StatusOr<int> got = (*dataset)->Get(1, 0, image.data());
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr(root + "/cat/a.png"));
  EXPECT_FALSE((*dataset)->Get(99, 0, image.data()).ok());
}

// ------------------------------------------------------------------- loader

// Example i is {i, augment seed's top 24 bits}; label i % 7; index 13 fails
// when `fail` is set.
class FakeDataset : public Dataset {
 public:
  explicit FakeDataset(int64_t size, bool fail = false) : size_(size), fail_(fail) {}
  int64_t size() const override { return size_; }
  int num_classes() const override { return 7; }
  Shape example_shape() const override { return Shape(1, 2, 1, 1); }
  std::string Describe() const override { return "fake"; }
  StatusOr<int> Get(int64_t index, uint64_t augment_seed, float* image) const override {
    if (fail_ && index == 13) return IoError("/fake/13.png: cannot decode");
    image[0] = static_cast<float>(index);
    image[1] = static_cast<float>(augment_seed >> 40);
    return static_cast<int>(index % 7);
  }

 private:
  int64_t size_;
  bool fail_;
};

LoaderOptions Options(int64_t batch, bool shuffle, bool drop_last, uint64_t seed = 1,
                      int workers = 1, int prefetch = 4) {
  LoaderOptions options;
  options.batch = batch;
  options.shuffle = shuffle;
  options.drop_last = drop_last;
  options.seed = seed;
  options.workers = workers;
  options.prefetch = prefetch;
  return options;
}

// The next `count` batches, all of which must succeed.
std::vector<Batch> Take(Loader* loader, int count) {
  std::vector<Batch> batches;
  for (int i = 0; i < count; ++i) {
    StatusOr<Batch> batch = loader->Next();
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok()) break;
    batches.push_back(std::move(batch).value());
  }
  return batches;
}

// Dataset indices of an epoch's batches, in order.
std::vector<int64_t> Indices(const std::vector<Batch>& batches) {
  std::vector<int64_t> indices;
  for (const Batch& batch : batches) {
    for (int64_t i = 0; i < batch.size; ++i)
      indices.push_back(static_cast<int64_t>(batch.images[2 * i]));
  }
  return indices;
}

void ExpectSame(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].epoch, b[i].epoch);
    EXPECT_EQ(a[i].index, b[i].index);
    EXPECT_EQ(a[i].size, b[i].size);
    EXPECT_EQ(a[i].labels, b[i].labels);
    EXPECT_EQ(a[i].images, b[i].images) << "batch " << i;
  }
}

TEST(LoaderTest, WithoutShuffleVisitsInOrder) {
  FakeDataset dataset(10);
  Loader loader(dataset, Options(4, false, false));
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  loader.Start(0, 0);
  std::vector<Batch> batches = Take(&loader, 6);
  ASSERT_EQ(batches.size(), 6u);
  for (int b = 0; b < 6; ++b) {
    EXPECT_EQ(batches[b].epoch, b / 3);
    EXPECT_EQ(batches[b].index, b % 3);
    EXPECT_EQ(batches[b].size, b % 3 == 2 ? 2 : 4);
    EXPECT_EQ(batches[b].images.size(), static_cast<size_t>(2 * batches[b].size));
  }
  std::vector<int64_t> expected(10);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(Indices({batches.begin(), batches.begin() + 3}), expected);
  EXPECT_EQ(Indices({batches.begin() + 3, batches.end()}), expected);
  EXPECT_EQ(batches[1].labels, (std::vector<float>{4, 5, 6, 0}));
}

TEST(LoaderTest, ShuffleIsAPermutationDifferentEachEpochAndSeeded) {
  FakeDataset dataset(100);
  Loader loader(dataset, Options(10, true, false, 5));
  std::vector<Batch> batches = Take(&loader, 20);  // Next() without Start() starts at 0
  std::vector<int64_t> epoch0 = Indices({batches.begin(), batches.begin() + 10});
  std::vector<int64_t> epoch1 = Indices({batches.begin() + 10, batches.end()});
  std::vector<int64_t> sorted0 = epoch0, sorted1 = epoch1, expected(100);
  std::iota(expected.begin(), expected.end(), 0);
  std::sort(sorted0.begin(), sorted0.end());
  std::sort(sorted1.begin(), sorted1.end());
  EXPECT_EQ(sorted0, expected);
  EXPECT_EQ(sorted1, expected);
  EXPECT_NE(epoch0, expected);
  EXPECT_NE(epoch0, epoch1);

  Loader same(dataset, Options(10, true, false, 5));
  same.Start(0, 0);
  ExpectSame(Take(&same, 20), batches);
  Loader other(dataset, Options(10, true, false, 6));
  other.Start(0, 0);
  EXPECT_NE(Indices(Take(&other, 10)), epoch0);
}

TEST(LoaderTest, AugmentSeedsFollowEpochAndPosition) {
  FakeDataset dataset(8);
  Loader loader(dataset, Options(4, true, true, 3));
  loader.Start(0, 0);
  std::vector<Batch> batches = Take(&loader, 4);
  std::set<float> seeds;
  for (const Batch& batch : batches) {
    for (int64_t i = 0; i < batch.size; ++i) seeds.insert(batch.images[2 * i + 1]);
  }
  EXPECT_EQ(seeds.size(), 16u);  // distinct per (epoch, position)
}

TEST(LoaderTest, DropLastSkipsThePartialBatch) {
  FakeDataset dataset(10);
  Loader loader(dataset, Options(4, false, true));
  EXPECT_EQ(loader.batches_per_epoch(), 2);
  loader.Start(0, 0);
  std::vector<Batch> batches = Take(&loader, 3);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[1].size, 4);
  EXPECT_EQ(batches[2].epoch, 1);
  EXPECT_EQ(batches[2].index, 0);
  EXPECT_EQ(Indices({batches[2]}), (std::vector<int64_t>{0, 1, 2, 3}));

  FakeDataset tiny(3);
  Loader empty(tiny, Options(4, true, true));
  EXPECT_EQ(empty.batches_per_epoch(), 0);
  empty.Start(0, 0);
  EXPECT_FALSE(empty.Next().ok());  // an error, not a hang
  Loader partial(tiny, Options(4, true, false));
  ASSERT_EQ(partial.batches_per_epoch(), 1);
  EXPECT_EQ(Take(&partial, 1)[0].size, 3);
}

TEST(LoaderTest, ResumeMidEpochYieldsTheSameBatches) {
  FakeDataset dataset(50);
  for (bool drop_last : {true, false}) {
    Loader full(dataset, Options(8, true, drop_last, 11));
    const int per_epoch = static_cast<int>(full.batches_per_epoch());
    full.Start(0, 0);
    std::vector<Batch> all = Take(&full, 3 * per_epoch);
    for (int k : {0, 1, per_epoch - 1}) {
      Loader resumed(dataset, Options(8, true, drop_last, 11));
      resumed.Start(1, k);
      ExpectSame(Take(&resumed, 2 * per_epoch - k), {all.begin() + per_epoch + k, all.end()});
    }
    // Restarting a running loader jumps to the new position.
    full.Start(2, 1);
    ExpectSame(Take(&full, 1), {all[2 * per_epoch + 1]});
  }
}

TEST(LoaderTest, WorkersAndPrefetchDoNotChangeTheBatches) {
  std::string dir = WriteCifar("loader_workers");
  Augmentation augment;
  augment.pad = 4;
  augment.crop = 32;
  augment.random_crop = true;
  augment.flip = true;
  auto train = OpenCifar10(dir, Split::kTrain, augment);
  ASSERT_TRUE(train.ok());
  Loader one(**train, Options(3, true, false, 7, 1, 1));
  one.Start(0, 0);
  std::vector<Batch> expected = Take(&one, 12);
  for (int workers : {2, 4}) {
    Loader many(**train, Options(3, true, false, 7, workers, 3));
    many.Start(0, 0);
    ExpectSame(Take(&many, 12), expected);
  }
  // Resuming an augmenting, shuffling loader reproduces the pixels too.
  Loader resumed(**train, Options(3, true, false, 7, 3, 2));
  resumed.Start(1, 2);
  ExpectSame(Take(&resumed, 6), {expected.begin() + 6, expected.end()});
}

TEST(LoaderTest, ErrorsComeOutOfNextAndLaterBatchesFollow) {
  FakeDataset dataset(20, /*fail=*/true);
  Loader loader(dataset, Options(5, false, true, 1, 3, 2));
  loader.Start(0, 0);
  EXPECT_TRUE(loader.Next().ok());
  EXPECT_TRUE(loader.Next().ok());
  StatusOr<Batch> bad = loader.Next();  // holds index 13
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("/fake/13.png"));
  StatusOr<Batch> next = loader.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->index, 3);
}

TEST(LoaderTest, DestroysCleanlyWhileWorkersWait) {
  FakeDataset dataset(1000);
  for (int i = 0; i < 20; ++i) {
    Loader loader(dataset, Options(10, true, true, i, 4, 8));
    loader.Start(0, 0);
    if (i % 2 == 0) {
      EXPECT_TRUE(loader.Next().ok());
    }
  }
  Loader never_started(dataset, Options(10, true, true));
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
