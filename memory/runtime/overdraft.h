// Overdraft (GivenPlans::overdraft, planning only): a request no room can be
// made for is placed past the budget and counted as the step's overshoot,
// so that a plan that does not fit still plays to the end.
//
// Not while a step or a rebuild is tried whole, or staging is tried at a
// slice that may still shrink: their failure decides to stream or to
// shrink. Those attempts hold overdraft back while they run.
#ifndef SPILL_MEMORY_RUNTIME_OVERDRAFT_H_
#define SPILL_MEMORY_RUNTIME_OVERDRAFT_H_

namespace spill {

class Overdraft {
 public:
  void set_allowed(bool allowed) { allowed_ = allowed; }
  // Whether a request no room can be made for may go past the budget now.
  bool may() const { return allowed_ && held_ == 0; }
  void Hold() { ++held_; }
  void Unhold() { --held_; }

  // Holds overdraft back while alive (when `hold`).
  class Scope {
   public:
    Scope(Overdraft* overdraft, bool hold) : overdraft_(hold ? overdraft : nullptr) {
      if (overdraft_ != nullptr) overdraft_->Hold();
    }
    ~Scope() {
      if (overdraft_ != nullptr) overdraft_->Unhold();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Overdraft* overdraft_;
  };

 private:
  bool allowed_ = false;
  int held_ = 0;
};

}  // namespace spill

#endif  // SPILL_MEMORY_RUNTIME_OVERDRAFT_H_
