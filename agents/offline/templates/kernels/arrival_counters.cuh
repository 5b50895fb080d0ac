
#include <array>
#include <mutex>
static unsigned* arrival_counters(const at::Tensor& like, long long count, const char* kernel) {
  static std::mutex mu;
  static auto* per_device = new std::array<at::Tensor, 64>();
  const int dev = like.get_device();
  TORCH_CHECK(dev >= 0 && dev < 64, kernel, ": device index ", dev, " not handled");
  std::lock_guard<std::mutex> hold(mu);
  at::Tensor& t = (*per_device)[dev];
  if (!t.defined() || t.numel() < count) t = like.new_zeros({count}, like.options().dtype(at::kInt));
  return reinterpret_cast<unsigned*>(t.data_ptr());
}
