#include "framework/base/source_location.h"

namespace spill {

std::string SourceLocation::FileLine() const {
  return line > 0 ? file + ":" + std::to_string(line) : file;
}

std::string SourceLocation::ToString() const {
  return instantiated.empty() ? FileLine() : FileLine() + " (" + instantiated + ")";
}

}  // namespace spill
