#include "tools/trainer/inference.h"

#include <algorithm>

#include "data/augment.h"
#include "data/loader.h"
#include "data/pair_dataset.h"
#include "framework/device/device_registry.h"
#include "framework/io/checkpoint.h"
#include "layers/cpu/conv_timer.h"
#include "memory/planning/feasibility.h"
#include "memory/planning/planner.h"
#include "tools/common/checks.h"
#include "tools/common/net_options.h"

namespace spill {
namespace {

// Adds the cross-entropy and top-1 hits of the first `count` images'
// scores (AddScoreLosses), leaving out labels equal to `ignored`. Labels come
// from a dataset checked to have at most `classes` classes; a label outside
// them is still an error here rather than a read past the row.
Status Score(const std::vector<float>& scores, const std::vector<float>& labels, int64_t count,
             int64_t classes, int64_t pixels, int64_t ignored, EvalResult* result) {
  for (int64_t r = 0; r < count * pixels; ++r) {
    const int64_t label = static_cast<int64_t>(labels[r]);
    if (label != ignored && (label < 0 || label >= classes)) {
      return InvalidArgument("test label " + std::to_string(label) + " is outside the " +
                             std::to_string(classes) + " classes the network scores");
    }
  }
  result->count += AddScoreLosses(scores.data(), labels.data(), count, classes, pixels,
                                  &result->loss, &result->correct, ignored);
  return Status::Ok();
}

// Fills a short batch up to the network's `n` rows with copies of its first
// image and its labels (their scores are not counted); `labels` per image.
void PadBatch(int64_t n, int64_t image, int64_t labels, Batch* batch) {
  batch->images.resize(n * image);
  batch->labels.resize(n * labels, 0.0f);
  for (int64_t i = batch->size; i < n; ++i) {
    std::copy_n(batch->labels.begin(), labels, batch->labels.begin() + i * labels);
  }
  for (int64_t i = batch->size; i < n; ++i) {
    std::copy_n(batch->images.begin(), image, batch->images.begin() + i * image);
  }
}

}  // namespace

Status OpenDatasets(const DataConfig& d, std::unique_ptr<Dataset>* train,
                    std::unique_ptr<Dataset>* test) {
  if (d.dataset == "cifar10") {
    SPILL_ASSIGN_OR_RETURN(*train, OpenCifar10(d.path, Split::kTrain, d.augment));
    SPILL_ASSIGN_OR_RETURN(*test, OpenCifar10(d.path, Split::kTest, d.test_augment));
  } else if (d.dataset == "image_folder") {
    SPILL_ASSIGN_OR_RETURN(*train, OpenImageFolder(d.path, d.augment));
    if (!d.test_path.empty()) {
      SPILL_ASSIGN_OR_RETURN(*test, OpenImageFolder(d.test_path, d.test_augment));
    }
  } else if (d.dataset == "text") {
    TextOptions text;
    text.path = d.path;
    text.sequence = d.sequence;
    text.test_fraction = d.test_fraction;
    text.streams = d.streams ? d.batch : 0;  // a stream per row of the batch
    text.vocabulary = d.vocabulary;
    SPILL_ASSIGN_OR_RETURN(*train, OpenCharText(text, Split::kTrain));
    SPILL_ASSIGN_OR_RETURN(*test, OpenCharText(text, Split::kTest));
  } else if (d.dataset == "pairs") {
    PairOptions pairs = d.pairs;
    pairs.test_fraction = d.test_fraction;
    pairs.vocabulary = d.vocabulary;
    SPILL_ASSIGN_OR_RETURN(*train, OpenPairDataset(pairs, Split::kTrain));
    SPILL_ASSIGN_OR_RETURN(*test, OpenPairDataset(pairs, Split::kTest));
  } else if (d.dataset == "fashion_mnist_segmentation" || d.dataset == "mnist_segmentation") {
    const bool fashion = d.dataset == "fashion_mnist_segmentation";
    if (d.masks.empty()) {
      return InvalidArgument(d.dataset + ": data.masks must name the folder of the masks");
    }
    SPILL_ASSIGN_OR_RETURN(*train,
                           OpenIdxSegmentation(d.path, d.masks, Split::kTrain, d.augment, fashion));
    SPILL_ASSIGN_OR_RETURN(
        *test, OpenIdxSegmentation(d.path, d.masks, Split::kTest, d.test_augment, fashion));
  } else {
    const bool fashion = d.dataset == "fashion_mnist";
    SPILL_ASSIGN_OR_RETURN(*train, OpenIdx(d.path, Split::kTrain, d.augment, fashion));
    SPILL_ASSIGN_OR_RETURN(*test, OpenIdx(d.path, Split::kTest, d.test_augment, fashion));
  }
  return Status::Ok();
}

StatusOr<EvalResult> EvaluateDataset(Executor& executor, const Net& net, const Dataset& data,
                                     int workers, const std::function<Status(Batch*)>& fit,
                                     int64_t batches) {
  LoaderOptions lo;
  lo.batch = net.batch();
  lo.shuffle = false;
  lo.drop_last = false;
  lo.workers = workers;
  Loader loader(data, lo);
  loader.Start(0, 0);
  const int64_t image = data.example_shape().sample_size();
  const int64_t ignored = net.layer(net.loss_layers()[0]).ignored_label();
  EvalResult result;
  for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    SPILL_ASSIGN_OR_RETURN(Batch batch, loader.Next());
    PadBatch(net.batch(), image, data.label_shape().sample_size(), &batch);
    if (fit) SPILL_RETURN_IF_ERROR(fit(&batch));
    const int64_t pixels = net.label_shape().sample_size();
    HostBatch host{batch.images.data(), batch.labels.data()};
    SPILL_RETURN_IF_ERROR(executor.Run(host, Phase::kEval, 0).status());
    SPILL_RETURN_IF_ERROR(Score(executor.scores(), batch.labels, batch.size, net.num_classes(),
                                pixels, ignored, &result));
  }
  // Unscored batches of zeros, at the network's last shape.
  Batch unscored;
  PadBatch(net.batch(), image, data.label_shape().sample_size(), &unscored);
  for (int64_t b = loader.batches_per_epoch(); b < batches; ++b) {
    HostBatch host{unscored.images.data(), unscored.labels.data()};
    SPILL_RETURN_IF_ERROR(executor.Run(host, Phase::kEval, 0).status());
  }
  const int64_t count = std::max<int64_t>(result.count, 1);
  result.accuracy = static_cast<double>(result.correct) / count;
  result.loss /= count;
  return result;
}

namespace {

// The examples of the idx and CIFAR-10 kinds: 10 classes, images of a fixed size.
constexpr int kFixedKindClasses = 10;
constexpr int kIdxSide = 28, kCifarSide = 32, kCifarChannels = 3;
// Text without its corpus: every byte value a symbol, unless a vocabulary file says.
constexpr int kByteSymbols = 256;

// A dataset kind's shape, labels and classes without its files (no examples).
class GeometryOnly : public Dataset {
 public:
  GeometryOnly(Shape shape, std::string kind, int classes = kFixedKindClasses,
               Shape labels = Shape(1, 1, 1, 1))
      : shape_(shape), labels_(labels), kind_(std::move(kind)), classes_(classes) {}
  int64_t size() const override { return 0; }
  int num_classes() const override { return classes_; }
  Shape example_shape() const override { return shape_; }
  Shape label_shape() const override { return labels_; }
  std::string Describe() const override { return kind_ + " (geometry only, no examples)"; }
  StatusOr<int> Get(int64_t, uint64_t, float*) const override {
    return Internal("a geometry-only dataset has no examples");
  }

 private:
  Shape shape_, labels_;
  std::string kind_;
  int classes_;
};

StatusOr<std::unique_ptr<Dataset>> Geometry(const DataConfig& d) {
  if (d.dataset == "image_folder") return NotFound("image_folder takes its classes from its data");
  if (d.dataset == "text") {  // windows of `sequence` symbols, a label per position
    int classes = kByteSymbols;
    if (!d.vocabulary.empty()) {
      SPILL_ASSIGN_OR_RETURN(std::vector<uint8_t> symbols, ReadCharVocabulary(d.vocabulary));
      classes = static_cast<int>(symbols.size());
    }
    const Shape window(1, 1, 1, d.sequence);
    return std::unique_ptr<Dataset>(new GeometryOnly(window, d.dataset, classes, window));
  }
  if (d.dataset == "pairs") {  // source and decoder input packed in two channels
    int classes = kReservedIds + kByteSymbols;
    if (!d.vocabulary.empty()) {
      SPILL_ASSIGN_OR_RETURN(std::vector<uint8_t> symbols, ReadCharVocabulary(d.vocabulary));
      classes = kReservedIds + static_cast<int>(symbols.size());
    }
    const int64_t length = d.pairs.max_length;
    return std::unique_ptr<Dataset>(
        new GeometryOnly(Shape(1, 2, 1, length), d.dataset, classes, Shape(1, 1, 1, length)));
  }
  const bool cifar = d.dataset == "cifar10";
  const int side = cifar ? kCifarSide : kIdxSide;
  SPILL_ASSIGN_OR_RETURN(
      Augmenter augmenter,
      Augmenter::Create(d.augment, cifar ? kCifarChannels : 1, side, side, {0.5f}, {0.5f}));
  return std::unique_ptr<Dataset>(new GeometryOnly(augmenter.example_shape(), d.dataset));
}

}  // namespace

StatusOr<std::unique_ptr<Inference>> Inference::Create(const TrainConfig& config,
                                                       const std::string& checkpoint,
                                                       bool needs_data,
                                                       std::optional<Precision> precision) {
  std::unique_ptr<Inference> inference(new Inference(config));
  if (precision) {
    inference->config_.run.precision = *precision;
  } else {
    SPILL_ASSIGN_OR_RETURN(inference->config_.run.precision, CheckpointPrecision(checkpoint));
  }
  SPILL_RETURN_IF_ERROR(inference->Setup(checkpoint, needs_data));
  return inference;
}

Status Inference::Setup(const std::string& checkpoint, bool needs_data) {
  DeviceConfig device_config;
  device_config.ordinal = config_.run.gpu;
  device_config.tensor_math = config_.run.precision == Precision::kTf32;
  SPILL_ASSIGN_OR_RETURN(device_, CreateDevice(config_.run.device, device_config));
  SPILL_RETURN_IF_ERROR(CheckPrecision(config_.run.precision, device_->type(), "run.precision"));
  cpu::SetConvTiming(
      {config_.timing.measure ? cpu::ConvTimingMode::kMeasure : cpu::ConvTimingMode::kModel,
       config_.timing.cache});
  Status opened = OpenDatasets(config_.data, &train_data_, &test_data_);
  if (!opened.ok()) {
    if (needs_data) return opened;
    auto geometry = Geometry(config_.data);
    if (!geometry.ok()) return opened;
    train_data_ = std::move(geometry).value();
    test_data_.reset();
  }
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadModel(config_, *train_data_));
  SPILL_ASSIGN_OR_RETURN(
      net_, Net::Build(spec, NetOptionsFor(config_.data.batch, device_->type(),
                                           config_.memory.workspace, config_.run.precision)));
  SPILL_RETURN_IF_ERROR(CalibrateNet(*net_, *device_));
  SPILL_RETURN_IF_ERROR(CheckPinnedAlgorithm(*net_, config_.memory.workspace)
                            .WithContext(config_.file + ": memory.workspace"));
  auto runtime = MemoryRuntime::Create(net_->view(), config_.memory, device_.get());
  if (!runtime.ok()) return ExplainOutOfMemory(runtime.status(), net_->view(), config_.memory);
  runtime_ = std::move(runtime).value();
  executor_ = std::make_unique<Executor>(*net_, device_.get(), *runtime_);
  if (test_data_) lengths_ = LengthBuckets::For(*test_data_);
  return LoadCheckpoint(checkpoint, *net_, *runtime_, *device_, nullptr).status();
}

StatusOr<EvalResult> Inference::Evaluate() {
  if (!test_data_) {
    return InvalidArgument(config_.file + ": the data has no test split (set data.test_path)");
  }
  const Shape want = net_->input_shape(), have = test_data_->example_shape();
  if (want.sample_size() != have.sample_size()) {
    return InvalidArgument("the test split gives " + have.ToString() + " images but model '" +
                           net_->name() + "' takes " + want.ToString());
  }
  if (!lengths_) return EvaluateDataset(*executor_, *net_, *test_data_, config_.data.workers);
  return EvaluateDataset(*executor_, *net_, *test_data_, config_.data.workers,
                         [this](Batch* batch) { return lengths_->Fit(batch, *net_, *runtime_); });
}

StatusOr<std::vector<float>> Inference::Predict(const std::vector<float>& images, int64_t count) {
  if (net_->label_shape().sample_size() != 1) {
    return InvalidArgument("predict: model '" + net_->name() + "' scores every pixel; predict " +
                           "lists classes of whole images (evaluate it with eval)");
  }
  const int64_t n = net_->batch(), image = net_->input_shape().sample_size();
  const int64_t classes = net_->num_classes();
  if (static_cast<int64_t>(images.size()) != count * image) {
    return InvalidArgument("predict: " + std::to_string(images.size()) + " values for " +
                           std::to_string(count) + " images of " + std::to_string(image));
  }
  std::vector<float> probabilities;
  for (int64_t first = 0; first < count; first += n) {
    Batch batch;
    batch.size = std::min(n, count - first);
    batch.images.assign(images.begin() + first * image,
                        images.begin() + (first + batch.size) * image);
    batch.labels.assign(batch.size, 0.0f);  // unused: only the scores are read
    PadBatch(n, image, 1, &batch);
    HostBatch host{batch.images.data(), batch.labels.data()};
    SPILL_RETURN_IF_ERROR(executor_->Run(host, Phase::kEval, 0).status());
    const std::vector<float>& scores = executor_->scores();
    probabilities.insert(probabilities.end(), scores.begin(),
                         scores.begin() + batch.size * classes);
  }
  return probabilities;
}

}  // namespace spill
