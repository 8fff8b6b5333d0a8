// The DQN planner's Q-function (the paper's Eq. 1-3) with hand-written
// backpropagation on Eigen:
//
//   s_v^{t+1} = ReLU(W1 x_v + W2 sum_{u in N(v)} s_u^t + W3 sum_{u in N(v)} ReLU(W4 w(u,v)))
//   g         = [W5 sum_v s_v^T ; W6 s_c^T]
//   Q(g, s_a) = W7 ReLU([g ; W8 s_a^T])
//
// with s^0 = 0, T = 4 rounds, W1 in R^{p x 6}, W2, W3, W5, W6, W8 in
// R^{p x p}, W4 in R^{p x 1}, W7 in R^{1 x 3p}, no biases (5p^2 + 10p
// weights). Edge weights are never negative, so the edge term is
// (W3 ReLU(W4)) times the sum of a node's edge weights, exactly.
//
// Every product is Eigen's coefficient-based lazyProduct, never its
// blocked, multi-threaded GEMM, whose blocking depends on the thread count:
// the same seed gives the same weights and the same plan in every program.
// Weights are trained by Adam on the squared error (y - Q)^2.
#ifndef SPILL_MEMORY_PLANNERS_DQN_Q_NETWORK_H_
#define SPILL_MEMORY_PLANNERS_DQN_Q_NETWORK_H_

#include <Eigen/Core>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "framework/base/status.h"
#include "memory/planners/dqn/op_graph.h"

namespace spill {

constexpr int kEmbeddingRounds = 4;  // T

using Matrix = Eigen::MatrixXf;
using Vector = Eigen::VectorXf;

struct QWeights {
  Matrix w1;                  // p x 6
  Matrix w2, w3, w5, w6, w8;  // p x p
  Vector w4;                  // p
  Vector w7;                  // 3p (a row, stored as a column)

  int p() const { return static_cast<int>(w2.rows()); }
  void Init(int p, std::mt19937_64& rng);
  void SetZero(int p);
  // Calls f(matrix) for each weight in a fixed order.
  template <typename F>
  void ForEach(F&& f) {
    for (Matrix* m : {&w1, &w2, &w3, &w5, &w6, &w8}) f(m->data(), m->size());
    f(w4.data(), w4.size());
    f(w7.data(), w7.size());
  }
};

// The embedding of every node for one state, with what backward needs.
struct Embedding {
  std::vector<Matrix> pre;  // per round: pre-activations (p x V)
  std::vector<Matrix> sum;  // per round > 0: the neighbor sums it read
  Matrix base;              // W1 x + edge term (p x V)
  Matrix s;                 // the last round's embeddings (p x V)
  Vector total;             // sum over nodes of s
  Vector g;                 // the graph state (2p)
  int current = 0;
};

class QNetwork {
 public:
  QNetwork(const OpGraph& graph, int p, uint64_t seed);

  // Embeds the state given by `open` (feature 5 of every node).
  void Embed(const std::vector<float>& open, int current, Embedding* e) const;
  // Q of the action node `a` in an embedded state.
  float Q(const Embedding& e, int a) const;
  // Adds the gradient of d_q * Q(e, a) to the accumulated gradient.
  void Backward(const Embedding& e, const std::vector<float>& open, int a, float d_q);
  // One Adam step with the accumulated gradient (scaled by 1/batch), then
  // clears it.
  void Step(float lr, int batch);

  const QWeights& weights() const { return w_; }
  Status Load(const std::string& path);
  Status Save(const std::string& path) const;

 private:
  const OpGraph& graph_;
  QWeights w_, grad_, m_, v_;
  int64_t steps_ = 0;
  Matrix static_x_;  // kStaticFeatures x V
  Vector weight_sum_;
};

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_DQN_Q_NETWORK_H_
