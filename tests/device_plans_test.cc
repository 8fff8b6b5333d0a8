// What the GPU layers decide on the host, checked without a GPU:
//   * convolution candidates are asked of the library once per geometry
//     (a second reshape of the same geometry makes no query), combined for
//     running image by image, merged with measured times (failed candidates
//     dropped), and kept within cuDNN's descriptor limits;
//   * a step computed slice by slice makes, in order, the same image-by-image
//     contributions as the step over the whole batch: the convolution's and
//     fully connected layer's per-image calls, and batch norm's sweeps with
//     their carried sums started and finished once;
//   * compaction's overlapping moves take few, large copies, or one kernel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "framework/device/downward_move.h"
#include "layers/conv_candidates.h"
#include "layers/slice_plans.h"

namespace spill {
namespace {

using ::testing::HasSubstr;
using Outcome = ConvMeasurement::Outcome;

ConvGeometry Geometry(int64_t batch) {
  ConvGeometry g;
  g.batch = batch;
  g.channels = 3;
  g.height = g.width = 8;
  g.filters = 4;
  g.out_height = g.out_width = 8;
  g.kernel = {3, 3};
  g.stride = {1, 1};
  g.pad = {1, 1};
  g.dilation = {1, 1};
  return g;
}

ConvCandidates Listed(std::vector<ConvCandidate> each) {
  ConvCandidates c;
  for (auto& op : c.ops) op = each;
  return c;
}

TEST(ConvCandidateCacheTest, ASecondReshapeOfAGeometryMakesNoQuery) {
  ConvCandidateCache cache;
  int queries = 0;
  auto query = [&](const ConvGeometry& g) -> StatusOr<ConvCandidates> {
    ++queries;
    return Listed({{1, "a", static_cast<size_t>(g.batch) * 100}});
  };
  auto first = cache.Get(Geometry(8), query);
  ASSERT_TRUE(first.ok());
  auto second = cache.Get(Geometry(8), query);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(queries, 1);
  EXPECT_EQ(second->ops[kConvForward][0].workspace, 800u);
  // Another batch, or any other difference, is another geometry.
  ConvGeometry strided = Geometry(8);
  strided.stride = {2, 2};
  ASSERT_TRUE(cache.Get(Geometry(1), query).ok());
  ASSERT_TRUE(cache.Get(strided, query).ok());
  EXPECT_EQ(queries, 3);
  EXPECT_EQ(cache.queries(), 3);
  EXPECT_EQ(cache.hits(), 1);
}

TEST(ConvCandidateCacheTest, AFailedQueryIsAskedAgain) {
  ConvCandidateCache cache;
  int queries = 0;
  auto failing = [&](const ConvGeometry&) -> StatusOr<ConvCandidates> {
    ++queries;
    return Internal("no handle");
  };
  EXPECT_FALSE(cache.Get(Geometry(2), failing).ok());
  EXPECT_FALSE(cache.Get(Geometry(2), failing).ok());
  EXPECT_EQ(queries, 2);
}

TEST(ConvCandidatesTest, ImageOrderKeepsAlgorithmsUsableBothWaysWithTheLargerWorkspace) {
  ConvCandidates whole = Listed({{0, "gemm", 0}, {2, "fft", 5000}, {4, "winograd", 300}});
  ConvCandidates image = Listed({{4, "winograd", 900}, {0, "gemm", 0}});
  const ConvCandidates both = CombineForImageOrder(whole, image);
  for (const auto& op : both.ops) {
    ASSERT_EQ(op.size(), 2u);
    EXPECT_EQ(op[0].name, "gemm");
    EXPECT_EQ(op[0].workspace, 0u);
    EXPECT_EQ(op[1].name, "winograd");  // the whole batch's order
    EXPECT_EQ(op[1].workspace, 900u);
  }
}

TEST(ConvCandidatesTest, MeasurementsReplaceEstimatesAndDropFailures) {
  const std::vector<ConvCandidate> list = {
      {0, "a", 0}, {1, "b", 100}, {2, "c", 1 << 20}, {3, "d", 50}, {4, "e", 10}};
  const std::vector<ConvMeasurement> found = {
      {0, Outcome::kRan, 3e-3}, {0, Outcome::kRan, 2e-3},  // the fastest of two counts
      {1, Outcome::kFailed, 0},                            // failed with room: dropped
      {2, Outcome::kFailed, 0},                            // not tried for want of room
      {3, Outcome::kRan, 1e-3}, {4, Outcome::kNoWorkspace, 0},
  };
  const MergedTimes merged = MergeMeasurements(list, found, /*workspace_offered=*/4096);
  ASSERT_EQ(merged.kept.size(), 4u);
  EXPECT_EQ(merged.dropped, std::vector<std::string>{"b"});
  EXPECT_TRUE(merged.measured);
  EXPECT_EQ(merged.kept[0].name, "a");
  EXPECT_EQ(merged.seconds[0], 2e-3);
  EXPECT_EQ(merged.kept[1].name, "c");
  EXPECT_EQ(merged.kept[2].name, "d");
  EXPECT_EQ(merged.seconds[2], 1e-3);
  // Unmeasured ones rank after the slowest measured, in their order.
  EXPECT_GT(merged.seconds[1], 2e-3);
  EXPECT_GT(merged.seconds[3], merged.seconds[1]);
}

TEST(ConvCandidatesTest, NothingMeasuredKeepsEveryCandidate) {
  const std::vector<ConvCandidate> list = {{0, "a", 0}, {1, "b", 100}};
  const MergedTimes merged = MergeMeasurements(list, {}, 0);
  EXPECT_FALSE(merged.measured);
  EXPECT_EQ(merged.kept.size(), 2u);
  EXPECT_TRUE(merged.dropped.empty());
}

TEST(ConvCandidatesTest, DescriptorLimitsNameTheLayerAndTheTensor) {
  ConvGeometry g = Geometry(1);
  EXPECT_TRUE(CheckDescriptorLimits("conv1", g).ok());
  // 2^31 input elements: one too many.
  g.batch = 32;
  g.channels = 64;
  g.height = g.width = 1024;
  g.out_height = g.out_width = 1;
  Status status = CheckDescriptorLimits("conv1", g);
  ASSERT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("convolution 'conv1': its input (32x64x1024x1024)"));
  EXPECT_THAT(status.message(), HasSubstr("2^31 - 1 elements"));
  g.width = 1023;  // under the limit; the output is next
  g.filters = 1 << 16;
  g.out_height = g.out_width = 256;
  status = CheckDescriptorLimits("conv2", g);
  EXPECT_THAT(status.message(), HasSubstr("'conv2': its output"));
  // A single dimension beyond int.
  ConvGeometry huge = Geometry(1);
  huge.filters = int64_t{1} << 32;
  EXPECT_THAT(CheckDescriptorLimits("conv3", huge).message(), HasSubstr("its output"));
}

// The calls a step makes over a batch of `batch`, slices of `chunk` images
// (0: one call), as the executor makes them: every slice of sweep 0, then
// of sweep 1, ...; `call` gets each slice and its image count.
template <typename Call>
void OverSlices(int64_t batch, int64_t chunk, int sweeps, Call call) {
  if (chunk == 0) {
    call(BatchSlice{}, batch);
    return;
  }
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    for (int64_t begin = 0; begin < batch; begin += chunk) {
      call(BatchSlice{begin, batch, sweep, nullptr}, std::min(chunk, batch - begin));
    }
  }
}

TEST(SlicePlansTest, ImageCallsOfSlicesAreTheWholeBatchsInOrder) {
  for (int64_t chunk : {1, 2, 3, 7}) {
    std::vector<ImageCall> calls;
    OverSlices(7, chunk, 1, [&](const BatchSlice& s, int64_t n) {
      for (const ImageCall& c : ImageCalls(s, n)) calls.push_back(c);
    });
    ASSERT_EQ(calls.size(), 7u) << chunk;
    for (int64_t i = 0; i < 7; ++i) {
      EXPECT_EQ(calls[i].image, i) << chunk;
      EXPECT_EQ(calls[i].first, i == 0) << chunk;
      EXPECT_EQ(calls[i].index, i % chunk) << chunk;
    }
  }
}

// One line per operation a call enqueues; consecutive runs of an operation
// over adjacent images merge (a carried sum continues where it stopped), so
// a sliced step and the whole step give the same lines exactly when they
// make the same contributions in the same order.
class Events {
 public:
  void Range(const char* op, int64_t begin, int64_t n, bool start) {
    if (!start && !lines_.empty() && last_op_ == op && last_end_ == begin) {
      last_end_ = begin + n;
      lines_.back() = Line(op, first_begin_, last_end_, last_start_);
      return;
    }
    last_op_ = op;
    first_begin_ = begin;
    last_end_ = begin + n;
    last_start_ = start;
    lines_.push_back(Line(op, begin, last_end_, start));
  }
  void Once(const char* op) {
    last_op_.clear();
    lines_.push_back(op);
  }
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  static std::string Line(const char* op, int64_t begin, int64_t end, bool start) {
    return std::string(op) + " [" + std::to_string(begin) + ", " + std::to_string(end) + ")" +
           (start ? " from zero" : " carried");
  }
  std::vector<std::string> lines_;
  std::string last_op_;
  int64_t first_begin_ = 0, last_end_ = 0;
  bool last_start_ = false;
};

std::vector<std::string> ForwardEvents(int64_t batch, int64_t chunk, Phase phase, bool recompute) {
  Events e;
  OverSlices(batch, chunk, kBatchNormForwardSweeps, [&](const BatchSlice& s, int64_t n) {
    const BatchNormForwardPlan p = PlanBatchNormForward(s, n, /*plane=*/4, phase, recompute);
    EXPECT_EQ(p.count, static_cast<double>(batch * 4));
    if (p.from_running) e.Once("from running");
    if (p.sums) e.Range("sums", s.begin, n, p.start);
    if (p.squares) e.Range("squares", s.begin, n, p.start);
    if (p.finish) e.Once("finish");
    if (p.normalize) e.Range("normalize", s.begin, n, false);
  });
  return e.lines();
}

std::vector<std::string> BackwardEvents(int64_t batch, int64_t chunk, bool input_grad) {
  Events e;
  OverSlices(batch, chunk, kBatchNormBackwardSweeps, [&](const BatchSlice& s, int64_t n) {
    const BatchNormBackwardPlan p = PlanBatchNormBackward(s, n, /*plane=*/4, input_grad);
    EXPECT_EQ(p.count, static_cast<double>(batch * 4));
    if (p.sums) e.Range("gradient sums", s.begin, n, p.start);
    if (p.param_grads) e.Once("parameter gradients");
    if (p.input_grad) e.Range("input gradient", s.begin, n, false);
  });
  return e.lines();
}

TEST(SlicePlansTest, BatchNormSweepsOverSlicesMakeTheWholeBatchsContributions) {
  const std::vector<std::string> training = {"sums [0, 5) from zero", "squares [0, 5) from zero",
                                             "finish", "normalize [0, 5) carried"};
  const std::vector<std::string> backward = {
      "gradient sums [0, 5) from zero", "parameter gradients", "input gradient [0, 5) carried"};
  for (int64_t chunk : {0, 1, 2, 3, 5}) {
    SCOPED_TRACE("slices of " + std::to_string(chunk));
    EXPECT_EQ(ForwardEvents(5, chunk, Phase::kTrain, false), training);
    // A recomputation normalizes with the saved statistics; evaluation with
    // the running ones, set once.
    EXPECT_EQ(ForwardEvents(5, chunk, Phase::kTrain, true),
              std::vector<std::string>{"normalize [0, 5) carried"});
    EXPECT_EQ(ForwardEvents(5, chunk, Phase::kEval, false),
              (std::vector<std::string>{"from running", "normalize [0, 5) carried"}));
    EXPECT_EQ(BackwardEvents(5, chunk, true), backward);
    EXPECT_EQ(BackwardEvents(5, chunk, false),
              (std::vector<std::string>{"gradient sums [0, 5) from zero", "parameter gradients"}));
  }
}

TEST(SlicePlansTest, ElementOffsetsPlaceASliceInTheWholeBatch) {
  EXPECT_EQ(SliceElementOffset(BatchSlice{}, 60), 0);
  EXPECT_EQ(SliceElementOffset(BatchSlice{3, 8, 0, nullptr}, 60), 180);
}

// A tensor slid down by a gap: gap-sized copies (each clear of its own
// source) while they are few or large, else one kernel - never the
// thousands of kilobyte copies a small gap under a large tensor would take.
TEST(DownwardMoveTest, FewLargeCopiesOrOneKernel) {
  constexpr size_t kKiB = 1024, kMiB = kKiB * kKiB;
  DownwardMove move = PlanDownwardMove(10 * kMiB, 4 * kMiB);  // a large gap
  EXPECT_FALSE(move.by_kernel);
  EXPECT_EQ(move.piece, 4 * kMiB);
  EXPECT_EQ(move.copies, 3u);
  move = PlanDownwardMove(64 * kKiB, 8 * kKiB);  // a small block: eight copies
  EXPECT_FALSE(move.by_kernel);
  EXPECT_EQ(move.copies, 8u);
  move = PlanDownwardMove(size_t{1} << 30, kKiB);  // a GiB moved by a KiB
  EXPECT_TRUE(move.by_kernel);
  EXPECT_EQ(move.copies, 1u);
  EXPECT_EQ(move.piece, size_t{1} << 30);
  move = PlanDownwardMove(size_t{1} << 30, kMinMoveCopyBytes);  // large copies stay copies
  EXPECT_FALSE(move.by_kernel);
  EXPECT_EQ(move.copies, 256u);
  for (size_t bytes : {size_t{1000}, 3 * kMiB + 7, size_t{1} << 28}) {
    for (size_t gap : {size_t{1}, size_t{512}, 3 * kMiB}) {
      if (gap >= bytes) continue;
      move = PlanDownwardMove(bytes, gap);
      EXPECT_LE(move.copies, std::max(kMaxMoveCopies, bytes / kMinMoveCopyBytes + 1));
      if (!move.by_kernel) {
        EXPECT_LE(move.piece, gap) << "a copy would overlap its source";
      }
      EXPECT_GE(move.piece * move.copies, bytes);
    }
  }
}

}  // namespace
}  // namespace spill
