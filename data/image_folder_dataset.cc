// ImageNet-style class folders. Policy: list root/<class>/<image> once at
// open (classes and images sorted by name, byte order; hidden entries
// skipped; a class folder without images is an error), keep only the paths;
// Get decodes with OpenCV (imread, shorter side resized with INTER_LINEAR,
// BGR -> RGB) and hands the pixels to the augmenter. A file that does not
// decode is an error from Get naming the path, never an abort.
#include <algorithm>
#include <cctype>
#include <exception>
#include <filesystem>
#include <memory>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <utility>
#include <vector>

#include "data/augment.h"
#include "data/dataset.h"
#include "data/io.h"

namespace spill {
namespace {

namespace fs = std::filesystem;

constexpr int kChannels = 3;

const char kObtain[] =
    "expected ImageNet-style class folders <root>/<class>/<image>.{jpg,jpeg,png}; obtain "
    "ImageNet from image-net.org, arranged as one folder per class (e.g. "
    "train/n01440764/*.JPEG)";

bool IsImageName(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* ext : {".jpg", ".jpeg", ".png"}) {
    std::string suffix = ext;
    if (lower.size() > suffix.size() &&
        lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

// Sorted names of the entries of `dir` that are folders (`folders`) or image files.
StatusOr<std::vector<std::string>> ListSorted(const std::string& dir, bool folders) {
  std::vector<std::string> names;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code type_error;
    bool keep = folders ? it->is_directory(type_error)
                        : it->is_regular_file(type_error) && IsImageName(name);
    if (keep && !type_error) names.push_back(name);
  }
  if (error) return IoError("cannot list " + dir + ": " + error.message());
  std::sort(names.begin(), names.end());
  return names;
}

class ImageFolderDataset : public Dataset {
 public:
  ImageFolderDataset(std::vector<std::string> paths, std::vector<int> labels, int classes,
                     int resize, Augmenter augmenter, std::string description)
      : paths_(std::move(paths)),
        labels_(std::move(labels)),
        classes_(classes),
        resize_(resize),
        augmenter_(std::move(augmenter)),
        description_(std::move(description)) {}

  int64_t size() const override { return static_cast<int64_t>(paths_.size()); }
  int num_classes() const override { return classes_; }
  Shape example_shape() const override { return augmenter_.example_shape(); }
  std::string Describe() const override { return description_; }
  StatusOr<int> Get(int64_t index, uint64_t augment_seed, float* image) const override;

 private:
  StatusOr<cv::Mat> Decode(const std::string& path) const;

  std::vector<std::string> paths_;
  std::vector<int> labels_;
  int classes_;
  int resize_;
  Augmenter augmenter_;
  std::string description_;
};

// The RGB image at `path`, shorter side resized to `resize_` when set.
StatusOr<cv::Mat> ImageFolderDataset::Decode(const std::string& path) const {
  try {
    cv::Mat bgr = cv::imread(path, cv::IMREAD_COLOR);
    if (bgr.empty() || bgr.type() != CV_8UC3) {
      return InvalidArgument(path + ": cannot decode image; expected a readable JPEG or PNG");
    }
    if (resize_ > 0 && std::min(bgr.rows, bgr.cols) != resize_) {
      const bool tall = bgr.rows > bgr.cols;
      const int64_t shorter = tall ? bgr.cols : bgr.rows, longer = tall ? bgr.rows : bgr.cols;
      const int scaled = static_cast<int>(std::max<int64_t>(1, resize_ * longer / shorter));
      cv::Size size = tall ? cv::Size(resize_, scaled) : cv::Size(scaled, resize_);
      cv::Mat resized;
      cv::resize(bgr, resized, size, 0, 0, cv::INTER_LINEAR);
      bgr = resized;
    }
    cv::Mat rgb;
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    return rgb;
  } catch (const std::exception& e) {  // cv::Exception, std::bad_alloc
    return InvalidArgument(path + ": cannot decode image (" + e.what() + ")");
  }
}

StatusOr<int> ImageFolderDataset::Get(int64_t index, uint64_t augment_seed, float* image) const {
  SPILL_RETURN_IF_ERROR(CheckExampleIndex(index, size(), description_));
  const std::string& path = paths_[index];
  SPILL_ASSIGN_OR_RETURN(cv::Mat rgb, Decode(path));
  PixelView view = PixelView::Interleaved(rgb.ptr<uint8_t>(0), kChannels, rgb.rows, rgb.cols,
                                          static_cast<int64_t>(rgb.step[0]));
  Status status = augmenter_.Apply(view, augment_seed, image);
  if (!status.ok()) return status.WithContext(path);
  return labels_[index];
}

}  // namespace

StatusOr<std::unique_ptr<Dataset>> OpenImageFolder(const std::string& dir,
                                                   const Augmentation& augment) {
  if (augment.crop <= 0) {
    return InvalidArgument("image folder " + dir +
                           ": augmentation crop must be set (the output size, e.g. 224)");
  }
  if (augment.resize > 0 && augment.crop > augment.resize + 2 * augment.pad) {
    return InvalidArgument("image folder " + dir + ": crop " + std::to_string(augment.crop) +
                           " is larger than the resized shorter side " +
                           std::to_string(augment.resize) + " plus padding");
  }
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    return NotFound(dir + " not found or not a folder; " + kObtain);
  }
  SPILL_ASSIGN_OR_RETURN(std::vector<std::string> classes, ListSorted(dir, true));
  if (classes.empty()) return InvalidArgument(dir + " has no class folders; " + kObtain);
  std::vector<std::string> paths;
  std::vector<int> labels;
  for (size_t label = 0; label < classes.size(); ++label) {
    const std::string class_dir = (fs::path(dir) / classes[label]).string();
    SPILL_ASSIGN_OR_RETURN(std::vector<std::string> images, ListSorted(class_dir, false));
    if (images.empty()) {
      return InvalidArgument(class_dir + " has no .jpg, .jpeg or .png images; " + kObtain);
    }
    for (const std::string& image : images) {
      paths.push_back((fs::path(class_dir) / image).string());
      labels.push_back(static_cast<int>(label));
    }
  }
  StatusOr<Augmenter> augmenter = Augmenter::Create(
      augment, kChannels, 0, 0, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f});
  if (!augmenter.ok()) return augmenter.status().WithContext("image folder " + dir);
  std::string description = "image_folder (" + dir + "): " + std::to_string(paths.size()) +
                            " images, " + std::to_string(classes.size()) + " classes -> 1x3x" +
                            std::to_string(augment.crop) + "x" + std::to_string(augment.crop);
  const int num_classes = static_cast<int>(classes.size());
  return std::unique_ptr<Dataset>(
      new ImageFolderDataset(std::move(paths), std::move(labels), num_classes, augment.resize,
                             std::move(augmenter).value(), std::move(description)));
}

}  // namespace spill
