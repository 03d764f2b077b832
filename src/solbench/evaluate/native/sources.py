"""The C++ that solbench adds to a native solution's build: the prelude, the binding and the export list.

``PRELUDE`` is force-included (``-include``) before every source of the solution. It includes pybind11's
macro header first (its include guard then keeps pybind11's own ``PYBIND11_MODULE`` from coming back) and
redefines ``PYBIND11_MODULE(name, m)`` so that the module body the solution wrote (``m.def("run", &run)``)
fills a plain table (``solbench_native::Module``) through one ``extern "C"`` function,
``solbench_native_module``, instead of creating a Python module: the table records each function's name, the
kinds of its parameters and result, a pointer to it and a typed call thunk, all of it code that needs no Python.

``BINDING`` is the trusted side's Python extension (``solbench_native_binding``), built once per toolchain and
torch version: ``bind(address)`` calls the solution's ``solbench_native_module`` at ``address`` and returns a
dict of Python callables that convert torch tensors and Python numbers to the recorded kinds.

``EXPORTS`` is the solution library's version script: only ``solbench_native_module`` is exported, so the
linker's ``--gc-sections`` keeps nothing the table, the static initialisers and their callees do not reach.
"""

from __future__ import annotations

import hashlib

ENTRY = "solbench_native_module"
BINDING_MODULE = "solbench_native_binding"

PRELUDE = r"""// solbench's prelude: force-included before every source of a native solution.
#pragma once
#ifdef __cplusplus
#include <pybind11/detail/common.h>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace at { class Tensor; }
namespace c10 { template <typename T> class ArrayRef; }

namespace solbench_native {

using Thunk = void (*)(const void* fn, void* const* args, void* ret);

struct Entry {
  const char* name;
  const char* kinds;  // the result's kind, then one per parameter
  Thunk thunk;
  const void* fn;
};

template <class T> using Bare = std::remove_cv_t<std::remove_reference_t<T>>;

// T tensor, o optional tensor, L list of tensors, I list of integers, i integer, f floating point, b bool
template <class T, class = void> struct Kind { static constexpr char value = '?'; };
template <class T> struct Kind<T, std::enable_if_t<std::is_same_v<T, at::Tensor>>> { static constexpr char value = 'T'; };
template <class T> struct Kind<T, std::enable_if_t<std::is_same_v<T, bool>>> { static constexpr char value = 'b'; };
template <class T> struct Kind<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static constexpr char value = 'i';
};
template <class T> struct Kind<T, std::enable_if_t<std::is_floating_point_v<T>>> { static constexpr char value = 'f'; };
template <class T> struct Kind<std::optional<T>, std::enable_if_t<std::is_same_v<T, at::Tensor>>> {
  static constexpr char value = 'o';
};
template <class T> struct Kind<std::vector<T>, std::enable_if_t<std::is_same_v<T, at::Tensor>>> {
  static constexpr char value = 'L';
};
template <class T> struct Kind<std::vector<T>, std::enable_if_t<std::is_same_v<T, int64_t>>> {
  static constexpr char value = 'I';
};
template <class T> struct Kind<c10::ArrayRef<T>, std::enable_if_t<std::is_same_v<T, int64_t>>> {
  static constexpr char value = 'I';
};

// results: v nothing, U a tuple of tensors, else a parameter's kind
template <class R> struct Ret { static constexpr char value = Kind<R>::value; };
template <> struct Ret<void> { static constexpr char value = 'v'; };
template <class... T> struct Ret<std::tuple<T...>> {
  static constexpr char value = ((Kind<Bare<T>>::value == 'T') && ...) ? 'U' : '?';
};

template <class F> struct Sig : Sig<decltype(&F::operator())> {};
template <class R, class... A> struct Sig<R (*)(A...)> { using Result = R; using Args = std::tuple<A...>; };
template <class R, class... A> struct Sig<R (*)(A...) noexcept> : Sig<R (*)(A...)> {};
template <class C, class R, class... A> struct Sig<R (C::*)(A...)> : Sig<R (*)(A...)> {};
template <class C, class R, class... A> struct Sig<R (C::*)(A...) const> : Sig<R (*)(A...)> {};
template <class C, class R, class... A> struct Sig<R (C::*)(A...) noexcept> : Sig<R (*)(A...)> {};
template <class C, class R, class... A> struct Sig<R (C::*)(A...) const noexcept> : Sig<R (*)(A...)> {};

template <char K> struct Scalar;
template <> struct Scalar<'b'> { using type = bool; };
template <> struct Scalar<'i'> { using type = int64_t; };
template <> struct Scalar<'f'> { using type = double; };

template <class A> decltype(auto) argument(void* p) {
  using B = Bare<A>;
  constexpr char k = Kind<B>::value;
  if constexpr (k == 'b' || k == 'i' || k == 'f') {
    return static_cast<B>(*static_cast<typename Scalar<k>::type*>(p));
  } else if constexpr (k == 'I' && !std::is_same_v<B, std::vector<int64_t>>) {
    return B(*static_cast<std::vector<int64_t>*>(p));
  } else {
    return *static_cast<B*>(p);  // at::Tensor, std::optional<at::Tensor>, std::vector<at::Tensor>, ints
  }
}

template <class D, class R, class... A, std::size_t... I>
void call(const void* fn, void* const* args, void* ret, std::index_sequence<I...>) {
  const D& f = *static_cast<const D*>(fn);
  constexpr char k = Ret<Bare<R>>::value;
  if constexpr (std::is_void_v<R>) {
    f(argument<A>(args[I])...);
  } else if constexpr (k == 'U') {
    auto out = f(argument<A>(args[I])...);
    auto* v = static_cast<std::vector<at::Tensor>*>(ret);
    std::apply([v](auto&... t) { (v->push_back(t), ...); }, out);
  } else if constexpr (k == 'b' || k == 'i' || k == 'f') {
    *static_cast<typename Scalar<k>::type*>(ret) = f(argument<A>(args[I])...);
  } else {
    *static_cast<Bare<R>*>(ret) = f(argument<A>(args[I])...);
  }
}

template <class D, class R, class Args> struct Erased;
template <class D, class R, class... A> struct Erased<D, R, std::tuple<A...>> {
  static constexpr char kinds[] = {Ret<Bare<R>>::value, Kind<Bare<A>>::value..., '\0'};
  static constexpr bool ok = Ret<Bare<R>>::value != '?' && ((Kind<Bare<A>>::value != '?') && ...);
  static void thunk(const void* fn, void* const* args, void* ret) {
    call<D, R, A...>(fn, args, ret, std::index_sequence_for<A...>{});
  }
};

struct Doc {
  Doc& operator=(const char*) { return *this; }
};

struct Module {
  static constexpr int capacity = 64;
  Entry entries[capacity];
  int count = 0;

  template <class F, class... Extra>
  Module& def(const char* name, F&& f, const Extra&...) {
    using D = std::decay_t<F>;
    using P = std::conditional_t<std::is_function_v<std::remove_pointer_t<D>>,
                                 std::add_pointer_t<std::remove_pointer_t<D>>, D>;
    using S = Sig<P>;
    using E = Erased<D, typename S::Result, typename S::Args>;
    static_assert(E::ok,
                  "solbench: a bound function takes at::Tensor, std::optional<at::Tensor>, std::vector<at::Tensor>, "
                  "integers, floating-point numbers, bool or std::vector<int64_t> / at::IntArrayRef, and returns "
                  "void, at::Tensor, std::vector<at::Tensor>, a std::tuple of at::Tensor or one of those scalars");
    if (count < capacity) entries[count++] = Entry{name, E::kinds, &E::thunk, new D(std::forward<F>(f))};
    return *this;
  }
  Doc doc() { return {}; }
};

}  // namespace solbench_native

#ifndef SOLBENCH_BINDING
#undef PYBIND11_MODULE
#define PYBIND11_MODULE(name, variable, ...)                                                            \
  static void solbench_module_body(::solbench_native::Module&);                                         \
  extern "C" __attribute__((visibility("default"))) void solbench_native_module(                        \
      ::solbench_native::Module& solbench_table) {                                                      \
    solbench_module_body(solbench_table);                                                               \
  }                                                                                                     \
  static void solbench_module_body(::solbench_native::Module& variable)
#endif  // SOLBENCH_BINDING
#endif  // __cplusplus
"""

BINDING = r"""// solbench's binding of a native solution: the solution's library fills a solbench_native::Module through
// solbench_native_module(); bind(address) turns each entry into a Python callable.
#define SOLBENCH_BINDING 1
#include <torch/csrc/utils/pybind.h>
#include <cstring>
#include <string>
#include "solbench_prelude.h"

namespace py = pybind11;
using solbench_native::Entry;
using solbench_native::Module;

namespace {

bool valid(const Entry& e) {
  if (!e.name || !e.kinds || !e.thunk || !e.fn) return false;
  std::size_t n = 0;
  for (; n < 128 && e.name[n]; ++n) {
    const char c = e.name[n];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (n > 0 && c >= '0' && c <= '9')))
      return false;
  }
  if (n == 0 || n == 128) return false;
  std::size_t k = 0;
  for (; k < 64 && e.kinds[k]; ++k)
    if (!std::strchr(k == 0 ? "vTLUifb" : "ToLIifb", e.kinds[k])) return false;
  return k >= 1 && k < 64;
}

struct Slot {
  at::Tensor tensor;
  std::optional<at::Tensor> optional;
  std::vector<at::Tensor> tensors;
  std::vector<int64_t> ints;
  int64_t integer = 0;
  double real = 0.0;
  bool flag = false;

  void* load(char kind, py::handle h) {
    switch (kind) {
      case 'T': tensor = py::cast<at::Tensor>(h); return &tensor;
      case 'o': if (!h.is_none()) optional = py::cast<at::Tensor>(h); return &optional;
      case 'L': tensors = py::cast<std::vector<at::Tensor>>(h); return &tensors;
      case 'I': ints = py::cast<std::vector<int64_t>>(h); return &ints;
      case 'i': integer = py::cast<int64_t>(h); return &integer;
      case 'f': real = py::cast<double>(h); return &real;
      default: flag = py::cast<bool>(h); return &flag;
    }
  }

  void* result(char kind) {
    switch (kind) {
      case 'T': return &tensor;
      case 'L': case 'U': return &tensors;
      case 'i': return &integer;
      case 'f': return &real;
      case 'b': return &flag;
      default: return nullptr;
    }
  }
};

py::object call(const Entry& e, const py::args& args) {
  const std::size_t n = std::strlen(e.kinds) - 1;
  if (args.size() != n)
    throw py::type_error(std::string(e.name) + "() takes " + std::to_string(n) + " arguments (" +
                         std::to_string(args.size()) + " given)");
  std::vector<Slot> slots(n);
  std::vector<void*> pointers(n);
  for (std::size_t i = 0; i < n; ++i) pointers[i] = slots[i].load(e.kinds[i + 1], args[i]);
  Slot out;
  e.thunk(e.fn, pointers.data(), out.result(e.kinds[0]));
  switch (e.kinds[0]) {
    case 'T': return py::cast(out.tensor);
    case 'L': return py::cast(out.tensors);
    case 'U': return py::tuple(py::cast(out.tensors));
    case 'i': return py::cast(out.integer);
    case 'f': return py::cast(out.real);
    case 'b': return py::cast(out.flag);
    default: return py::none();
  }
}

py::dict bind(std::uintptr_t address) {
  auto* table = new Module();
  reinterpret_cast<void (*)(Module&)>(address)(*table);
  py::dict out;
  const int count = table->count < 0 || table->count > Module::capacity ? 0 : table->count;
  for (int i = 0; i < count; ++i) {
    const Entry e = table->entries[i];
    if (!valid(e)) throw py::value_error("solbench: the solution's module table is malformed");
    out[py::str(e.name)] = py::cpp_function([e](py::args args) { return call(e, args); }, py::name(e.name));
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(solbench_native_binding, m) { m.def("bind", &bind); }
"""

EXPORTS = "{ global: %s; local: *; };\n" % ENTRY


def digest() -> str:
    """A hash of what this module adds to a build (part of every build's key)."""
    return hashlib.sha256((PRELUDE + BINDING + EXPORTS).encode()).hexdigest()
