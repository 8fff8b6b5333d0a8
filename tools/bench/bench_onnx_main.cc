// bench_onnx: imports an ONNX model and compares spill's scores with a
// reference computed by another framework on the same images - the check
// behind tools/bench/torchvision_onnx.py.
//
//   bench_onnx --onnx resnet18.onnx --reference resnet18.npz
//   {"model": "resnet18.onnx", "layers": 71, "params": 11689512, "batch": 2,
//    "max_error": 2.1e-07, "import_seconds": 0.4, "forward_seconds": 0.3}
//
// The reference is an npz with `input` (N x C x H x W float32) and `output`
// (the N score rows). max_error is the largest absolute difference over the
// largest absolute reference score. One convolution algorithm is pinned
// (im2col_image), as the tests do.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "framework/graph/net.h"
#include "framework/io/npz.h"
#include "framework/onnx/onnx_import.h"
#include "tools/common/cli.h"
#include "tools/common/scores.h"

namespace spill {
namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

StatusOr<NpyArray> Array(const NpzArchive& npz, const std::string& key, const std::string& file) {
  auto it = npz.find(key);
  if (it == npz.end() || it->second.dtype != "<f4" || it->second.shape.empty()) {
    return InvalidArgument(file + ": no float32 array '" + key + "'");
  }
  return it->second;
}

int Main(int argc, char** argv) {
  Flags flags("bench_onnx", "Compares spill's scores for an ONNX model with a reference.");
  std::string onnx, reference;
  flags.InputFile("--onnx", &onnx, "the ONNX model (.onnx)")->required();
  flags.InputFile("--reference", &reference, "input and output arrays (.npz)")->required();
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  auto start = std::chrono::steady_clock::now();
  auto imported = ImportOnnxFile(onnx);
  if (!imported.ok()) return ReportStatus("bench_onnx", imported.status());
  auto spec = ParseNetString(imported->yaml, onnx);
  if (!spec.ok()) return ReportStatus("bench_onnx", spec.status());
  const double import_seconds = Seconds(start);
  auto npz = ReadNpz(reference);
  if (!npz.ok()) return ReportStatus("bench_onnx", npz.status());
  auto input = Array(*npz, "input", reference);
  auto output = Array(*npz, "output", reference);
  if (!input.ok() || !output.ok()) {
    return ReportStatus("bench_onnx", input.ok() ? output.status() : input.status());
  }
  const int64_t batch = input->shape[0];
  auto net = Net::Build(*spec, {batch, DeviceType::kCpu});
  if (!net.ok()) return ReportStatus("bench_onnx", net.status());
  Status shapes = CheckImportedShapes(*imported, **net);
  if (!shapes.ok()) return ReportStatus("bench_onnx", shapes);
  start = std::chrono::steady_clock::now();
  const std::vector<float> images(input->floats(), input->floats() + input->numel());
  auto scores = ScoreImages(*spec, imported->params, images, batch, "pin:im2col_image");
  if (!scores.ok()) return ReportStatus("bench_onnx", scores.status());
  const double forward_seconds = Seconds(start);
  if (static_cast<int64_t>(scores->size()) != output->numel()) {
    return ReportStatus(
        "bench_onnx",
        InvalidArgument("spill computes " + std::to_string(scores->size()) +
                        " scores, the reference has " + std::to_string(output->numel())));
  }
  double scale = 0, error = 0;
  for (int64_t i = 0; i < output->numel(); ++i) {
    const double want = output->floats()[i];
    scale = std::max(scale, std::fabs(want));
    error = std::max(error, std::fabs((*scores)[i] - want));
  }
  int64_t params = 0;
  for (int id = 0; id < (*net)->num_layers(); ++id) {
    for (const ParamSpec& p : (*net)->decl(id).params) params += p.trainable ? p.shape.numel() : 0;
  }
  nlohmann::json report = {{"model", onnx},
                           {"layers", (*net)->num_layers()},
                           {"params", params},
                           {"batch", batch},
                           {"max_error", scale > 0 ? error / scale : error},
                           {"import_seconds", import_seconds},
                           {"forward_seconds", forward_seconds}};
  std::printf("%s\n", report.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("bench_onnx", [&] { return spill::Main(argc, argv); });
}
