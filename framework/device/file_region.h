// Host memory backed by a file: the host tier that lets offloaded tensors and
// persistent state exceed RAM (`memory.host_tier: file:DIR`).
//
// The region is a shared mapping of a temporary file created in the
// directory and unlinked at once, so nothing is left behind when the program
// ends, however it ends. The page cache keeps in RAM what fits. Disk space is
// claimed with posix_fallocate as the region is used (in chunks, like
// page-locking), so a full disk is an error at the moment the space is
// claimed - never a SIGBUS when a page is first written.
#ifndef SPILL_FRAMEWORK_DEVICE_FILE_REGION_H_
#define SPILL_FRAMEWORK_DEVICE_FILE_REGION_H_

#include <cstddef>
#include <string>

#include "framework/base/status.h"

namespace spill {

struct FileRegion {
  void* base = nullptr;
  size_t bytes = 0;    // the mapping's size
  size_t claimed = 0;  // disk space allocated so far, from the start
  int fd = -1;
  std::string directory;
};

// Maps `bytes` of a new unlinked file in `directory`. Errors name the
// directory and the reason (missing, not a directory, not writable, no
// address space).
StatusOr<FileRegion> MapFileRegion(size_t bytes, const std::string& directory);
// Claims disk space for the region's first `bytes` (rounded up to whole
// chunks of kHostPinChunkBytes, never past the region). kOutOfMemory when
// the disk is full, saying how much was claimed and where.
Status ClaimFileRegion(FileRegion* region, size_t bytes);
void UnmapFileRegion(FileRegion* region);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_DEVICE_FILE_REGION_H_
