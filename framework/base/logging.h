// A leveled logger with channels. Tracing is switched on at run time, never by
// editing code:
//
//   SPILL_LOG=info                  default: warnings and info on stderr
//   SPILL_LOG=debug                 everything at debug level and above
//   SPILL_LOG=info,memory:debug     info in general, debug for the memory channel
//
// Usage: SPILL_LOG_INFO(kGeneral) << "message"; SPILL_LOG_DEBUG(kMemory) << ...
#ifndef SPILL_FRAMEWORK_BASE_LOGGING_H_
#define SPILL_FRAMEWORK_BASE_LOGGING_H_

#include <sstream>
#include <string>

#include "framework/base/status.h"

namespace spill {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kOff = 4 };
enum class LogChannel { kGeneral = 0, kMemory, kData, kLayers, kCount };

// True when a message at `level` on `channel` would be printed.
bool LogEnabled(LogChannel channel, LogLevel level);
// Overrides the configuration read from SPILL_LOG (used by tools' --log flag).
void ConfigureLogging(const std::string& spec);
// Ok when every item of `spec` names a known level and channel; the error
// lists them.
Status CheckLogSpec(const std::string& spec);

class LogMessage {
 public:
  LogMessage(LogChannel channel, LogLevel level);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogChannel channel_;
  LogLevel level_;
  std::ostringstream stream_;
};

}  // namespace spill

#define SPILL_LOG_AT(channel, level)                               \
  if (!::spill::LogEnabled(::spill::LogChannel::channel, level)) { \
  } else                                                           \
    ::spill::LogMessage(::spill::LogChannel::channel, level).stream()

#define SPILL_LOG_DEBUG(channel) SPILL_LOG_AT(channel, ::spill::LogLevel::kDebug)
#define SPILL_LOG_INFO(channel) SPILL_LOG_AT(channel, ::spill::LogLevel::kInfo)
#define SPILL_LOG_WARNING(channel) SPILL_LOG_AT(channel, ::spill::LogLevel::kWarning)
#define SPILL_LOG_ERROR(channel) SPILL_LOG_AT(channel, ::spill::LogLevel::kError)

#endif  // SPILL_FRAMEWORK_BASE_LOGGING_H_
