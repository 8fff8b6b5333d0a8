// Segmentation on idx files (data/dataset.h, OpenIdxSegmentation): images
// read as OpenIdx reads them, and masks - a class byte per pixel - from idx
// files of their own, made from the images when missing. Everything is read
// and checked at open (magic number, dimensions against the images', exact
// size, classes in range); GetPixelLabels only converts one mask.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/io.h"
#include "framework/base/files.h"

namespace spill {

Status Dataset::GetPixelLabels(int64_t, float*) const {
  return InvalidArgument(Describe() + " labels whole examples, not pixels");
}

namespace {

constexpr uint32_t kMaskMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr size_t kMaskHeader = 16;
constexpr int kImageClasses = 10;                // Fashion-MNIST's and MNIST's
constexpr int kMaskClasses = kImageClasses + 1;  // and the background
constexpr float kForeground = 64.0f / 255.0f;    // a quarter of full scale
constexpr uint64_t kMaxMaskBytes = uint64_t{4} << 30;

std::string MaskPath(const std::string& dir, Split split) {
  return JoinPath(dir,
                  std::string(split == Split::kTrain ? "train" : "t10k") + "-masks-idx3-ubyte");
}

void PutBigEndian32(uint32_t v, std::string* out) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

// Masks of every image of `raw` (pixels scaled to [0, 1], unnormalized),
// written to `path` through a temporary file and a rename.
Status MakeMasks(const Dataset& raw, const std::string& path) {
  const Shape shape = raw.example_shape();
  const int64_t pixels = shape.h() * shape.w();
  std::string bytes;
  PutBigEndian32(kMaskMagic, &bytes);
  for (int64_t v : {raw.size(), shape.h(), shape.w()}) {
    PutBigEndian32(static_cast<uint32_t>(v), &bytes);
  }
  std::vector<float> image(shape.sample_size());
  for (int64_t i = 0; i < raw.size(); ++i) {
    SPILL_ASSIGN_OR_RETURN(int label, raw.Get(i, 0, image.data()));
    for (int64_t p = 0; p < pixels; ++p) {
      bytes.push_back(static_cast<char>(image[p] > kForeground ? label + 1 : 0));
    }
  }
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return IoError("cannot create '" + temp + "': " + std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) return IoError("cannot write '" + temp + "' (disk full?)");
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    return IoError("cannot rename '" + temp + "' to '" + path + "': " + std::strerror(errno));
  }
  return Status::Ok();
}

// Reads and checks the masks of the images of `raw` (unpadded) at `path`.
StatusOr<std::vector<uint8_t>> ReadMasks(const std::string& path, const Dataset& raw) {
  std::vector<uint8_t> bytes;
  SPILL_RETURN_IF_ERROR(AppendFile(path, &bytes, kMaxMaskBytes));
  const Shape shape = raw.example_shape();
  const uint64_t count = raw.size(), pixels = shape.h() * shape.w();
  auto fail = [&](const std::string& what) {
    return InvalidArgument(path + ": " + what + "; expected an idx file of " +
                           std::to_string(count) + " masks of " + std::to_string(shape.h()) + "x" +
                           std::to_string(shape.w()) + " unsigned bytes, as the images");
  };
  if (bytes.size() < kMaskHeader) return fail("truncated header");
  if (ReadBigEndian32(bytes.data()) != kMaskMagic) return fail("bad magic number");
  if (ReadBigEndian32(bytes.data() + 4) != count ||
      ReadBigEndian32(bytes.data() + 8) != static_cast<uint64_t>(shape.h()) ||
      ReadBigEndian32(bytes.data() + 12) != static_cast<uint64_t>(shape.w())) {
    return fail("the header declares other dimensions");
  }
  if (bytes.size() != kMaskHeader + count * pixels) {
    return fail(std::to_string(bytes.size()) + " bytes");
  }
  for (size_t i = kMaskHeader; i < bytes.size(); ++i) {
    if (bytes[i] >= kMaskClasses) {
      return fail("class " + std::to_string(bytes[i]) + " of mask " +
                  std::to_string((i - kMaskHeader) / pixels) + " is not below " +
                  std::to_string(kMaskClasses));
    }
  }
  bytes.erase(bytes.begin(), bytes.begin() + kMaskHeader);
  return bytes;
}

// The images (padded by `pad` on every side) and their masks (padded with
// background alike).
class IdxSegmentation : public Dataset {
 public:
  IdxSegmentation(std::unique_ptr<Dataset> images, std::vector<uint8_t> masks, std::string path,
                  int pad)
      : images_(std::move(images)), masks_(std::move(masks)), path_(std::move(path)), pad_(pad) {
    const Shape s = images_->example_shape();
    height_ = s.h();
    width_ = s.w();
  }

  int64_t size() const override { return images_->size(); }
  int num_classes() const override { return kMaskClasses; }
  Shape example_shape() const override { return images_->example_shape(); }
  Shape label_shape() const override {
    const Shape s = images_->example_shape();
    return Shape(1, 1, s.h(), s.w());
  }
  std::string Describe() const override {
    return images_->Describe() + ", masks of " + std::to_string(kMaskClasses) + " classes (" +
           path_ + ")";
  }

  StatusOr<int> Get(int64_t index, uint64_t augment_seed, float* image) const override {
    return images_->Get(index, augment_seed, image);
  }

  Status GetPixelLabels(int64_t index, float* labels) const override {
    SPILL_RETURN_IF_ERROR(CheckExampleIndex(index, size(), path_));
    const int64_t rows = height_ - 2 * pad_, cols = width_ - 2 * pad_;
    const uint8_t* mask = masks_.data() + index * rows * cols;
    for (int64_t h = 0; h < height_; ++h) {
      for (int64_t w = 0; w < width_; ++w) {
        const int64_t r = h - pad_, c = w - pad_;
        const bool inside = r >= 0 && r < rows && c >= 0 && c < cols;
        labels[h * width_ + w] = inside ? static_cast<float>(mask[r * cols + c]) : 0.0f;
      }
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<Dataset> images_;
  std::vector<uint8_t> masks_;
  std::string path_;
  int pad_ = 0;
  int64_t height_ = 0, width_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Dataset>> OpenIdxSegmentation(const std::string& images_dir,
                                                       const std::string& masks_dir, Split split,
                                                       const Augmentation& augment, bool fashion) {
  if (augment.resize != 0 || augment.crop != 0 || augment.random_crop || augment.flip) {
    return InvalidArgument("segmentation data is augmented by padding only (augment.pad); " +
                           std::string("its masks would not follow crops, flips or resizing"));
  }
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Dataset> images,
                         OpenIdx(images_dir, split, augment, fashion));
  Augmentation unnormalized;
  unnormalized.mean = {0.0f};
  unnormalized.std = {1.0f};
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Dataset> raw,
                         OpenIdx(images_dir, split, unnormalized, fashion));
  const std::string path = MaskPath(masks_dir, split);
  if (!PathExists(path)) {
    SPILL_RETURN_IF_ERROR(CreateOutputFolder(masks_dir, "data.masks"));
    SPILL_RETURN_IF_ERROR(MakeMasks(*raw, path));
  }
  SPILL_ASSIGN_OR_RETURN(std::vector<uint8_t> masks, ReadMasks(path, *raw));
  return std::unique_ptr<Dataset>(
      new IdxSegmentation(std::move(images), std::move(masks), path, augment.pad));
}

}  // namespace spill
