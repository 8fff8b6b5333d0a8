// The training configuration: model, data, solver, memory and run.
//
//   model:
//     file: ../models/resnet18.yaml     # relative to this file (or inline `layers:`)
//     params: {stem: cifar}             # model parameter overrides
//     # or onnx: net.onnx              # an ONNX model; its weights initialize the run
//   data:
//     dataset: cifar10                  # fashion_mnist | mnist | cifar10 | image_folder | text
//                                       # | pairs
//     path: /data/cifar-10-batches-bin  # image_folder: the train folder (not for pairs)
//     test_path: ...                    # image_folder: the validation folder
//     batch: 128
//     workers: 2
//     augment: {crop: 32, pad: 4, flip: true}   # training transforms
//     test_augment: {}                          # evaluation transforms
//     # text only (data/dataset.h, OpenCharText): path is a text file or a folder
//     sequence: 64         # T, symbols per example (required)
//     test_fraction: 0.05  # the corpus's last bytes that are the test split
//     streams: false       # true: data.batch contiguous streams (needs shuffle: false)
//     vocabulary: FILE     # its distinct bytes are the symbols (default: the corpus's)
//     # pairs only (data/pair_dataset.h, OpenPairDataset): sequence pairs for an
//     # encoder-decoder, each example 2 x 1 x max_length (source, decoder
//     # input), its labels the target + <eos>, then -1 (softmax_loss needs
//     # ignore_label: -1). One corpus of three:
//     source: train.en     # line-aligned files, pair i = line i of each
//     target: train.fr
//     # catalogs: [/usr/share/locale/fr/LC_MESSAGES]   # gettext .mo files or folders
//     # synthetic: reverse # or add; with synthetic_pairs (required),
//     #                    # synthetic_min_length (1), synthetic_max_length
//     #                    # (required) and synthetic_seed (1: the corpus
//     #                    # does not change with run.seed)
//     max_length: 64       # T, tokens per side (required): max(source, target + 1)
//     skip_longer: false   # true: drop longer pairs instead of refusing them
//     test_fraction: 0.05  # the corpus's last pairs that are the test split
//     vocabulary: FILE     # as for text (default: both sides' bytes)
//   solver:
//     type: sgd            # sgd | adam
//     lr: 0.1
//     momentum: 0.9
//     nesterov: true
//     weight_decay: 5e-4
//     schedule: {type: cosine, warmup: 1, unit: epoch}
//   memory:
//     mode: liveness       # baseline | liveness | offload | recompute |
//                          # offload_recompute | superneurons
//     device_budget: 2GiB
//     workspace: dynamic   # dynamic | fastest | memory_optimal | cap:8MiB | pin:NAME
//     conv_timing: measure # measure | model
//   run:
//     device: cpu          # cpu | cuda (a --config=cuda build)
//     epochs: 30           # or steps: N
//     eval_every: 0        # steps between evaluations; 0 = every epoch
//     checkpoint_every: 0  # steps between checkpoints; 0 = every epoch
//     seed: 1
//     precision: fp32      # fp32 | bf16 (activations in 16 bits) | fp16 (the same in
//                          # IEEE half, loss-scaled) | tf32 (cuda)
//     loss_scale: 65536    # fp16: the initial loss scale, a power of two
//     loss_scale_growth: 2000  # fp16: clean steps before it doubles; 0: never
//     output: runs/resnet18_cifar
//   distributed:           # only when mpirun starts several ranks
//     bucket: 4MiB         # gradients fused per allreduce
//     sync_batch_norm: false
//
// Model parameters named `classes`, `channels`, `size` and `sequence` are
// filled from the dataset unless the config sets them.
//
// The file is read by the strict YAML reader (framework/config/yaml_reader.h): an
// unknown or duplicate key at any level, a value of the wrong type, a number
// outside its range (the ceilings are named constants in train_config.cc) or
// a key without a value is an error naming the file, the line and the dotted
// key.
#ifndef SPILL_TOOLS_TRAINER_TRAIN_CONFIG_H_
#define SPILL_TOOLS_TRAINER_TRAIN_CONFIG_H_

#include <string>

#include "data/dataset.h"
#include "data/pair_dataset.h"
#include "framework/config/net_spec.h"
#include "framework/graph/precision.h"
#include "framework/solver/lr_schedule.h"
#include "framework/solver/solver.h"
#include "memory/memory_options.h"
#include "tools/trainer/loss_scale.h"

namespace spill {

struct DataConfig {
  std::string dataset = "fashion_mnist";
  std::string path;
  std::string test_path;
  // The segmentation datasets' masks: a folder, made (with the masks) when missing.
  std::string masks;
  int64_t batch = 64;
  int workers = 2;
  bool shuffle = true;
  Augmentation augment;
  Augmentation test_augment;
  // dataset text (TextOptions): symbols per example, the test split's share
  // of the corpus, whether the batch is `batch` streams, a vocabulary file.
  int64_t sequence = 0;
  double test_fraction = 0.05;
  bool streams = false;
  std::string vocabulary;
  // dataset pairs (PairOptions): its corpus, max_length, skip_longer and
  // seed; test_fraction and vocabulary are the two above.
  PairOptions pairs;
};

struct ScheduleConfig {
  LrSchedule schedule;  // step counts below are in `unit`s until resolved
  std::string unit = "epoch";
};

struct RunConfig {
  std::string device = "cpu";  // cpu | cuda
  int gpu = 0;                 // which GPU, for cuda
  int64_t epochs = 0;
  int64_t steps = 0;
  int64_t eval_every = 0;
  int64_t checkpoint_every = 0;
  uint64_t seed = 1;
  // Gradient accumulation: each step computes its batch (a rank's share of
  // data.batch) in this many micro-batches, one after another, and updates
  // once with the mean of their gradients, added in order - what as many
  // data-parallel ranks compute. The network is built for one micro-batch.
  int64_t micro_batches = 1;
  // How activations and their gradients are stored (framework/graph/precision.h).
  Precision precision = Precision::kFp32;
  // fp16's dynamic loss scaling (tools/trainer/loss_scale.h).
  LossScaleConfig loss_scale;
  std::string output;
  // Fine-tuning: start from the parameters of this checkpoint that match the
  // network by name and shape ("" = a fresh initialization only). A resumed
  // run ignores it: its own checkpoint holds every parameter.
  std::string init;
};

// How convolution algorithms are timed for the workspace selector
// (layers/cpu/conv_timer.h).
struct TimingConfig {
  bool measure = true;  // false: a FLOP model
  std::string cache;    // timing cache file ("" = none)
};

// Data-parallel runs under mpirun (tools/trainer/data_parallel.h); ignored by a
// single process.
struct DistributedConfig {
  size_t bucket_bytes = 4 << 20;  // gradients fused into one allreduce
  bool sync_batch_norm = false;   // batch norm statistics of the global batch
  bool check_replicas = false;    // compare every rank's parameters after each step
  // ZeRO stage: 0 replicates the solver state on every rank; 1 shards it,
  // each rank updating its part of every parameter and the ranks then
  // all-gathering the updated parameters; 2 also lets each gradient leave
  // the device once backward has produced it and it is copied out for
  // reduction (MemoryOptions::gradients_leave); 3 also shards the
  // parameters: each rank keeps its piece of each one, and the ranks gather
  // a layer's parameters before each of its steps (forward and backward)
  // and free them after (MemoryOptions::params_gathered).
  int zero = 0;
};

struct TrainConfig {
  std::string file;             // where it was read from ("(built-in)" for the default)
  std::string text;             // the YAML text, saved into checkpoints
  std::string model_file;       // resolved path, or empty for an inline model
  std::string model_onnx;       // resolved path of an ONNX model (then run.init defaults to it)
  YAML::Node model_node;        // an inline model (its `params` are its defaults)
  std::string base_dir;         // for the inline model's includes
  ParamOverrides model_params;  // overrides of a model file's params
  DataConfig data;
  SolverConfig solver;
  ScheduleConfig schedule;
  MemoryOptions memory;
  TimingConfig timing;
  RunConfig run;
  DistributedConfig distributed;
};

StatusOr<TrainConfig> LoadTrainConfig(const std::string& path);
StatusOr<TrainConfig> ParseTrainConfig(const std::string& text, const std::string& file,
                                       const std::string& base_dir);
// The built-in default: a small CNN on Fashion-MNIST.
TrainConfig DefaultTrainConfig();

// Loads the model the config names, with its overrides plus `classes`,
// `channels`, `size` (the height) and `sequence` (the width) from the dataset
// where the model has them.
StatusOr<NetSpec> LoadModel(const TrainConfig& config, const Dataset& dataset);

}  // namespace spill

#endif  // SPILL_TOOLS_TRAINER_TRAIN_CONFIG_H_
