#include "memory/planners/dqn/learner.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

namespace spill {
namespace {

constexpr int kBatch = 16;
constexpr int kUpdatesPerEpisode = 16;
constexpr size_t kReplayCapacity = 50000;
constexpr uint64_t kExplorationStream = 0x9e3779b97f4a7c15ULL;  // apart from the weights' seed
// With a demonstration: the share of a minibatch drawn from its transitions,
// and of random actions that follow the best plan so far instead.
constexpr double kDemonstrationShare = 0.25;
constexpr double kFollowBest = 0.5;

struct Transition {
  Prefix prefix;  // decisions before it; its length is the candidate decided
  uint8_t action;
  float reward;
  bool terminal;
};

class Learner {
 public:
  // `learn` false: one greedy episode with the weights as they are.
  Learner(const EvalModel& model, size_t limit, const PlannerSettings& settings,
          const OpGraph& graph, QNetwork& net, bool learn, const Decisions* demonstration)
      : model_(model),
        settings_(settings),
        learn_(learn),
        demonstration_(demonstration),
        env_(model, limit, graph),
        net_(net),
        rng_(settings.seed ^ kExplorationStream) {}

  DqnTraining Run() {
    const auto start = std::chrono::steady_clock::now();
    DqnTraining out;
    const int k = env_.num_candidates();
    const int every = std::max(1, (k + kUpdatesPerEpisode - 1) / kUpdatesPerEpisode);
    int steps = 0;
    env_.Reset();
    if (env_.done()) {  // nothing to decide: everything kept fits, or nothing can go
      Keep(0, &out);
      return out;
    }
    if (demonstration_ != nullptr) Demonstrate(&out);
    for (int episode = 1; episode <= settings_.episodes; ++episode) {
      env_.Reset();
      const double explore = 1.0 - static_cast<double>(episode) / settings_.episodes;
      while (!env_.done()) {
        Remember(Play(Choose(explore, out)));
        Keep(episode, &out);
        if (learn_ && ++steps % every == 0 && replay_.size() >= kBatch) Update(&out.updates);
      }
      out.episodes = episode;
      out.curve.push_back(env_.fits() ? env_.seconds() : -env_.seconds());
    }
    out.train_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  }

 private:
  // The current state's plan, if it is the best so far: the fastest that
  // fits, or while none does the lowest peak.
  void Keep(int episode, DqnTraining* out) {
    const bool better = out->decisions.empty() || (env_.fits() && !out->feasible) ||
                        (env_.fits() == out->feasible &&
                         (env_.fits() ? env_.seconds() < out->seconds : env_.peak() < out->peak));
    if (!better) return;
    out->feasible = env_.fits();
    out->decisions = env_.decisions();
    out->seconds = env_.seconds();
    out->peak = env_.peak();
    out->best_episode = episode;
  }

  // Episode 0: the demonstration's choice for every candidate (keep where
  // the choice is not open to the agent).
  void Demonstrate(DqnTraining* out) {
    env_.Reset();
    while (!env_.done()) {
      demonstrations_.push_back(
          Play(OpenOrKeep(env_.k(), (*demonstration_)[Candidate(env_.k())].choice)));
      Keep(0, out);
    }
  }

  // Takes action `a` in the current state: the transition it made.
  Transition Play(TensorChoice a) {
    Transition t{env_.prefix(), static_cast<uint8_t>(a), 0, false};
    t.reward = static_cast<float>(env_.Step(a));
    t.terminal = env_.done();
    return t;
  }

  TensorId Candidate(int k) const { return model_.candidates[k]; }

  TensorChoice OpenOrKeep(int k, TensorChoice choice) const {
    const std::vector<TensorChoice> actions = env_.Actions(k);
    return std::find(actions.begin(), actions.end(), choice) != actions.end() ? choice
                                                                              : TensorChoice::kKeep;
  }

  TensorChoice Choose(double explore, const DqnTraining& best) {
    const int k = env_.k();
    const std::vector<TensorChoice> actions = env_.Actions(k);
    if (Uniform() < explore) {
      if (demonstration_ != nullptr && Uniform() < kFollowBest) {
        return OpenOrKeep(k, best.decisions[Candidate(k)].choice);
      }
      return actions[rng_() % actions.size()];
    }
    env_.OpenFeatures(env_.prefix(), k, &open_);
    net_.Embed(open_, env_.CurrentNode(k), &embedding_);
    return Best(embedding_, k, actions, nullptr);
  }

  // The action with the highest Q (the first among equals).
  TensorChoice Best(const Embedding& e, int k, const std::vector<TensorChoice>& actions, float* q) {
    TensorChoice best = actions.front();
    float best_q = 0;
    for (size_t i = 0; i < actions.size(); ++i) {
      const float value = net_.Q(e, env_.ActionNode(k, actions[i]));
      if (i == 0 || value > best_q) {
        best = actions[i];
        best_q = value;
      }
    }
    if (q != nullptr) *q = best_q;
    return best;
  }

  void Remember(Transition t) {
    if (replay_.size() < kReplayCapacity) {
      replay_.push_back(std::move(t));
    } else {
      replay_[next_] = std::move(t);
      next_ = (next_ + 1) % kReplayCapacity;
    }
  }

  void Update(int* updates) {
    for (int b = 0; b < kBatch; ++b) {
      const bool demonstrated = !demonstrations_.empty() && Uniform() < kDemonstrationShare;
      const Transition& t = demonstrated ? demonstrations_[rng_() % demonstrations_.size()]
                                         : replay_[rng_() % replay_.size()];
      const int k = static_cast<int>(t.prefix.size());
      float y = t.reward;
      if (!t.terminal) {
        Prefix next = t.prefix;
        next.push_back(t.action);
        env_.OpenFeatures(next, k + 1, &open_);
        net_.Embed(open_, env_.CurrentNode(k + 1), &embedding_);
        float best = 0;
        Best(embedding_, k + 1, env_.Actions(k + 1), &best);
        y += static_cast<float>(settings_.gamma) * best;
      }
      env_.OpenFeatures(t.prefix, k, &open_);
      net_.Embed(open_, env_.CurrentNode(k), &embedding_);
      const int node = env_.ActionNode(k, static_cast<TensorChoice>(t.action));
      const float q = net_.Q(embedding_, node);
      net_.Backward(embedding_, open_, node, 2.0f * (q - y));
    }
    net_.Step(static_cast<float>(settings_.lr), kBatch);
    ++*updates;
  }

  double Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

  const EvalModel& model_;
  const PlannerSettings& settings_;
  const bool learn_;
  const Decisions* demonstration_;
  std::vector<Transition> demonstrations_;  // episode 0's, kept
  DqnEnvironment env_;
  QNetwork& net_;
  std::mt19937_64 rng_;
  std::vector<Transition> replay_;
  size_t next_ = 0;
  std::vector<float> open_;
  Embedding embedding_;
};

}  // namespace

StatusOr<DqnTraining> TrainDqn(const EvalModel& model, size_t limit,
                               const PlannerSettings& settings, const std::string& start,
                               std::unique_ptr<QNetwork>* net_out,
                               std::unique_ptr<OpGraph>* graph_out,
                               const Decisions* demonstration) {
  SPILL_CHECK((net_out == nullptr) == (graph_out == nullptr)) << "the network reads its graph";
  auto graph = std::make_unique<OpGraph>(BuildOpGraph(model, limit));
  auto net = std::make_unique<QNetwork>(*graph, settings.embedding, settings.seed);
  if (!start.empty()) SPILL_RETURN_IF_ERROR(net->Load(start));
  // A trained model given one episode is applied, not trained further.
  const bool apply = !start.empty() && settings.episodes == 1;
  Learner learner(model, limit, settings, *graph, *net, !apply, apply ? nullptr : demonstration);
  DqnTraining training = learner.Run();
  if (net_out != nullptr) *net_out = std::move(net);
  if (graph_out != nullptr) *graph_out = std::move(graph);
  return training;
}

}  // namespace spill
