#include "framework/device/file_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "framework/base/units.h"
#include "framework/device/device.h"

namespace spill {

StatusOr<FileRegion> MapFileRegion(size_t bytes, const std::string& directory) {
  if (bytes == 0) return InvalidArgument("host region of 0 bytes");
  const std::string where = "memory.host_tier: file:" + directory;
  struct stat info;
  if (stat(directory.c_str(), &info) != 0) {
    return InvalidArgument(where + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(info.st_mode)) return InvalidArgument(where + ": not a directory");
  std::string name = directory + "/spill-host-XXXXXX";
  std::vector<char> path(name.begin(), name.end());
  path.push_back('\0');
  const int fd = mkstemp(path.data());
  if (fd < 0) {
    return InvalidArgument(where + ": cannot create a file there: " + std::strerror(errno));
  }
  unlink(path.data());  // the mapping keeps it alive; nothing is left behind
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string reason = std::strerror(errno);
    close(fd);
    return OutOfMemory(where + ": cannot size a " + FormatBytes(static_cast<double>(bytes)) +
                       " file: " + reason);
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const std::string reason = std::strerror(errno);
    close(fd);
    return OutOfMemory(where + ": cannot map " + FormatBytes(static_cast<double>(bytes)) + ": " +
                       reason);
  }
  FileRegion region;
  region.base = base;
  region.bytes = bytes;
  region.fd = fd;
  region.directory = directory;
  return region;
}

Status ClaimFileRegion(FileRegion* region, size_t bytes) {
  const size_t target = PinnedExtentFor(bytes, region->bytes);
  if (target <= region->claimed) return Status::Ok();
  const int error = posix_fallocate(region->fd, static_cast<off_t>(region->claimed),
                                    static_cast<off_t>(target - region->claimed));
  if (error != 0) {
    return OutOfMemory(
        "host memory on disk (memory.host_tier: file:" + region->directory + "): cannot claim " +
        FormatBytes(static_cast<double>(target - region->claimed)) + " beyond the " +
        FormatBytes(static_cast<double>(region->claimed)) + " in use: " + std::strerror(error));
  }
  region->claimed = target;
  return Status::Ok();
}

void UnmapFileRegion(FileRegion* region) {
  if (region->base != nullptr) munmap(region->base, region->bytes);
  if (region->fd >= 0) close(region->fd);
  region->base = nullptr;
  region->fd = -1;
}

}  // namespace spill
