// The cost model: the seconds of every computation of an iteration, either
// measured on the device (StepTimes, cached like convolution timings) or
// from a roofline model of the layers' declared work under a device profile.
//
//   measured  a step's seconds as timed in a real run, keyed by the layer,
//             the pass and the algorithms the step ran; a step whose
//             algorithms were not measured is adjusted from a measured one
//             by the difference of the algorithms' timed candidates
//   model     max(flops / achieved FLOP/s, bytes / achieved bandwidth) +
//             host bytes over the link + the profile's per-kernel cost,
//             scaled by the chosen algorithms' slowdown against the fastest
//             candidates
//
// A recomputation costs its layer's forward under the algorithms its forward
// ran (chains cost each layer they rerun: the event log lists every one).
// Copies cost latency + bytes / bandwidth per direction (timeline.cc).
#ifndef SPILL_MEMORY_SIM_COST_MODEL_H_
#define SPILL_MEMORY_SIM_COST_MODEL_H_

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "framework/schedule/network_view.h"
#include "memory/memory_log.h"
#include "memory/sim/device_profile.h"

namespace spill {

// Per-step seconds measured on a device. Samples of the same key average.
class StepTimes {
 public:
  void Add(const std::string& layer, Pass pass, const std::string& algorithms, double seconds);
  void AddUpdate(double seconds);
  // The host's own time between two computations (the runtime's
  // bookkeeping), typical of an iteration.
  void AddHostStep(double seconds);
  // Mean seconds of the key; negative when never measured.
  double Find(const std::string& layer, Pass pass, const std::string& algorithms) const;
  // Any measured algorithms of (layer, pass), or false.
  bool FindAny(const std::string& layer, Pass pass, std::string* algorithms, double* seconds) const;
  double update_seconds() const;     // negative when never measured
  double host_step_seconds() const;  // negative when never measured
  // Takes every key of `newer`, replacing what this holds for it.
  void Replace(const StepTimes& newer);
  bool empty() const { return samples_.empty(); }
  size_t size() const { return samples_.size(); }

  // The cache file: one line per key, "signature<TAB>layer<TAB>pass<TAB>
  // algorithms<TAB>seconds<TAB>samples" (the update is layer "<update>").
  // Load reads the lines of `signature`; a missing file is empty. Save
  // rewrites the file with this signature's lines replaced.
  static StatusOr<StepTimes> Load(const std::string& path, const std::string& signature);
  Status Save(const std::string& path, const std::string& signature) const;

 private:
  using Key = std::tuple<std::string, int, std::string>;
  struct Sum {
    double seconds = 0;
    int count = 0;
  };
  std::map<Key, Sum> samples_;
};

// What identifies a network's step times: every layer's name and type and
// every tensor's shape, element type and layout but the solver's state,
// hashed (network files with the same name but other parameters differ, and
// so do precisions and layouts; solvers do not).
std::string NetworkSignature(const NetworkView& view);

// The costs of one iteration of a plan.
struct IterationCosts {
  std::vector<double> step_seconds;       // by step; 0 for inactive steps
  std::vector<double> recompute_seconds;  // by layer: its forward as its forward ran
  std::vector<bool> sync_after;           // by step: the host reads results back (losses)
  double update_seconds = 0;              // the solver's update after the last step
  double host_step_seconds = 0;           // the host's bookkeeping before each computation
  int measured = 0;                       // steps timed on the device
  int modelled = 0;                       // steps from the model
  std::string Source() const;             // "measured", "model", or both with counts
};

// Costs of the iteration `log` records (its per-step algorithms) under
// `profile`; `measured` (may be null) supplies measured steps first.
IterationCosts ModelCosts(const NetworkView& view, const MemoryLog& log,
                          const DeviceProfile& profile, const StepTimes* measured);

// The roofline seconds of `work` under `profile` (one computation).
double RooflineSeconds(const LayerWork& work, const DeviceProfile& profile);

}  // namespace spill

#endif  // SPILL_MEMORY_SIM_COST_MODEL_H_
