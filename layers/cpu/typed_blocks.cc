#include "layers/cpu/typed_blocks.h"

#include <algorithm>
#include <cstring>

#include "framework/device/convert.h"

namespace spill {
namespace cpu {
namespace {

char* At(const Tensor& t, int64_t element) {
  return static_cast<char*>(t.raw()) + element * static_cast<int64_t>(DTypeSize(t.dtype()));
}

}  // namespace

void ForEachFloatBlock(const std::vector<BlockOperand>& operands, int64_t n,
                       const FloatBlockBody& body) {
  const int64_t blocks = (n + kFloatBlock - 1) / kFloatBlock;
  const size_t count = operands.size();
#pragma omp parallel
  {
    std::vector<float> buffers(count * kFloatBlock);
    std::vector<float*> floats(count);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t begin = b * kFloatBlock, size = std::min(kFloatBlock, n - begin);
      for (size_t k = 0; k < count; ++k) {
        const BlockOperand& o = operands[k];
        if (o.tensor->dtype() == DType::kF32) {
          floats[k] = o.tensor->data() + begin;
          continue;
        }
        floats[k] = buffers.data() + k * kFloatBlock;
        if (o.read) ConvertToFloat(At(*o.tensor, begin), o.tensor->dtype(), floats[k], size);
      }
      body(size, floats.data());
      for (size_t k = 0; k < count; ++k) {
        const BlockOperand& o = operands[k];
        if (!o.written || o.tensor->dtype() == DType::kF32) continue;
        ConvertFromFloat(floats[k], At(*o.tensor, begin), o.tensor->dtype(), size);
      }
    }
  }
}

void Zero(const Tensor& t) { std::memset(t.raw(), 0, t.bytes()); }

}  // namespace cpu
}  // namespace spill
