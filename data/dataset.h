// Datasets: random access to labeled images in their real on-disk formats.
//
//   fashion_mnist / mnist   idx files (gzipped or not): train-images-idx3-ubyte[.gz], ...
//   cifar10                 the binary version: data_batch_1..5.bin, test_batch.bin
//   image_folder            ImageNet-style class folders of JPEG/PNG: root/<class>/<image>
//
// Get() is thread-safe and deterministic: the same (index, augment_seed)
// always yields the same pixels, so shuffling and augmentation are
// reproducible and a resumed run sees exactly the batches an uninterrupted
// one would.
#ifndef SPILL_DATA_DATASET_H_
#define SPILL_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/status.h"
#include "framework/tensor.h"

namespace spill {

enum class Split { kTrain, kTest };

// Transforms applied to each example, in this order.
struct Augmentation {
  // image_folder: resize so the shorter side is `resize` (0 = keep size).
  int resize = 0;
  // Crop size (0 = no crop). Training takes a random crop, evaluation the
  // centre. `pad` pixels of zeros are added on every side first (CIFAR's 4).
  int crop = 0;
  int pad = 0;
  bool random_crop = false;  // false: centre crop
  bool flip = false;         // random horizontal flip (training only)
  // Per-channel normalization after scaling pixels to [0, 1]:
  // (x - mean) / std. Empty = dataset defaults (see each Open* function).
  std::vector<float> mean;
  std::vector<float> std;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  virtual int num_classes() const = 0;
  // C x H x W of one example after augmentation (N = 1).
  virtual Shape example_shape() const = 0;
  virtual std::string Describe() const = 0;

  // Writes example `index` (C*H*W floats, NCHW) into `image` and returns its
  // label. `augment_seed` drives the random crop and flip.
  virtual StatusOr<int> Get(int64_t index, uint64_t augment_seed, float* image) const = 0;
};

// Reads the idx files of `split` from `dir` (train-* or t10k-*), gzipped or
// not. Pixels are scaled to [0, 1] then normalized with mean 0.2860 /
// std 0.3530 (Fashion-MNIST) unless `augment` says otherwise.
StatusOr<std::unique_ptr<Dataset>> OpenIdx(const std::string& dir, Split split,
                                           const Augmentation& augment, bool fashion = true);

// Reads CIFAR-10's binary batches from `dir`. Defaults: mean
// (0.4914, 0.4822, 0.4465), std (0.2470, 0.2435, 0.2616).
StatusOr<std::unique_ptr<Dataset>> OpenCifar10(const std::string& dir, Split split,
                                               const Augmentation& augment);

// Lists `dir`/<class>/<image> (classes sorted by name; .jpg .jpeg .png).
// Images are decoded when read. Defaults: ImageNet's mean (0.485, 0.456,
// 0.406) and std (0.229, 0.224, 0.225); `augment.crop` must be set.
StatusOr<std::unique_ptr<Dataset>> OpenImageFolder(const std::string& dir,
                                                   const Augmentation& augment);

}  // namespace spill

#endif  // SPILL_DATA_DATASET_H_
