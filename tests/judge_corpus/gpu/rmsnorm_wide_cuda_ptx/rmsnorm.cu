#include <torch/extension.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

// One block per row; warp sums reduced with an inline-PTX butterfly shuffle.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        float other;
        asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(other) : "f"(v), "r"(off));
        v += other;
    }
    return v;
}

__device__ __forceinline__ float fast_rsqrt(float x) {
    float y;
    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__global__ void rmsnorm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                               __nv_bfloat16* __restrict__ y, int H, float eps) {
    const int row = blockIdx.x;
    const __nv_bfloat16* xr = x + (size_t)row * H;
    __nv_bfloat16* yr = y + (size_t)row * H;
    float ss = 0.f;
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        float v = __bfloat162float(xr[i]);
        ss += v * v;
    }
    __shared__ float partial[32];
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0.f;
        v = warp_sum(v);
        if (threadIdx.x == 0) partial[0] = v;
    }
    __syncthreads();
    const float inv = fast_rsqrt(partial[0] / H + eps);
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        float v = __bfloat162float(xr[i]) * inv;
        yr[i] = __float2bfloat16(__bfloat162float(__float2bfloat16(v)) * __bfloat162float(w[i]));
    }
}

void run(torch::Tensor x, torch::Tensor weight, double eps, torch::Tensor y) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == at::kBFloat16, "x: contiguous bf16 CUDA");
    const int T = x.size(0), H = x.size(1);
    if (T == 0) return;
    rmsnorm_kernel<<<T, 256>>>(reinterpret_cast<const __nv_bfloat16*>(x.data_ptr()),
                               reinterpret_cast<const __nv_bfloat16*>(weight.data_ptr()),
                               reinterpret_cast<__nv_bfloat16*>(y.data_ptr()), H, (float)eps);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "rmsnorm launch failed: ", cudaGetErrorString(err));
}
