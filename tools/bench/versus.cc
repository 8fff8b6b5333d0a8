#include "tools/bench/versus.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <vector>

#include "framework/base/units.h"
#include "memory/runtime/runtime.h"
#include "memory/sim/timeline.h"
#include "tools/common/cli.h"
#include "tools/common/timeline_tools.h"

namespace spill {
namespace {

// What one measured iteration of one side gave.
struct Measured {
  double seconds = 0;           // wall time, steps and update
  double streamed_seconds = 0;  // the streamed steps, first queued work to last
  // The copy queue's busy time. (How much of it hid under compute is not
  // measurable here: a step's measured span includes its waits for copies.)
  double copy_seconds = 0;
  double loss = 0;
};

// The wall time of the steps computed in slices: for each, from the first
// slice of work (compute or copy) tagged with the step to the last one's end.
double StreamedSeconds(const Timeline& timeline, const MemoryLog& log) {
  double total = 0;
  for (const StepRecord& record : log.steps) {
    if (record.slice_images == 0) continue;
    double begin = 1e300, end = -1e300;
    for (const TimelineSlice& s : timeline.slices) {
      if (s.step != record.step) continue;
      begin = std::min(begin, s.start);
      end = std::max(end, s.start + s.duration);
    }
    if (end > begin) total += end - begin;
  }
  return total;
}

Measured Take(const TracedRun& run) {
  const TimelineSummary summary = Summarize(run.last());
  Measured m;
  m.seconds = run.history().back().first;
  m.streamed_seconds = StreamedSeconds(run.last(), run.runtime().log());
  m.copy_seconds = summary.copy_seconds;
  m.loss = run.last_loss();
  return m;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

template <typename F>
std::vector<double> Column(const std::vector<Measured>& runs, F field) {
  std::vector<double> out;
  for (const Measured& m : runs) out.push_back(field(m));
  return out;
}

// One row: A's and B's medians of `field` and, when A's is not zero, B/A.
template <typename F>
void PrintRow(const char* what, const std::vector<Measured>& a, const std::vector<Measured>& b,
              F field) {
  const double ma = Median(Column(a, field)), mb = Median(Column(b, field));
  std::printf("%-34s %10.3f %10.3f", what, ma, mb);
  if (ma > 0) std::printf(" %8.3f", mb / ma);
  std::printf("\n");
}

void PrintSummary(const std::vector<Measured>& a, const std::vector<Measured>& b,
                  const MemoryRuntime& ra, const MemoryRuntime& rb) {
  std::vector<double> ratios;
  for (size_t i = 0; i < a.size(); ++i) ratios.push_back(b[i].seconds / a[i].seconds);
  std::printf("\n%-34s %10s %10s %8s\n", "medians over the pairs", "A", "B", "B/A");
  PrintRow("iteration, s", a, b, [](const Measured& m) { return m.seconds; });
  PrintRow("streamed steps, s", a, b, [](const Measured& m) { return m.streamed_seconds; });
  PrintRow("copies (either copy queue busy), s", a, b,
           [](const Measured& m) { return m.copy_seconds; });
  const auto fastest = [](const std::vector<Measured>& v) {
    double best = 1e300;
    for (const Measured& m : v) best = std::min(best, m.seconds);
    return best;
  };
  std::printf("%-34s %10.3f %10.3f %8.3f\n", "fastest iteration, s", fastest(a), fastest(b),
              fastest(b) / fastest(a));
  std::printf("B/A per pair: median %.3f, range %.3f-%.3f over %zu pairs\n", Median(ratios),
              *std::min_element(ratios.begin(), ratios.end()),
              *std::max_element(ratios.begin(), ratios.end()), ratios.size());
  std::printf("measured peak: A %s, B %s; steps streamed: A %d, B %d\n",
              FormatBytes(static_cast<double>(ra.run_peak())).c_str(),
              FormatBytes(static_cast<double>(rb.run_peak())).c_str(), ra.log().streamed,
              rb.log().streamed);
}

// The first iteration whose losses differ, or -1.
int FirstDifference(const std::vector<Measured>& a, const std::vector<Measured>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].loss != b[i].loss) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

StatusOr<MemoryOptions> VersusOptions(const MemoryOptions& a, const std::string& flags,
                                      const MemoryFlagsUse& use) {
  std::vector<std::string> tokens = {"bench_train"};
  std::istringstream in(flags);
  for (std::string t; in >> t;) tokens.push_back(t);
  if (tokens.size() == 1) return InvalidArgument("--versus: expected memory flags, got none");
  std::vector<char*> argv;
  for (std::string& t : tokens) argv.push_back(t.data());
  Flags parser("bench_train", "The memory flags of the run B (--versus).");
  MemoryFlags memory;
  memory.Declare(parser, use);
  if (parser.Parse(static_cast<int>(argv.size()), argv.data()) != -1) {
    return InvalidArgument("--versus '" + flags + "': expected memory flags (see above)");
  }
  MemoryOptions b = a;
  SPILL_RETURN_IF_ERROR(memory.Apply(&b));
  SPILL_RETURN_IF_ERROR(b.Validate());
  return b;
}

Status RunVersus(const VersusArgs& args, const MemoryOptions& b, const std::string& b_label,
                 Device& device) {
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<TracedRun> ra,
                         TracedRun::Create(args.spec, args.batch, device, args.a));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<TracedRun> rb,
                         TracedRun::Create(args.spec, args.batch, device, b));
  std::printf("A: %s\nB: A with %s\n", args.a_label.c_str(), b_label.c_str());
  for (int64_t i = 0; i < args.warmup; ++i) {
    SPILL_RETURN_IF_ERROR(ra->Iterate(false));
    SPILL_RETURN_IF_ERROR(rb->Iterate(false));
  }
  std::vector<Measured> a, bm;
  for (int64_t i = 0; i < args.pairs; ++i) {
    // A B, then B A: neither always runs after the other.
    TracedRun* first = i % 2 == 0 ? ra.get() : rb.get();
    TracedRun* second = i % 2 == 0 ? rb.get() : ra.get();
    SPILL_RETURN_IF_ERROR(first->Iterate(true));
    SPILL_RETURN_IF_ERROR(second->Iterate(true));
    a.push_back(Take(*ra));
    bm.push_back(Take(*rb));
    std::printf(
        "pair %ld (%s first): A %.3f s, B %.3f s, B/A %.3f; streamed steps A %.3f s, B %.3f s\n",
        static_cast<long>(i + 1), i % 2 == 0 ? "A" : "B", a.back().seconds, bm.back().seconds,
        bm.back().seconds / a.back().seconds, a.back().streamed_seconds,
        bm.back().streamed_seconds);
    std::fflush(stdout);
  }
  if (args.pairs == 0) return Status::Ok();
  PrintSummary(a, bm, ra->runtime(), rb->runtime());
  const int differs = FirstDifference(a, bm);
  if (differs >= 0) {
    std::printf("losses differ at timed iteration %d: A %.9g, B %.9g\n", differs + 1,
                a[differs].loss, bm[differs].loss);
  } else {
    std::printf("losses: the same in every iteration (last %.6f)\n", a.back().loss);
  }
  return Status::Ok();
}

}  // namespace spill
