#include "tests/testing/fuzz_tools.h"

#include <cmath>
#include <cstring>
#include <opencv2/imgcodecs.hpp>

#include "framework/graph/net.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/onnx_harness.h"
#include "tools/trainer/predict_input.h"
#include "tools/trainer/train_config.h"

namespace spill {
namespace fuzz {
namespace {

// What one exported network may hold, weights and every activation at
// batch 1 together: a mutation that makes a layer huge is not run.
constexpr double kMaxExportBytes = 64.0 * (1 << 20);

// The network the host tier cases train: a convolution, batch norm and a
// classifier, small enough that its two steps take milliseconds.
const char kHostNet[] = R"(
  layers:
    - {name: data, type: input, shape: [1, 6, 6]}
    - {name: conv, type: convolution, filters: 3, kernel: 3, pad: 1}
    - {name: bn, type: batch_norm}
    - {name: relu, type: relu}
    - {name: fc, type: fully_connected, outputs: 4}
    - {name: loss, type: softmax_loss}
)";

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Bytes of every tensor of `net` at its batch (an upper bound of what one
// forward pass holds), in doubles so that huge shapes cannot wrap.
double TensorBytes(const Net& net) {
  double bytes = 0;
  for (const TensorInfo& t : net.schedule().tensors) {
    double n = sizeof(float);
    for (int64_t d : t.shape.dims) n *= static_cast<double>(d);
    bytes += n;
  }
  return bytes;
}

// One convolution algorithm pinned, as the memory tests pin it: an algorithm
// chosen by the workspace a budget leaves would change the arithmetic.
constexpr char kPinned[] = "workspace: pin:im2col_image";

// The host tier network trained two steps under a config's memory section.
StatusOr<testing::TrainTrace> TrainHostNet(const std::string& memory_yaml) {
  const std::string text = std::string("model:") + kHostNet +
                           "data: {dataset: fashion_mnist, path: /nowhere, batch: 2}\n" +
                           "memory: {" + memory_yaml + ", " + kPinned + "}\nrun: {steps: 2}\n";
  SPILL_ASSIGN_OR_RETURN(TrainConfig config, ParseTrainConfig(text, "host_tier.yaml", "configs"));
  testing::SyntheticRun run;
  run.memory = config.memory;
  return testing::TrainSynthetic(testing::MustParse(kHostNet), run);
}

}  // namespace

std::vector<uint8_t> EncodedImage(const std::string& extension, int rows, int cols, int channels) {
  cv::Mat image(rows, cols, CV_8UC(channels));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols * channels; ++c) {
      image.ptr<uint8_t>(r)[c] = static_cast<uint8_t>((r * 31 + c * 17) % 256);
    }
  }
  std::vector<uint8_t> bytes;
  cv::imencode(extension, image, bytes);
  return bytes;
}

Status PredictInputPipeline(const std::string& path, const std::string& dataset) {
  DataConfig data;
  data.dataset = dataset;
  const Shape input = dataset == "cifar10" ? Shape(1, 3, 32, 32) : Shape(1, 1, 28, 28);
  SPILL_ASSIGN_OR_RETURN(PredictInput read, ReadPredictInput(path, data, input));
  if (read.count < 1) return Internal("accepted with no example");
  if (static_cast<int64_t>(read.images.size()) != read.count * input.sample_size()) {
    return Internal("accepted " + std::to_string(read.images.size()) + " values for " +
                    std::to_string(read.count) + " examples");
  }
  for (float v : read.images) {
    if (!std::isfinite(v)) return Internal("accepted an example with a value that is not finite");
  }
  if (!read.labels.empty() && static_cast<int64_t>(read.labels.size()) != read.count) {
    return Internal("accepted a label count other than the example count");
  }
  return Status::Ok();
}

Status ExportPipeline(const std::string& net_path, const std::string& onnx_path) {
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadNetFile(net_path));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {1, DeviceType::kCpu}));
  if (TensorBytes(*net) > kMaxExportBytes) {
    return InvalidArgument("too large for a fuzz case (" + std::to_string(TensorBytes(*net)) +
                           " bytes of tensors)");
  }
  const NpzArchive params = testing::SeededParams(*net);
  SPILL_ASSIGN_OR_RETURN(onnx::ModelProto model, ExportOnnx(*net, params, net_path));
  SPILL_RETURN_IF_ERROR(WriteOnnxFile(onnx_path, model));
  // From here on the model was exported: any difference is a defect.
  auto imported = ImportOnnxFile(onnx_path);
  if (!imported.ok()) return Internal("the export does not import: " + imported.status().message());
  auto spec_back = ParseNetString(imported->yaml, onnx_path);
  if (!spec_back.ok()) {
    return Internal("the export imports as a network that does not parse: " +
                    spec_back.status().message());
  }
  if (imported->params.size() != params.size()) {
    return Internal("the export holds " + std::to_string(imported->params.size()) +
                    " weights, the network " + std::to_string(params.size()));
  }
  const std::vector<float> images = testing::SomeImages(net->input_shape().sample_size());
  SPILL_ASSIGN_OR_RETURN(std::vector<float> before,
                         testing::ForwardScores(spec, params, images, 1));
  auto after = testing::ForwardScores(*spec_back, imported->params, images, 1);
  if (!after.ok()) return Internal("the export does not run: " + after.status().message());
  if (!SameBits(before, *after)) return Internal("the export computes other scores");
  return Status::Ok();
}

Status HostTierPipeline(const std::string& memory_yaml) {
  static const auto* const baseline =
      new StatusOr<testing::TrainTrace>(TrainHostNet("mode: baseline"));
  if (!baseline->ok())
    return Internal("the baseline does not run: " + baseline->status().message());
  SPILL_ASSIGN_OR_RETURN(testing::TrainTrace run, TrainHostNet(memory_yaml));
  if (run.losses != (*baseline)->losses || run.params.size() != (*baseline)->params.size()) {
    return Internal("ran with losses other than the baseline's");
  }
  for (size_t i = 0; i < run.params.size(); ++i) {
    if (!SameBits(run.params[i], (*baseline)->params[i])) {
      return Internal("ran to weights other than the baseline's");
    }
  }
  return Status::Ok();
}

}  // namespace fuzz
}  // namespace spill
