
// The launch attribute that groups CTAs in clusters of `cluster` along x.
static cudaLaunchAttribute cluster_x_attribute(unsigned cluster) {
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  return attr;
}
// One launch of `kernel` in clusters of `cluster` CTAs along x; more than 8 is a non-portable size (16 on the
// H100/H200). The caller takes another path on an error (and clears it).
template <typename... Params, typename... Args>
static cudaError_t launch_clusters(void (*kernel)(Params...), dim3 grid, dim3 block, unsigned cluster,
                                   cudaStream_t stream, Args... args) {
  if (cluster > 8) {
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (err != cudaSuccess) return err;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1] = {cluster_x_attribute(cluster)};
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}
// The address of `p` (this CTA's shared memory) in the shared memory of the cluster's CTA `rank`.
__device__ __forceinline__ unsigned dsmem_addr(const void* p, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote) : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))), "r"(rank));
  return remote;
}
__device__ __forceinline__ float2 dsmem_f2(const float2* p, unsigned rank) {
  float2 v;
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];"
               : "=f"(v.x), "=f"(v.y) : "r"(dsmem_addr(p, rank)) : "memory");
  return v;
}
__device__ __forceinline__ float4 dsmem_f4(const float* p, unsigned rank) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(dsmem_addr(p, rank)) : "memory");
  return v;
}
