#include "memory/planners/dqn/q_network.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace spill {
namespace {

constexpr int kFeatures = kStaticFeatures + 1;
constexpr float kAdamBeta1 = 0.9f, kAdamBeta2 = 0.999f, kAdamEpsilon = 1e-8f;
constexpr float kMaxGradientNorm = 10.0f;  // global norm, per step
constexpr char kWeightsHeader[] = "spill-dqn-weights";

Matrix Relu(const Matrix& x) { return x.cwiseMax(0.0f); }

void Uniform(Matrix* m, int rows, int cols, float bound, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-bound, bound);
  m->resize(rows, cols);
  for (int j = 0; j < cols; ++j) {
    for (int i = 0; i < rows; ++i) (*m)(i, j) = u(rng);
  }
}

}  // namespace

void QWeights::Init(int p, std::mt19937_64& rng) {
  const float square = 1.0f / std::sqrt(static_cast<float>(p));
  Uniform(&w1, p, kFeatures, 1.0f / std::sqrt(static_cast<float>(kFeatures)), rng);
  for (Matrix* m : {&w2, &w3, &w5, &w6, &w8}) Uniform(m, p, p, square, rng);
  Matrix column;
  Uniform(&column, p, 1, 1.0f, rng);
  w4 = column.col(0);
  Uniform(&column, 3 * p, 1, 1.0f / std::sqrt(3.0f * p), rng);
  w7 = column.col(0);
}

void QWeights::SetZero(int p) {
  w1 = Matrix::Zero(p, kFeatures);
  for (Matrix* m : {&w2, &w3, &w5, &w6, &w8}) *m = Matrix::Zero(p, p);
  w4 = Vector::Zero(p);
  w7 = Vector::Zero(3 * p);
}

QNetwork::QNetwork(const OpGraph& graph, int p, uint64_t seed) : graph_(graph) {
  std::mt19937_64 rng(seed);
  w_.Init(p, rng);
  grad_.SetZero(p);
  m_.SetZero(p);
  v_.SetZero(p);
  const int nodes = graph.num_nodes;
  static_x_.resize(kStaticFeatures, nodes);
  weight_sum_.resize(nodes);
  for (int v = 0; v < nodes; ++v) {
    for (int f = 0; f < kStaticFeatures; ++f) {
      static_x_(f, v) = graph.features[static_cast<size_t>(v) * kStaticFeatures + f];
    }
    weight_sum_(v) = graph.weight_sum[v];
  }
}

namespace {

// Sums each node's neighbors' columns (itself included).
void NeighborSum(const OpGraph& graph, const Matrix& s, Matrix* out) {
  out->setZero(s.rows(), s.cols());
  for (int v = 0; v < graph.num_nodes; ++v) {
    for (int i = graph.neighbor_start[v]; i < graph.neighbor_start[v + 1]; ++i) {
      out->col(v) += s.col(graph.neighbors[i]);
    }
  }
}

}  // namespace

void QNetwork::Embed(const std::vector<float>& open, int current, Embedding* e) const {
  const int p = w_.p();
  const Eigen::Map<const Eigen::RowVectorXf> open_row(open.data(), graph_.num_nodes);
  const Vector edge = w_.w3.lazyProduct(w_.w4.cwiseMax(0.0f));
  e->base.noalias() = w_.w1.leftCols(kStaticFeatures).lazyProduct(static_x_);
  e->base.noalias() += w_.w1.col(kStaticFeatures).lazyProduct(open_row);
  e->base.noalias() += edge.lazyProduct(weight_sum_.transpose());
  e->pre.resize(kEmbeddingRounds);
  e->sum.resize(kEmbeddingRounds);
  e->pre[0] = e->base;
  e->s = Relu(e->pre[0]);
  for (int t = 1; t < kEmbeddingRounds; ++t) {
    NeighborSum(graph_, e->s, &e->sum[t]);
    e->pre[t] = e->base;
    e->pre[t].noalias() += w_.w2.lazyProduct(e->sum[t]);
    e->s = Relu(e->pre[t]);
  }
  e->total = e->s.rowwise().sum();
  e->current = current;
  e->g.resize(2 * p);
  e->g.head(p).noalias() = w_.w5.lazyProduct(e->total);
  e->g.tail(p).noalias() = w_.w6.lazyProduct(e->s.col(current));
}

float QNetwork::Q(const Embedding& e, int a) const {
  const int p = w_.p();
  Vector z(3 * p);
  z.head(2 * p) = e.g;
  z.tail(p).noalias() = w_.w8.lazyProduct(e.s.col(a));
  return w_.w7.dot(z.cwiseMax(0.0f));
}

void QNetwork::Backward(const Embedding& e, const std::vector<float>& open, int a, float d_q) {
  const int p = w_.p();
  Vector z(3 * p);
  z.head(2 * p) = e.g;
  z.tail(p).noalias() = w_.w8.lazyProduct(e.s.col(a));
  const Vector h = z.cwiseMax(0.0f);
  grad_.w7 += d_q * h;
  const Vector dz = (d_q * w_.w7).cwiseProduct((z.array() > 0).cast<float>().matrix());
  grad_.w5.noalias() += dz.head(p).lazyProduct(e.total.transpose());
  grad_.w6.noalias() += dz.segment(p, p).lazyProduct(e.s.col(e.current).transpose());
  grad_.w8.noalias() += dz.tail(p).lazyProduct(e.s.col(a).transpose());
  const Vector d_total = w_.w5.transpose().lazyProduct(dz.head(p));
  Matrix ds = d_total.replicate(1, graph_.num_nodes);
  ds.col(e.current).noalias() += w_.w6.transpose().lazyProduct(dz.segment(p, p));
  ds.col(a).noalias() += w_.w8.transpose().lazyProduct(dz.tail(p));
  Matrix d_base = Matrix::Zero(p, graph_.num_nodes);
  Matrix d_pre, d_sum;
  for (int t = kEmbeddingRounds - 1; t >= 0; --t) {
    d_pre = ds.cwiseProduct((e.pre[t].array() > 0).cast<float>().matrix());
    d_base += d_pre;
    if (t == 0) break;
    grad_.w2.noalias() += d_pre.lazyProduct(e.sum[t].transpose());
    d_sum.noalias() = w_.w2.transpose().lazyProduct(d_pre);
    NeighborSum(graph_, d_sum, &ds);  // the neighbor relation is symmetric
  }
  const Eigen::Map<const Vector> open_col(open.data(), graph_.num_nodes);
  grad_.w1.leftCols(kStaticFeatures).noalias() += d_base.lazyProduct(static_x_.transpose());
  grad_.w1.col(kStaticFeatures).noalias() += d_base.lazyProduct(open_col);
  const Vector c = d_base.lazyProduct(weight_sum_);
  const Vector r = w_.w4.cwiseMax(0.0f);
  grad_.w3.noalias() += c.lazyProduct(r.transpose());
  const Vector dr = w_.w3.transpose().lazyProduct(c);
  grad_.w4 += dr.cwiseProduct((w_.w4.array() > 0).cast<float>().matrix());
}

void QNetwork::Step(float lr, int batch) {
  const float scale = 1.0f / static_cast<float>(std::max(batch, 1));
  double norm2 = 0;
  grad_.ForEach([&](float* g, int64_t n) {
    for (int64_t i = 0; i < n; ++i) norm2 += static_cast<double>(g[i] * scale) * (g[i] * scale);
  });
  const float norm = static_cast<float>(std::sqrt(norm2));
  const float clip = norm > kMaxGradientNorm ? kMaxGradientNorm / norm : 1.0f;
  ++steps_;
  const float c1 = 1.0f - std::pow(kAdamBeta1, static_cast<float>(steps_));
  const float c2 = 1.0f - std::pow(kAdamBeta2, static_cast<float>(steps_));
  std::vector<float*> grads, firsts, seconds;
  std::vector<int64_t> sizes;
  grad_.ForEach([&](float* g, int64_t n) {
    grads.push_back(g);
    sizes.push_back(n);
  });
  m_.ForEach([&](float* m, int64_t) { firsts.push_back(m); });
  v_.ForEach([&](float* v, int64_t) { seconds.push_back(v); });
  size_t k = 0;
  w_.ForEach([&](float* w, int64_t n) {
    float *g = grads[k], *m = firsts[k], *v = seconds[k];
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i] * scale * clip;
      m[i] = kAdamBeta1 * m[i] + (1 - kAdamBeta1) * gi;
      v[i] = kAdamBeta2 * v[i] + (1 - kAdamBeta2) * gi * gi;
      w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + kAdamEpsilon);
      g[i] = 0;
    }
    ++k;
  });
}

Status QNetwork::Save(const std::string& path) const {
  std::ostringstream text;
  text << kWeightsHeader << " p=" << w_.p() << "\n";
  char number[32];
  QWeights copy = w_;
  copy.ForEach([&](float* w, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      std::snprintf(number, sizeof(number), "%.9g", w[i]);
      text << number << (i + 1 < n ? " " : "\n");
    }
  });
  std::ofstream out(path, std::ios::trunc);
  out << text.str();
  out.close();
  if (!out) return InvalidArgument("cannot write the planner's weights to '" + path + "'");
  return Status::Ok();
}

Status QNetwork::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("memory.planner.model: cannot read '" + path + "'");
  std::string header, width;
  in >> header >> width;
  const std::string expected = "p=" + std::to_string(w_.p());
  if (header != kWeightsHeader || width.rfind("p=", 0) != 0) {
    return InvalidArgument("memory.planner.model: '" + path +
                           "' is not a DQN planner's weights file (no '" + kWeightsHeader +
                           "' header)");
  }
  if (width != expected) {
    return InvalidArgument("memory.planner.model: '" + path + "' has embedding " + width.substr(2) +
                           "; memory.planner.embedding is " + std::to_string(w_.p()));
  }
  bool ok = true;
  QWeights loaded = w_;
  loaded.ForEach([&](float* w, int64_t n) {
    for (int64_t i = 0; i < n && ok; ++i) ok = static_cast<bool>(in >> w[i]) && std::isfinite(w[i]);
  });
  if (!ok) {
    return InvalidArgument("memory.planner.model: '" + path +
                           "' ends early or holds a value that is not a finite number");
  }
  w_ = loaded;
  return Status::Ok();
}

}  // namespace spill
