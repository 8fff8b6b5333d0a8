// File helpers: plain files are read with one fread into a buffer sized from
// the file; gzipped ones stream through zlib, with the gzip trailer's
// uncompressed size (capped) as a hint to reserve the buffer once.
#include "data/io.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace spill {
namespace {

constexpr unsigned kGzipChunk = 1u << 20;
constexpr uint64_t kMaxReserveRatio = 64;  // trust the trailer hint up to 64x the gzip size

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Status OpenError(const std::string& path, int error) {
  if (error == ENOENT) return NotFound(path + ": no such file");
  return IoError("cannot open " + path + ": " + std::strerror(error));
}

// Uncompressed size that the gzip trailer records (modulo 2^32), or 0.
uint64_t GzipSizeHint(const std::string& path) {
  std::error_code error;
  uint64_t compressed = std::filesystem::file_size(path, error);
  if (error || compressed < 18) return 0;
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return 0;
  uint8_t trailer[4] = {0, 0, 0, 0};
  bool ok = std::fseek(file, -4, SEEK_END) == 0 && std::fread(trailer, 1, 4, file) == 4;
  std::fclose(file);
  if (!ok) return 0;
  uint64_t size = trailer[0] | (trailer[1] << 8) | (trailer[2] << 16) |
                  (static_cast<uint64_t>(trailer[3]) << 24);
  return std::min(size, compressed * kMaxReserveRatio);
}

Status AppendGzip(const std::string& path, std::vector<uint8_t>* bytes) {
  errno = 0;
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return OpenError(path, errno != 0 ? errno : ENOMEM);
  gzbuffer(file, 1 << 17);
  bytes->reserve(bytes->size() + GzipSizeHint(path));
  std::vector<uint8_t> chunk(kGzipChunk);
  Status status;
  while (true) {
    int got = gzread(file, chunk.data(), kGzipChunk);
    if (got > 0) bytes->insert(bytes->end(), chunk.data(), chunk.data() + got);
    int code = Z_OK;
    const char* message = gzerror(file, &code);
    if (got < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      std::string reason = message != nullptr ? message : "unknown zlib error";
      if (reason.rfind(path + ": ", 0) == 0) reason.erase(0, path.size() + 2);  // zlib adds it
      status = IoError(path + ": truncated or corrupt gzip data (" + reason + ")");
      break;
    }
    if (got == 0) break;
  }
  gzclose(file);
  return status;
}

Status AppendPlain(const std::string& path, std::vector<uint8_t>* bytes) {
  errno = 0;
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return OpenError(path, errno);
  Status status;
  long size = -1;
  if (std::fseek(file, 0, SEEK_END) == 0) size = std::ftell(file);
  if (size < 0 || std::fseek(file, 0, SEEK_SET) != 0) {
    status = IoError("cannot read " + path + ": not a seekable file");
  } else {
    size_t old_size = bytes->size();
    bytes->resize(old_size + static_cast<size_t>(size));
    size_t got = std::fread(bytes->data() + old_size, 1, static_cast<size_t>(size), file);
    if (got != static_cast<size_t>(size)) {
      bytes->resize(old_size + got);
      status = IoError("cannot read " + path + ": got " + std::to_string(got) + " of " +
                       std::to_string(size) + " bytes (" + std::strerror(errno) + ")");
    }
  }
  std::fclose(file);
  return status;
}

}  // namespace

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

bool PathExists(const std::string& path) {
  std::error_code error;
  return std::filesystem::exists(path, error);
}

Status AppendFile(const std::string& path, std::vector<uint8_t>* bytes) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return InvalidArgument(path + " is a folder; expected a file");
  }
  return EndsWith(path, ".gz") ? AppendGzip(path, bytes) : AppendPlain(path, bytes);
}

Status CheckExampleIndex(int64_t index, int64_t size, const std::string& source) {
  if (index >= 0 && index < size) return Status::Ok();
  return InvalidArgument("example " + std::to_string(index) + " is out of range [0, " +
                         std::to_string(size) + ") of " + source);
}

}  // namespace spill
