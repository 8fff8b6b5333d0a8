// onnx_export: a checkpoint (or a training config's fresh network) as an
// ONNX model of its inference graph, checked by ONNX's checker.
//
//   onnx_export --config configs/lenet_fashion.yaml --checkpoint runs/lenet/checkpoint.npz
//               --output lenet.onnx
//   onnx_export --config my.yaml --output fresh.onnx     # the initialization, no checkpoint
//
// The network is built as train builds it (the config's model and dataset);
// see framework/onnx/onnx_export.h for the graph.
#include <cstdio>
#include <string>

#include "framework/graph/initializer.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "tools/common/cli.h"
#include "tools/trainer/inference.h"
#include "tools/trainer/model_source.h"
#include "tools/trainer/train_config.h"

namespace spill {
namespace {

struct Args {
  std::string config, checkpoint, output;
};

// A checkpoint's arrays, or the config's initialization (run.init's matching
// arrays over the seeded values).
StatusOr<NpzArchive> Parameters(const Args& a, const TrainConfig& config, const Net& net) {
  if (!a.checkpoint.empty()) return ReadNpz(a.checkpoint);
  NpzArchive archive;
  const Schedule& s = net.schedule();
  for (int id = 0; id < net.num_layers(); ++id) {
    for (size_t p = 0; p < net.decl(id).params.size(); ++p) {
      const TensorInfo& info = s.tensors[s.layers[id].params[p]];
      std::vector<float> v = InitialValues(net.decl(id).params[p], config.run.seed, info.name);
      archive["params/" + info.name] = NpyArray::Floats(
          {info.shape.n(), info.shape.c(), info.shape.h(), info.shape.w()}, v.data());
    }
  }
  if (config.run.init.empty()) return archive;
  NpzArchive init;
  if (IsOnnxFile(config.run.init)) {
    SPILL_ASSIGN_OR_RETURN(ImportedNet imported, ImportOnnxFile(config.run.init));
    init = std::move(imported.params);
  } else {
    SPILL_ASSIGN_OR_RETURN(init, ReadNpz(config.run.init));
  }
  for (auto& [name, array] : archive) {
    auto it = init.find(name);
    if (it != init.end() && it->second.dtype == array.dtype && it->second.shape == array.shape) {
      array = it->second;
    }
  }
  return archive;
}

Status Export(const Args& a, const Flags& flags) {
  SPILL_ASSIGN_OR_RETURN(TrainConfig config, LoadTrainConfig(a.config));
  std::vector<NamedFile> inputs = flags.InputFiles();
  inputs.push_back({"the model file", config.model_file});
  inputs.push_back({"model.onnx", config.model_onnx});
  inputs.push_back({"run.init", config.run.init});
  SPILL_RETURN_IF_ERROR(CheckDistinctFiles(inputs, flags.OutputFiles()));
  std::unique_ptr<Dataset> train, test;
  SPILL_RETURN_IF_ERROR(OpenDatasets(config.data, &train, &test));
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadModel(config, *train));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {1, DeviceType::kCpu}));
  SPILL_ASSIGN_OR_RETURN(NpzArchive params, Parameters(a, config, *net));
  const std::string label = a.checkpoint.empty() ? a.config : a.checkpoint;
  SPILL_ASSIGN_OR_RETURN(onnx::ModelProto model, ExportOnnx(*net, params, label));
  SPILL_RETURN_IF_ERROR(WriteOnnxFile(a.output, model));
  std::printf("%s: network '%s', %d nodes, %d initializers, opset %d (onnx::checker passed)\n",
              a.output.c_str(), net->name().c_str(), model.graph().node_size(),
              model.graph().initializer_size(), kExportOpset);
  return Status::Ok();
}

int Main(int argc, char** argv) {
  Flags flags("onnx_export", "Writes a checkpoint's network as an ONNX model (see README).");
  Args a;
  flags.InputFile("--config", &a.config, "training configuration of the network")->required();
  flags.InputFile("--checkpoint", &a.checkpoint,
                  "checkpoint (.npz) whose parameters to export (default: the initialization)");
  flags.OutputFile("--output", &a.output, "where to write the ONNX model (.onnx)")->required();
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  return ReportStatus("onnx_export", Export(a, flags));
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("onnx_export", [&] { return spill::Main(argc, argv); });
}
