// tagged_ops/kernel.h: register a C++ kernel of a tagged_ops op, written once in the tagged form.
//
// An op declared with tagged_ops.declare_out / declare_inplace has a different schema on each
// path: on torch with native tags (2.13+) the 2.13 tagged schema, which returns its buffers
//     sin.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)
// and elsewhere (2.2-2.12, or TAGGED_OPS_FALLBACK=1) an untagged op that returns nothing, out
// buffers positional (after the required arguments, before the defaulted ones)
//     sin.out(Tensor x, Tensor(a!) out) -> ()
// and, on the native path, an untagged twin sin__untagged.out that compiled code calls.
// A plain m.impl("sin.out", &fn) fits one of them. TAGGED_OPS_IMPL registers one boxed kernel
// for both names that reads the schema the op has when it is called: it passes the arguments
// in the tagged order, and returns the buffers only where the schema returns them.
//
//     at::Tensor& sin_out(const at::Tensor& x, at::Tensor& out) {  // the tagged form:
//       at::sin_out(out, x);                                         // returns its buffer
//       return out;
//     }
//     TORCH_LIBRARY_IMPL(mylib, CPU, m) { TAGGED_OPS_IMPL(m, "sin.out", sin_out); }
//
// In-place kernels return their first argument (at::Tensor&); out= kernels their buffer, or a
// std::tuple<at::Tensor&, ...> of them, in order. A kernel returning void is taken as a classic
// kernel: the op still returns what it mutated. As the Python kernels of tagged_ops ops do, the
// kernel refuses out= calls under autograd (2.13's error, before anything is written), checks a
// tagged kernel returned the very tensors it mutated, and bumps their version counters.
//
// Argument types: at::Tensor (const& or &), std::optional / c10::optional<at::Tensor>, double,
// int64_t, bool, at::Scalar, std::string / c10::string_view, c10::ArrayRef<T> / std::vector<T>.
// Out= ops whose keyword-only arguments are not all out buffers are refused: on the fallback
// path their order next to the buffers cannot be recovered from the schema.
//
// The Python declaration and the extension's registration may come in either order (the
// kernel is boxed: no schema is inferred from it, and it adapts at call time).
// Compiles against torch 2.2 to 2.15 headers (C++17).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>
#include <c10/util/SmallVector.h>
#include <c10/util/TypeTraits.h>
#include <torch/library.h>

#include <array>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tagged_ops {
namespace detail {

// What an argument is held as between the stack and the call: by value, lists as vectors.
template <class T>
struct stored {
  using type = std::decay_t<T>;
};
template <class E>
struct stored<c10::ArrayRef<E>> {
  using type = std::vector<E>;
};
template <>
struct stored<c10::string_view> {
  using type = std::string;
};
template <class T>
using stored_t = typename stored<std::decay_t<T>>::type;

template <class T>
struct is_tuple : std::false_type {};
template <class... T>
struct is_tuple<std::tuple<T...>> : std::true_type {};

inline bool writes(const c10::Argument& a) {
  return a.alias_info() != nullptr && a.alias_info()->isWrite();
}

// The op's name as Python's tagged_ops names it (helpers carry a suffix on the packet).
inline std::string packet_of(const c10::OperatorHandle& op) {
  std::string name = op.operator_name().name;
  auto colons = name.find("::");
  std::string packet = colons == std::string::npos ? name : name.substr(colons + 2);
  const std::string suffix = "__untagged";
  if (packet.size() > suffix.size() && packet.compare(packet.size() - suffix.size(), suffix.size(), suffix) == 0) {
    packet.resize(packet.size() - suffix.size());
  }
  return packet;
}

inline std::string qualname_of(const c10::OperatorHandle& op) {
  const auto& name = op.operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

// How the schema the op has now maps onto the kernel's (tagged) parameter order.
struct Layout {  // small vectors: worked out on every call, so no heap allocation
  c10::SmallVector<size_t, 8> order;  // stack position of the kernel's i-th parameter
  c10::SmallVector<size_t, 4> mutated;  // stack positions of the mutated tensors, in tagged order
  bool out = false;  // an out= op (its kernel refuses autograd)
};

inline Layout layout_of(const c10::OperatorHandle& op, size_t kernel_arity) {
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  TORCH_CHECK(
      args.size() == kernel_arity, qualname_of(op), ": the C++ kernel takes ", kernel_arity,
      " argument(s) but the op's schema has ", args.size(), ": ", schema);
  Layout layout;
  bool any_written = false, kwarg_out = false;
  for (const auto& a : args) {
    any_written = any_written || writes(a);
    kwarg_out = kwarg_out || (writes(a) && a.kwarg_only());
  }
  // Native path: out buffers are keyword-only. Fallback path: positional, and an in-place op
  // writes its first argument (an out= op with no inputs reads the same either way).
  layout.out = kwarg_out || (any_written && !args.empty() && !writes(args[0]));
  if (!layout.out) {
    for (size_t i = 0; i < args.size(); ++i) {
      layout.order.push_back(i);
    }
    if (!args.empty() && writes(args[0])) {
      layout.mutated.push_back(0);
    }
    return layout;
  }
  // Tagged order: the positional inputs, then the buffers. On the fallback path the buffers sit
  // between the required and the defaulted inputs; on the native path this is the schema order.
  std::vector<std::string> other_keywords;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!writes(args[i]) && !args[i].kwarg_only()) {
      layout.order.push_back(i);
    } else if (!writes(args[i])) {
      other_keywords.push_back(args[i].name());
    }
  }
  if (!other_keywords.empty()) {
    std::ostringstream names;
    for (size_t i = 0; i < other_keywords.size(); ++i) {
      names << (i ? ", " : "") << other_keywords[i];
    }
    TORCH_CHECK(
        false, qualname_of(op), ": a C++ kernel registered with TAGGED_OPS_IMPL takes out= ops whose ",
        "keyword-only arguments are their out buffers; declare ", names.str(),
        " before the `*` (on torch without native tags their place among the buffers cannot be recovered).");
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (writes(args[i])) {
      TORCH_CHECK(
          args[i].type()->kind() == c10::TypeKind::TensorType, qualname_of(op),
          ": TAGGED_OPS_IMPL takes out buffers that are Tensors; ", args[i].name(), " is ", args[i].type()->str());
      layout.order.push_back(i);
      layout.mutated.push_back(i);
    }
  }
  return layout;
}

inline bool requires_grad(const c10::IValue& v) {
  if (v.isTensor()) {
    return v.toTensor().defined() && v.toTensor().requires_grad();
  }
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec()) {
      if (t.defined() && t.requires_grad()) {
        return true;
      }
    }
  }
  if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (requires_grad(e)) {
        return true;
      }
    }
  }
  return false;
}

inline void refuse_autograd(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t base, size_t n) {
  if (!c10::GradMode::is_enabled()) {
    return;
  }
  for (size_t i = base; i < base + n; ++i) {
    TORCH_CHECK(
        !requires_grad(stack[i]), packet_of(op),
        "(): functions with out=... arguments don't support automatic differentiation, but one of the "
        "arguments requires grad.");
  }
}

[[noreturn]] inline void identity_error(const c10::OperatorHandle& op, bool out) {
  TORCH_CHECK(
      false, op.operator_name().overload_name.empty() ? packet_of(op) : packet_of(op) + "." + op.operator_name().overload_name,
      " (with implementation in C++): ",
      out ? "An operator tagged with torch.Tag.out must return its mutable keyword-only arguments."
          : "An operator tagged with torch.Tag.inplace must return its first argument.");
}

template <class R>
void check_identity(const c10::OperatorHandle& op, const Layout& layout, c10::ArrayRef<at::Tensor> mutated, R&& r) {
  using Result = std::decay_t<R>;
  if constexpr (is_tuple<Result>::value) {
    constexpr size_t k = std::tuple_size<Result>::value;
    if (k != mutated.size()) {
      identity_error(op, layout.out);
    }
    std::apply(
        [&](const auto&... t) {
          size_t i = 0;
          bool same = ((t.unsafeGetTensorImpl() == mutated[i++].unsafeGetTensorImpl()) && ...);
          if (!same) {
            identity_error(op, layout.out);
          }
        },
        r);
  } else {
    static_assert(std::is_same<Result, at::Tensor>::value, "a tagged kernel returns at::Tensor& (or a tuple of them)");
    if (mutated.size() != 1 || r.unsafeGetTensorImpl() != mutated[0].unsafeGetTensorImpl()) {
      identity_error(op, layout.out);
    }
  }
}

template <auto kernel, class Params, size_t... I>
void call(const c10::OperatorHandle& op, torch::jit::Stack* stack, std::index_sequence<I...>) {
  constexpr size_t n = sizeof...(I);
  const Layout layout = layout_of(op, n);
  const size_t base = stack->size() - n;
  if (layout.out) {
    refuse_autograd(op, *stack, base, n);
  }
  c10::SmallVector<at::Tensor, 4> mutated;
  for (size_t i : layout.mutated) {
    mutated.push_back((*stack)[base + i].toTensor());
  }
  // Braced initialisation converts the arguments left to right.
  std::tuple<stored_t<c10::guts::typelist::element_t<I, Params>>...> values{
      std::move((*stack)[base + layout.order[I]]).template to<stored_t<c10::guts::typelist::element_t<I, Params>>>()...};
  using Result = decltype(kernel(std::get<I>(values)...));
  if constexpr (std::is_void<Result>::value) {
    kernel(std::get<I>(values)...);  // a classic kernel: mutates, returns nothing
  } else {
    check_identity(op, layout, mutated, kernel(std::get<I>(values)...));
  }
  for (at::Tensor& t : mutated) {
    t.unsafeGetTensorImpl()->bump_version();  // kernels that write through raw pointers skip it
  }
  torch::jit::drop(*stack, n);
  if (!op.schema().returns().empty()) {  // the native path returns the buffers
    for (at::Tensor& t : mutated) {
      stack->emplace_back(std::move(t));
    }
  }
}

template <auto kernel>
void boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  using traits = c10::guts::infer_function_traits_t<std::remove_pointer_t<decltype(kernel)>>;
  call<kernel, typename traits::parameter_types>(
      op, stack, std::make_index_sequence<traits::number_of_parameters>());
}

// "sin.out" -> "sin__untagged.out": the untagged twin tagged_ops defines beside a native op.
inline std::string helper_name(const std::string& name, const std::string& suffix) {
  auto dot = name.find('.');
  return dot == std::string::npos ? name + suffix : name.substr(0, dot) + suffix + name.substr(dot);
}

}  // namespace detail

// Register `kernel` (written in the tagged form) for the op `name` ("sin.out", "scale_") in the
// TORCH_LIBRARY_IMPL block `m`, and for the untagged twin that compiled code calls on 2.13+.
template <auto kernel>
void impl(torch::Library& m, const std::string& name) {
  m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&detail::boxed<kernel>>());
  m.impl(
      detail::helper_name(name, "__untagged").c_str(),
      torch::CppFunction::makeFromBoxedFunction<&detail::boxed<kernel>>());
}

}  // namespace tagged_ops

// TAGGED_OPS_IMPL(m, "sin.out", sin_out_cpu): inside TORCH_LIBRARY_IMPL(mylib, CPU, m) { ... }.
#define TAGGED_OPS_IMPL(m, name, kernel) ::tagged_ops::impl<&(kernel)>(m, name)
