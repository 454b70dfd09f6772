// srunway-train's --config FILE.yaml as command-line words.
#include "trainer/train/config_file.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <optional>

#include "common/fs.h"
#include "common/parse.h"
#include "trainer/train/megatron_args.h"

namespace srunway::trainer {
namespace {

// A key, or an item of a value's list, that is itself a list or mapping.
std::optional<YAML::Node> NotScalar(const YAML::Node& key, const YAML::Node& value) {
  if (key.IsSequence() || key.IsMap()) return key;
  if (value.IsSequence()) {
    for (const YAML::Node& item : value) {
      if (item.IsSequence() || item.IsMap()) return item;
    }
  }
  return std::nullopt;
}

common::StatusOr<std::vector<std::string>> WordsOf(const YAML::Node& root, const std::string& path,
                                                   const std::set<std::string>& given, const CLI::App& app) {
  if (!root.IsMap()) return common::InvalidArgument("{}: expected a mapping of flag: value", path);
  std::vector<std::string> words;
  std::map<std::string, int> first_line;  // YAML forbids a key twice; yaml-cpp keeps both (mock_data = mock-data)
  for (const auto& entry : root) {
    // A list or mapping as a key or a list item threw YAML::TypedBadConversion past every handler (abort).
    if (std::optional<YAML::Node> odd = NotScalar(entry.first, entry.second)) {
      return common::InvalidArgument("{}:{}:{}: expected a flag name or value, not a {}", path, odd->Mark().line + 1,
                                     odd->Mark().column + 1, odd->IsMap() ? "mapping" : "list");
    }
    std::string key = entry.first.as<std::string>();
    std::replace(key.begin(), key.end(), '_', '-');
    const std::string flag = "--" + key;
    const int line = entry.first.Mark().line + 1;
    if (auto [at, fresh] = first_line.emplace(key, line); !fresh) {
      return common::InvalidArgument("{}:{}: '{}' is given twice (first on line {})", path, line, key, at->second);
    }
    if (key == "config") {
      return common::InvalidArgument("{}:{}: 'config' cannot be set in a config file", path, line);
    }
    const CLI::Option* option = app.get_option_no_throw(flag);
    if (option == nullptr) {
      if (const std::string refused = RefusedMegatronFlag({flag}); !refused.empty()) {
        return common::InvalidArgument("{}:{}: {}", path, line, refused);
      }
      return common::InvalidArgument("{}:{}: unknown key '{}' (srunway-train has no {}; see --help)", path, line,
                                     entry.first.as<std::string>(), flag);
    }
    if (given.count(flag)) continue;  // the command line wins
    const YAML::Node& value = entry.second;
    if (value.IsSequence() && option->get_items_expected_max() <= 1) {
      return common::InvalidArgument("{}:{}: '{}' takes one value, not a list", path, line, key);
    }
    if (value.IsSequence()) {
      words.push_back(flag);
      for (const auto& item : value) words.push_back(item.as<std::string>());
    } else if (value.IsScalar() && option->get_items_expected_max() == 0) {  // a switch
      const std::string text = value.as<std::string>();
      if (text != "true" && text != "false") {
        return common::InvalidArgument("{}:{}: '{}' is a switch: true or false, not '{}'", path, line, key,
                                       common::Printable(text));
      }
      if (text == "true") words.push_back(flag);
    } else if (value.IsScalar()) {
      words.push_back(flag);
      words.push_back(value.as<std::string>());
    } else {
      return common::InvalidArgument("{}:{}: '{}' must be a scalar or a list", path, line, key);
    }
  }
  return words;
}

}  // namespace

common::StatusOr<std::vector<std::string>> ConfigWords(std::string_view text, const std::string& path,
                                                       const std::set<std::string>& given, const CLI::App& app) {
  try {
    return WordsOf(YAML::Load(std::string(text)), path, given, app);
  } catch (const YAML::DeepRecursion& e) {  // yaml-cpp says "bad file"
    return common::InvalidArgument("{}:{}:{}: nested too deep for a mapping of flag: value", path, e.mark.line + 1,
                                   e.mark.column + 1);
  } catch (const YAML::Exception& e) {
    return common::InvalidArgument("{}:{}:{}: {}", path, e.mark.line + 1,
                                   e.mark.column + 1, common::Printable(e.msg, 200));
  }
}

common::StatusOr<std::vector<std::string>> ConfigFileWords(const std::string& path, const std::set<std::string>& given,
                                                           const CLI::App& app) {
  // Read here: yaml-cpp's LoadFile said "0:0: bad file" for a missing one, and a directory threw std::ios_failure
  // past every handler (abort, exit 134).
  auto text = common::ReadFile(path);
  if (!text.ok()) return common::InvalidArgument("--config: {}", text.status().message());
  return ConfigWords(*text, path, given, app);
}

}  // namespace srunway::trainer
