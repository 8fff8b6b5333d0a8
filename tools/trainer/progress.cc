#include "tools/trainer/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace spill {
namespace {

constexpr int kBarWidth = 24;
constexpr double kPlainInterval = 10.0;  // seconds between lines when not a terminal

}  // namespace

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  char buffer[32];
  if (s >= 3600) {
    std::snprintf(buffer, sizeof(buffer), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%ld:%02ld", s / 60, s % 60);
  }
  return buffer;
}

Progress::Progress(bool enabled) : enabled_(enabled), tty_(isatty(STDERR_FILENO)) {}

void Progress::Update(int64_t epoch, int64_t epochs, int64_t done, int64_t total, double loss,
                      double accuracy, double images_per_second, double seconds_left) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  bool finished = done >= total;
  if (!tty_ && !finished && open_ &&
      std::chrono::duration<double>(now - last_).count() < kPlainInterval) {
    return;
  }
  last_ = now;
  open_ = true;
  int filled = total > 0 ? static_cast<int>(kBarWidth * done / total) : 0;
  std::string bar(filled, '=');
  if (filled < kBarWidth) bar += '>' + std::string(kBarWidth - filled - 1, ' ');
  std::fprintf(stderr, "%sepoch %ld/%ld [%s] %ld/%ld  loss %.4f  acc %5.1f%%  %.0f img/s  ETA %s%s",
               tty_ ? "\r" : "", epoch, epochs, bar.c_str(), done, total, loss, 100 * accuracy,
               images_per_second, FormatDuration(seconds_left).c_str(), tty_ ? "\033[K" : "\n");
  std::fflush(stderr);
}

void Progress::Break() {
  if (enabled_ && tty_ && open_) std::fprintf(stderr, "\n");
  open_ = false;
}

}  // namespace spill
