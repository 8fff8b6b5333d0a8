// Where something in a network file was written, for error messages: plain
// data, so that layers can say where they come from without the network
// format (framework/config/net_spec.h) or its YAML types.
#ifndef SPILL_FRAMEWORK_BASE_SOURCE_LOCATION_H_
#define SPILL_FRAMEWORK_BASE_SOURCE_LOCATION_H_

#include <string>

namespace spill {

// Where a layer was written: the file and line of its entry, and the chain of
// block instantiations that produced it.
struct SourceLocation {
  std::string file;
  int line = 0;              // 1-based; 0 when unknown
  std::string instantiated;  // "block 'basic' instantiated as 'res2.1' at f.yaml:20"

  // "models/resnet18.yaml:14"
  std::string FileLine() const;
  // FileLine() plus the instantiation chain, for error messages.
  std::string ToString() const;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_BASE_SOURCE_LOCATION_H_
