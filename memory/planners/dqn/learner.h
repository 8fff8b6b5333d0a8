// The DQN planner's training (the paper's Algorithm 1, fitted Q-iteration
// with experience replay):
//
//   for episode e = 1..l: reset; until terminal: with probability 1 - e/l a
//   random open action, else argmax_a Q(g, s_a); step the environment;
//   store (state, action, reward, terminal); every ceil(K / 16) agent steps
//   (K candidates: about 16 updates an episode whatever the network) one
//   Adam step on a minibatch of 16 transitions drawn from the replay
//   buffer (the last 50,000), on (y - Q)^2 with y = r + gamma max_a' Q(g',
//   s_a') (y = r at a terminal state; no gradient through y).
//
// States are stored as their decisions, not as vectors, and re-embedded with
// the current weights, so the gradient reaches every weight (structure2vec's
// too). The best plan that fits over all states of all episodes is kept -
// the last episode is greedy (P(random) = 0). Single-threaded; one seed
// drives the weights, exploration and sampling, so a given network, limit
// and settings always give the same plan.
#ifndef SPILL_MEMORY_PLANNERS_DQN_LEARNER_H_
#define SPILL_MEMORY_PLANNERS_DQN_LEARNER_H_

#include <string>
#include <vector>

#include "memory/planners/dqn/environment.h"
#include "memory/planners/dqn/q_network.h"
#include "memory/planners/planner_settings.h"

namespace spill {

struct DqnTraining {
  bool feasible = false;  // a plan within the limit was found
  Decisions decisions;    // the best one (the lowest peak reached when none fits)
  double seconds = 0;     // its simulated iteration time
  size_t peak = 0;        // its peak (ideal accounting)
  int episodes = 0;       // episodes run
  int best_episode = 0;   // the first episode that reached the best plan
  double train_seconds = 0;
  int updates = 0;  // Adam steps
  // Per episode: the simulated time of its final plan (negative: it did not fit).
  std::vector<double> curve;
};

// Trains on `model` under `limit` from the weights file `start` ("": fresh
// weights from the seed); `net` and `graph` (both or neither) receive the
// trained network. With `start` and one episode, the model is applied: one
// greedy episode, no update.
//
// With a `demonstration` (another planner's plan; memory.planner.
// demonstrations), deep Q-learning from demonstrations: before the first
// episode the demonstration is played as episode 0, its plan becomes the
// best so far, and its transitions stay in a buffer of their own from which
// a quarter of every minibatch is drawn; a random action is then, half of
// the time, the best plan's choice for the tensor instead (exploration
// around the best plan). Without one, training is the paper's.
StatusOr<DqnTraining> TrainDqn(const EvalModel& model, size_t limit,
                               const PlannerSettings& settings, const std::string& start,
                               std::unique_ptr<QNetwork>* net, std::unique_ptr<OpGraph>* graph,
                               const Decisions* demonstration = nullptr);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_DQN_LEARNER_H_
