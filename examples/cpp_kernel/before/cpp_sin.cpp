// Before the port: a classic op defined and implemented in C++. It mutates `out` and returns
// nothing, so callers need a wrapper to get the result, and it has no tag on any torch.
#include <torch/library.h>

#include "../sin_kernel.h"

namespace {

void sin_out(const at::Tensor& x, at::Tensor& out, double scale) {
  cpp_sin::sin_into(x, scale, out);
}

}  // namespace

TORCH_LIBRARY(cpp_sin_classic, m) {
  m.def("sin_out(Tensor x, Tensor(a!) out, float scale=1.0) -> ()");
}

TORCH_LIBRARY_IMPL(cpp_sin_classic, CPU, m) {
  m.impl("sin_out", &sin_out);
}
