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
#ifndef SPILL_FRAMEWORK_BASE_FILES_H_
#define SPILL_FRAMEWORK_BASE_FILES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/base/status.h"

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

// Writes `text` to `path` as WriteFileAtomically does: a report or a log
// that cannot be written completely leaves the previous one as it was.
Status WriteTextFile(const std::string& path, const std::string& text, const std::string& what);

// Writes `bytes` to `path` through `path`.tmp, synced and renamed over it, so
// that `path` holds either its old content or all of the new. On failure the
// temporary file is removed and the error says why (WriteError).
Status WriteFileAtomically(const std::string& path, const std::string& bytes,
                           const std::string& what);
// The error of an atomic write of `path` that failed with `error` (an errno
// value): names the file and the reason - a full disk (ENOSPC), a file larger
// than the process may write (EFBIG, `ulimit -f`), a quota - and says that the
// file was left as it was.
Status WriteError(const std::string& path, const std::string& what, int error);
// Ok when an atomic writer may rename a file over `path`: nothing is there or
// a regular file is (a rename would replace a FIFO or a device node itself).
Status CheckReplaceable(const std::string& path, const std::string& what);

// A log that grows a line at a time (train's log.jsonl). Each line reaches
// the file whole or not at all: a write that fails (a full disk) is cut back
// to the end of the previous line and reported at once, naming the file and
// the reason, so the lines already there stay readable and a resumed run
// appends after them.
class LineLog {
 public:
  LineLog() = default;
  LineLog(const LineLog&) = delete;
  LineLog& operator=(const LineLog&) = delete;
  ~LineLog();
  // Opens `path`, emptied or (`append`) kept; an empty path writes nowhere.
  Status Open(const std::string& path, bool append, const std::string& what);
  // Appends `line` and a newline.
  Status Append(const std::string& line);

 private:
  int fd_ = -1;
  std::string path_, what_;
  int64_t size_ = 0;  // bytes of whole lines
};

// Creates `path` and its parents as folders; an error when something else is
// in the way or the location is not writable.
Status CreateOutputFolder(const std::string& path, const std::string& what);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_BASE_FILES_H_
