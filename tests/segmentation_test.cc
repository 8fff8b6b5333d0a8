// Segmentation data (OpenIdxSegmentation) on small idx files written here:
// masks made from the images when missing (and then read as written), masks
// given by the user read exactly, padding applied to masks as to images,
// per-pixel labels through the loader in batch order, and every malformed
// mask file an error naming it and what was expected.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
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
using ::testing::HasSubstr;
using testing::IdxImages;
using testing::IdxLabels;
using testing::Ramp;
using testing::Raw;
using testing::TempDir;
using testing::WriteFile;

constexpr int kRows = 4, kCols = 5, kPixels = kRows * kCols;
constexpr int kForeground = 64;  // a quarter of full scale: brighter is the garment
const Bytes kTrainLabels = {7, 0, 9};

// Three training and two test images of 4x5 in `dir`/images.
std::string WriteImages(const std::string& name) {
  const std::string dir = TempDir(name);
  fs::create_directories(dir + "/images");
  WriteFile(dir + "/images/train-images-idx3-ubyte",
            IdxImages(3, kRows, kCols, Ramp(3 * kPixels, 0)));
  WriteFile(dir + "/images/train-labels-idx1-ubyte", IdxLabels(kTrainLabels));
  WriteFile(dir + "/images/t10k-images-idx3-ubyte",
            IdxImages(2, kRows, kCols, Ramp(2 * kPixels, 100)));
  WriteFile(dir + "/images/t10k-labels-idx1-ubyte", IdxLabels({3, 5}));
  return dir;
}

StatusOr<std::unique_ptr<Dataset>> Open(const std::string& dir, Split split,
                                        const Augmentation& augment = Raw()) {
  return OpenIdxSegmentation(dir + "/images", dir + "/masks", split, augment);
}

std::vector<float> PixelLabels(const Dataset& dataset, int64_t index) {
  std::vector<float> labels(dataset.label_shape().sample_size(), -1.0f);
  Status status = dataset.GetPixelLabels(index, labels.data());
  EXPECT_TRUE(status.ok()) << status.ToString();
  return labels;
}

Bytes ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(SegmentationTest, MasksAreMadeFromTheImagesOnFirstUse) {
  const std::string dir = WriteImages("seg_made");
  auto train = Open(dir, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_EQ((*train)->size(), 3);
  EXPECT_EQ((*train)->num_classes(), 11);  // ten garments and the background
  EXPECT_EQ((*train)->label_shape(), Shape(1, 1, kRows, kCols));
  const Bytes pixels = Ramp(3 * kPixels, 0);
  for (int i = 0; i < 3; ++i) {
    const std::vector<float> labels = PixelLabels(**train, i);
    for (int p = 0; p < kPixels; ++p) {
      const float want = pixels[i * kPixels + p] > kForeground ? kTrainLabels[i] + 1 : 0;
      ASSERT_EQ(labels[p], want) << "image " << i << " pixel " << p;
    }
  }
  // The mask file is an idx file of unsigned bytes, N x H x W; no temporary
  // file is left behind.
  const Bytes file = ReadAll(dir + "/masks/train-masks-idx3-ubyte");
  ASSERT_EQ(file.size(), 16u + 3 * kPixels);
  EXPECT_EQ(Bytes(file.begin(), file.begin() + 16), IdxImages(3, kRows, kCols, {}));
  EXPECT_FALSE(fs::exists(dir + "/masks/train-masks-idx3-ubyte.tmp"));
  EXPECT_FALSE(fs::exists(dir + "/masks/t10k-masks-idx3-ubyte"));  // made when opened
  auto test = Open(dir, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  EXPECT_TRUE(fs::exists(dir + "/masks/t10k-masks-idx3-ubyte"));
}

// A mask file that exists is the user's: read as written, never remade.
TEST(SegmentationTest, GivenMasksAreReadExactly) {
  const std::string dir = WriteImages("seg_given");
  fs::create_directories(dir + "/masks");
  Bytes classes(3 * kPixels);
  for (size_t i = 0; i < classes.size(); ++i) classes[i] = static_cast<uint8_t>(i % 11);
  WriteFile(dir + "/masks/train-masks-idx3-ubyte", IdxImages(3, kRows, kCols, classes));
  auto train = Open(dir, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  for (int i = 0; i < 3; ++i) {
    const std::vector<float> labels = PixelLabels(**train, i);
    for (int p = 0; p < kPixels; ++p) ASSERT_EQ(labels[p], classes[i * kPixels + p]);
  }
}

// Padding grows images and masks alike; the masks' border is background.
TEST(SegmentationTest, PaddingPadsTheMasksWithBackground) {
  const std::string dir = WriteImages("seg_pad");
  auto plain = Open(dir, Split::kTrain);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  Augmentation augment = Raw();
  augment.pad = 2;
  auto padded = Open(dir, Split::kTrain, augment);
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  constexpr int kH = kRows + 4, kW = kCols + 4;
  EXPECT_EQ((*padded)->example_shape(), Shape(1, 1, kH, kW));
  EXPECT_EQ((*padded)->label_shape(), Shape(1, 1, kH, kW));
  const std::vector<float> inner = PixelLabels(**plain, 2);
  const std::vector<float> labels = PixelLabels(**padded, 2);
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      const bool inside = y >= 2 && y < kRows + 2 && x >= 2 && x < kCols + 2;
      ASSERT_EQ(labels[y * kW + x], inside ? inner[(y - 2) * kCols + x - 2] : 0.0f) << y << x;
    }
  }
}

// The loader lays a batch's labels out image after image, H x W each.
TEST(SegmentationTest, LoaderBatchesPixelLabelsInOrder) {
  const std::string dir = WriteImages("seg_loader");
  auto train = Open(dir, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  LoaderOptions options;
  options.batch = 3;
  options.shuffle = false;
  Loader loader(**train, options);
  loader.Start(0, 0);
  auto batch = loader.Next();
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->labels.size(), 3u * kPixels);
  for (int i = 0; i < 3; ++i) {
    const std::vector<float> labels = PixelLabels(**train, i);
    EXPECT_EQ(std::vector<float>(batch->labels.begin() + i * kPixels,
                                 batch->labels.begin() + (i + 1) * kPixels),
              labels)
        << "image " << i;
  }
}

// A mask file that does not fit its images is an error naming the file and
// the masks expected; augmentations that masks cannot follow are refused.
TEST(SegmentationTest, BadMaskFilesAreErrorsNamingThem) {
  const std::string dir = WriteImages("seg_bad");
  fs::create_directories(dir + "/masks");
  const std::string path = dir + "/masks/train-masks-idx3-ubyte";
  const Bytes good(3 * kPixels, 1);
  auto expect_error = [&](const Bytes& file, const std::string& what) {
    WriteFile(path, file);
    auto opened = Open(dir, Split::kTrain);
    ASSERT_FALSE(opened.ok()) << what;
    EXPECT_THAT(opened.status().message(), HasSubstr(path)) << what;
    EXPECT_THAT(opened.status().message(), HasSubstr(what));
    EXPECT_THAT(opened.status().message(), HasSubstr("3 masks of 4x5"));
  };
  expect_error(Bytes(10, 0), "truncated header");
  expect_error(IdxImages(3, kRows, kCols, good, 2049), "bad magic number");
  expect_error(IdxImages(2, kRows, kCols, Bytes(2 * kPixels, 1)), "other dimensions");
  expect_error(IdxImages(3, kCols, kRows, good), "other dimensions");
  expect_error(IdxImages(3, kRows, kCols, Bytes(3 * kPixels - 1, 1)), "bytes");
  Bytes out_of_range = good;
  out_of_range[kPixels + 3] = 11;
  expect_error(IdxImages(3, kRows, kCols, out_of_range), "class 11 of mask 1");

  Augmentation flip = Raw();
  flip.flip = true;
  auto flipped = Open(dir, Split::kTrain, flip);
  ASSERT_FALSE(flipped.ok());
  EXPECT_THAT(flipped.status().message(), HasSubstr("padding only"));
}

// A dataset of whole-image labels refuses to give labels per pixel.
TEST(SegmentationTest, ClassificationDataHasNoPixelLabels) {
  const std::string dir = WriteImages("seg_classes");
  auto images = OpenIdx(dir + "/images", Split::kTrain, Raw());
  ASSERT_TRUE(images.ok()) << images.status().ToString();
  EXPECT_EQ((*images)->label_shape(), Shape(1, 1, 1, 1));
  std::vector<float> labels(kPixels);
  Status status = (*images)->GetPixelLabels(0, labels.data());
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("labels whole examples, not pixels"));
}

}  // namespace
}  // namespace spill
