#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint16_t load_nc(const uint16_t* p) {
  uint16_t v;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}

__global__ void swiglu_kernel(const uint16_t* gate, const uint16_t* up, __nv_bfloat16* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float g = __bfloat162float(__ushort_as_bfloat16(load_nc(gate + i)));
  float u = __bfloat162float(__ushort_as_bfloat16(load_nc(up + i)));
  float sig = 1.0f / (1.0f + fast_exp2(-g * 1.4426950408889634f));
  out[i] = __float2bfloat16(g * sig * u);
}

extern "C" void swiglu_launch(const void* gate, const void* up, void* out, int64_t n) {
  const int threads = 256;
  const int blocks = static_cast<int>((n + threads - 1) / threads);
  if (n > 0)
    swiglu_kernel<<<blocks, threads>>>(static_cast<const uint16_t*>(gate), static_cast<const uint16_t*>(up),
                                                   static_cast<__nv_bfloat16*>(out), n);
}
