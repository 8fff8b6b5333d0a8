#include "framework/base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>

namespace spill {
namespace {

namespace fs = std::filesystem;

std::string Named(const std::string& what, const std::string& path) {
  return what.empty() ? "'" + path + "'" : what + " '" + path + "'";
}

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Status OpenError(const std::string& path, const std::string& what, int error) {
  if (error == ENOENT) return NotFound(Named(what, path) + " does not exist");
  return IoError("cannot open " + Named(what, path) + ": " + std::strerror(error));
}

// The folder a new file at `path` would be created in.
std::string ParentOf(const std::string& path) {
  std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

StatusOr<int> OpenRegularFile(const std::string& path, const std::string& what) {
  if (path.empty()) return InvalidArgument(what + ": empty file name");
  // O_NONBLOCK: opening a FIFO must not wait for a writer before we can look.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return OpenError(path, what, errno);
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    return OpenError(path, what, error);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return InvalidArgument(Named(what, path) + " is " + KindOf(info.st_mode) +
                           "; expected a regular file");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

Status CheckRegularFile(const std::string& path, const std::string& what) {
  SPILL_ASSIGN_OR_RETURN(int fd, OpenRegularFile(path, what));
  ::close(fd);
  return Status::Ok();
}

StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes,
                                       const std::string& what) {
  SPILL_ASSIGN_OR_RETURN(int fd, OpenRegularFile(path, what));
  struct stat info;
  if (::fstat(fd, &info) == 0 && static_cast<uint64_t>(info.st_size) > max_bytes) {
    ::close(fd);
    return InvalidArgument(Named(what, path) + " has " + std::to_string(info.st_size) +
                           " bytes; the limit is " + std::to_string(max_bytes));
  }
  std::string text;
  Status status;
  try {
    char buffer[1 << 16];
    while (true) {
      const ssize_t got = ::read(fd, buffer, sizeof(buffer));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        status = IoError("cannot read " + Named(what, path) + ": " + std::strerror(errno));
        break;
      }
      if (got == 0) break;
      if (text.size() + static_cast<size_t>(got) > max_bytes) {
        status = InvalidArgument(Named(what, path) + " grew past the limit of " +
                                 std::to_string(max_bytes) + " bytes while being read");
        break;
      }
      text.append(buffer, static_cast<size_t>(got));
    }
  } catch (const std::bad_alloc&) {
    status = OutOfMemory("not enough memory to read " + Named(what, path));
  }
  ::close(fd);
  if (!status.ok()) return status;
  return text;
}

Status CheckOutputFile(const std::string& path, const std::string& what) {
  if (path.empty()) return InvalidArgument(what + ": empty file name");
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) {
      return InvalidArgument(Named(what, path) + " is a folder; expected a file name");
    }
    SPILL_RETURN_IF_ERROR(CheckReplaceable(path, what));
    if (::access(path.c_str(), W_OK) != 0) {
      return IoError("cannot write " + Named(what, path) + ": " + std::strerror(errno));
    }
  }
  // The file is replaced by renaming a new one over it, made in its folder.
  const std::string parent = ParentOf(path);
  if (::stat(parent.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return NotFound("cannot write " + Named(what, path) + ": the folder '" + parent +
                    "' does not exist");
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    return IoError("cannot write " + Named(what, path) + ": the folder '" + parent +
                   "' is not writable (" + std::strerror(errno) + ")");
  }
  return Status::Ok();
}

Status CheckReplaceable(const std::string& path, const std::string& what) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || S_ISREG(info.st_mode)) return Status::Ok();
  return InvalidArgument(Named(what, path) + " is " + KindOf(info.st_mode) +
                         "; an output must be a regular file (or a new name)");
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat x, y;
  if (::stat(a.c_str(), &x) == 0 && ::stat(b.c_str(), &y) == 0) {
    return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
  }
  std::error_code e1, e2;
  const fs::path p = fs::weakly_canonical(fs::absolute(a, e1), e1);
  const fs::path q = fs::weakly_canonical(fs::absolute(b, e2), e2);
  return !e1 && !e2 ? p == q : fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
}

Status CheckDistinctFiles(const std::vector<NamedFile>& inputs,
                          const std::vector<NamedFile>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedFile& out = outputs[i];
    if (out.path.empty()) continue;
    for (const NamedFile& in : inputs) {
      if (!in.path.empty() && SameFile(out.path, in.path)) {
        return InvalidArgument(Named(out.what, out.path) + " is " + Named(in.what, in.path) +
                               ", which the tool reads; writing it would destroy it (choose "
                               "another file name)");
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (!outputs[j].path.empty() && SameFile(out.path, outputs[j].path)) {
        return InvalidArgument(Named(out.what, out.path) + " and " +
                               Named(outputs[j].what, outputs[j].path) +
                               " are the same file; one would overwrite the other (choose "
                               "different file names)");
      }
    }
  }
  return Status::Ok();
}

Status WriteError(const std::string& path, const std::string& what, int error) {
  std::string why = std::strerror(error);
  if (error == ENOSPC) why += " (the disk is full)";
  if (error == EDQUOT) why += " (the disk quota is used up)";
  if (error == EFBIG) why += " (larger than this process may write: see `ulimit -f`)";
  return IoError("cannot write " + Named(what, path) + ": " + why + "; '" + path +
                 "' was left as it was");
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes,
                           const std::string& what) {
  SPILL_RETURN_IF_ERROR(CheckReplaceable(path, what));
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot create '" + temp + "': " + std::strerror(errno));
  int error = 0;
  for (size_t done = 0; done < bytes.size() && error == 0;) {
    const ssize_t wrote = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      error = wrote < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(wrote);
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && std::rename(temp.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temp.c_str());
    return WriteError(path, what, error);
  }
  return Status::Ok();
}

Status WriteTextFile(const std::string& path, const std::string& text, const std::string& what) {
  return WriteFileAtomically(path, text, what);
}

LineLog::~LineLog() {
  if (fd_ >= 0) ::close(fd_);
}

Status LineLog::Open(const std::string& path, bool append, const std::string& what) {
  path_ = path;
  what_ = what;
  if (path.empty()) return Status::Ok();
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? 0 : O_TRUNC), 0644);
  if (fd_ < 0) return IoError("cannot write " + Named(what, path) + ": " + std::strerror(errno));
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  if (end < 0) return IoError("cannot write " + Named(what, path) + ": " + std::strerror(errno));
  size_ = end;
  return Status::Ok();
}

Status LineLog::Append(const std::string& line) {
  if (fd_ < 0) return Status::Ok();
  const std::string text = line + "\n";
  int error = 0;
  for (size_t done = 0; done < text.size();) {
    const ssize_t wrote = ::pwrite(fd_, text.data() + done, text.size() - done, size_ + done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      error = wrote < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(wrote);
  }
  if (error == 0) {
    size_ += static_cast<int64_t>(text.size());
    return Status::Ok();
  }
  // No half line: a resumed run's lines must follow whole ones.
  const bool cut = ::ftruncate(fd_, size_) == 0;
  return IoError("cannot write " + Named(what_, path_) + ": " + std::strerror(error) +
                 (cut ? "; its lines up to the last whole one are kept" : ""));
}

Status CreateOutputFolder(const std::string& path, const std::string& what) {
  if (path.empty()) return InvalidArgument(what + ": empty folder name");
  std::error_code error;
  fs::create_directories(path, error);
  if (error) {
    return IoError("cannot create " + Named(what, path) + ": " + error.message());
  }
  if (!fs::is_directory(path, error)) {
    return InvalidArgument(Named(what, path) + " exists and is not a folder");
  }
  if (::access(path.c_str(), W_OK) != 0) {
    return IoError("cannot write into " + Named(what, path) + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace spill
