// After the port: the ops are declared from Python (cpp_sin.py, with tagged_ops.declare_out /
// declare_inplace); the kernels stay in C++, written once in the tagged form (they return their
// buffer / first argument), and TAGGED_OPS_IMPL fits them to the schema each torch gives the op.
#include <tagged_ops/kernel.h>
#include <torch/library.h>

#include <tuple>

#include "../sin_kernel.h"

namespace {

at::Tensor& sin_out(const at::Tensor& x, double scale, at::Tensor& out) {
  cpp_sin::sin_into(x, scale, out);
  return out;
}

at::Tensor& sin_(at::Tensor& x) {
  cpp_sin::sin_into(x, 1.0, x);
  return x;
}

std::tuple<at::Tensor&, at::Tensor&> sincos_out(const at::Tensor& x, at::Tensor& sin, at::Tensor& cos) {
  cpp_sin::sin_into(x, 1.0, sin);
  cos.copy_(at::cos(x));
  return {sin, cos};
}

}  // namespace

TORCH_LIBRARY_IMPL(cpp_sin, CPU, m) {
  TAGGED_OPS_IMPL(m, "sin.out", sin_out);
  TAGGED_OPS_IMPL(m, "sin_", sin_);
  TAGGED_OPS_IMPL(m, "sincos.out", sincos_out);
}
