#include "tools/trainer/train_config.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>

#include "framework/base/files.h"
#include "framework/base/units.h"
#include "framework/config/yaml_reader.h"
#include "framework/graph/net_checks.h"
#include "layers/cpu/conv_timer.h"
#include "memory/settings.h"
#include "tools/trainer/model_source.h"

namespace spill {
namespace {

namespace fs = std::filesystem;

const char kDefaultConfig[] = R"(# The built-in default: a small CNN on Fashion-MNIST.
model:
  name: fashion_cnn
  layers:
    - {name: data, type: input, shape: [1, 28, 28]}
    - {name: conv1, type: convolution, filters: 32, kernel: 3, pad: 1, bias: false}
    - {name: bn1, type: batch_norm}
    - {name: relu1, type: relu}
    - {name: pool1, type: max_pool, kernel: 2}
    - {name: conv2, type: convolution, filters: 64, kernel: 3, pad: 1, bias: false}
    - {name: bn2, type: batch_norm}
    - {name: relu2, type: relu}
    - {name: pool2, type: max_pool, kernel: 2}
    - {name: fc1, type: fully_connected, outputs: 128}
    - {name: relu3, type: relu}
    - {name: fc2, type: fully_connected, outputs: 10}
    - {name: loss, type: softmax_loss}
data:
  dataset: fashion_mnist
  path: /usr/share/datasets/fashion-mnist
  batch: 64
solver:
  type: sgd
  lr: 0.05
  momentum: 0.9
  nesterov: true
  weight_decay: 5e-4
  schedule: {type: cosine, unit: epoch}
memory:
  mode: liveness
run:
  epochs: 4
  seed: 1
  output: runs/fashion_cnn
)";

// Ceilings of the configuration's numbers (see README, "Limits").
constexpr int64_t kMaxWorkers = 64;                       // data loading threads
constexpr int64_t kMaxImageSide = 1 << 16;                // resize and crop, pixels
constexpr int64_t kMaxPad = 1 << 12;                      // pixels of padding
constexpr size_t kMaxChannels = 64;                       // normalization values
constexpr int64_t kMaxEpochs = 1000000;                   // run.epochs
constexpr int64_t kMaxSteps = 1000000000000;              // steps, intervals, schedule lengths
constexpr size_t kMaxMilestones = 1000;                   // multistep milestones
constexpr int64_t kMaxGpu = 63;                           // device ordinal
constexpr int64_t kMaxSequence = 1 << 20;                 // data.sequence, symbols per example
constexpr double kMaxTestFraction = 0.5;                  // data.test_fraction
constexpr int64_t kMaxSyntheticPairs = int64_t{1} << 24;  // data.synthetic_pairs
constexpr int64_t kDefaultSyntheticSeed = 1;              // data.synthetic_seed
constexpr size_t kMaxCatalogs = 4096;                     // data.catalogs entries
constexpr double kMaxLearningRate = 1000;
constexpr size_t kMinBucketBytes = 4 * kKiB;  // distributed.bucket
constexpr int64_t kZeroStages = 3;            // distributed.zero: ZeRO's stages
constexpr size_t kMaxBucketBytes = 1 * kGiB;

Status ReadAugment(YamlMap section, Augmentation* a) {
  a->resize = static_cast<int>(section.Int("resize", a->resize, 0, kMaxImageSide));
  a->crop = static_cast<int>(section.Int("crop", a->crop, 0, kMaxImageSide));
  a->pad = static_cast<int>(section.Int("pad", a->pad, 0, kMaxPad));
  a->random_crop = section.Bool("random_crop", a->random_crop);
  a->flip = section.Bool("flip", a->flip);
  a->mean = section.FloatList("mean", Bounds::Closed(-1e3, 1e3), kMaxChannels);
  a->std = section.FloatList("std", Bounds::AboveTo(0, 1e3), kMaxChannels);
  if (a->mean.size() != a->std.size()) section.Fail("std", "needs as many values as mean");
  return section.Finish();
}

// `path` relative to the config's folder when it exists there, else as given
// (relative to the working directory).
std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  fs::path beside = fs::path(base_dir) / path;
  std::error_code error;
  if (fs::exists(beside, error)) return beside.lexically_normal().string();
  return path;
}

Status ReadModel(YamlMap model, const YAML::Node& node, const std::string& base_dir,
                 TrainConfig* c) {
  c->base_dir = base_dir;
  if (model.Has("onnx")) {  // an ONNX model: its weights start the run (see model_source.h)
    if (model.Has("file")) model.Fail("onnx", "give either 'file' or 'onnx', not both");
    c->model_onnx = Resolve(model.String("onnx", ""), base_dir);
    return model.Finish();
  }
  if (!model.Has("file")) {
    if (!node.IsDefined() || !node.IsMap() || !node["layers"]) {
      return InvalidArgument(c->file + ": 'model' needs a 'file' or an inline network ('layers')");
    }
    c->model_node = node;  // its keys are checked by the network parser
    return Status::Ok();
  }
  c->model_file = Resolve(model.String("file", ""), base_dir);
  YAML::Node params = model.Raw("params");
  if (params.IsDefined() && params.IsMap()) {
    for (const auto& item : params) c->model_params[item.first.Scalar()] = YAML::Clone(item.second);
  } else if (params.IsDefined() && !params.IsNull()) {
    model.Fail("params", "must be a map of model parameters");
  }
  return model.Finish();
}

// Keys that only some kinds of dataset read: a key given to a dataset of
// another kind is an error naming it (and the datasets that read it).
enum DataKind : unsigned { kImages = 1, kText = 2, kPairs = 4 };
struct KindKey {
  const char* key;
  unsigned kinds;
};
constexpr KindKey kKindKeys[] = {
    {"path", kImages | kText},
    {"test_path", kImages},
    {"masks", kImages},
    {"augment", kImages},
    {"test_augment", kImages},
    {"sequence", kText},
    {"streams", kText},
    {"test_fraction", kText | kPairs},
    {"vocabulary", kText | kPairs},
    {"source", kPairs},
    {"target", kPairs},
    {"catalogs", kPairs},
    {"synthetic", kPairs},
    {"synthetic_pairs", kPairs},
    {"synthetic_min_length", kPairs},
    {"synthetic_max_length", kPairs},
    {"synthetic_seed", kPairs},
    {"max_length", kPairs},
    {"skip_longer", kPairs},
    {"buckets", kPairs},
};

unsigned KindOf(const std::string& dataset) {
  if (dataset == "text") return kText;
  if (dataset == "pairs") return kPairs;
  return kImages;
}

// Why a sequence dataset does not read an image dataset's key.
std::string NotReadBy(const std::string& dataset, const std::string& key) {
  if (dataset == "text") {
    return "dataset 'text' does not read it (a text corpus is split by data.test_fraction and "
           "is not augmented)";
  }
  if (key == "path") {
    return "dataset 'pairs' does not read it (name its corpus with data.source and data.target, "
           "data.catalogs or data.synthetic)";
  }
  return "dataset 'pairs' does not read it (a pair corpus is split by data.test_fraction and is "
         "not augmented)";
}

// "dataset 'text'", "datasets 'text' and 'pairs'" (kinds without kImages).
std::string Readers(unsigned kinds) {
  if (kinds == (kText | kPairs)) return "datasets 'text' and 'pairs'";
  return kinds == kText ? "dataset 'text'" : "dataset 'pairs'";
}

void CheckKindKeys(YamlMap& data, const std::string& dataset) {
  const unsigned kind = KindOf(dataset);
  for (const KindKey& k : kKindKeys) {
    if ((k.kinds & kind) || !data.Raw(k.key).IsDefined()) continue;
    if (k.kinds & kImages) {  // a sequence dataset given an image dataset's key
      data.Fail(k.key, NotReadBy(dataset, k.key));
      continue;
    }
    std::string message =
        "is read only by " + Readers(k.kinds) + " (this config's dataset is '" + dataset + "')";
    if (kind == kPairs && std::string(k.key) == "sequence") {
      message += "; a pair's length is data.max_length";
    }
    data.Fail(k.key, message);
  }
}

// The text dataset's keys (data/dataset.h, TextOptions).
void ReadText(YamlMap& data, const std::string& base_dir, DataConfig* d) {
  d->sequence = data.RequiredInt("sequence", 1, kMaxSequence);
  d->test_fraction =
      data.Float("test_fraction", d->test_fraction, Bounds::AboveTo(0, kMaxTestFraction));
  d->streams = data.Bool("streams", d->streams);
  d->vocabulary = Resolve(data.String("vocabulary", d->vocabulary), base_dir);
  if (d->streams && d->shuffle) {
    data.Fail("shuffle",
              "must be false with data.streams: row r of every batch continues row r of the "
              "batch before, in order (set shuffle: false)");
  }
}

// data.catalogs: a list of .mo files or folders (or one), each resolved
// like `path`.
std::vector<std::string> ReadCatalogs(YamlMap& data, const std::string& base_dir) {
  std::vector<std::string> catalogs;
  if (!data.Has("catalogs")) return catalogs;
  const YAML::Node node = data.Raw("catalogs");
  if (node.IsScalar()) return {Resolve(node.Scalar(), base_dir)};
  bool ok = node.IsSequence() && node.size() > 0 && node.size() <= kMaxCatalogs;
  for (size_t i = 0; ok && i < node.size(); ++i) {
    ok = node[i].IsScalar() && !node[i].Scalar().empty();
    if (ok) catalogs.push_back(Resolve(node[i].Scalar(), base_dir));
  }
  if (!ok) {
    data.Fail("catalogs", "must be a list of 1 to " + std::to_string(kMaxCatalogs) +
                              " .mo files or folders of them");
  }
  return catalogs;
}

// The pair dataset's keys (data/pair_dataset.h, PairOptions). The synthetic
// tasks take their own seed, synthetic_seed, rather than run.seed, so that
// runs of different seeds train and test on the same corpus.
void ReadPairs(YamlMap& data, const std::string& base_dir, DataConfig* d) {
  PairOptions& p = d->pairs;
  p.source = Resolve(data.String("source", p.source), base_dir);
  p.target = Resolve(data.String("target", p.target), base_dir);
  p.catalogs = ReadCatalogs(data, base_dir);
  if (data.Has("synthetic")) p.synthetic = data.Choice("synthetic", {"reverse", "add"}, "");
  const bool synthetic = !p.synthetic.empty();
  for (const char* key :
       {"synthetic_pairs", "synthetic_min_length", "synthetic_max_length", "synthetic_seed"}) {
    if (!synthetic && data.Has(key)) data.Fail(key, "is read only with data.synthetic");
  }
  if (synthetic) {
    p.synthetic_pairs = data.RequiredInt("synthetic_pairs", 1, kMaxSyntheticPairs);
    p.synthetic_min_length =
        data.Int("synthetic_min_length", p.synthetic_min_length, 1, kMaxSequence);
    p.synthetic_max_length = data.RequiredInt("synthetic_max_length", 1, kMaxSequence);
    p.seed = static_cast<uint64_t>(
        data.Int("synthetic_seed", kDefaultSyntheticSeed, 0, std::numeric_limits<int64_t>::max()));
  }
  const int corpora = (!p.source.empty() || !p.target.empty()) + !p.catalogs.empty() + synthetic;
  if (data.ok() && corpora != 1) {
    data.Fail(corpora == 0 ? "source"
              : synthetic  ? "synthetic"
                           : "catalogs",
              "dataset 'pairs' needs exactly one corpus: data.source and data.target, "
              "data.catalogs or data.synthetic");
  }
  if (data.ok() && p.source.empty() != p.target.empty()) {
    data.Fail(p.source.empty() ? "source" : "target",
              "is required with data." + std::string(p.source.empty() ? "target" : "source") +
                  " (two line-aligned files)");
  }
  p.max_length = data.RequiredInt("max_length", 1, kMaxSequence);
  p.skip_longer = data.Bool("skip_longer", p.skip_longer);
  p.buckets = data.Bool("buckets", p.buckets);
  d->test_fraction =
      data.Float("test_fraction", d->test_fraction, Bounds::AboveTo(0, kMaxTestFraction));
  d->vocabulary = Resolve(data.String("vocabulary", d->vocabulary), base_dir);
}

Status ReadData(YamlMap data, const std::string& base_dir, DataConfig* d) {
  d->dataset = data.Choice("dataset",
                           {"fashion_mnist", "mnist", "cifar10", "image_folder",
                            "fashion_mnist_segmentation", "mnist_segmentation", "text", "pairs"},
                           d->dataset);
  const bool pairs = d->dataset == "pairs";
  d->path = Resolve(data.String("path", d->path), base_dir);
  d->test_path = Resolve(data.String("test_path", d->test_path), base_dir);
  d->masks = Resolve(data.String("masks", d->masks), base_dir);
  d->batch = data.Int("batch", d->batch, 1, kMaxBatch);
  d->workers = static_cast<int>(data.Int("workers", d->workers, 1, kMaxWorkers));
  d->shuffle = data.Bool("shuffle", d->shuffle);
  CheckKindKeys(data, d->dataset);
  if (d->dataset == "text") ReadText(data, base_dir, d);
  if (pairs) ReadPairs(data, base_dir, d);
  SPILL_RETURN_IF_ERROR(ReadAugment(data.Section("augment"), &d->augment));
  SPILL_RETURN_IF_ERROR(ReadAugment(data.Section("test_augment"), &d->test_augment));
  if (d->path.empty() && !pairs) data.Fail("path", "the dataset's location is required");
  return data.Finish();
}

Status ReadSchedule(YamlMap schedule, TrainConfig* c) {
  LrSchedule& lr = c->schedule.schedule;
  lr.type = schedule.Choice("type", {"constant", "step", "multistep", "cosine"}, lr.type);
  c->schedule.unit = schedule.Choice("unit", {"epoch", "step"}, c->schedule.unit);
  lr.gamma = schedule.Float("gamma", lr.gamma, Bounds::AboveTo(0, 1));
  lr.step_size = schedule.Int("step_size", lr.step_size, 0, kMaxSteps);
  lr.milestones = schedule.IntList("milestones", 1, kMaxSteps, kMaxMilestones);
  lr.min_lr = schedule.Float("min_lr", lr.min_lr, Bounds::Closed(0, kMaxLearningRate));
  lr.warmup = schedule.Int("warmup", lr.warmup, 0, kMaxSteps);
  lr.warmup_factor = schedule.Float("warmup_factor", lr.warmup_factor, Bounds::AboveTo(0, 1));
  if (lr.type == "step" && lr.step_size == 0) schedule.Fail("step_size", "is required (>= 1)");
  if (!std::is_sorted(lr.milestones.begin(), lr.milestones.end())) {
    schedule.Fail("milestones", "must be increasing");
  }
  return schedule.Finish();
}

Status ReadSolver(YamlMap solver, TrainConfig* c) {
  SolverConfig& s = c->solver;
  s.type = solver.Choice("type", {"sgd", "adam"}, s.type);
  s.momentum =
      solver.Float("momentum", s.type == "adam" ? 0.0 : s.momentum, Bounds::FromBelow(0, 1));
  s.nesterov = solver.Bool("nesterov", s.nesterov);
  s.weight_decay = solver.Float("weight_decay", s.weight_decay, Bounds::Closed(0, 1));
  s.beta1 = solver.Float("beta1", s.beta1, Bounds::FromBelow(0, 1));
  s.beta2 = solver.Float("beta2", s.beta2, Bounds::FromBelow(0, 1));
  s.epsilon = solver.Float("epsilon", s.epsilon, Bounds::AboveTo(0, 1));
  LrSchedule& lr = c->schedule.schedule;
  lr.lr = solver.Float("lr", s.type == "adam" ? 1e-3 : lr.lr, Bounds::AboveTo(0, kMaxLearningRate));
  SPILL_RETURN_IF_ERROR(ReadSchedule(solver.Section("schedule"), c));
  return solver.Finish();
}

// Every key of the memory schema (memory/memory_options.h): the shared ones
// in order (mode first), then each policy's settings; a policy's key the
// chosen mode does not read is an error naming the mode. A dotted key is
// one of a section (planner.limit: `planner: {limit: ...}`), whose unknown
// keys are errors too.
Status ReadMemory(YamlMap memory, MemoryOptions* m, TimingConfig* timing) {
  std::vector<std::string> keys;
  for (const MemoryKey& k : MemoryKeys()) keys.push_back(k.spec.key);
  for (const std::string& key : PolicySettingRegistry().Names()) keys.push_back(key);
  std::map<std::string, YamlMap> sections;
  for (const std::string& key : keys) {
    const size_t dot = key.find('.');
    YamlMap* map = &memory;
    if (dot != std::string::npos) {
      const std::string section = key.substr(0, dot);
      auto it = sections.find(section);
      if (it == sections.end()) it = sections.emplace(section, memory.Section(section)).first;
      map = &it->second;
    }
    const std::string leaf = dot == std::string::npos ? key : key.substr(dot + 1);
    if (!map->Raw(leaf).IsDefined()) continue;
    const std::string text = map->String(leaf, "");
    if (!map->ok()) break;
    Status set = SetMemoryKey(key, text, map->Where(leaf), m);
    if (!set.ok()) {
      map->Fail(leaf, set.message());
      break;
    }
  }
  if (!memory.ok()) return memory.Finish();
  for (const auto& [name, section] : sections) SPILL_RETURN_IF_ERROR(section.Finish());
  timing->measure = memory.Choice("conv_timing", {"measure", "model"},
                                  timing->measure ? "measure" : "model") == "measure";
  timing->cache = memory.String("conv_timing_cache", timing->cache);
  SPILL_RETURN_IF_ERROR(memory.Finish());
  SPILL_RETURN_IF_ERROR(CheckKeysRead(*m));
  return m->Validate().WithContext(memory.Where("mode"));
}

Status ReadRun(YamlMap run, const std::string& base_dir, RunConfig* r) {
  r->device = run.Choice("device", {"cpu", "cuda"}, r->device);
  r->gpu = static_cast<int>(run.Int("gpu", r->gpu, 0, kMaxGpu));
  r->epochs = run.Int("epochs", r->epochs, 0, kMaxEpochs);
  r->steps = run.Int("steps", r->steps, 0, kMaxSteps);
  r->eval_every = run.Int("eval_every", r->eval_every, 0, kMaxSteps);
  r->checkpoint_every = run.Int("checkpoint_every", r->checkpoint_every, 0, kMaxSteps);
  r->seed = static_cast<uint64_t>(
      run.Int("seed", static_cast<int64_t>(r->seed), 0, std::numeric_limits<int64_t>::max()));
  r->micro_batches = run.Int("micro_batches", r->micro_batches, 1, kMaxBatch);
  const std::string precision =
      run.Choice("precision", {"fp32", "bf16", "fp16", "tf32"}, PrecisionName(r->precision));
  if (run.ok()) r->precision = *ParsePrecision(precision, "run.precision");
  for (const char* key : {"loss_scale", "loss_scale_growth"}) {
    if (run.Has(key) && run.ok() && r->precision != Precision::kFp16) {
      run.Fail(key, std::string("applies to run.precision fp16 only (this run is ") +
                        PrecisionName(r->precision) + ")");
    }
  }
  r->loss_scale.initial =
      run.Float("loss_scale", r->loss_scale.initial, Bounds::Closed(kMinLossScale, kMaxLossScale));
  const std::string scale_problem = CheckLossScale(r->loss_scale.initial);
  if (run.ok() && !scale_problem.empty()) run.Fail("loss_scale", scale_problem);
  r->loss_scale.growth_interval =
      run.Int("loss_scale_growth", r->loss_scale.growth_interval, 0, kMaxSteps);
  r->output = run.String("output", r->output);
  r->init = Resolve(run.String("init", r->init), base_dir);
  if (run.ok() && r->epochs == 0 && r->steps == 0) {
    run.Fail("epochs", "set run.epochs or run.steps (at least 1)");
  }
  return run.Finish();
}

Status ReadDistributed(YamlMap section, DistributedConfig* d) {
  d->bucket_bytes = section.Bytes("bucket", d->bucket_bytes, kMinBucketBytes, kMaxBucketBytes);
  d->sync_batch_norm = section.Bool("sync_batch_norm", d->sync_batch_norm);
  d->check_replicas = section.Bool("check_replicas", d->check_replicas);
  d->zero = static_cast<int>(section.Int("zero", d->zero, 0, kZeroStages));
  if (section.ok() && d->zero >= 3 && d->check_replicas) {
    section.Fail("check_replicas",
                 "compares the parameters every rank holds whole; at zero 3 each rank holds "
                 "its own piece of them (use zero 0, 1 or 2 to check replicas)");
  }
  return section.Finish();
}

}  // namespace

StatusOr<TrainConfig> ParseTrainConfig(const std::string& text, const std::string& file,
                                       const std::string& base_dir) {
  SPILL_ASSIGN_OR_RETURN(YAML::Node root, LoadYamlText(text, file));
  TrainConfig c;
  c.file = file;
  c.text = text;
  YamlOrigin origin;
  origin.file = file;
  YamlMap top(root, origin, "");
  // Unknown top-level keys first: a misspelt section ("memroy:") would
  // otherwise only show as its settings silently missing.
  for (const char* section : {"model", "data", "solver", "memory", "run", "distributed"}) {
    top.Raw(section);
  }
  SPILL_RETURN_IF_ERROR(top.Finish());
  SPILL_RETURN_IF_ERROR(ReadModel(top.Section("model"), top.Raw("model"), base_dir, &c));
  SPILL_RETURN_IF_ERROR(ReadData(top.Section("data"), base_dir, &c.data));
  SPILL_RETURN_IF_ERROR(ReadSolver(top.Section("solver"), &c));
  c.timing.cache = cpu::DefaultConvTimingCache();
  SPILL_RETURN_IF_ERROR(ReadMemory(top.Section("memory"), &c.memory, &c.timing));
  SPILL_RETURN_IF_ERROR(ReadRun(top.Section("run"), base_dir, &c.run));
  if (!c.model_onnx.empty() && c.run.init.empty()) c.run.init = c.model_onnx;
  SPILL_RETURN_IF_ERROR(ReadDistributed(top.Section("distributed"), &c.distributed));
  if (c.run.output.empty()) {
    c.run.output = "runs/" + fs::path(file).stem().string();
  }
  return c;
}

StatusOr<TrainConfig> LoadTrainConfig(const std::string& path) {
  SPILL_ASSIGN_OR_RETURN(std::string text,
                         ReadFileToString(path, kMaxYamlFileBytes, "training config"));
  std::string base = fs::path(path).parent_path().string();
  return ParseTrainConfig(text, path, base.empty() ? "." : base);
}

TrainConfig DefaultTrainConfig() {
  auto config = ParseTrainConfig(kDefaultConfig, "(built-in default)", ".");
  SPILL_CHECK(config.ok()) << config.status().ToString();
  return *config;
}

StatusOr<NetSpec> LoadModel(const TrainConfig& config, const Dataset& dataset) {
  if (!config.model_onnx.empty()) return LoadOnnxModel(config.model_onnx);
  auto parse = [&](const ParamOverrides& overrides) -> StatusOr<NetSpec> {
    if (!config.model_file.empty()) return LoadNetFile(config.model_file, overrides);
    return ParseNetNode(config.model_node, config.file, overrides, config.base_dir);
  };
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, parse(config.model_params));
  ParamOverrides overrides = config.model_params;
  const Shape shape = dataset.example_shape();
  const std::pair<const char*, int64_t> from_data[] = {{"classes", dataset.num_classes()},
                                                       {"channels", shape.c()},
                                                       {"size", shape.h()},
                                                       {"sequence", shape.w()}};
  bool changed = false;
  for (const auto& [name, value] : from_data) {
    if (spec.params.count(name) && !overrides.count(name)) {
      overrides[name] = YAML::Node(value);
      changed = true;
    }
  }
  if (!changed) return spec;
  return parse(overrides);
}

}  // namespace spill
