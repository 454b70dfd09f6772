// Slurm hostlists both ways, matching `scontrol show hostnames` and `scontrol show hostlist` of Slurm 22.05.
#include "common/hostlist.h"

#include <charconv>
#include <optional>

namespace srunway::common {
namespace {

// Beyond 18 digits a number no longer fits the arithmetic safely; Slurm silently wraps such numbers.
constexpr size_t kMaxDigits = 18;

struct Range {
  uint64_t lo = 0;
  uint64_t hi = 0;
  int width = 0;  // printed with this many digits, zero-padded
};

// One bracket group and the literal text before it: "-n" and {1-2} in "r[1-2]-n[1-2]".
struct Group {
  std::string_view prefix;
  std::vector<Range> ranges;
};

bool IsSeparator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n'; }
bool IsAllDigits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::optional<uint64_t> ParseNumber(std::string_view digits) {
  if (!IsAllDigits(digits) || digits.size() > kMaxDigits) return std::nullopt;
  uint64_t value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value;
}

StatusOr<Range> ParseRange(std::string_view text, std::string_view token) {
  size_t dash = text.find('-');
  std::string_view lo_text = text.substr(0, dash);
  std::string_view hi_text = dash == std::string_view::npos ? lo_text : text.substr(dash + 1);
  auto lo = ParseNumber(lo_text);
  auto hi = ParseNumber(hi_text);
  if (!lo || !hi) return InvalidArgument("invalid range `{}' in `{}'", text, token);
  if (*lo > *hi) return InvalidArgument("invalid range `{}' in `{}': start is after end", text, token);
  if (*hi - *lo + 1 > kMaxHostsPerRange) {
    return InvalidArgument("too many hosts in range `{}' of `{}' (at most {})", text, token, kMaxHostsPerRange);
  }
  return Range{*lo, *hi, static_cast<int>(lo_text.size())};
}

StatusOr<std::vector<Group>> ParseToken(std::string_view token) {
  std::vector<Group> groups;
  size_t pos = 0;
  while (pos < token.size()) {
    size_t open = token.find_first_of("[]", pos);
    if (open == std::string_view::npos) {
      if (!groups.empty()) {
        return InvalidArgument("text `{}' after the last `]' in `{}' (Slurm 22.05 accepts none)",
                               token.substr(pos), token);
      }
      groups.push_back({token, {}});
      return groups;
    }
    if (token[open] == ']') return InvalidArgument("`]' without `[' in `{}'", token);
    size_t close = token.find_first_of("[]", open + 1);
    if (close == std::string_view::npos) return InvalidArgument("unclosed `[' in `{}'", token);
    if (token[close] == '[') return InvalidArgument("nested `[' in `{}'", token);
    Group group{token.substr(pos, open - pos), {}};
    std::string_view body = token.substr(open + 1, close - open - 1);
    size_t start = 0;
    while (true) {
      size_t comma = body.find(',', start);
      auto range = ParseRange(body.substr(start, comma == std::string_view::npos ? comma : comma - start), token);
      if (!range.ok()) return range.status();
      group.ranges.push_back(*range);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    groups.push_back(std::move(group));
    pos = close + 1;
  }
  return groups;
}

uint64_t CountHosts(const std::vector<Group>& groups) {
  uint64_t total = 1;
  for (const Group& group : groups) {
    if (group.ranges.empty()) continue;
    uint64_t count = 0;
    for (const Range& range : group.ranges) count += range.hi - range.lo + 1;
    // Saturate instead of overflowing; the caller only compares against a bound.
    total = count != 0 && total > kMaxExpandedHosts * 2 / count ? kMaxExpandedHosts * 2 : total * count;
  }
  return total;
}

// Slurm peels bracket groups off from the right: the next-to-last group varies slowest, then the ones before it
// down to the first, and the last group fastest. "a[1-2]b[1-2]c[1-2]" starts a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1.
std::vector<size_t> NestingOrder(size_t groups) {
  std::vector<size_t> order;
  for (size_t i = groups - 1; i-- > 0;) order.push_back(i);
  order.push_back(groups - 1);
  return order;
}

// Fixes the number of group order[depth], then of the groups nested inside it; at the bottom emits one host.
void Emit(const std::vector<Group>& groups, const std::vector<size_t>& order, size_t depth,
          std::vector<std::string>& numbers, std::vector<std::string>& out) {
  if (depth == order.size()) {
    std::string host;
    for (size_t i = 0; i < groups.size(); ++i) host.append(groups[i].prefix).append(numbers[i]);
    out.push_back(std::move(host));
    return;
  }
  const Group& group = groups[order[depth]];
  if (group.ranges.empty()) {
    Emit(groups, order, depth + 1, numbers, out);
    return;
  }
  for (const Range& range : group.ranges) {
    for (uint64_t n = range.lo; n <= range.hi; ++n) {
      numbers[order[depth]] = fmt::format("{:0{}}", n, range.width);
      Emit(groups, order, depth + 1, numbers, out);
    }
  }
}

// A host name split the way Slurm's hostname_create does: trailing digits are its number.
struct HostRange {
  std::string prefix;
  uint64_t lo = 0;
  uint64_t hi = 0;
  int width = 0;
  bool single = true;  // no number: the prefix is the whole name
};

HostRange SplitHost(const std::string& host) {
  size_t digits_at = host.size();
  while (digits_at > 0 && host[digits_at - 1] >= '0' && host[digits_at - 1] <= '9') --digits_at;
  std::string_view digits = std::string_view(host).substr(digits_at);
  auto number = ParseNumber(digits);
  if (!number) return HostRange{host, 0, 0, 0, true};
  return HostRange{host.substr(0, digits_at), *number, *number, static_cast<int>(digits.size()), false};
}

int ZeroPadding(uint64_t number, int width) {
  int digits = 1;
  while (number /= 10) ++digits;
  return width > digits ? width - digits : 0;
}

// Slurm's _width_equiv: whether numbers printed with widths *wn and *wm can share one range, unifying the widths.
bool WidthsCombine(uint64_t n, int* wn, uint64_t m, int* wm) {
  int npad = ZeroPadding(n, *wn);
  int nmpad = ZeroPadding(n, *wm);
  int mpad = ZeroPadding(m, *wm);
  int mnpad = ZeroPadding(m, *wn);
  if (npad != nmpad && mpad != mnpad) return false;
  if (npad != nmpad) {
    *wm = *wn;
  } else {
    *wn = *wm;
  }
  return true;
}

void AppendNumbers(const HostRange& range, std::string& out) {
  fmt::format_to(std::back_inserter(out), "{:0{}}", range.lo, range.width);
  if (range.hi > range.lo) fmt::format_to(std::back_inserter(out), "-{:0{}}", range.hi, range.width);
}

bool SameBracket(const HostRange& a, const HostRange& b) { return !a.single && !b.single && a.prefix == b.prefix; }

}  // namespace

StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view hostlist) {
  std::vector<std::string> hosts;
  size_t pos = 0;
  while (pos < hostlist.size()) {
    if (IsSeparator(hostlist[pos])) {
      ++pos;
      continue;
    }
    // A token ends at a separator outside brackets.
    size_t end = pos;
    int depth = 0;
    while (end < hostlist.size() && !(depth == 0 && IsSeparator(hostlist[end]))) {
      if (hostlist[end] == '[') ++depth;
      if (hostlist[end] == ']') --depth;
      ++end;
    }
    std::string_view token = hostlist.substr(pos, end - pos);
    pos = end;
    auto groups = ParseToken(token);
    if (!groups.ok()) return groups.status();
    if (hosts.size() + CountHosts(*groups) > kMaxExpandedHosts) {
      return ResourceExhausted("hostlist `{}' expands to more than {} hosts", hostlist.substr(0, 80),
                               kMaxExpandedHosts);
    }
    std::vector<std::string> numbers(groups->size());
    Emit(*groups, NestingOrder(groups->size()), 0, numbers, hosts);
  }
  return hosts;
}

std::string CompressHostlist(std::span<const std::string> hosts) {
  std::vector<HostRange> ranges;
  for (const std::string& host : hosts) {
    HostRange next = SplitHost(host);
    if (!ranges.empty()) {
      HostRange& tail = ranges.back();
      if (SameBracket(tail, next) && tail.hi + 1 == next.lo && WidthsCombine(tail.lo, &tail.width, next.lo, &next.width)) {
        tail.hi = next.hi;
        continue;
      }
    }
    ranges.push_back(std::move(next));
  }

  std::string out;
  for (size_t i = 0; i < ranges.size();) {
    size_t end = i + 1;
    while (end < ranges.size() && SameBracket(ranges[end - 1], ranges[end])) ++end;
    if (!out.empty()) out += ',';
    out += ranges[i].prefix;
    if (ranges[i].single) {
      i = end;
      continue;
    }
    bool bracket = end - i > 1 || ranges[i].hi > ranges[i].lo;
    if (bracket) out += '[';
    for (size_t j = i; j < end; ++j) {
      if (j > i) out += ',';
      AppendNumbers(ranges[j], out);
    }
    if (bracket) out += ']';
    i = end;
  }
  return out;
}

}  // namespace srunway::common
