#include "framework/onnx/onnx_external_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "framework/base/checked_math.h"

namespace spill {
namespace {

struct ExternalRange {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;  // to the end of the file
};

StatusOr<int64_t> ParseByteCount(const std::string& text, const std::string& what) {
  if (text.empty() || text.size() > 18 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument(what + " '" + text + "' is not a byte count");
  }
  return static_cast<int64_t>(std::stoll(text));
}

// A location inside the model's folder: relative, and no component is "..".
bool StaysInFolder(const std::string& location) {
  if (location.empty() || location[0] == '/') return false;
  size_t start = 0;
  while (start <= location.size()) {
    size_t end = location.find('/', start);
    if (end == std::string::npos) end = location.size();
    if (location.compare(start, end - start, "..") == 0 && end - start == 2) return false;
    start = end + 1;
  }
  return true;
}

StatusOr<ExternalRange> ReadRange(const onnx::TensorProto& t, const std::string& what) {
  ExternalRange range;
  for (const auto& entry : t.external_data()) {
    if (entry.key() == "location") {
      range.location = entry.value();
    } else if (entry.key() == "offset") {
      SPILL_ASSIGN_OR_RETURN(range.offset, ParseByteCount(entry.value(), what + ": offset"));
    } else if (entry.key() == "length") {
      SPILL_ASSIGN_OR_RETURN(range.length, ParseByteCount(entry.value(), what + ": length"));
    }
  }
  if (range.location.empty()) return InvalidArgument(what + " names no location");
  if (!StaysInFolder(range.location)) {
    return InvalidArgument(what + " is at '" + range.location +
                           "', outside the model's folder (a location is relative to it and "
                           "does not go up with '..')");
  }
  return range;
}

Status LoadTensor(onnx::TensorProto* t, const std::string& model_dir, const std::string& label) {
  const std::string what = label + ": tensor '" + t->name() + "' stored outside the file";
  if (model_dir.empty()) {
    return InvalidArgument(what + ": read the model from its file, so its data can be found");
  }
  SPILL_ASSIGN_OR_RETURN(ExternalRange range, ReadRange(*t, what));
  const std::string path = model_dir + (model_dir.back() == '/' ? "" : "/") + range.location;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return NotFound(what + ": cannot read " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument(what + ": " + path + " is not a file");
  const int64_t size = st.st_size;
  int64_t end = 0;
  if (range.length < 0) range.length = size - std::min(range.offset, size);
  if (!CheckedAdd(range.offset, range.length, &end) || end > size) {
    return InvalidArgument(what + ": bytes " + std::to_string(range.offset) + " to " +
                           std::to_string(range.offset + range.length) + " lie past the end of " +
                           path + " (" + std::to_string(size) + " bytes)");
  }
  std::string bytes(static_cast<size_t>(range.length), '\0');
  std::ifstream in(path, std::ios::binary);
  in.seekg(range.offset);
  if (!in.read(bytes.data(), range.length)) {
    return InvalidArgument(what + ": cannot read " + std::to_string(range.length) + " bytes from " +
                           path);
  }
  t->set_raw_data(std::move(bytes));
  t->clear_external_data();
  t->set_data_location(onnx::TensorProto::DEFAULT);
  return Status::Ok();
}

}  // namespace

Status LoadOnnxExternalData(onnx::ModelProto* model, const std::string& model_dir,
                            const std::string& label) {
  std::vector<onnx::TensorProto*> tensors;
  onnx::GraphProto* graph = model->mutable_graph();
  for (auto& t : *graph->mutable_initializer()) tensors.push_back(&t);
  for (auto& node : *graph->mutable_node()) {
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_t()) tensors.push_back(a.mutable_t());
    }
  }
  for (onnx::TensorProto* t : tensors) {
    if (t->data_location() != onnx::TensorProto::EXTERNAL) continue;
    SPILL_RETURN_IF_ERROR(LoadTensor(t, model_dir, label));
  }
  return Status::Ok();
}

}  // namespace spill
