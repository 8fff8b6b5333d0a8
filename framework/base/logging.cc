#include "framework/base/logging.h"

#include <array>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "framework/base/strings.h"

namespace spill {
namespace {

constexpr int kChannels = static_cast<int>(LogChannel::kCount);
const char* const kChannelNames[kChannels] = {"general", "memory", "data", "layers"};
const char* const kLevelNames[] = {"debug", "info", "warning", "error", "off"};

struct LogConfig {
  std::array<LogLevel, kChannels> levels;
  LogConfig() { levels.fill(LogLevel::kInfo); }
};

bool ParseLevel(const std::string& text, LogLevel* level) {
  for (int i = 0; i <= static_cast<int>(LogLevel::kOff); ++i) {
    if (text == kLevelNames[i]) {
      *level = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

void Apply(const std::string& spec, LogConfig* config) {
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    size_t colon = item.find(':');
    LogLevel level;
    if (colon == std::string::npos) {
      if (ParseLevel(item, &level)) config->levels.fill(level);
      continue;
    }
    std::string channel = item.substr(0, colon);
    if (!ParseLevel(item.substr(colon + 1), &level)) continue;
    for (int c = 0; c < kChannels; ++c) {
      if (channel == kChannelNames[c]) config->levels[c] = level;
    }
  }
}

LogConfig& Config() {
  static LogConfig* config = [] {
    auto* c = new LogConfig();
    if (const char* env = std::getenv("SPILL_LOG")) Apply(env, c);
    return c;
  }();
  return *config;
}

}  // namespace

bool LogEnabled(LogChannel channel, LogLevel level) {
  return level >= Config().levels[static_cast<int>(channel)];
}

void ConfigureLogging(const std::string& spec) { Apply(spec, &Config()); }

Status CheckLogSpec(const std::string& spec) {
  const std::string levels = Join(kLevelNames), channels = Join(kChannelNames);
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    LogLevel level;
    if (!ParseLevel(colon == std::string::npos ? item : item.substr(colon + 1), &level)) {
      return InvalidArgument("'" + item + "': the level must be one of " + levels);
    }
    if (colon == std::string::npos) continue;
    bool known = false;
    for (const char* c : kChannelNames) known = known || item.substr(0, colon) == c;
    if (!known) return InvalidArgument("'" + item + "': the channel must be one of " + channels);
  }
  return Status::Ok();
}

LogMessage::LogMessage(LogChannel channel, LogLevel level) : channel_(channel), level_(level) {}

LogMessage::~LogMessage() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::cerr << "[" << kLevelNames[static_cast<int>(level_)] << "]";
  if (channel_ != LogChannel::kGeneral) {
    std::cerr << "[" << kChannelNames[static_cast<int>(channel_)] << "]";
  }
  std::cerr << " " << stream_.str() << std::endl;
}

}  // namespace spill
