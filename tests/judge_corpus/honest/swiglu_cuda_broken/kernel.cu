__global__ void swiglu_kernel(const float* gate, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = undeclared_identifier_xyz(gate[i]);
}
