// Kernels tests/test_cpp_kernel.py registers beside the example's: each breaks one rule of
// <tagged_ops/kernel.h>, so the tests can see the rule enforced.
#include <ATen/ATen.h>
#include <tagged_ops/kernel.h>
#include <torch/library.h>

namespace {

// Returns a new tensor instead of its buffer.
at::Tensor not_its_buffer(const at::Tensor& x, at::Tensor& out) {
  out.copy_(x);
  return x.clone();
}

// Returns a new tensor instead of its first argument.
at::Tensor not_its_argument(at::Tensor& x) {
  return x.clone();
}

// Declared with a keyword-only float beside its buffer.
at::Tensor& scale_kwonly(const at::Tensor& x, double scale, at::Tensor& out) {
  out.copy_(x * scale);
  return out;
}

// A classic kernel (returns nothing): the op still returns its buffer.
void classic(const at::Tensor& x, at::Tensor& out) {
  out.copy_(x);
}

// Takes one argument too few.
at::Tensor& too_few(at::Tensor& out) {
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(cpp_sin_test, CPU, m) {
  TAGGED_OPS_IMPL(m, "copy.out", not_its_buffer);
  TAGGED_OPS_IMPL(m, "clone_", not_its_argument);
  TAGGED_OPS_IMPL(m, "scale.out", scale_kwonly);
  TAGGED_OPS_IMPL(m, "classic.out", classic);
  TAGGED_OPS_IMPL(m, "short.out", too_few);
}
