// The kernel body both versions of the extension share: scale * sin(x) into out, float32, CPU.
// Real kernels write through raw pointers; so does this one (whole contiguous tensors), and
// it reads each element before writing it, so x and out may be the same memory.
#pragma once

#include <ATen/ATen.h>

#include <cmath>

namespace cpp_sin {

inline void sin_into(const at::Tensor& x, double scale, at::Tensor& out) {
  TORCH_CHECK(x.sizes() == out.sizes(), "cpp_sin: x and out differ in shape: ", x.sizes(), " and ", out.sizes());
  TORCH_CHECK(
      x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat, "cpp_sin: float32 tensors only, got ",
      x.scalar_type(), " and ", out.scalar_type());
  if (x.is_contiguous() && out.is_contiguous()) {
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      dst[i] = static_cast<float>(std::sin(src[i]) * scale);
    }
  } else {
    out.copy_(at::sin(x) * scale);
  }
}

}  // namespace cpp_sin
