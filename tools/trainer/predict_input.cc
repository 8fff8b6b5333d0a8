#include "tools/trainer/predict_input.h"

#include <algorithm>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "data/augment.h"
#include "data/io.h"

namespace spill {
namespace {

constexpr uint64_t kMaxInputBytes = uint64_t{1} << 32;  // 4 GiB: larger than any release
constexpr uint32_t kIdxImageMagic = 2051;               // unsigned bytes, 3 dimensions
constexpr size_t kIdxHeader = 16;
constexpr int kIdxSide = 28;
constexpr int kCifarSide = 32, kCifarChannels = 3;
constexpr int64_t kCifarRecord = 1 + kCifarChannels * kCifarSide * kCifarSide;  // label + pixels

// Each dataset's normalization defaults, as data/dataset.h documents them.
struct Normalization {
  std::vector<float> mean, std;
};

Normalization Defaults(const std::string& dataset) {
  if (dataset == "fashion_mnist") return {{0.2860f}, {0.3530f}};
  if (dataset == "mnist") return {{0.1307f}, {0.3081f}};
  if (dataset == "cifar10") return {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
  return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};  // image_folder: ImageNet's
}

bool IsImageName(const std::string& path) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  for (const char* ext : {".png", ".jpg", ".jpeg"}) {
    const std::string e = ext;
    if (lower.size() > e.size() && lower.compare(lower.size() - e.size(), e.size(), e) == 0) {
      return true;
    }
  }
  return false;
}

// Checks that the test pipeline's output is what the network takes.
Status CheckShape(const Augmenter& augmenter, int height, int width, const Shape& input,
                  const std::string& path) {
  if (augmenter.channels() != input.c() || augmenter.OutHeight(height) != input.h() ||
      augmenter.OutWidth(width) != input.w()) {
    return InvalidArgument(path + ": the test pipeline gives " +
                           std::to_string(augmenter.channels()) + "x" +
                           std::to_string(augmenter.OutHeight(height)) + "x" +
                           std::to_string(augmenter.OutWidth(width)) +
                           " images but the network takes " + input.ToString());
  }
  return Status::Ok();
}

StatusOr<PredictInput> ReadIdx(const std::string& path, const DataConfig& data,
                               const Shape& input) {
  std::vector<uint8_t> bytes;
  SPILL_RETURN_IF_ERROR(AppendFile(path, &bytes, kMaxInputBytes));
  if (bytes.size() < kIdxHeader || ReadBigEndian32(bytes.data()) != kIdxImageMagic) {
    return InvalidArgument(path + ": not an idx image file (expected magic number 2051 in a " +
                           std::to_string(kIdxHeader) + "-byte header)");
  }
  const uint64_t count = ReadBigEndian32(&bytes[4]), rows = ReadBigEndian32(&bytes[8]),
                 cols = ReadBigEndian32(&bytes[12]);
  if (count == 0) {
    return InvalidArgument(path + ": the idx file holds no images (its header says 0)");
  }
  if (rows != kIdxSide || cols != kIdxSide || bytes.size() != kIdxHeader + count * rows * cols) {
    return InvalidArgument(path + ": header says " + std::to_string(count) + " images of " +
                           std::to_string(rows) + "x" + std::to_string(cols) +
                           " (expected 28x28) in " + std::to_string(bytes.size()) + " bytes");
  }
  const Normalization n = Defaults(data.dataset);
  SPILL_ASSIGN_OR_RETURN(Augmenter augmenter, Augmenter::Create(data.test_augment, 1, kIdxSide,
                                                                kIdxSide, n.mean, n.std));
  SPILL_RETURN_IF_ERROR(CheckShape(augmenter, kIdxSide, kIdxSide, input, path));
  PredictInput out;
  out.count = static_cast<int64_t>(count);
  out.images.resize(count * input.sample_size());
  for (uint64_t i = 0; i < count; ++i) {
    const uint8_t* pixels = bytes.data() + kIdxHeader + i * rows * cols;
    SPILL_RETURN_IF_ERROR(augmenter.Apply(PixelView::Planar(pixels, kIdxSide, kIdxSide), 0,
                                          out.images.data() + i * input.sample_size()));
  }
  return out;
}

StatusOr<PredictInput> ReadCifar(const std::string& path, const DataConfig& data,
                                 const Shape& input) {
  std::vector<uint8_t> bytes;
  SPILL_RETURN_IF_ERROR(AppendFile(path, &bytes, kMaxInputBytes));
  if (bytes.empty() || bytes.size() % kCifarRecord != 0) {
    return InvalidArgument(path + ": " + std::to_string(bytes.size()) +
                           " bytes is not a whole number of CIFAR-10 records (" +
                           std::to_string(kCifarRecord) + " bytes: a label and 32x32x3 pixels)");
  }
  const Normalization n = Defaults(data.dataset);
  SPILL_ASSIGN_OR_RETURN(
      Augmenter augmenter,
      Augmenter::Create(data.test_augment, kCifarChannels, kCifarSide, kCifarSide, n.mean, n.std));
  SPILL_RETURN_IF_ERROR(CheckShape(augmenter, kCifarSide, kCifarSide, input, path));
  PredictInput out;
  out.count = static_cast<int64_t>(bytes.size()) / kCifarRecord;
  out.images.resize(out.count * input.sample_size());
  for (int64_t i = 0; i < out.count; ++i) {
    const uint8_t* record = bytes.data() + i * kCifarRecord;
    out.labels.push_back(record[0]);
    SPILL_RETURN_IF_ERROR(augmenter.Apply(PixelView::Planar(record + 1, kCifarSide, kCifarSide), 0,
                                          out.images.data() + i * input.sample_size()));
  }
  return out;
}

bool StartsWith(const std::vector<uint8_t>& bytes, const std::vector<uint8_t>& prefix) {
  return bytes.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), bytes.begin());
}

// A JPEG or PNG whose end is there: decoders fill a truncated image's missing
// part with grey and say nothing, so the end marker is looked for first (a
// JPEG's EOI after its last scan, a PNG's IEND chunk).
Status CheckComplete(const std::vector<uint8_t>& bytes, const std::string& path) {
  const std::vector<uint8_t> kJpeg = {0xFF, 0xD8, 0xFF}, kPng = {0x89, 'P', 'N', 'G', '\r', '\n'};
  if (StartsWith(bytes, kJpeg)) {
    size_t scan = 0, end = std::string::npos;
    for (size_t i = 0; i + 1 < bytes.size(); ++i) {
      if (bytes[i] != 0xFF) continue;
      if (bytes[i + 1] == 0xDA) scan = i;  // start of scan
      if (bytes[i + 1] == 0xD9) end = i;   // end of image
    }
    if (end == std::string::npos || end < scan) {
      return InvalidArgument(path + ": the JPEG is truncated (no end-of-image marker after its " +
                             "last scan)");
    }
    return Status::Ok();
  }
  if (StartsWith(bytes, kPng)) {
    const std::string kEnd = "IEND";
    const auto it = std::search(bytes.begin(), bytes.end(), kEnd.begin(), kEnd.end());
    if (it == bytes.end()) return InvalidArgument(path + ": the PNG is truncated (no IEND chunk)");
    return Status::Ok();
  }
  return InvalidArgument(path +
                         ": cannot decode image: not a JPEG or PNG (its first bytes say "
                         "otherwise)");
}

// Decodes (gray for one channel, RGB for three) and resizes like the data
// pipeline: the shorter side to data.test_augment.resize for class folders,
// the dataset's fixed size otherwise.
StatusOr<cv::Mat> DecodeImage(const std::string& path, const DataConfig& data, int channels) {
  std::vector<uint8_t> bytes;
  SPILL_RETURN_IF_ERROR(AppendFile(path, &bytes, kMaxInputBytes));
  SPILL_RETURN_IF_ERROR(CheckComplete(bytes, path));
  try {
    cv::Mat image = cv::imdecode(bytes, channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
    if (image.empty()) {
      return InvalidArgument(path + ": cannot decode image; expected a readable JPEG or PNG");
    }
    if (channels == 3) cv::cvtColor(image, image, cv::COLOR_BGR2RGB);
    const int resize = data.test_augment.resize;
    cv::Mat resized = image;
    if (data.dataset != "image_folder") {
      const int side = data.dataset == "cifar10" ? kCifarSide : kIdxSide;
      cv::resize(image, resized, cv::Size(side, side), 0, 0, cv::INTER_AREA);
    } else if (resize > 0 && std::min(image.rows, image.cols) != resize) {
      const bool tall = image.rows > image.cols;
      const int64_t shorter = tall ? image.cols : image.rows,
                    longer = tall ? image.rows : image.cols;
      const int scaled = static_cast<int>(std::max<int64_t>(1, resize * longer / shorter));
      cv::resize(image, resized, tall ? cv::Size(resize, scaled) : cv::Size(scaled, resize), 0, 0,
                 cv::INTER_LINEAR);
    }
    return resized;
  } catch (const std::exception& e) {  // cv::Exception, std::bad_alloc
    return InvalidArgument(path + ": cannot decode image (" + e.what() + ")");
  }
}

StatusOr<PredictInput> ReadImage(const std::string& path, const DataConfig& data,
                                 const Shape& input) {
  const int channels = static_cast<int>(input.c());
  if (channels != 1 && channels != 3) {
    return InvalidArgument(path + ": the network takes " + std::to_string(channels) +
                           " channels; images give 1 (gray) or 3 (RGB)");
  }
  SPILL_ASSIGN_OR_RETURN(cv::Mat image, DecodeImage(path, data, channels));
  const Normalization n = Defaults(data.dataset);
  SPILL_ASSIGN_OR_RETURN(
      Augmenter augmenter,
      Augmenter::Create(data.test_augment, channels, image.rows, image.cols, n.mean, n.std));
  SPILL_RETURN_IF_ERROR(CheckShape(augmenter, image.rows, image.cols, input, path));
  PredictInput out;
  out.count = 1;
  out.images.resize(input.sample_size());
  const PixelView view = PixelView::Interleaved(image.ptr<uint8_t>(0), channels, image.rows,
                                                image.cols, static_cast<int64_t>(image.step[0]));
  Status status = augmenter.Apply(view, 0, out.images.data());
  if (!status.ok()) return status.WithContext(path);
  return out;
}

}  // namespace

StatusOr<PredictInput> ReadPredictInput(const std::string& path, const DataConfig& data,
                                        const Shape& input) {
  if (IsImageName(path)) return ReadImage(path, data, input);
  if (data.dataset == "cifar10") return ReadCifar(path, data, input);
  if (data.dataset == "image_folder") {
    return InvalidArgument(path +
                           ": expected a .png, .jpg or .jpeg image for an image_folder "
                           "config");
  }
  return ReadIdx(path, data, input);
}

}  // namespace spill
