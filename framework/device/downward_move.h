// How a device moves a block down over itself - compaction slides a tensor
// to a lower offset, the two ranges overlapping - as memmove would, in few
// large operations:
//   * copies of at most `gap` bytes (the distance moved), in order, never
//     overlap their own source, so a plain copy engine can do them; when
//     the gap is large, or the block is only a few gaps long, that is a
//     handful of large copies;
//   * when it would take many small copies (a block of gigabytes moved by a
//     kilobyte), one kernel moves it instead, in waves that read ahead of
//     what they write (framework/cuda: MoveDownAsync).
#ifndef SPILL_FRAMEWORK_DEVICE_DOWNWARD_MOVE_H_
#define SPILL_FRAMEWORK_DEVICE_DOWNWARD_MOVE_H_

#include <cstddef>

namespace spill {

// At most this many gap-sized copies, unless each is at least
// kMinMoveCopyBytes (large copies run at full bandwidth).
constexpr size_t kMaxMoveCopies = 16;
constexpr size_t kMinMoveCopyBytes = size_t{4} << 20;  // 4 MiB

struct DownwardMove {
  bool by_kernel = false;
  size_t piece = 0;   // bytes per copy, the last one shorter
  size_t copies = 0;  // copies, or 1 kernel
};

// The move of `bytes` down by `gap` bytes (0 < gap < bytes).
inline DownwardMove PlanDownwardMove(size_t bytes, size_t gap) {
  DownwardMove move;
  move.piece = gap;
  move.copies = (bytes + gap - 1) / gap;
  if (move.copies > kMaxMoveCopies && gap < kMinMoveCopyBytes) {
    move.by_kernel = true;
    move.piece = bytes;
    move.copies = 1;
  }
  return move;
}

}  // namespace spill

#endif  // SPILL_FRAMEWORK_DEVICE_DOWNWARD_MOVE_H_
