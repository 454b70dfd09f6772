// dlopen wrapper: site libraries (NCCL, the CUDA driver, cuBLASLt, cuDNN) are loaded at run time, never linked.
#include "common/dynlib.h"

#include <dlfcn.h>
#include <link.h>

#include <vector>

namespace srunway::common {
namespace {

std::string LastDlError() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown dlopen error";
}

std::string ResolvedPath(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return fallback;
}

// Tries one name in every place; appends "where (why)" for each failure to `attempts`.
void* TryOpen(std::string_view name, std::span<const std::string> search_dirs, std::string& loaded_from,
              std::vector<std::string>& attempts) {
  std::vector<std::string> candidates;
  if (name.find('/') == std::string_view::npos) {
    for (const std::string& dir : search_dirs) {
      if (!dir.empty()) candidates.push_back(dir + (dir.back() == '/' ? "" : "/") + std::string(name));
    }
  }
  candidates.emplace_back(name);
  for (const std::string& candidate : candidates) {
    dlerror();
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      loaded_from = ResolvedPath(handle, candidate);
      return handle;
    }
    std::string why = LastDlError();
    // dlerror repeats the path we already name; keep only the reason after it.
    if (why.starts_with(candidate + ": ")) why = why.substr(candidate.size() + 2);
    bool system_search = candidate.find('/') == std::string::npos;
    attempts.push_back(fmt::format("{}{} ({})", candidate, system_search ? " via the system search path" : "", why));
  }
  return nullptr;
}

}  // namespace

StatusOr<DynamicLibrary> DynamicLibrary::Open(std::string_view name, std::span<const std::string> search_dirs) {
  std::string names[] = {std::string(name)};
  return OpenFirst(names, search_dirs);
}

StatusOr<DynamicLibrary> DynamicLibrary::OpenFirst(std::span<const std::string> names,
                                                   std::span<const std::string> search_dirs) {
  if (names.empty()) return InvalidArgument("no library name given");
  std::vector<std::string> attempts;
  for (const std::string& name : names) {
    std::string path;
    if (void* handle = TryOpen(name, search_dirs, path, attempts)) return DynamicLibrary(handle, path);
  }
  std::string tried;
  for (const std::string& attempt : attempts) tried += (tried.empty() ? "" : "; ") + attempt;
  return NotFound("cannot load {}: tried {}", names.front(), tried);
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void DynamicLibrary::KeepLoaded() const {
  // A second handle that is never closed; RTLD_NODELETE keeps the library even past a dlclose of every handle.
  if (handle_ != nullptr) dlopen(path_.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

StatusOr<void*> DynamicLibrary::RawSymbol(std::string_view symbol) const {
  dlerror();
  void* address = dlsym(handle_, std::string(symbol).c_str());
  if (address == nullptr) {
    return NotFound("{} has no symbol {}: {}", path_, symbol, LastDlError());
  }
  return address;
}

}  // namespace srunway::common
