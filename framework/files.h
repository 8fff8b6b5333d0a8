// The files a user names: configs, networks, datasets, checkpoints, and the
// reports, plots, logs and folders the tools write.
//
// Policy: a file that is read is first opened without blocking and checked to
// be a regular file, so a folder, a FIFO or a device where a file belongs is
// an error that names it instead of a hang or an exception. Reads have a size
// ceiling. An output is checked before the work starts (its folder exists and
// is writable, the path is not a folder, a FIFO, a device or a socket - a
// write would block or an atomic rename would replace the node itself - and
// it is none of the tool's inputs and no other output), so a run never
// computes for an hour and then fails to save or overwrites what the user
// had; a write reports failure, with its reason, instead of exiting 0, and
// leaves no temporary file behind. `what` names the file for messages:
// "--report", "network file", ...
#ifndef SPILL_FRAMEWORK_FILES_H_
#define SPILL_FRAMEWORK_FILES_H_

#include <cstddef>
#include <string>
#include <vector>

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
// writable, and `path` is absent or a regular file. Creates nothing.
Status CheckOutputFile(const std::string& path, const std::string& what);

// A file a tool reads or writes, for the checks below ("" paths are skipped).
struct NamedFile {
  std::string what;  // "--config", "the run's checkpoint", ...
  std::string path;
};
// Whether two paths name the same file: the same inode when both exist, the
// same normalized absolute path (symbolic links of existing folders resolved)
// otherwise.
bool SameFile(const std::string& a, const std::string& b);
// No output is one of the inputs or another output: an error naming both.
Status CheckDistinctFiles(const std::vector<NamedFile>& inputs,
                          const std::vector<NamedFile>& outputs);

// Writes `text` to `path` (replacing it) and reports any failure, including
// one that only shows when the file is closed (a full disk).
Status WriteTextFile(const std::string& path, const std::string& text, const std::string& what);

// Writes `bytes` to `path` through `path`.tmp, synced and renamed over it, so
// that `path` holds either its old content or all of the new. On failure the
// temporary file is removed and the error says why (a full disk: ENOSPC).
Status WriteFileAtomically(const std::string& path, const std::string& bytes,
                           const std::string& what);
// Ok when an atomic writer may rename a file over `path`: nothing is there or
// a regular file is (a rename would replace a FIFO or a device node itself).
Status CheckReplaceable(const std::string& path, const std::string& what);

// Creates `path` and its parents as folders; an error when something else is
// in the way or the location is not writable.
Status CreateOutputFolder(const std::string& path, const std::string& what);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_FILES_H_
