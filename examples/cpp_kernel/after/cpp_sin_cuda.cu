// The CUDA kernels of the same ops, registered the same way at the CUDA key. Built only where
// a GPU and nvcc are present (cpp_sin.load_kernels(cuda=True)).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <tagged_ops/kernel.h>
#include <torch/library.h>

#include <tuple>

namespace {

__global__ void sin_kernel(const float* src, float* dst, float scale, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    dst[i] = sinf(src[i]) * scale;
  }
}

void sin_into_cuda(const at::Tensor& x, double scale, at::Tensor& out) {
  TORCH_CHECK(x.sizes() == out.sizes(), "cpp_sin: x and out differ in shape: ", x.sizes(), " and ", out.sizes());
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat, "cpp_sin: float32 tensors only");
  if (x.is_contiguous() && out.is_contiguous()) {
    const int64_t n = x.numel();
    if (n == 0) {
      return;
    }
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    sin_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), static_cast<float>(scale), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else {
    out.copy_(at::sin(x) * scale);
  }
}

at::Tensor& sin_out(const at::Tensor& x, double scale, at::Tensor& out) {
  sin_into_cuda(x, scale, out);
  return out;
}

at::Tensor& sin_(at::Tensor& x) {
  sin_into_cuda(x, 1.0, x);
  return x;
}

std::tuple<at::Tensor&, at::Tensor&> sincos_out(const at::Tensor& x, at::Tensor& sin, at::Tensor& cos) {
  sin_into_cuda(x, 1.0, sin);
  cos.copy_(at::cos(x));
  return {sin, cos};
}

}  // namespace

TORCH_LIBRARY_IMPL(cpp_sin, CUDA, m) {
  TAGGED_OPS_IMPL(m, "sin.out", sin_out);
  TAGGED_OPS_IMPL(m, "sin_", sin_);
  TAGGED_OPS_IMPL(m, "sincos.out", sincos_out);
}
