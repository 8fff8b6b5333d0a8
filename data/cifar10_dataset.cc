// CIFAR-10, binary version. Policy: read every batch file of the split into
// one buffer of 3073-byte records at open (label byte, then the R, G and B
// planes of 32x32), checking sizes and labels; Get converts one record in
// place through the augmenter, with no allocation.
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/augment.h"
#include "data/dataset.h"
#include "data/io.h"
#include "data/planar_dataset.h"

namespace spill {
namespace {

constexpr int kSide = 32;
constexpr int kChannels = 3;
constexpr int64_t kPixels = kChannels * kSide * kSide;  // 3072
constexpr int64_t kRecord = 1 + kPixels;                // 3073
constexpr int64_t kFullBatch = 10000 * kRecord;         // bytes of one released batch file
constexpr uint64_t kMaxBatchFile = uint64_t{1} << 30;   // 1 GiB: 35x a released batch file
constexpr int kClasses = 10;

const char kObtain[] =
    "download the binary version of CIFAR-10 from "
    "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz and pass the folder it "
    "extracts to (cifar-10-batches-bin)";

std::vector<std::string> BatchFiles(Split split) {
  if (split == Split::kTest) return {"test_batch.bin"};
  std::vector<std::string> names;
  for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  return names;
}

// Appends the records of `path` to `records` after checking its size and labels.
Status ReadBatch(const std::string& path, std::vector<uint8_t>* records) {
  if (!PathExists(path)) {
    return NotFound(path + " not found: expected a CIFAR-10 batch file; " + kObtain);
  }
  const size_t start = records->size();
  SPILL_RETURN_IF_ERROR(AppendFile(path, records, kMaxBatchFile));
  const int64_t size = static_cast<int64_t>(records->size() - start);
  if (size == 0 || size % kRecord != 0) {
    int64_t expected = size < kRecord ? kRecord : (size / kRecord + 1) * kRecord;
    return InvalidArgument(path + " is truncated: " + std::to_string(size) + " bytes, expected " +
                           std::to_string(expected) +
                           " (a multiple of 3073: a label byte and 3072 pixel bytes per record; a "
                           "full batch is " +
                           std::to_string(kFullBatch) + " bytes); " + kObtain);
  }
  for (int64_t r = 0; r < size / kRecord; ++r) {
    int label = (*records)[start + r * kRecord];
    if (label >= kClasses) {
      return InvalidArgument(
          path + ": record " + std::to_string(r) + " has label " + std::to_string(label) +
          "; expected 0..9 (is this CIFAR-100? this reader wants CIFAR-10: " + kObtain + ")");
    }
  }
  return Status::Ok();
}

class Cifar10Dataset : public PlanarDataset {
 public:
  Cifar10Dataset(std::vector<uint8_t> records, Augmenter augmenter, std::string description)
      : PlanarDataset(static_cast<int64_t>(records.size()) / kRecord, kClasses, kSide, kSide,
                      std::move(augmenter), description, description),
        records_(std::move(records)) {}

 private:
  PlanarExample Example(int64_t index) const override {
    const uint8_t* record = records_.data() + index * kRecord;
    return {record + 1, static_cast<int>(record[0])};
  }

  std::vector<uint8_t> records_;
};

}  // namespace

StatusOr<std::unique_ptr<Dataset>> OpenCifar10(const std::string& dir, Split split,
                                               const Augmentation& augment) {
  if (augment.resize != 0) {
    return InvalidArgument("augmentation resize applies to image folders only; got " +
                           std::to_string(augment.resize) + " for CIFAR-10 in " + dir);
  }
  std::vector<uint8_t> records;
  const std::vector<std::string> names = BatchFiles(split);
  uint64_t total = 0;
  for (const std::string& name : names) {
    std::error_code error;
    uint64_t bytes = std::filesystem::file_size(JoinPath(dir, name), error);
    if (!error) total += bytes;
  }
  records.reserve(total);
  for (const std::string& name : names) {
    SPILL_RETURN_IF_ERROR(ReadBatch(JoinPath(dir, name), &records));
  }
  StatusOr<Augmenter> augmenter = Augmenter::Create(
      augment, kChannels, kSide, kSide, {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f});
  if (!augmenter.ok()) return augmenter.status().WithContext("CIFAR-10 in " + dir);
  std::string description = std::string("cifar10 ") + (split == Split::kTrain ? "train" : "test") +
                            " (" + dir + "): " + std::to_string(records.size() / kRecord) +
                            " examples, " + std::to_string(kClasses) + " classes, 3x32x32 -> " +
                            augmenter->example_shape().ToString();
  return std::unique_ptr<Dataset>(
      new Cifar10Dataset(std::move(records), std::move(augmenter).value(), std::move(description)));
}

}  // namespace spill
