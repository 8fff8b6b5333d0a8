#include "tools/trainer/rank_agreement.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace spill {
namespace {

// Examples whose labels make the data's fingerprint.
constexpr int64_t kFingerprintExamples = 64;

// FNV-1a: the same lines give the same hash on every rank.
constexpr uint64_t kFnvOffset = 14695981039346656037ull;
uint64_t Fnv1a(const void* data, size_t bytes, uint64_t hash) {
  constexpr uint64_t kPrime = 1099511628211ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * kPrime;
  return hash;
}

// The shortest decimal that reads back as `v`.
std::string Number(double v) {
  constexpr int kMaxDoubleDigits = 17;
  char text[40];
  for (int digits = 6; digits <= kMaxDoubleDigits; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return text;
}

template <typename T>
std::string List(const std::vector<T>& values) {
  std::string text;
  for (const T& v : values) text += (text.empty() ? "" : ", ") + Number(static_cast<double>(v));
  return "[" + text + "]";
}

std::string Augment(const Augmentation& a) {
  return "resize " + std::to_string(a.resize) + ", crop " + std::to_string(a.crop) + ", pad " +
         std::to_string(a.pad) + (a.random_crop ? ", random crop" : "") + (a.flip ? ", flip" : "") +
         ", mean " + List(a.mean) + ", std " + List(a.std);
}

std::string Flow(const YAML::Node& node) {
  if (!node || node.IsNull()) return "{}";
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

void AddConfig(const TrainConfig& c, int64_t max_steps, bool resuming,
               std::vector<AgreementLine>* lines) {
  const SolverConfig& s = c.solver;
  const LrSchedule& lr = c.schedule.schedule;
  const std::vector<AgreementLine> config = {
      {"solver.type", s.type},
      {"solver.lr", Number(lr.lr)},
      {"solver.momentum", Number(s.momentum)},
      {"solver.nesterov", s.nesterov ? "true" : "false"},
      {"solver.weight_decay", Number(s.weight_decay)},
      {"solver.adam", Number(s.beta1) + " " + Number(s.beta2) + " " + Number(s.epsilon)},
      {"solver.schedule", lr.type + " gamma " + Number(lr.gamma) + " step " +
                              std::to_string(lr.step_size) + " milestones " + List(lr.milestones) +
                              " min " + Number(lr.min_lr) + " warmup " + std::to_string(lr.warmup) +
                              " x" + Number(lr.warmup_factor) + " per " + c.schedule.unit},
      {"data.dataset", c.data.dataset},
      {"data.batch", std::to_string(c.data.batch)},
      {"data.shuffle", c.data.shuffle ? "true" : "false"},
      {"data.augment", Augment(c.data.augment)},
      {"data.test_augment", Augment(c.data.test_augment)},
      {"run.epochs", std::to_string(c.run.epochs)},
      {"run.steps", std::to_string(c.run.steps)},
      {"run.eval_every", std::to_string(c.run.eval_every)},
      {"run.checkpoint_every", std::to_string(c.run.checkpoint_every)},
      {"run.seed", std::to_string(c.run.seed)},
      {"run.init", c.run.init.empty() ? "none" : "a checkpoint"},
      {"run.precision", PrecisionName(c.run.precision)},
      {"--max-steps", std::to_string(max_steps)},
      {"--resume", resuming ? "yes" : "no"},
      {"distributed.bucket", std::to_string(c.distributed.bucket_bytes)},
      {"distributed.sync_batch_norm", c.distributed.sync_batch_norm ? "true" : "false"},
      {"distributed.check_replicas", c.distributed.check_replicas ? "true" : "false"},
      {"distributed.zero", std::to_string(c.distributed.zero)},
      // Where parameters live decides how gradients are bucketed.
      {"memory.params", c.memory.params.ToString()},
      {"memory.update", c.memory.update_on_host ? "host" : "device"},
      {"memory.chunk", BatchChunkName(c.memory.batch_chunk)},
  };
  lines->insert(lines->end(), config.begin(), config.end());
  if (c.data.dataset == "pairs") {  // the files' contents are the fingerprint's to compare
    const PairOptions& p = c.data.pairs;
    std::string pairs = "max_length " + std::to_string(p.max_length) +
                        (p.skip_longer ? ", skip longer" : "") + ", test fraction " +
                        Number(c.data.test_fraction);
    if (!p.synthetic.empty()) {
      pairs += ", synthetic " + p.synthetic + " " + std::to_string(p.synthetic_pairs) +
               " pairs of " + std::to_string(p.synthetic_min_length) + ".." +
               std::to_string(p.synthetic_max_length) + ", seed " + std::to_string(p.seed);
    }
    lines->push_back({"data.pairs", pairs});
  }
}

void AddNetwork(const Net& net, std::vector<AgreementLine>* lines) {
  lines->push_back({"network.layers", std::to_string(net.num_layers())});
  const Schedule& s = net.schedule();
  for (int id = 0; id < net.num_layers(); ++id) {
    const LayerSpec& spec = net.spec(id);
    std::string value = spec.type + " " + Flow(spec.params) + " ->";
    for (TensorId t : s.layers[id].outputs) value += " " + s.tensors[t].shape.ToString();
    for (TensorId t : s.layers[id].params) {
      value += ", " + s.tensors[t].name + " " + s.tensors[t].shape.ToString();
    }
    lines->push_back({"network layer " + std::to_string(id) + " '" + spec.name + "'", value});
  }
}

// Sizes, and the labels of the first examples and the bytes of the first
// image: the same files, or files with the same content.
Status AddData(const Dataset& train, const Dataset* test, std::vector<AgreementLine>* lines) {
  lines->push_back({"data.train", std::to_string(train.size()) + " examples of " +
                                      train.example_shape().ToString() + ", " +
                                      std::to_string(train.num_classes()) + " classes"});
  lines->push_back(
      {"data.test", test ? std::to_string(test->size()) + " examples" : std::string("none")});
  std::vector<float> image(train.example_shape().sample_size());
  uint64_t hash = kFnvOffset;
  for (int64_t i = 0; i < std::min(train.size(), kFingerprintExamples); ++i) {
    SPILL_ASSIGN_OR_RETURN(int label, train.Get(i, /*augment_seed=*/0, image.data()));
    hash = Fnv1a(&label, sizeof(label), hash);
    if (i == 0) hash = Fnv1a(image.data(), image.size() * sizeof(float), hash);
  }
  lines->push_back({"data.fingerprint", std::to_string(hash)});
  return Status::Ok();
}

// Rank 0's text replaces every rank's.
Status BroadcastText(Communicator& comm, std::string* text) {
  uint64_t size = text->size();
  SPILL_RETURN_IF_ERROR(comm.Broadcast(&size, sizeof(size), Channel::kControl));
  text->resize(size);
  return comm.Broadcast(text->data(), size, Channel::kControl);
}

// Rank `from`'s text, on every rank (the communicator broadcasts from rank 0
// only: a sum in which every other rank adds zeros).
StatusOr<std::string> TextOf(Communicator& comm, int from, const std::string& text) {
  uint64_t low = 0, size = 0;
  SPILL_RETURN_IF_ERROR(
      comm.MinMax(comm.rank() == from ? text.size() : 0, &low, &size, Channel::kControl));
  std::vector<double> bytes(size, 0.0);
  if (comm.rank() == from) {
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(text[i]);
  }
  SPILL_RETURN_IF_ERROR(
      comm.SumDoubles(bytes.data(), static_cast<int64_t>(size), Channel::kControl));
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>(static_cast<int>(bytes[i]));
  return out;
}

}  // namespace

StatusOr<std::vector<AgreementLine>> RankAgreement(const TrainConfig& config, int64_t max_steps,
                                                   bool resuming, const Net& net,
                                                   const Dataset& train, const Dataset* test) {
  std::vector<AgreementLine> lines;
  AddConfig(config, max_steps, resuming, &lines);
  AddNetwork(net, &lines);
  SPILL_RETURN_IF_ERROR(AddData(train, test, &lines));
  return lines;
}

Status CheckRanksAgree(Communicator& comm, const std::vector<AgreementLine>& lines) {
  // prefix[i]: the hash of lines [0, i].
  std::vector<uint64_t> prefix;
  uint64_t hash = kFnvOffset;
  for (const AgreementLine& line : lines) {
    hash = Fnv1a(line.key.data(), line.key.size() + 1, hash);  // with the terminator
    hash = Fnv1a(line.value.data(), line.value.size() + 1, hash);
    prefix.push_back(hash);
  }
  uint64_t low = 0, high = 0, fewest = 0, most = 0;
  SPILL_RETURN_IF_ERROR(comm.MinMax(lines.size(), &fewest, &most, Channel::kControl));
  SPILL_RETURN_IF_ERROR(comm.MinMax(hash, &low, &high, Channel::kControl));
  if (low == high && fewest == most) return Status::Ok();
  // The first line whose prefix differs: lines [0, lo) agree everywhere.
  uint64_t lo = 0, hi = fewest;  // every rank has lines below `fewest`
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    SPILL_RETURN_IF_ERROR(comm.MinMax(prefix[mid], &low, &high, Channel::kControl));
    if (low == high) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  // The line there on rank 0 and on the last rank whose line differs from it.
  auto describe = [&](uint64_t i) {
    return i < lines.size() ? "'" + lines[i].key + "' = " + lines[i].value
                            : std::string("no line (a shorter list)");
  };
  uint64_t reference = lo < prefix.size() ? prefix[lo] : 0;
  SPILL_RETURN_IF_ERROR(comm.Broadcast(&reference, sizeof(reference), Channel::kControl));
  const uint64_t mine = lo < prefix.size() ? prefix[lo] : 0;
  uint64_t none = 0, other = 0;
  SPILL_RETURN_IF_ERROR(comm.MinMax(mine != reference ? static_cast<uint64_t>(comm.rank()) : 0,
                                    &none, &other, Channel::kControl));
  std::string first = describe(lo);
  SPILL_RETURN_IF_ERROR(BroadcastText(comm, &first));
  SPILL_ASSIGN_OR_RETURN(std::string theirs, TextOf(comm, static_cast<int>(other), describe(lo)));
  return InvalidArgument("the ranks do not train the same thing: they differ first at " + first +
                         " on rank 0 but " + theirs + " on rank " + std::to_string(other) +
                         " (every rank must read the same configuration, network, data and "
                         "flags)");
}

}  // namespace spill
