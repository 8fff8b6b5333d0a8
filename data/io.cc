// File helpers: a file is opened through OpenRegularFile (framework/base/files.h),
// so anything but a regular file is refused before a byte is read. Plain
// files are read with read(2) into a buffer reserved from the file size;
// gzipped ones stream through zlib, with the gzip trailer's uncompressed size
// (capped) as a hint to reserve the buffer once. Callers say how much they
// expect, and reading never goes past it.
#include "data/io.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>

#include "framework/base/files.h"

namespace spill {
namespace {

constexpr uint64_t kChunk = 1u << 20;      // bytes read per call
constexpr uint64_t kMaxReserveRatio = 64;  // trust the gzip trailer up to 64x the file

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

uint64_t FileSize(int fd) {
  struct stat info;
  return ::fstat(fd, &info) == 0 ? static_cast<uint64_t>(info.st_size) : 0;
}

// Uncompressed size that the gzip trailer records (modulo 2^32), or 0.
uint64_t GzipSizeHint(int fd) {
  const uint64_t compressed = FileSize(fd);
  uint8_t trailer[4] = {0, 0, 0, 0};
  if (compressed < 18 || ::pread(fd, trailer, 4, static_cast<off_t>(compressed - 4)) != 4) return 0;
  uint64_t size = trailer[0] | (trailer[1] << 8) | (trailer[2] << 16) |
                  (static_cast<uint64_t>(trailer[3]) << 24);
  return std::min(size, compressed * kMaxReserveRatio);
}

// Grows `bytes` by up to `count` through `read_some(dst, n)` (bytes read, 0 at
// the end, negative on error).
template <typename ReadSome>
StatusOr<uint64_t> ReadChunks(uint64_t count, std::vector<uint8_t>* bytes,
                              const ReadSome& read_some, const std::string& path) {
  uint64_t done = 0;
  try {
    while (done < count) {
      const uint64_t want = std::min(count - done, kChunk);
      const size_t old_size = bytes->size();
      bytes->resize(old_size + want);
      const int64_t got = read_some(bytes->data() + old_size, want);
      bytes->resize(old_size + std::max<int64_t>(got, 0));
      if (got < 0) return Status(StatusCode::kIoError, "");
      if (got == 0) break;
      done += static_cast<uint64_t>(got);
    }
  } catch (const std::bad_alloc&) {
    return OutOfMemory("not enough memory to read " + path);
  }
  return done;
}

class PlainReader : public FileReader {
 public:
  PlainReader(std::string path, int fd) : FileReader(std::move(path)), fd_(fd) {}
  ~PlainReader() override { ::close(fd_); }

  StatusOr<uint64_t> Read(uint64_t count, std::vector<uint8_t>* bytes) override {
    bytes->reserve(bytes->size() + std::min(count, FileSize(fd_)));
    auto got = ReadChunks(
        count, bytes,
        [this](uint8_t* dst, uint64_t n) -> int64_t {
          ssize_t r;
          do {
            r = ::read(fd_, dst, n);
          } while (r < 0 && errno == EINTR);
          return r;
        },
        path_);
    if (!got.ok() && got.status().code() == StatusCode::kIoError) {
      return IoError("cannot read " + path_ + ": " + std::strerror(errno));
    }
    return got;
  }

 private:
  int fd_;
};

class GzipReader : public FileReader {
 public:
  GzipReader(std::string path, gzFile file, uint64_t hint)
      : FileReader(std::move(path)), file_(file), hint_(hint) {}
  ~GzipReader() override { gzclose(file_); }

  StatusOr<uint64_t> Read(uint64_t count, std::vector<uint8_t>* bytes) override {
    bytes->reserve(bytes->size() + std::min(count, hint_));
    std::string reason;
    auto got = ReadChunks(
        count, bytes,
        [this, &reason](uint8_t* dst, uint64_t n) -> int64_t {
          const int r = gzread(file_, dst, static_cast<unsigned>(n));
          int code = Z_OK;
          const char* message = gzerror(file_, &code);
          if (r < 0 || (code != Z_OK && code != Z_STREAM_END)) {
            reason = message != nullptr ? message : "unknown zlib error";
            return -1;
          }
          return r;
        },
        path_);
    if (!got.ok() && got.status().code() == StatusCode::kIoError) {
      if (reason.rfind(path_ + ": ", 0) == 0) reason.erase(0, path_.size() + 2);  // zlib adds it
      return IoError(path_ + ": truncated or corrupt gzip data (" + reason + ")");
    }
    return got;
  }

 private:
  gzFile file_;
  uint64_t hint_;
};

}  // namespace

StatusOr<std::unique_ptr<FileReader>> FileReader::Open(const std::string& path) {
  SPILL_ASSIGN_OR_RETURN(int fd, OpenRegularFile(path, ""));
  if (!EndsWith(path, ".gz")) return std::unique_ptr<FileReader>(new PlainReader(path, fd));
  const uint64_t hint = GzipSizeHint(fd);
  gzFile file = gzdopen(fd, "rb");  // takes over fd
  if (file == nullptr) {
    ::close(fd);
    return OutOfMemory("cannot open " + path + " for gunzipping");
  }
  gzbuffer(file, 1 << 17);
  return std::unique_ptr<FileReader>(new GzipReader(path, file, hint));
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

bool PathExists(const std::string& path) {
  std::error_code error;
  return std::filesystem::exists(path, error);
}

Status AppendFile(const std::string& path, std::vector<uint8_t>* bytes, uint64_t max_bytes) {
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<FileReader> reader, FileReader::Open(path));
  SPILL_ASSIGN_OR_RETURN(uint64_t got, reader->Read(max_bytes + 1, bytes));
  if (got > max_bytes) {
    return InvalidArgument(path + " holds more than " + std::to_string(max_bytes) +
                           " bytes, the most this reader accepts");
  }
  return Status::Ok();
}

Status CheckExampleIndex(int64_t index, int64_t size, const std::string& source) {
  if (index >= 0 && index < size) return Status::Ok();
  return InvalidArgument("example " + std::to_string(index) + " is out of range [0, " +
                         std::to_string(size) + ") of " + source);
}

}  // namespace spill
