// onnx_import: converts an ONNX model into a spill network (YAML) and an npz
// of its weights, for users who want to read or edit the network before
// training it.
//
//   onnx_import --onnx resnet18.onnx --yaml resnet18.yaml --weights resnet18.npz
//   train --config my.yaml --init resnet18.npz     # model: {file: resnet18.yaml}
//
// A training config can also name the ONNX file itself (model: {onnx: ...});
// this program writes what that import builds, so both start from the same
// network and weights (see framework/onnx/onnx_import.h).
#include <cstdio>
#include <string>

#include "framework/base/files.h"
#include "framework/graph/net.h"
#include "framework/io/npz.h"
#include "framework/onnx/onnx_import.h"
#include "tools/common/cli.h"

namespace spill {
namespace {

struct Args {
  std::string onnx, yaml, weights;
};

// The network must build as spill reads it: a layer spill would reject is an
// error now, not when training starts.
Status CheckBuilds(const ImportedNet& net, const std::string& label) {
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, ParseNetString(net.yaml, label));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> built, Net::Build(spec, {1, DeviceType::kCpu}));
  return CheckImportedShapes(net, *built);
}

int Main(int argc, char** argv) {
  Flags flags("onnx_import", "Converts an ONNX model into a spill network and its weights.");
  Args a;
  flags.InputFile("--onnx", &a.onnx, "the ONNX model (.onnx)")->required();
  flags.OutputFile("--yaml", &a.yaml, "where to write the network (YAML)")->required();
  flags.OutputFile("--weights", &a.weights,
                   "where to write the weights (.npz; load them with train --init)");
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  auto net = ImportOnnxFile(a.onnx);
  if (!net.ok()) return ReportStatus("onnx_import", net.status());
  Status built = CheckBuilds(*net, a.yaml);
  if (!built.ok()) return ReportStatus("onnx_import", built.WithContext(a.onnx));
  Status written = WriteTextFile(a.yaml, net->yaml, "--yaml");
  if (!written.ok()) return ReportStatus("onnx_import", written);
  if (!a.weights.empty()) {
    Status written = WriteNpzAtomically(a.weights, net->params);
    if (!written.ok()) return ReportStatus("onnx_import", written);
  }
  std::printf("%s: network '%s' to %s (%zu parameter tensors%s%s)\n", a.onnx.c_str(),
              net->name.c_str(), a.yaml.c_str(), net->params.size(),
              a.weights.empty() ? "" : " to ", a.weights.c_str());
  return 0;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("onnx_import", [&] { return spill::Main(argc, argv); });
}
