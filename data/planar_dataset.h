// Datasets held whole in memory as planar 8-bit images with one label each
// (idx, CIFAR-10). A reader says where example `index` lies; the accessors
// and Get are shared: Get converts one image through the augmenter straight
// out of the buffer, with no allocation.
#ifndef SPILL_DATA_PLANAR_DATASET_H_
#define SPILL_DATA_PLANAR_DATASET_H_

#include <cstdint>
#include <string>
#include <utility>

#include "data/augment.h"
#include "data/dataset.h"
#include "data/io.h"

namespace spill {

// One example where it lies in memory.
struct PlanarExample {
  const uint8_t* pixels = nullptr;  // the augmenter's channels, height x width each
  int label = 0;
};

class PlanarDataset : public Dataset {
 public:
  int64_t size() const override { return size_; }
  int num_classes() const override { return num_classes_; }
  Shape example_shape() const override { return augmenter_.example_shape(); }
  std::string Describe() const override { return description_; }

  StatusOr<int> Get(int64_t index, uint64_t augment_seed, float* image) const override {
    SPILL_RETURN_IF_ERROR(CheckExampleIndex(index, size_, source_));
    const PlanarExample example = Example(index);
    SPILL_RETURN_IF_ERROR(
        augmenter_.Apply(PixelView::Planar(example.pixels, height_, width_), augment_seed, image));
    return example.label;
  }

 protected:
  // `source` names the dataset in the error for an index out of range.
  PlanarDataset(int64_t size, int num_classes, int height, int width, Augmenter augmenter,
                std::string description, std::string source)
      : size_(size),
        num_classes_(num_classes),
        height_(height),
        width_(width),
        augmenter_(std::move(augmenter)),
        description_(std::move(description)),
        source_(std::move(source)) {}

 private:
  // Example `index`, already checked to be in [0, size()).
  virtual PlanarExample Example(int64_t index) const = 0;

  int64_t size_;
  int num_classes_;
  int height_, width_;
  Augmenter augmenter_;
  std::string description_;
  std::string source_;
};

}  // namespace spill

#endif  // SPILL_DATA_PLANAR_DATASET_H_
