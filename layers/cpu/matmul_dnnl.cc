#include "layers/cpu/matmul_dnnl.h"

#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

namespace spill {
namespace cpu {
namespace {

using dnnl::memory;

struct Matmul {
  memory::desc a, b, c;
  dnnl::matmul primitive;
};

class MatmulCache {
 public:
  MatmulCache() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  void Run(int64_t m, int64_t n, int64_t k, const uint16_t* a, const uint16_t* b, float* c) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Matmul& mm = Find(m, n, k);
    memory am(mm.a, engine_, const_cast<uint16_t*>(a));
    memory bm(mm.b, engine_, const_cast<uint16_t*>(b));
    memory cm(mm.c, engine_, c);
    mm.primitive.execute(stream_, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream_.wait();
  }

 private:
  const Matmul& Find(int64_t m, int64_t n, int64_t k) {
    auto& slot = cache_[std::make_tuple(m, n, k)];
    if (!slot) {
      slot = std::make_unique<Matmul>();
      slot->a = memory::desc({m, k}, memory::data_type::bf16, memory::format_tag::ab);
      slot->b = memory::desc({k, n}, memory::data_type::bf16, memory::format_tag::ab);
      slot->c = memory::desc({m, n}, memory::data_type::f32, memory::format_tag::ab);
      const dnnl::matmul::desc d(slot->a, slot->b, slot->c);
      slot->primitive = dnnl::matmul(dnnl::matmul::primitive_desc(d, engine_));
    }
    return *slot;
  }

  std::mutex mutex_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::unique_ptr<Matmul>> cache_;
};

}  // namespace

void MatmulBf16(int64_t m, int64_t n, int64_t k, const uint16_t* a, const uint16_t* b, float* c) {
  static MatmulCache* cache = new MatmulCache();
  cache->Run(m, n, k, a, b, c);
}

}  // namespace cpu
}  // namespace spill
