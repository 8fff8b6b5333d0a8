// predict: the most likely classes of images under a checkpoint.
//
//   predict --config configs/lenet_fashion.yaml --checkpoint runs/lenet/checkpoint.npz
//           --input shoe.png --top 3
//   predict --config X --checkpoint Y --input data/t10k-images-idx3-ubyte --json
//   predict --config X --checkpoint Y --input shoe.png --labels classes.txt
//
// The input is one PNG/JPEG image or one file of the config's dataset kind
// (see tools/trainer/predict_input.h); each example gets one line: its index and its
// top-k classes with their softmax probabilities, as text or JSON lines;
// with --labels (one class name per line, class 0 first) each class is
// followed by its name.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>

#include "framework/base/files.h"
#include "framework/base/units.h"
#include "tools/common/cli.h"
#include "tools/trainer/inference.h"
#include "tools/trainer/predict_input.h"

namespace spill {
namespace {

constexpr int64_t kMaxTop = 1000;              // --top
constexpr size_t kMaxLabelsBytes = 16 * kMiB;  // --labels

struct Args {
  std::string config, checkpoint, input, labels;
  int64_t top = 5;
  bool json = false;
};

void Declare(Flags& f, Args* a) {
  f.InputFile("--config", &a->config, "training configuration the checkpoint was trained with")
      ->required();
  f.InputFile("--checkpoint", &a->checkpoint, "checkpoint (.npz) written by train")->required();
  f.InputFile("--input", &a->input,
              "a PNG or JPEG image, or an idx / CIFAR-10 binary file of the config's dataset")
      ->required();
  f.Int("--top", &a->top, "classes shown per example (at most the network's)", 1, kMaxTop);
  f.Flag("--json", &a->json, "one JSON object per example");
  f.InputFile("--labels", &a->labels, "class names, one per line (class 0 first)");
}

// The byte at which `text` stops being UTF-8 (shortest forms, no surrogates,
// at most U+10FFFF), or npos.
size_t InvalidUtf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int length = b < 0x80           ? 1
                       : (b >> 5) == 0x6  ? 2
                       : (b >> 4) == 0xE  ? 3
                       : (b >> 3) == 0x1E ? 4
                                          : 0;
    if (length == 0 || i + length > text.size()) return i;
    uint32_t code = length == 1 ? b : b & (0x7F >> length);
    for (int k = 1; k < length; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if ((c >> 6) != 0x2) return i;
      code = (code << 6) | (c & 0x3F);
    }
    constexpr uint32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
    i += length;
  }
  return std::string::npos;
}

// A class name is shown and written as JSON: UTF-8 text, not blank.
Status CheckClassName(const std::string& name, const std::string& path, size_t line) {
  const std::string where = path + ":" + std::to_string(line) + ": ";
  const size_t bad = InvalidUtf8(name);
  if (bad != std::string::npos) {
    return InvalidArgument(where + "the class name is not UTF-8 text (byte " +
                           std::to_string(bad + 1) + "); save the labels file as UTF-8");
  }
  if (name.find_first_not_of(" \t") == std::string::npos) {
    return InvalidArgument(where + "the class name is blank; give every class a name");
  }
  return Status::Ok();
}

// One name per class: the file's lines, a trailing empty line aside.
StatusOr<std::vector<std::string>> ReadClassNames(const std::string& path, int64_t classes) {
  SPILL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, kMaxLabelsBytes, "labels"));
  std::vector<std::string> names;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    SPILL_RETURN_IF_ERROR(CheckClassName(line, path, names.size() + 1));
    names.push_back(line);
    start = end + 1;
  }
  if (static_cast<int64_t>(names.size()) != classes) {
    return InvalidArgument(path + ": " + std::to_string(names.size()) +
                           " class names (lines) for a network of " + std::to_string(classes) +
                           " classes");
  }
  return names;
}

// Classes of one row of probabilities, most likely first (ties: lower class).
std::vector<int64_t> TopClasses(const float* p, int64_t classes, int64_t k) {
  std::vector<int64_t> order(classes);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [p](int64_t a, int64_t b) { return p[a] > p[b]; });
  order.resize(std::min(k, classes));
  return order;
}

void PrintExample(const Args& a, const PredictInput& in, int64_t i, const float* p, int64_t classes,
                  const std::vector<std::string>& names) {
  const std::vector<int64_t> top = TopClasses(p, classes, a.top);
  if (a.json) {
    nlohmann::ordered_json line = {{"index", i}};
    if (!in.labels.empty()) line["label"] = in.labels[i];
    line["top"] = nlohmann::json::array();
    for (int64_t c : top) {
      nlohmann::ordered_json entry = {{"class", c}};
      if (!names.empty()) entry["name"] = names[c];
      entry["probability"] = p[c];
      line["top"].push_back(entry);
    }
    std::printf("%s\n", line.dump().c_str());
    return;
  }
  std::printf("%ld:", i);
  for (int64_t c : top) {
    if (names.empty()) {
      std::printf(" %ld (%.4f)", c, p[c]);
    } else {
      std::printf(" %ld %s (%.4f)", c, names[c].c_str(), p[c]);
    }
  }
  if (!in.labels.empty()) std::printf("  [label %d]", in.labels[i]);
  std::printf("\n");
}

int Main(int argc, char** argv) {
  Flags flags("predict", "Top classes of images under a checkpoint (see README, Predict).");
  Args args;
  Declare(flags, &args);
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  auto config = LoadTrainConfig(args.config);
  if (!config.ok()) return ReportStatus("predict", config.status());
  // Scoring images needs the network, not the training data.
  auto inference = Inference::Create(*config, args.checkpoint, /*needs_data=*/false);
  if (!inference.ok()) return ReportStatus("predict", inference.status());
  const Net& net = (*inference)->net();
  const int64_t classes = net.num_classes();
  std::vector<std::string> names;
  if (!args.labels.empty()) {
    auto read = ReadClassNames(args.labels, classes);
    if (!read.ok()) return ReportStatus("predict", read.status());
    names = std::move(read).value();
  }
  auto input = ReadPredictInput(args.input, config->data, net.input_shape());
  if (!input.ok()) return ReportStatus("predict", input.status());
  auto probabilities = (*inference)->Predict(input->images, input->count);
  if (!probabilities.ok()) return ReportStatus("predict", probabilities.status());
  for (int64_t i = 0; i < input->count; ++i) {
    PrintExample(args, *input, i, probabilities->data() + i * classes, classes, names);
  }
  return 0;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("predict", [&] { return spill::Main(argc, argv); });
}
