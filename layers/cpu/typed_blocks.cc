#include "layers/cpu/typed_blocks.h"

#include <algorithm>
#include <cstring>

#include "framework/device/convert.h"
#include "layers/cpu/cpu_math.h"

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

void CopyOrAdd(const Tensor& x, const Tensor& y, bool accumulate) {
  if (x.dtype() == DType::kF32 && y.dtype() == DType::kF32) {
    CopyOrAdd(x.data(), y.data(), x.numel(), accumulate);
  } else if (!accumulate && x.dtype() == y.dtype()) {
    std::memcpy(y.raw(), x.raw(), x.bytes());
  } else {
    ForEachFloatBlock({{&x, true, false}, {&y, accumulate, true}}, x.numel(),
                      [accumulate](int64_t n, float* const* f) {
                        if (accumulate) {
                          for (int64_t j = 0; j < n; ++j) f[1][j] += f[0][j];
                        } else {
                          std::copy_n(f[0], n, f[1]);
                        }
                      });
  }
}

}  // namespace cpu
}  // namespace spill
