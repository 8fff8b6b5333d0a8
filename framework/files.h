// The files a user names: configs, networks, datasets, checkpoints, and the
// reports, plots, logs and folders the tools write.
//
// Policy: a file that is read is first opened without blocking and checked to
// be a regular file, so a folder, a FIFO or a device where a file belongs is
// an error that names it instead of a hang or an exception. Reads have a size
// ceiling. An output is checked before the work starts (its folder exists and
// is writable, the path is not a folder), so a run never computes for an hour
// and then fails to save; a write reports failure instead of exiting 0.
// `what` names the file for messages: "--report", "network file", ...
#ifndef SPILL_FRAMEWORK_FILES_H_
#define SPILL_FRAMEWORK_FILES_H_

#include <cstddef>
#include <string>

#include "framework/status.h"

namespace spill {

// Opens `path` for reading; fails unless it is a regular file. Returns a file
// descriptor in blocking mode that the caller closes.
StatusOr<int> OpenRegularFile(const std::string& path, const std::string& what);

// Ok when `path` is a regular file that can be opened for reading.
Status CheckRegularFile(const std::string& path, const std::string& what);

// The whole content of a regular file of at most `max_bytes` bytes.
StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes,
                                       const std::string& what);

// Ok when `path` can be created or overwritten: its folder exists and is
// writable, and `path` is not a folder. Creates nothing.
Status CheckOutputFile(const std::string& path, const std::string& what);

// Writes `text` to `path` (replacing it) and reports any failure, including
// one that only shows when the file is closed (a full disk).
Status WriteTextFile(const std::string& path, const std::string& text, const std::string& what);

// Creates `path` and its parents as folders; an error when something else is
// in the way or the location is not writable.
Status CreateOutputFolder(const std::string& path, const std::string& what);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_FILES_H_
