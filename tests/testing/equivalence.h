// The equivalence checks every memory policy answers to, on any device:
// a run gives the losses and parameters of the baseline bit for bit, and
// the plan made from shapes alone equals the run step by step, event by
// event, offset by offset.
#ifndef SPILL_TESTS_TESTING_EQUIVALENCE_H_
#define SPILL_TESTS_TESTING_EQUIVALENCE_H_

#include <string>

#include "framework/config/net_spec.h"
#include "framework/device/device.h"
#include "tests/testing/net_harness.h"

namespace spill {
namespace testing {

// `trace` gave the losses and parameters of `baseline` bit for bit.
void ExpectSameMath(const TrainTrace& baseline, const TrainTrace& trace, const std::string& what);

// The same, within the baseline's peak.
void ExpectBitIdentical(const TrainTrace& baseline, const TrainTrace& trace,
                        const std::string& what);

// The plan of `run` (its network built for `device`), computed without a
// device, equals the measured run step by step: bytes in use by category,
// peaks, live tensors, transfers, recomputations and slices - and every
// allocation, free, transfer and computation, in the same order, with every
// block at the same offset. `run` must record events.
void ExpectRunAsPlanned(const NetSpec& spec, const SyntheticRun& run, const TrainTrace& measured,
                        const std::string& what, DeviceType device = DeviceType::kCpu);

}  // namespace testing
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_EQUIVALENCE_H_
