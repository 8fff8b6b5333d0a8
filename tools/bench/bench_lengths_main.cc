// bench_lengths: sequence lengths that vary from batch to batch, under the
// memory runtime's allocators - the profile-guided allocation seed's
// seq2seq experiment - from plans alone (PlanLengths runs the runtime's own
// code without a device, so the figures are a run's).
//
// A training config over sequence pairs (data.dataset: pairs) gives the
// batches: each epoch's batches, each of one length bucket
// (PairDataset::EpochBatches), padded to its longest pair (--pad batch) or
// to its bucket's bound (--pad bucket). For each allocator, --batches
// iterations are played in training and in inference; the tool prints
//   * the footprint: the highest end offset any block reached over the run,
//     the device memory a budget must cover;
//   * the largest load: the most bytes live at once, which no placement
//     beats;
//   * the iterations after --warmup that planned anew: the runtime made a
//     plan for sizes it had not seen, or the allocator left its profile
//     (the static allocator profiles again when a request grows).
//
//   bazel-bin/tools/bench/bench_lengths --config configs/seq2seq.yaml --set hidden=1024
//       --set layers=3 --set embed=1024 --batch 128 --synthetic-max-length 48 --max-length 50
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "data/pair_dataset.h"
#include "framework/base/random.h"
#include "framework/base/units.h"
#include "framework/graph/net.h"
#include "framework/graph/net_checks.h"
#include "framework/solver/solver.h"
#include "memory/memory_options.h"
#include "memory/planning/planner.h"
#include "tools/common/cli.h"
#include "tools/trainer/train_config.h"

namespace spill {
namespace {

struct Args {
  std::string config;
  ParamOverrides sets;
  int64_t batch = 0;  // 0: the config's
  int64_t batches = 1000;
  int64_t warmup = 100;
  std::string pad = "batch";
  std::string mode = "liveness";
  std::vector<std::string> allocators = {"caching", "static"};
  int64_t max_length = 0;            // 0: the config's data.max_length
  int64_t synthetic_max_length = 0;  // 0: the config's
  int64_t synthetic_pairs = 0;       // 0: the config's
};

// The lengths of `count` batches, epoch after epoch.
StatusOr<std::vector<int64_t>> BatchLengths(const PairDataset& pairs, const Args& a, int64_t batch,
                                            uint64_t seed) {
  std::vector<int64_t> lengths;
  for (uint64_t epoch = 0; static_cast<int64_t>(lengths.size()) < a.batches; ++epoch) {
    SPILL_ASSIGN_OR_RETURN(std::vector<PairBatch> batches,
                           pairs.EpochBatches(batch, MixSeed(seed, epoch)));
    for (const PairBatch& b : batches) {
      if (static_cast<int64_t>(lengths.size()) == a.batches) break;
      lengths.push_back(a.pad == "bucket" ? b.bound : b.length);
    }
  }
  return lengths;
}

struct Row {
  size_t footprint = 0;
  size_t peak = 0;
  int64_t replanned = 0;  // after the warm-up
  int64_t replans = 0;
  int64_t mismatches = 0;
};

StatusOr<Row> Play(Net& net, MemoryOptions options, const std::vector<int64_t>& lengths,
                   int64_t warmup, Phase phase) {
  const int64_t start = net.sequence_length();
  const SequenceReshaper reshape = ReshaperOf(net);
  SPILL_ASSIGN_OR_RETURN(LengthsPlan plan,
                         PlanLengths(net.view(), options, lengths, reshape, phase));
  SPILL_RETURN_IF_ERROR(net.SetSequenceLength(start));
  if (!plan.fits) return OutOfMemory(plan.failure);
  Row row;
  row.footprint = plan.footprint;
  row.peak = plan.peak;
  row.replans = plan.replans;
  row.mismatches = plan.mismatches;
  for (size_t i = static_cast<size_t>(warmup); i < plan.replanned.size(); ++i) {
    row.replanned += plan.replanned[i] ? 1 : 0;
  }
  return row;
}

std::string Bytes(size_t b) { return FormatBytes(static_cast<double>(b)); }

Status Run(const Args& a) {
  SPILL_ASSIGN_OR_RETURN(TrainConfig c, LoadTrainConfig(a.config));
  if (c.data.dataset != "pairs") {
    return InvalidArgument(a.config + ": data.dataset is '" + c.data.dataset +
                           "'; bench_lengths plays the batches of sequence pairs (pairs)");
  }
  for (const auto& [k, v] : a.sets) c.model_params[k] = v;
  PairOptions p = c.data.pairs;
  p.test_fraction = c.data.test_fraction;
  p.vocabulary = c.data.vocabulary;
  if (a.max_length > 0) p.max_length = a.max_length;
  if (a.synthetic_max_length > 0) p.synthetic_max_length = a.synthetic_max_length;
  if (a.synthetic_pairs > 0) p.synthetic_pairs = a.synthetic_pairs;
  p.bucket_bounds.clear();  // the default buckets of the (maybe new) max_length
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<PairDataset> pairs, OpenPairs(p, Split::kTrain));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Dataset> padded, OpenPairDataset(p, Split::kTrain));
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadModel(c, *padded));
  const int64_t batch = a.batch > 0 ? a.batch : c.data.batch;
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {batch, DeviceType::kCpu}));
  SPILL_ASSIGN_OR_RETURN(auto solver, Solver::Create(c.solver));
  solver->AddState(*net);
  SPILL_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, BatchLengths(*pairs, a, batch, c.run.seed));
  int64_t shortest = lengths.front(), longest = lengths.front(), changes = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    shortest = std::min(shortest, lengths[i]);
    longest = std::max(longest, lengths[i]);
    changes += i > 0 && lengths[i] != lengths[i - 1] ? 1 : 0;
  }
  std::printf("%s: %s, batch %ld, %s\n", a.config.c_str(), net->name().c_str(), batch,
              pairs->Describe().c_str());
  std::printf("%zu batches padded to their %s: lengths %ld..%ld, %ld changes of length\n",
              lengths.size(), a.pad == "bucket" ? "bucket's bound" : "longest pair", shortest,
              longest, changes);
  std::printf("memory mode %s, no budget; re-planned: iterations %ld..%zu that planned anew\n\n",
              a.mode.c_str(), a.warmup + 1, lengths.size());
  std::printf(
      "| phase | allocator | footprint | largest load | re-planned | plans | mismatches |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  for (Phase phase : {Phase::kTrain, Phase::kEval}) {
    for (const std::string& allocator : a.allocators) {
      MemoryOptions options = c.memory;
      SPILL_RETURN_IF_ERROR(ApplyMemoryMode(a.mode, &options));
      options.allocator = allocator;
      options.device_budget = kUnlimitedBudget;
      SPILL_ASSIGN_OR_RETURN(Row row, Play(*net, options, lengths, a.warmup, phase));
      const double after = static_cast<double>(lengths.size()) - static_cast<double>(a.warmup);
      std::printf("| %s | %s | %s | %s | %ld (%.1f%%) | %ld | %ld |\n",
                  phase == Phase::kTrain ? "training" : "inference", allocator.c_str(),
                  Bytes(row.footprint).c_str(), Bytes(row.peak).c_str(), row.replanned,
                  after > 0 ? 100.0 * static_cast<double>(row.replanned) / after : 0.0,
                  row.replans + 1, row.mismatches);
    }
  }
  return Status::Ok();
}

int Main(int argc, char** argv) {
  Flags flags("bench_lengths",
              "Sequence lengths that vary from batch to batch under each allocator, planned: "
              "footprint, largest load and re-planning over a run's batches.");
  Args a;
  flags.InputFile("--config", &a.config, "a training config over sequence pairs")->required();
  flags.Set(&a.sets);
  flags.Int("--batch", &a.batch, "pairs per batch (default: the config's)", 1, kMaxBatch);
  flags.Int("--batches", &a.batches, "iterations played", 1, 1 << 20);
  flags.Int("--warmup", &a.warmup, "iterations before re-planning is counted", 0, 1 << 20);
  flags.Choice("--pad", &a.pad, "a batch's length: its longest pair, or its bucket's bound",
               {"batch", "bucket"});
  flags.String("--memory", &a.mode, "memory mode");
  flags.List("--allocators", &a.allocators, "allocators compared");
  flags.Int("--max-length", &a.max_length, "data.max_length instead of the config's", 1, 1 << 20);
  flags.Int("--synthetic-max-length", &a.synthetic_max_length,
            "data.synthetic_max_length instead of the config's", 1, 1 << 20);
  flags.Int("--synthetic-pairs", &a.synthetic_pairs, "data.synthetic_pairs instead of the config's",
            1, 1 << 24);
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  if (a.warmup >= a.batches) {
    std::fprintf(stderr, "bench_lengths: --warmup must be below --batches\n");
    return 2;
  }
  return ReportStatus("bench_lengths", Run(a));
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("bench_lengths", [&] { return spill::Main(argc, argv); });
}
