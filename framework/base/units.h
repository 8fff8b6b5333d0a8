// Numbers as users write them, converted the same way by every reader of
// YAML, flags and files: integers (decimal, 64-bit, no wrapping), finite
// numbers, booleans, and byte sizes ("2GiB", "512MiB", "1.5GB", "64KiB", "1000").
#ifndef SPILL_FRAMEWORK_BASE_UNITS_H_
#define SPILL_FRAMEWORK_BASE_UNITS_H_

#include <cstddef>
#include <string>

#include "framework/base/status.h"

namespace spill {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;
constexpr size_t kGiB = 1024 * kMiB;

// A decimal integer with an optional sign that fits in 64 bits; nothing else.
StatusOr<int64_t> ParseInt64(const std::string& text);
// A finite number (no nan or inf, no trailing characters).
StatusOr<double> ParseFiniteDouble(const std::string& text);
// true/false or yes/no, in lower case, Capitalized or UPPER case.
StatusOr<bool> ParseBool(const std::string& text);

// Accepts B, KB/MB/GB/TB/PB (powers of 1000) and KiB/MiB/GiB/TiB/PiB (powers
// of 1024).
StatusOr<size_t> ParseBytes(const std::string& text);
// "1.50 GiB", "12.0 MiB", "512 B"
std::string FormatBytes(double bytes);
// Mebibytes with three decimals, as the SuperNeurons paper reports them.
std::string FormatMiB(double bytes);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_BASE_UNITS_H_
