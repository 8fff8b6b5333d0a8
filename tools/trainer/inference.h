// Inference from a training configuration and a checkpoint, behind `eval`,
// `predict` and train's evaluation on the test split.
//
// The network is built exactly as `train` builds it (same config, same
// datasets for its classes and image size, same batch), and the checkpoint's
// parameters - BatchNorm running statistics included, they are parameters -
// are restored after every check of LoadCheckpoint. Evaluation runs the test
// split in order, in batches of the network's batch, a short last batch
// padded with copies of its first image and only its real rows scored: the
// same arithmetic as train's evaluation (which calls EvaluateDataset too), so
// eval reproduces train's test accuracy exactly, under any memory mode
// (every mode is bit-identical to the plain run).
#ifndef SPILL_TOOLS_TRAINER_INFERENCE_H_
#define SPILL_TOOLS_TRAINER_INFERENCE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "framework/graph/executor.h"
#include "framework/graph/net.h"
#include "memory/runtime/runtime.h"
#include "tools/trainer/length_buckets.h"
#include "tools/trainer/train_config.h"

namespace spill {

struct EvalResult {
  double loss = 0;  // mean cross-entropy
  double accuracy = 0;
  int64_t correct = 0;
  int64_t count = 0;
};

// Opens the training split and (where the config has one) the test split.
Status OpenDatasets(const DataConfig& data, std::unique_ptr<Dataset>* train,
                    std::unique_ptr<Dataset>* test);

// Scores every example of `data`, in order, in the evaluation phase.
// `fit`, when given, prepares each batch first (data.buckets: cut to its
// length, the network and the memory runtime set to it). `batches`: run at
// least this many batches, the ones past the data unscored (ranks that
// gather sharded parameters all run the same steps).
StatusOr<EvalResult> EvaluateDataset(Executor& executor, const Net& net, const Dataset& data,
                                     int workers,
                                     const std::function<Status(Batch*)>& fit = nullptr,
                                     int64_t batches = 0);

// A network of a training config with a checkpoint's parameters, ready to score.
class Inference {
 public:
  // `needs_data` false (predict): when the config's dataset cannot be
  // opened, a kind of fixed geometry (idx: 1x28x28, CIFAR-10: 3x32x32, 10
  // classes each, through data.augment; text: 1x1xT with T labels, 256
  // classes or the symbols of data.vocabulary) stands in for it to build the
  // network; image_folder takes its classes from its folders and needs them.
  // The network runs in `precision`, or where none is given in the
  // checkpoint's (meta/precision): the one it was trained in.
  static StatusOr<std::unique_ptr<Inference>> Create(
      const TrainConfig& config, const std::string& checkpoint, bool needs_data = true,
      std::optional<Precision> precision = std::nullopt);

  // The test split of the config's dataset.
  StatusOr<EvalResult> Evaluate();
  // Class probabilities of `count` images (each the network's C*H*W floats),
  // `count` rows of num_classes() values.
  StatusOr<std::vector<float>> Predict(const std::vector<float>& images, int64_t count);

  const Net& net() const { return *net_; }
  // The memory runtime: its log and events are the last batch's.
  const MemoryRuntime& runtime() const { return *runtime_; }
  const Dataset& train_data() const { return *train_data_; }
  const TrainConfig& config() const { return config_; }

 private:
  explicit Inference(const TrainConfig& config) : config_(config) {}
  Status Setup(const std::string& checkpoint, bool needs_data);

  TrainConfig config_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Dataset> train_data_, test_data_;
  std::unique_ptr<Net> net_;
  std::unique_ptr<MemoryRuntime> runtime_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<LengthBuckets> lengths_;  // data.buckets; null without
};

}  // namespace spill

#endif  // SPILL_TOOLS_TRAINER_INFERENCE_H_
