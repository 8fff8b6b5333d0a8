#include "tools/train_config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "layers/cpu/conv_timer.h"
#include "memory/allocators/allocator.h"
#include "memory/eviction/eviction.h"
#include "memory/transfer_plan.h"
#include "tools/config_reader.h"

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

Status ReadAugment(ConfigSection section, Augmentation* a) {
  a->resize = static_cast<int>(section.Int("resize", a->resize));
  a->crop = static_cast<int>(section.Int("crop", a->crop));
  a->pad = static_cast<int>(section.Int("pad", a->pad));
  a->random_crop = section.Bool("random_crop", a->random_crop);
  a->flip = section.Bool("flip", a->flip);
  a->mean = section.FloatList("mean");
  a->std = section.FloatList("std");
  if (a->mean.size() != a->std.size()) {
    return InvalidArgument(section.Where("std") + ": needs as many values as mean");
  }
  return section.Finish();
}

std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  fs::path beside = fs::path(base_dir) / path;
  if (fs::exists(beside)) return beside.lexically_normal().string();
  return path;  // relative to the working directory
}

Status ReadModel(ConfigSection model, const YAML::Node& node, const std::string& base_dir,
                 TrainConfig* c) {
  c->base_dir = base_dir;
  if (!model.Has("file")) {
    if (!node.IsDefined() || !node.IsMap() || !node["layers"]) {
      return InvalidArgument(c->file + ": 'model' needs a 'file' or an inline network ('layers')");
    }
    c->model_node = node;  // checked by the network parser
    return Status::Ok();
  }
  c->model_file = Resolve(model.String("file", ""), base_dir);
  YAML::Node params = model.Raw("params");
  if (params.IsDefined() && params.IsMap()) {
    for (const auto& item : params) c->model_params[item.first.Scalar()] = YAML::Clone(item.second);
  } else if (params.IsDefined() && !params.IsNull()) {
    return InvalidArgument(model.Where("params") + ": must be a map of model parameters");
  }
  return model.Finish();
}

Status ReadData(ConfigSection data, const std::string& base_dir, DataConfig* d) {
  d->dataset =
      data.Choice("dataset", {"fashion_mnist", "mnist", "cifar10", "image_folder"}, d->dataset);
  d->path = Resolve(data.String("path", d->path), base_dir);
  d->test_path = Resolve(data.String("test_path", d->test_path), base_dir);
  d->batch = data.Int("batch", d->batch);
  d->workers = static_cast<int>(data.Int("workers", d->workers));
  d->shuffle = data.Bool("shuffle", d->shuffle);
  if (d->batch < 1) return InvalidArgument(data.Where("batch") + ": must be at least 1");
  if (d->workers < 1) return InvalidArgument(data.Where("workers") + ": must be at least 1");
  SPILL_RETURN_IF_ERROR(ReadAugment(data.Section("augment"), &d->augment));
  SPILL_RETURN_IF_ERROR(ReadAugment(data.Section("test_augment"), &d->test_augment));
  if (d->path.empty())
    return InvalidArgument(data.Where("path") + ": the dataset's location is required");
  return data.Finish();
}

Status ReadSolver(ConfigSection solver, TrainConfig* c) {
  SolverConfig& s = c->solver;
  s.type = solver.Choice("type", {"sgd", "adam"}, s.type);
  s.momentum = solver.Float("momentum", s.type == "adam" ? 0.0 : s.momentum);
  s.nesterov = solver.Bool("nesterov", s.nesterov);
  s.weight_decay = solver.Float("weight_decay", s.weight_decay);
  s.beta1 = solver.Float("beta1", s.beta1);
  s.beta2 = solver.Float("beta2", s.beta2);
  s.epsilon = solver.Float("epsilon", s.epsilon);
  LrSchedule& lr = c->schedule.schedule;
  lr.lr = solver.Float("lr", s.type == "adam" ? 1e-3 : lr.lr);
  ConfigSection schedule = solver.Section("schedule");
  lr.type = schedule.Choice("type", {"constant", "step", "multistep", "cosine"}, lr.type);
  c->schedule.unit = schedule.Choice("unit", {"epoch", "step"}, c->schedule.unit);
  lr.gamma = schedule.Float("gamma", lr.gamma);
  lr.step_size = schedule.Int("step_size", lr.step_size);
  lr.milestones = schedule.IntList("milestones");
  lr.min_lr = schedule.Float("min_lr", lr.min_lr);
  lr.warmup = schedule.Int("warmup", lr.warmup);
  lr.warmup_factor = schedule.Float("warmup_factor", lr.warmup_factor);
  SPILL_RETURN_IF_ERROR(schedule.Finish());
  return solver.Finish();
}

Status ReadMemory(ConfigSection memory, MemoryOptions* m, TimingConfig* timing) {
  std::string mode = memory.String("mode", m->mode);
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode(mode, m).WithContext(memory.Where("mode")));
  m->device_budget = memory.Bytes("device_budget", m->device_budget);
  m->host_budget = memory.Bytes("host_budget", m->host_budget);
  m->allocator = memory.Choice("allocator", AllocatorNames(), m->allocator);
  m->eviction = memory.Choice("eviction", EvictionNames(), m->eviction);
  m->scheduler = memory.Choice("scheduler", SchedulerNames(), m->scheduler);
  m->liveness = memory.Bool("liveness", m->liveness);
  m->offload = memory.Bool("offload", m->offload);
  m->cache = memory.Bool("cache", m->cache);
  m->recompute = memory.Bool("recompute", m->recompute);
  m->prefetch_ahead = static_cast<int>(memory.Int("prefetch_ahead", m->prefetch_ahead));
  m->compact = memory.Bool("compact", m->compact);
  for (auto [key, setting] :
       {std::pair{"window", &m->window}, {"window_budget", &m->window_budget}}) {
    if (!memory.Has(key)) continue;
    auto parsed = ParseSizeSetting(memory.String(key, ""));
    if (!parsed.ok()) return parsed.status().WithContext(memory.Where(key));
    *setting = *parsed;
  }
  m->lms_threshold = static_cast<int>(memory.Int("lms_threshold", m->lms_threshold));
  m->lms_ahead = static_cast<int>(memory.Int("lms_ahead", m->lms_ahead));
  m->chunk = memory.Bytes("chunk", m->chunk);
  // The dymem scheduler's switches.
  m->min_offload_bytes = memory.Bytes("min_offload", m->min_offload_bytes);
  m->offload_set = memory.Choice("offload_set", {"dymem", "conv"}, m->offload_set);
  m->release = memory.Choice("release", {"lazy", "eager"}, m->release);
  m->prefetch = memory.Choice("prefetch", {"dymem", "ahead"}, m->prefetch);
  m->barrier = memory.Bool("barrier", m->barrier);
  auto strategy = ParseRecomputeStrategy(
      memory.String("recompute_strategy", RecomputeStrategyName(m->recompute_strategy)));
  if (!strategy.ok()) return strategy.status().WithContext(memory.Where("recompute_strategy"));
  m->recompute_strategy = *strategy;
  auto workspace = ParseWorkspacePolicy(memory.String("workspace", m->workspace.ToString()));
  if (!workspace.ok()) return workspace.status().WithContext(memory.Where("workspace"));
  m->workspace = *workspace;
  timing->measure = memory.Choice("conv_timing", {"measure", "model"},
                                  timing->measure ? "measure" : "model") == "measure";
  timing->cache = memory.String("conv_timing_cache", timing->cache);
  return memory.Finish();
}

Status ReadRun(ConfigSection run, RunConfig* r) {
  r->device = run.Choice("device", {"cpu", "cuda"}, r->device);
  r->gpu = static_cast<int>(run.Int("gpu", r->gpu));
  r->epochs = run.Int("epochs", r->epochs);
  r->steps = run.Int("steps", r->steps);
  r->eval_every = run.Int("eval_every", r->eval_every);
  r->checkpoint_every = run.Int("checkpoint_every", r->checkpoint_every);
  r->seed = static_cast<uint64_t>(run.Int("seed", static_cast<int64_t>(r->seed)));
  r->output = run.String("output", r->output);
  if (r->epochs <= 0 && r->steps <= 0) {
    return InvalidArgument(run.Where("epochs") + ": set run.epochs or run.steps");
  }
  return run.Finish();
}

}  // namespace

StatusOr<TrainConfig> ParseTrainConfig(const std::string& text, const std::string& file,
                                       const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(file + ":" + std::to_string(e.mark.line + 1) +
                           ": YAML syntax: " + e.msg);
  }
  TrainConfig c;
  c.file = file;
  c.text = text;
  ConfigSection top(root, file, "");
  SPILL_RETURN_IF_ERROR(ReadModel(top.Section("model"), root["model"], base_dir, &c));
  SPILL_RETURN_IF_ERROR(ReadData(top.Section("data"), base_dir, &c.data));
  SPILL_RETURN_IF_ERROR(ReadSolver(top.Section("solver"), &c));
  c.timing.cache = cpu::DefaultConvTimingCache();
  SPILL_RETURN_IF_ERROR(ReadMemory(top.Section("memory"), &c.memory, &c.timing));
  SPILL_RETURN_IF_ERROR(ReadRun(top.Section("run"), &c.run));
  if (c.run.output.empty()) {
    c.run.output = "runs/" + fs::path(file).stem().string();
  }
  return c;
}

StatusOr<TrainConfig> LoadTrainConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("training config '" + path + "' does not exist");
  std::stringstream text;
  text << in.rdbuf();
  std::string base = fs::path(path).parent_path().string();
  return ParseTrainConfig(text.str(), path, base.empty() ? "." : base);
}

TrainConfig DefaultTrainConfig() {
  auto config = ParseTrainConfig(kDefaultConfig, "(built-in default)", ".");
  SPILL_CHECK(config.ok()) << config.status().ToString();
  return *config;
}

StatusOr<NetSpec> LoadModel(const TrainConfig& config, const Dataset& dataset) {
  auto parse = [&](const ParamOverrides& overrides) -> StatusOr<NetSpec> {
    if (!config.model_file.empty()) return LoadNetFile(config.model_file, overrides);
    return ParseNetNode(config.model_node, config.file, overrides, config.base_dir);
  };
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, parse(config.model_params));
  ParamOverrides overrides = config.model_params;
  const Shape shape = dataset.example_shape();
  const std::pair<const char*, int64_t> from_data[] = {
      {"classes", dataset.num_classes()}, {"channels", shape.c()}, {"size", shape.h()}};
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
