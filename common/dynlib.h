// dlopen wrapper: site libraries (NCCL, the CUDA driver, cuBLASLt, cuDNN) are loaded at run time, never linked.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace srunway::common {

class DynamicLibrary {
 public:
  // Tries `name` in each of `search_dirs`, then through the system search path (LD_LIBRARY_PATH, ld.so.cache).
  // A name with a '/' is tried as given, alone. The error names the library and every path tried, with why.
  static StatusOr<DynamicLibrary> Open(std::string_view name, std::span<const std::string> search_dirs = {});
  // The first of several names that loads (libnccl.so.2, then libnccl.so); the error lists every attempt.
  static StatusOr<DynamicLibrary> OpenFirst(std::span<const std::string> names,
                                            std::span<const std::string> search_dirs = {});

  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary();

  // The file that was loaded, as the dynamic linker resolved it.
  const std::string& path() const { return path_; }
  // The library stays loaded for the rest of the process, whatever happens to this handle.
  void KeepLoaded() const;

  StatusOr<void*> RawSymbol(std::string_view symbol) const;
  template <typename Fn>
  StatusOr<Fn*> Symbol(std::string_view symbol) const {
    SRUNWAY_ASSIGN_OR_RETURN(void* address, RawSymbol(symbol));
    return reinterpret_cast<Fn*>(address);
  }
  // nullptr where the library lacks it: for entry points that newer versions add.
  template <typename Fn>
  Fn* OptionalSymbol(std::string_view symbol) const {
    auto address = RawSymbol(symbol);
    return address.ok() ? reinterpret_cast<Fn*>(*address) : nullptr;
  }

 private:
  DynamicLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace srunway::common

// Assigns the function `name`, declared by a library's header, from DynamicLibrary `lib` to `target`, or returns
// the error. Headers map some names to versioned symbols (cuda.h's cuMemAlloc is cuMemAlloc_v2): the name is
// macro-expanded before it is stringized, so dlsym is asked for the symbol the header means.
#define SRUNWAY_SYMBOL_NAME_EXPANDED(name) #name
#define SRUNWAY_SYMBOL_NAME(name) SRUNWAY_SYMBOL_NAME_EXPANDED(name)
#define SRUNWAY_LOAD_SYMBOL(target, lib, name) \
  SRUNWAY_ASSIGN_OR_RETURN((target), (lib).Symbol<decltype(::name)>(SRUNWAY_SYMBOL_NAME(name)))
