// (Fashion-)MNIST idx files. Policy: read and validate everything at open
// (magic numbers, dimensions, exact sizes, matching counts, label range) and
// keep the raw uint8 bytes; Get only converts one image through the
// augmenter, straight out of the file buffer, with no allocation. The plain
// file is preferred when both it and its .gz exist. The header is read first
// and the rest only up to the size it announces (at most kMaxIdxBytes), so a
// file that decompresses to more - a gzip bomb - is refused after reading
// one byte past it.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/augment.h"
#include "data/dataset.h"
#include "data/io.h"
#include "data/planar_dataset.h"
#include "framework/base/checked_math.h"

namespace spill {
namespace {

constexpr uint32_t kImageMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr uint32_t kLabelMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension
constexpr size_t kImageHeader = 16;
constexpr size_t kLabelHeader = 8;
constexpr uint32_t kMaxSide = 1 << 16;
constexpr uint64_t kMaxIdxBytes = uint64_t{4} << 30;  // 4 GiB: 80x the largest MNIST file
constexpr int kClasses = 10;

struct IdxFile {
  std::string path;
  std::vector<uint8_t> bytes;
};

std::string Source(bool fashion) {
  return fashion ? "Fashion-MNIST (https://github.com/zalandoresearch/fashion-mnist)"
                 : "MNIST (http://yann.lecun.com/exdb/mnist/)";
}

// The payload size an idx header announces: the product of its
// dimensions (one for labels, three for images), or an error.
using PayloadOf = StatusOr<uint64_t> (*)(const IdxFile& header);

// Reads `dir`/`name`, or `dir`/`name`.gz when only that exists: `header`
// bytes, then the payload `payload_of` computes from them plus one byte, to
// tell an exact file from a longer one without reading all of a longer one.
StatusOr<IdxFile> ReadIdx(const std::string& dir, const std::string& name, const std::string& what,
                          bool fashion, size_t header, PayloadOf payload_of) {
  IdxFile file;
  std::string plain = JoinPath(dir, name);
  file.path = PathExists(plain) ? plain : plain + ".gz";
  if (!PathExists(file.path)) {
    return NotFound("neither " + plain + " nor " + plain + ".gz exists; expected the " + what +
                    " of " + Source(fashion) + " as idx files, gzipped or not");
  }
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<FileReader> reader, FileReader::Open(file.path));
  SPILL_RETURN_IF_ERROR(reader->Read(header, &file.bytes).status());
  if (file.bytes.size() < header) return file;  // the caller reports the short header
  SPILL_ASSIGN_OR_RETURN(uint64_t payload, payload_of(file));
  SPILL_RETURN_IF_ERROR(reader->Read(payload + 1, &file.bytes).status());
  return file;
}

std::string Hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

Status CheckMagic(const IdxFile& file, size_t header, uint32_t magic, const std::string& kind) {
  if (file.bytes.size() < header) {
    return InvalidArgument(file.path + " is truncated: " + std::to_string(file.bytes.size()) +
                           " bytes, expected at least the " + std::to_string(header) +
                           "-byte header of an idx " + kind + " file");
  }
  uint32_t found = ReadBigEndian32(file.bytes.data());
  if (found != magic) {
    return InvalidArgument(file.path + ": bad magic number " + std::to_string(found) + " (" +
                           Hex(found) + "); expected " + std::to_string(magic) + " (" + Hex(magic) +
                           ") for an idx " + kind + " file");
  }
  return Status::Ok();
}

// The file must hold exactly its header plus `payload` bytes (ReadIdx reads
// at most one byte more).
Status CheckSize(const IdxFile& file, size_t header, uint64_t payload, const std::string& what) {
  uint64_t expected = header + payload;
  if (file.bytes.size() < expected) {
    return InvalidArgument(file.path + " is truncated: " + std::to_string(file.bytes.size()) +
                           " bytes, expected " + std::to_string(expected) + " for " + what);
  }
  if (file.bytes.size() > expected) {
    return InvalidArgument(file.path + " is malformed: more than " + std::to_string(expected) +
                           " bytes, expected exactly " + std::to_string(expected) + " for " + what);
  }
  return Status::Ok();
}

// Payload sizes announced by a header; 0 for a wrong magic number, which
// CheckMagic then reports.
StatusOr<uint64_t> ImagePayload(const IdxFile& file) {
  if (ReadBigEndian32(file.bytes.data()) != kImageMagic) return 0;
  const uint64_t count = ReadBigEndian32(file.bytes.data() + 4);
  const uint64_t rows = ReadBigEndian32(file.bytes.data() + 8);
  const uint64_t cols = ReadBigEndian32(file.bytes.data() + 12);
  uint64_t pixels = 0;
  if (rows > kMaxSide || cols > kMaxSide || !CheckedMul(count, rows * cols, &pixels) ||
      pixels > kMaxIdxBytes) {
    return InvalidArgument(file.path + ": header declares " + std::to_string(count) +
                           " images of " + std::to_string(rows) + "x" + std::to_string(cols) +
                           "; expected sides in [1, " + std::to_string(kMaxSide) +
                           "] and at most " + std::to_string(kMaxIdxBytes) + " bytes of pixels");
  }
  return pixels;
}

StatusOr<uint64_t> LabelPayload(const IdxFile& file) {
  if (ReadBigEndian32(file.bytes.data()) != kLabelMagic) return 0;
  return static_cast<uint64_t>(ReadBigEndian32(file.bytes.data() + 4));
}

class IdxDataset : public PlanarDataset {
 public:
  IdxDataset(IdxFile images, IdxFile labels, int rows, int cols, Augmenter augmenter,
             std::string description)
      : PlanarDataset(static_cast<int64_t>(labels.bytes.size() - kLabelHeader), kClasses, rows,
                      cols, std::move(augmenter), std::move(description), images.path),
        images_(std::move(images)),
        labels_(std::move(labels)),
        image_bytes_(static_cast<int64_t>(rows) * cols) {}

 private:
  PlanarExample Example(int64_t index) const override {
    return {images_.bytes.data() + kImageHeader + index * image_bytes_,
            static_cast<int>(labels_.bytes[kLabelHeader + index])};
  }

  IdxFile images_;
  IdxFile labels_;
  int64_t image_bytes_;
};

// Validates the image file; sets `count`, `rows` and `cols` from its header.
Status CheckImages(const IdxFile& file, uint32_t* count, uint32_t* rows, uint32_t* cols) {
  SPILL_RETURN_IF_ERROR(CheckMagic(file, kImageHeader, kImageMagic, "image"));
  *count = ReadBigEndian32(file.bytes.data() + 4);
  *rows = ReadBigEndian32(file.bytes.data() + 8);
  *cols = ReadBigEndian32(file.bytes.data() + 12);
  if (*count == 0 || *rows == 0 || *cols == 0 || *rows > kMaxSide || *cols > kMaxSide) {
    return InvalidArgument(file.path + ": header declares " + std::to_string(*count) +
                           " images of " + std::to_string(*rows) + "x" + std::to_string(*cols) +
                           "; expected at least one image and sides in [1, " +
                           std::to_string(kMaxSide) + "]");
  }
  uint64_t payload = static_cast<uint64_t>(*count) * *rows * *cols;
  return CheckSize(
      file, kImageHeader, payload,
      std::to_string(*count) + " images of " + std::to_string(*rows) + "x" + std::to_string(*cols));
}

Status CheckLabels(const IdxFile& file, const IdxFile& images, uint32_t image_count) {
  SPILL_RETURN_IF_ERROR(CheckMagic(file, kLabelHeader, kLabelMagic, "label"));
  uint32_t count = ReadBigEndian32(file.bytes.data() + 4);
  if (count != image_count) {
    return InvalidArgument("count mismatch: " + file.path + " has " + std::to_string(count) +
                           " labels but " + images.path + " has " + std::to_string(image_count) +
                           " images; expected the same number");
  }
  SPILL_RETURN_IF_ERROR(CheckSize(file, kLabelHeader, count, std::to_string(count) + " labels"));
  for (uint32_t i = 0; i < count; ++i) {
    int label = file.bytes[kLabelHeader + i];
    if (label >= kClasses) {
      return InvalidArgument(file.path + ": label " + std::to_string(label) + " of example " +
                             std::to_string(i) + " is out of range; expected 0.." +
                             std::to_string(kClasses - 1));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Dataset>> OpenIdx(const std::string& dir, Split split,
                                           const Augmentation& augment, bool fashion) {
  if (augment.resize != 0) {
    return InvalidArgument("augmentation resize applies to image folders only; got " +
                           std::to_string(augment.resize) + " for the idx files in " + dir);
  }
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string split_name = split == Split::kTrain ? "training" : "test";
  SPILL_ASSIGN_OR_RETURN(
      IdxFile images, ReadIdx(dir, prefix + "-images-idx3-ubyte", split_name + " images", fashion,
                              kImageHeader, ImagePayload));
  uint32_t count = 0, rows = 0, cols = 0;
  SPILL_RETURN_IF_ERROR(CheckImages(images, &count, &rows, &cols));
  SPILL_ASSIGN_OR_RETURN(
      IdxFile labels, ReadIdx(dir, prefix + "-labels-idx1-ubyte", split_name + " labels", fashion,
                              kLabelHeader, LabelPayload));
  SPILL_RETURN_IF_ERROR(CheckLabels(labels, images, count));

  const std::vector<float> mean = {fashion ? 0.2860f : 0.1307f};
  const std::vector<float> std = {fashion ? 0.3530f : 0.3081f};
  StatusOr<Augmenter> augmenter =
      Augmenter::Create(augment, 1, static_cast<int>(rows), static_cast<int>(cols), mean, std);
  if (!augmenter.ok()) return augmenter.status().WithContext(images.path);
  std::string description = std::string(fashion ? "fashion_mnist" : "mnist") + " " +
                            (split == Split::kTrain ? "train" : "test") + " (" + dir +
                            "): " + std::to_string(count) + " examples, " +
                            std::to_string(kClasses) + " classes, " + std::to_string(rows) + "x" +
                            std::to_string(cols) + " -> " + augmenter->example_shape().ToString();
  return std::unique_ptr<Dataset>(
      new IdxDataset(std::move(images), std::move(labels), static_cast<int>(rows),
                     static_cast<int>(cols), std::move(augmenter).value(), std::move(description)));
}

}  // namespace spill
