// Tests for the dlopen wrapper: loading, symbols, and errors that name the library and every path tried.
#include "common/dynlib.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace srunway::common {
namespace {

TEST(DynamicLibrary, LoadsAndResolvesSymbols) {
  auto libm = DynamicLibrary::Open("libm.so.6");
  ASSERT_TRUE(libm.ok()) << libm.status().ToString();
  EXPECT_NE(libm->path().find("libm"), std::string::npos);
  auto cosine = libm->Symbol<double(double)>("cos");
  ASSERT_TRUE(cosine.ok());
  EXPECT_DOUBLE_EQ((*cosine)(0.0), 1.0);
  EXPECT_EQ(libm->OptionalSymbol<void()>("srunway_no_such_symbol"), nullptr);
}

TEST(DynamicLibrary, MissingSymbolNamesIt) {
  auto libm = DynamicLibrary::Open("libm.so.6");
  ASSERT_TRUE(libm.ok());
  auto missing = libm->Symbol<void()>("ncclCommInitRankScalable");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("has no symbol ncclCommInitRankScalable"), std::string::npos);
}

TEST(DynamicLibrary, ErrorListsEveryPathTried) {
  std::vector<std::string> dirs = {"/opt/srunway-none/lib64", "/usr/local/srunway-none/"};
  auto nccl = DynamicLibrary::Open("libsrunway-missing.so.2", dirs);
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.status().code(), StatusCode::kNotFound);
  const std::string& message = nccl.status().message();
  EXPECT_TRUE(message.starts_with("cannot load libsrunway-missing.so.2: tried ")) << message;
  EXPECT_NE(message.find("/opt/srunway-none/lib64/libsrunway-missing.so.2 (cannot open shared object file"),
            std::string::npos) << message;
  EXPECT_NE(message.find("/usr/local/srunway-none/libsrunway-missing.so.2 ("), std::string::npos) << message;
  EXPECT_NE(message.find("libsrunway-missing.so.2 via the system search path ("), std::string::npos) << message;
}

TEST(DynamicLibrary, OpenFirstFallsBack) {
  std::vector<std::string> names = {"libsrunway-missing.so.2", "libm.so.6"};
  auto lib = DynamicLibrary::OpenFirst(names);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_NE(lib->path().find("libm"), std::string::npos);
}

TEST(DynamicLibrary, MovesOwnership) {
  auto lib = DynamicLibrary::Open("libm.so.6");
  ASSERT_TRUE(lib.ok());
  DynamicLibrary moved = std::move(*lib);
  EXPECT_TRUE(moved.Symbol<double(double)>("sin").ok());
}

// Whether the dynamic linker still has the library at `path` mapped (RTLD_NOLOAD loads nothing).
bool StillLoaded(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}

TEST(DynamicLibrary, KeepLoadedOutlivesTheHandle) {
  // Copies of libm under names of their own: loaded by this test alone, so closing them can unload them.
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("srunway-dynlib-" + std::to_string(::getpid()));
  fs::create_directories(root);
  auto libm = DynamicLibrary::Open("libm.so.6");
  ASSERT_TRUE(libm.ok());
  const std::string closed = (root / "libsrunway-closed.so").string(), kept = (root / "libsrunway-kept.so").string();
  fs::copy_file(libm->path(), closed);
  fs::copy_file(libm->path(), kept);
  {
    auto lib = DynamicLibrary::Open(closed);
    ASSERT_TRUE(lib.ok()) << lib.status().ToString();
    EXPECT_TRUE(StillLoaded(closed));
  }
  EXPECT_FALSE(StillLoaded(closed)) << "closing the only handle unloads the library";
  {
    auto lib = DynamicLibrary::Open(kept);
    ASSERT_TRUE(lib.ok()) << lib.status().ToString();
    lib->KeepLoaded();
  }
  EXPECT_TRUE(StillLoaded(kept));
  fs::remove_all(root);
}

}  // namespace
}  // namespace srunway::common
