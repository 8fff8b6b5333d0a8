// The examples `predict` scores: one image file (PNG or JPEG, decoded with
// OpenCV) or one file of the config's dataset kind (an idx image file of
// MNIST/Fashion-MNIST, gzipped or not, or a CIFAR-10 binary batch), turned
// into the network's input exactly as the config's test pipeline does it:
// data.test_augment (crop, padding) and the dataset's normalization (its
// mean/std, or the defaults of data/dataset.h). A photo given to a network
// trained on idx or CIFAR-10 data is first resized to that data's image size
// (and converted to gray for one channel).
#ifndef SPILL_TOOLS_TRAINER_PREDICT_INPUT_H_
#define SPILL_TOOLS_TRAINER_PREDICT_INPUT_H_

#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/device/tensor.h"
#include "tools/trainer/train_config.h"

namespace spill {

struct PredictInput {
  std::vector<float> images;  // count x C x H x W
  int64_t count = 0;
  std::vector<int> labels;  // the file's labels where it has them (CIFAR-10), else empty
};

// Reads `path` for a network taking `input` (its C x H x W) under `data`.
// Errors name the file and what was expected.
StatusOr<PredictInput> ReadPredictInput(const std::string& path, const DataConfig& data,
                                        const Shape& input);

}  // namespace spill

#endif  // SPILL_TOOLS_TRAINER_PREDICT_INPUT_H_
