// Byte sizes as users write them: "2GiB", "512MiB", "1.5GB", "64KiB", "1000".
#ifndef SPILL_FRAMEWORK_UNITS_H_
#define SPILL_FRAMEWORK_UNITS_H_

#include <cstddef>
#include <string>

#include "framework/status.h"

namespace spill {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;
constexpr size_t kGiB = 1024 * kMiB;

// Accepts B, KB/MB/GB/TB (powers of 1000) and KiB/MiB/GiB/TiB (powers of 1024).
StatusOr<size_t> ParseBytes(const std::string& text);
// "1.50 GiB", "12.0 MiB", "512 B"
std::string FormatBytes(double bytes);
// Mebibytes with three decimals, as the SuperNeurons paper reports them.
std::string FormatMiB(double bytes);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_UNITS_H_
