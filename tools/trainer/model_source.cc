#include "tools/trainer/model_source.h"

#include <filesystem>

#include "framework/onnx/onnx_import.h"

namespace spill {

StatusOr<NetSpec> LoadOnnxModel(const std::string& path) {
  SPILL_ASSIGN_OR_RETURN(ImportedNet net, ImportOnnxFile(path));
  auto spec = ParseNetString(net.yaml, path + " (imported)");
  if (!spec.ok()) return spec.status().WithContext("model.onnx");
  // Building runs no compute: it checks the layers and their shapes.
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> built, Net::Build(*spec, {1, DeviceType::kCpu}));
  SPILL_RETURN_IF_ERROR(CheckImportedShapes(net, *built));
  return spec;
}

bool IsOnnxFile(const std::string& path) {
  return std::filesystem::path(path).extension() == ".onnx";
}

StatusOr<PartialLoad> LoadInitialParameters(const std::string& path, const Net& net,
                                            TensorStore& store) {
  if (!IsOnnxFile(path)) return LoadMatchingParameters(path, net, store);
  SPILL_ASSIGN_OR_RETURN(ImportedNet imported, ImportOnnxFile(path));
  return LoadMatchingArrays(imported.params, path, net, store);
}

}  // namespace spill
