// A one-line progress display on stderr: a bar with the loss, accuracy,
// images per second and time left. On a terminal it redraws in place; when
// stderr is a file or a pipe it prints a line every few seconds instead.
#ifndef SPILL_TOOLS_TRAINER_PROGRESS_H_
#define SPILL_TOOLS_TRAINER_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace spill {

class Progress {
 public:
  explicit Progress(bool enabled);

  // `done` of `total` steps; the rest are shown as given.
  void Update(int64_t epoch, int64_t epochs, int64_t done, int64_t total, double loss,
              double accuracy, double images_per_second, double seconds_left);
  // Ends the current line (before printing something else).
  void Break();

 private:
  bool enabled_;
  bool tty_;
  bool open_ = false;
  std::chrono::steady_clock::time_point last_;
};

std::string FormatDuration(double seconds);

}  // namespace spill

#endif  // SPILL_TOOLS_TRAINER_PROGRESS_H_
