#include "layers/conv_candidates.h"

#include <algorithm>

#include "framework/device/tensor.h"

namespace spill {

const char* ConvOpName(int op) {
  return op == kConvForward      ? "forward"
         : op == kConvFilterGrad ? "filter gradient"
                                 : "data gradient";
}

std::string ConvGeometryKey(const ConvGeometry& g) {
  auto pair = [](const std::array<int64_t, 2>& v) {
    return std::to_string(v[0]) + "x" + std::to_string(v[1]);
  };
  return Shape(g.batch, g.channels, g.height, g.width).ToString() + " f" +
         std::to_string(g.filters) + " k" + pair(g.kernel) + " s" + pair(g.stride) + " p" +
         pair(g.pad) + " d" + pair(g.dilation) + " g" + std::to_string(g.groups) +
         (g.input_dtype == DType::kF32 ? "" : std::string(" ") + DTypeName(g.input_dtype)) +
         (g.output_dtype == g.input_dtype ? "" : std::string("->") + DTypeName(g.output_dtype));
}

StatusOr<ConvCandidates> ConvCandidateCache::Get(const ConvGeometry& g, const Query& query) {
  const std::string key = ConvGeometryKey(g);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    ++hits_;
    return it->second;
  }
  ++queries_;
  SPILL_ASSIGN_OR_RETURN(ConvCandidates found, query(g));
  cache_.emplace(key, found);
  return found;
}

int64_t ConvCandidateCache::queries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queries_;
}

int64_t ConvCandidateCache::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

ConvCandidates CombineForImageOrder(const ConvCandidates& whole, const ConvCandidates& image) {
  ConvCandidates combined;
  for (int op = 0; op < kConvOps; ++op) {
    for (const ConvCandidate& c : whole.ops[op]) {
      for (const ConvCandidate& one : image.ops[op]) {
        if (one.algo != c.algo) continue;
        ConvCandidate both = c;
        both.workspace = std::max(c.workspace, one.workspace);
        combined.ops[op].push_back(both);
        break;
      }
    }
  }
  return combined;
}

MergedTimes MergeMeasurements(const std::vector<ConvCandidate>& candidates,
                              const std::vector<ConvMeasurement>& results,
                              size_t workspace_offered) {
  MergedTimes merged;
  std::vector<double> measured;
  std::vector<ConvCandidate> kept;
  for (const ConvCandidate& c : candidates) {
    double best = -1;
    bool failed = false;
    for (const ConvMeasurement& r : results) {
      if (r.algo != c.algo) continue;
      if (r.outcome == ConvMeasurement::Outcome::kRan && r.seconds >= 0) {
        best = best < 0 ? r.seconds : std::min(best, r.seconds);
      }
      failed = failed || r.outcome == ConvMeasurement::Outcome::kFailed;
    }
    if (best < 0 && failed && c.workspace <= workspace_offered) {
      merged.dropped.push_back(c.name);
      continue;
    }
    kept.push_back(c);
    measured.push_back(best);
  }
  double slowest = -1;
  for (double s : measured) slowest = std::max(slowest, s);
  merged.measured = slowest >= 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    // Unmeasured: after every measured candidate, keeping their order.
    const double estimate = slowest >= 0 ? slowest * static_cast<double>(2 + i) : -1;
    merged.seconds.push_back(measured[i] >= 0 ? measured[i] : estimate);
  }
  merged.kept = std::move(kept);
  return merged;
}

Status CheckDescriptorLimits(const std::string& layer, const ConvGeometry& g) {
  struct Described {
    const char* what;
    int64_t dims[4];
  };
  const Described tensors[] = {
      {"input", {g.batch, g.channels, g.height, g.width}},
      {"output", {g.batch, g.filters, g.out_height, g.out_width}},
      {"filter", {g.filters, g.channels_per_group(), g.kernel[0], g.kernel[1]}},
  };
  for (const Described& t : tensors) {
    int64_t elements = 1;
    bool over = false;
    for (int64_t d : t.dims) {
      over = over || d > kMaxDescriptorElements;
      elements = over ? elements : elements * std::max<int64_t>(d, 1);
      over = over || elements > kMaxDescriptorElements;
    }
    if (!over) continue;
    return InvalidArgument(
        "convolution '" + layer + "': its " + t.what + " (" +
        Shape(t.dims[0], t.dims[1], t.dims[2], t.dims[3]).ToString() +
        ") exceeds cuDNN's limit of 2^31 - 1 elements per tensor; lower the batch or the sizes");
  }
  return Status::Ok();
}

}  // namespace spill
