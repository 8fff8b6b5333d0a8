// Images: augmentation checked against an independent reference on a known
// image, and class folders of PNG and JPEG decoded, resized and cropped.
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
using testing::GetImage;
using ::testing::HasSubstr;
using testing::Raw;
using testing::TempDir;
using testing::WriteCifar;
using testing::WriteFile;

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

}  // namespace
}  // namespace spill
