// Finding site libraries: the override variable, the CUDA install, Python wheels' nvidia/*/lib, in that order, and
// an error that says what was searched. A copy of libm under another name stands in for the library.
#include "common/site_library.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

namespace srunway::common {
namespace {

namespace fs = std::filesystem;

class SiteLibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("srunway-sitelib-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    for (const char* var : {"CUDA_HOME", "CUDA_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "SRUNWAY_TEST_LIBRARY", "PATH"}) {
      Save(var);
      unsetenv(var);
    }
    Save("HOME");
    setenv("HOME", root_.c_str(), 1);
    auto libm = DynamicLibrary::Open("libm.so.6");
    ASSERT_TRUE(libm.ok());
    libm_ = libm->path();
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
    fs::remove_all(root_);
  }
  // Puts the stand-in library at root/relative and returns that path.
  std::string Place(const std::string& relative) {
    const fs::path path = root_ / relative;
    fs::create_directories(path.parent_path());
    fs::copy_file(libm_, path);
    return path.string();
  }
  void Save(const char* var) {
    const char* value = getenv(var);
    saved_.emplace_back(var, value ? std::optional<std::string>(value) : std::nullopt);
  }
  static SiteLibrary Fake() { return {"SRUNWAY_TEST_LIBRARY", {"libsrunway-fake.so.2", "libsrunway-fake.so"}}; }

  fs::path root_;
  std::string libm_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(SiteLibraryTest, FindsAWheelInAVirtualEnvironment) {
  const std::string wheel = Place("venv/lib/python3.11/site-packages/nvidia/nccl/lib/libsrunway-fake.so.2");
  setenv("VIRTUAL_ENV", (root_ / "venv").c_str(), 1);
  auto lib = OpenSiteLibrary(Fake());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_EQ(fs::canonical(lib->path()), fs::canonical(wheel));
  auto dirs = SiteLibraryDirs();
  EXPECT_NE(std::ranges::find(dirs, (root_ / "venv/lib/python3.11/site-packages/nvidia/nccl/lib").string()),
            dirs.end());
}

// PyTorch's images put their environment's bin on PATH without setting VIRTUAL_ENV.
TEST_F(SiteLibraryTest, FindsAWheelBesideThePython3OnPath) {
  const std::string wheel = Place("opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libsrunway-fake.so.2");
  Place("opt/torch/.venv/bin/python3");
  setenv("PATH", ("/nonexistent/bin:" + (root_ / "opt/torch/.venv/bin").string() + ":/usr/bin").c_str(), 1);
  auto lib = OpenSiteLibrary(Fake());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_EQ(fs::canonical(lib->path()), fs::canonical(wheel));
}

TEST_F(SiteLibraryTest, CudaInstallBeforeWheelsAndUserSitePackages) {
  Place(".local/lib/python3.12/site-packages/nvidia/cublas/lib/libsrunway-fake.so");
  const std::string cuda = Place("cuda/lib64/libsrunway-fake.so.2");
  setenv("CUDA_HOME", (root_ / "cuda").c_str(), 1);
  auto lib = OpenSiteLibrary(Fake());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_EQ(fs::canonical(lib->path()), fs::canonical(cuda));
  unsetenv("CUDA_HOME");
  auto user = OpenSiteLibrary(Fake());  // ~/.local, found through HOME
  ASSERT_TRUE(user.ok()) << user.status().ToString();
  EXPECT_NE(user->path().find("/.local/lib/python3.12/site-packages/nvidia/cublas/lib/"), std::string::npos);
}

TEST_F(SiteLibraryTest, OverrideIsTheOnlyPlaceTried) {
  Place("cuda/lib64/libsrunway-fake.so.2");
  setenv("CUDA_HOME", (root_ / "cuda").c_str(), 1);
  setenv("SRUNWAY_TEST_LIBRARY", "/nonexistent/libsrunway-fake.so.2", 1);
  auto lib = OpenSiteLibrary(Fake());
  ASSERT_FALSE(lib.ok());
  EXPECT_TRUE(lib.status().message().starts_with(
      "SRUNWAY_TEST_LIBRARY=/nonexistent/libsrunway-fake.so.2: cannot load /nonexistent/libsrunway-fake.so.2"))
      << lib.status().message();
  const std::string given = Place("mine/libanything.so");
  setenv("SRUNWAY_TEST_LIBRARY", given.c_str(), 1);
  auto mine = OpenSiteLibrary(Fake());
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(fs::canonical(mine->path()), fs::canonical(given));
}

TEST_F(SiteLibraryTest, NotFoundSaysWhereItLookedAndWhatToSet) {
  fs::create_directories(root_ / "cuda/lib64");
  setenv("CUDA_HOME", (root_ / "cuda").c_str(), 1);
  auto lib = OpenSiteLibrary(Fake());
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), StatusCode::kNotFound);
  const std::string& message = lib.status().message();
  EXPECT_TRUE(message.starts_with("cannot load libsrunway-fake.so.2: not on the dynamic linker's search path, nor in "
                                  "the CUDA install or a Python wheel's nvidia/*/lib (")) << message;
  EXPECT_NE(message.find((root_ / "cuda/lib64").string()), std::string::npos) << message;
  EXPECT_TRUE(message.ends_with("); set SRUNWAY_TEST_LIBRARY to its path")) << message;
}

TEST_F(SiteLibraryTest, AFileThatDoesNotLoadSaysSo) {
  const fs::path broken = root_ / "cuda/lib64/libsrunway-fake.so.2";
  fs::create_directories(broken.parent_path());
  std::ofstream(broken) << "not an ELF file";
  setenv("CUDA_HOME", (root_ / "cuda").c_str(), 1);
  auto lib = OpenSiteLibrary(Fake());
  ASSERT_FALSE(lib.ok());
  EXPECT_TRUE(lib.status().message().starts_with("found " + broken.string() + " but: cannot load"))
      << lib.status().message();
}

}  // namespace
}  // namespace srunway::common
