// libFuzzer target: any text as srunway-train's --config gives command-line words of the program's own flags, or
// one error naming the file; never an exception (a list as a key, a directory, deep nesting each aborted).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/train/config_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One flag of each kind srunway-train has: a switch, a value, a list; --config itself; one given on the command
  // line (the file's value for it is skipped).
  static CLI::App* app = [] {
    auto* app = new CLI::App("fuzz");
    static bool mock = false;
    static double lr = 0;
    static std::vector<std::string> data_path;
    static std::string config, save;
    app->add_flag("--mock-data", mock);
    app->add_option("--lr", lr);
    app->add_option("--data-path", data_path);
    app->add_option("--config", config);
    app->add_option("--save", save);
    return app;
  }();
  static const std::set<std::string> kGiven = {"--save"};
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto words = srunway::trainer::ConfigWords(text, "fuzz.yaml", kGiven, *app);
  if (!words.ok()) {
    if (!words.status().message().starts_with("fuzz.yaml")) std::abort();
    return 0;
  }
  // The words start with a flag of the program: not --config (a file cannot name another) nor one given.
  if (!words->empty()) {
    const std::string& first = words->front();
    if (first != "--lr" && first != "--mock-data" && first != "--data-path") std::abort();
  }
  return 0;
}
