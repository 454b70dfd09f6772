// See site_library.h.
#include "common/site_library.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "common/env.h"
#include "common/parse.h"

namespace srunway::common {
namespace {

namespace fs = std::filesystem;

bool IsDir(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

// Subfolders of `dir` whose names start with `prefix`, sorted (so the search order does not depend on the
// file system's).
std::vector<fs::path> Children(const fs::path& dir, std::string_view prefix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().starts_with(prefix) && IsDir(it->path())) out.push_back(it->path());
  }
  std::ranges::sort(out);
  return out;
}

void Add(std::vector<std::string>& dirs, const fs::path& dir) {
  if (!IsDir(dir)) return;
  std::string text = dir.lexically_normal().string();
  if (std::ranges::find(dirs, text) == dirs.end()) dirs.push_back(std::move(text));
}

}  // namespace

std::vector<std::string> SiteLibraryDirs() {
  std::vector<std::string> dirs;
  std::vector<std::string> cuda_roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (auto root = GetEnv(var); root && !root->empty()) cuda_roots.push_back(*root);
  }
  cuda_roots.emplace_back("/usr/local/cuda");
  for (const fs::path root : cuda_roots) {
    Add(dirs, root / "lib64");
    Add(dirs, root / "lib");
    for (const fs::path& target : Children(root / "targets", "")) Add(dirs, target / "lib");
  }
  std::vector<fs::path> python_roots;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (auto root = GetEnv(var); root && !root->empty()) python_roots.emplace_back(*root);
  }
  // The environment of the python3 on PATH (a virtual environment or a module put there without activating it,
  // as PyTorch images do with /opt/.../.venv/bin).
  if (auto path = GetEnv("PATH")) {
    for (std::string_view dir : Split(*path, ':')) {
      const fs::path bin(dir);
      std::error_code ec;
      if (!dir.empty() && bin.filename() == "bin" && fs::exists(bin / "python3", ec)) {
        python_roots.push_back(bin.parent_path());
      }
    }
  }
  if (auto home = GetEnv("HOME"); home && !home->empty()) python_roots.push_back(fs::path(*home) / ".local");
  for (const char* root : {"/usr/local", "/usr", "/opt/conda"}) python_roots.emplace_back(root);
  for (const fs::path& root : python_roots) {
    for (const fs::path& python : Children(root / "lib", "python3")) {
      for (const char* packages : {"site-packages", "dist-packages"}) {
        for (const fs::path& wheel : Children(python / packages / "nvidia", "")) Add(dirs, wheel / "lib");
      }
    }
  }
  return dirs;
}

StatusOr<DynamicLibrary> OpenSiteLibrary(const SiteLibrary& library) {
  if (library.names.empty()) return InvalidArgument("no library name given");
  if (auto path = GetEnv(library.env_var); path && !path->empty()) {
    auto opened = DynamicLibrary::Open(*path);
    if (!opened.ok()) return opened.status().WithContext(fmt::format("{}={}", library.env_var, *path));
    return opened;
  }
  auto system = DynamicLibrary::OpenFirst(library.names);
  if (system.ok()) return system;
  // Only files that are there: a library that exists and still fails to load says why.
  const std::vector<std::string> dirs = SiteLibraryDirs();
  for (const std::string& dir : dirs) {
    for (const std::string& name : library.names) {
      const fs::path candidate = fs::path(dir) / name;
      std::error_code ec;
      if (!fs::exists(candidate, ec)) continue;
      auto opened = DynamicLibrary::Open(candidate.string());
      if (!opened.ok()) return opened.status().WithContext(fmt::format("found {} but", candidate.string()));
      return opened;
    }
  }
  std::string searched;
  for (const std::string& dir : dirs) searched += (searched.empty() ? "" : ", ") + dir;
  return NotFound("cannot load {}: not on the dynamic linker's search path, nor in the CUDA install or a Python "
                  "wheel's nvidia/*/lib ({}); set {} to its path", library.names.front(),
                  searched.empty() ? "none found" : searched, library.env_var);
}

}  // namespace srunway::common
