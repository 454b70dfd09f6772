// Tests for hostlist expansion and compression; expected values were taken from Slurm 22.05's scontrol.
#include "common/hostlist.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace srunway::common {
namespace {

using Hosts = std::vector<std::string>;

Hosts Expand(std::string_view text) {
  auto hosts = ExpandHostlist(text);
  EXPECT_TRUE(hosts.ok()) << text << ": " << hosts.status().ToString();
  return hosts.ok() ? *hosts : Hosts{};
}

TEST(ExpandHostlist, RangesListsAndPadding) {
  EXPECT_EQ(Expand("gpu-a[01-03,07],login1"), (Hosts{"gpu-a01", "gpu-a02", "gpu-a03", "gpu-a07", "login1"}));
  EXPECT_EQ(Expand("n[8-10]"), (Hosts{"n8", "n9", "n10"}));
  EXPECT_EQ(Expand("n[08-10]"), (Hosts{"n08", "n09", "n10"}));
  // The width is that of the first number, as in Slurm.
  EXPECT_EQ(Expand("n[1-010]").size(), 10u);
  EXPECT_EQ(Expand("n[1-010]").back(), "n10");
  EXPECT_EQ(Expand("n[01-3],n4"), (Hosts{"n01", "n02", "n03", "n4"}));
  EXPECT_EQ(Expand("n[0]"), (Hosts{"n0"}));
}

TEST(ExpandHostlist, OrderAndDuplicatesAreKept) {
  EXPECT_EQ(Expand("n1,n3,n2"), (Hosts{"n1", "n3", "n2"}));
  EXPECT_EQ(Expand("a,b,a"), (Hosts{"a", "b", "a"}));
  EXPECT_EQ(Expand("n[1,2-3,2]"), (Hosts{"n1", "n2", "n3", "n2"}));
}

TEST(ExpandHostlist, SeparatorsAndEmptyFields) {
  EXPECT_EQ(Expand("n[1-2] m[3]"), (Hosts{"n1", "n2", "m3"}));
  EXPECT_EQ(Expand("n1\tn2\nn3"), (Hosts{"n1", "n2", "n3"}));
  EXPECT_EQ(Expand("n[1-2],,m3,"), (Hosts{"n1", "n2", "m3"}));
  EXPECT_TRUE(Expand("").empty());
  EXPECT_TRUE(Expand(" , ").empty());
}

TEST(ExpandHostlist, SeveralBracketsMultiplyOut) {
  EXPECT_EQ(Expand("r[1-2]-n[1-2]"), (Hosts{"r1-n1", "r1-n2", "r2-n1", "r2-n2"}));
  EXPECT_EQ(Expand("[1-2]"), (Hosts{"1", "2"}));
  EXPECT_EQ(Expand("a[1-2]b[1-2]c[1-2]").size(), 8u);
  // Slurm's order with three groups: the middle one slowest, then the first, the last fastest.
  EXPECT_EQ(Expand("a[1-2]b[1-2]c[1-2]"),
            (Hosts{"a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"}));
}

TEST(ExpandHostlist, NamesWithoutBracketsAreLiteral) {
  EXPECT_EQ(Expand("n0-1"), (Hosts{"n0-1"}));
  EXPECT_EQ(Expand("n1;n2"), (Hosts{"n1;n2"}));
  EXPECT_EQ(Expand("node"), (Hosts{"node"}));
}

TEST(ExpandHostlist, LargestRangeSlurmAccepts) {
  EXPECT_EQ(Expand("n[1-65536]").size(), 65536u);
}

struct Malformed {
  const char* hostlist;
  const char* message;
};

TEST(ExpandHostlist, MalformedInputIsAnErrorThatQuotesIt) {
  const Malformed cases[] = {
      {"n[3-1]", "invalid range `3-1' in `n[3-1]': start is after end"},
      {"n[a]", "invalid range `a' in `n[a]'"},
      {"n[1,,2]", "invalid range `' in `n[1,,2]'"},
      {"n[]", "invalid range `' in `n[]'"},
      {"n[-1]", "invalid range `-1' in `n[-1]'"},
      {"n[1--2]", "invalid range `1--2' in `n[1--2]'"},
      {"n[ 1-2]", "invalid range ` 1-2' in `n[ 1-2]'"},
      {"n[+1]", "invalid range `+1' in `n[+1]'"},
      {"n[0x1]", "invalid range `0x1' in `n[0x1]'"},
      {"n[1-", "unclosed `[' in `n[1-'"},
      {"n[1-3", "unclosed `[' in `n[1-3'"},
      {"n]", "`]' without `[' in `n]'"},
      {"n[[1-2]]", "nested `[' in `n[[1-2]]'"},
      {"n[1-3]-ib", "text `-ib' after the last `]' in `n[1-3]-ib' (Slurm 22.05 accepts none)"},
      {"x[1]y", "text `y' after the last `]' in `x[1]y' (Slurm 22.05 accepts none)"},
      {"n[0-65536]", "too many hosts in range `0-65536' of `n[0-65536]' (at most 65536)"},
      {"n[1-9999999999999999999]", "invalid range `1-9999999999999999999' in `n[1-9999999999999999999]'"},
  };
  for (const Malformed& c : cases) {
    auto hosts = ExpandHostlist(c.hostlist);
    ASSERT_FALSE(hosts.ok()) << c.hostlist;
    EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument) << c.hostlist;
    EXPECT_EQ(hosts.status().message(), c.message) << c.hostlist;
  }
}

TEST(ExpandHostlist, HugeProductIsRefusedNotAllocated) {
  auto hosts = ExpandHostlist("a[1-65536]b[1-65536]");
  ASSERT_FALSE(hosts.ok());
  EXPECT_EQ(hosts.status().code(), StatusCode::kResourceExhausted);
  auto many = ExpandHostlist("a[1-60000],b[1-60000],c[1-60000],d[1-60000],e[1-60000],f[1-60000],g[1-60000],"
                             "h[1-60000],i[1-60000],j[1-60000],k[1-60000],l[1-60000],m[1-60000],n[1-60000],"
                             "o[1-60000],p[1-60000],q[1-60000],r[1-60000]");
  EXPECT_EQ(many.status().code(), StatusCode::kResourceExhausted);
  // The bound: 2^17 hosts expand, one more is refused.
  EXPECT_EQ(ExpandHostlist("n[1-65536],m[1-65536]")->size(), 131072u);
  EXPECT_EQ(ExpandHostlist("n[1-65536],m[1-65536],x").status().code(), StatusCode::kResourceExhausted);
}

std::string Compress(const Hosts& hosts) { return CompressHostlist(hosts); }

TEST(CompressHostlist, MatchesScontrolShowHostlist) {
  EXPECT_EQ(Compress({"gpu-a01", "gpu-a02", "gpu-a03", "gpu-a07", "login1"}), "gpu-a[01-03,07],login1");
  EXPECT_EQ(Compress({"n1", "n2", "n3", "n5"}), "n[1-3,5]");
  EXPECT_EQ(Compress({"n1", "n3", "n2"}), "n[1,3,2]");
  EXPECT_EQ(Compress({"n1", "n01", "n02", "n2"}), "n[1,01-02,2]");
  EXPECT_EQ(Compress({"a", "b", "a"}), "a,b,a");
  EXPECT_EQ(Compress({"n1", "n1"}), "n[1,1]");
  EXPECT_EQ(Compress({"n9", "n10", "n11"}), "n[9-11]");
  EXPECT_EQ(Compress({"n09", "n10"}), "n[09-10]");
  EXPECT_EQ(Compress({"login1", "n1", "login2"}), "login1,n1,login2");
  EXPECT_EQ(Compress({"x0y2", "x0y3", "x1y2"}), "x0y[2-3],x1y2");
  EXPECT_EQ(Compress({"node"}), "node");
  EXPECT_EQ(Compress({"n1x", "n2x"}), "n1x,n2x");
  EXPECT_EQ(Compress({"123", "124"}), "[123-124]");
  EXPECT_EQ(Compress({"n007", "n8"}), "n[007,8]");
  EXPECT_EQ(Compress({"n0", "n00", "n000"}), "n[0,00,000]");
  EXPECT_EQ(Compress({"n8", "n09"}), "n[8,09]");
  EXPECT_EQ(Compress({"n10", "n9"}), "n[10,9]");
  EXPECT_EQ(Compress({"n1", "n2", "n1", "n2"}), "n[1-2,1-2]");
  EXPECT_EQ(Compress({"r1n1", "r1n2", "r2n1"}), "r1n[1-2],r2n1");
  EXPECT_EQ(Compress({"n1-ib", "n2-ib"}), "n1-ib,n2-ib");
  EXPECT_EQ(Compress({}), "");
}

TEST(CompressHostlist, RoundTrips) {
  for (const char* text : {"gpu-a[01-03,07],login1", "n[1-3,5]", "node[1-2]", "r1n[1-2],r2n1", "a,b,a"}) {
    EXPECT_EQ(Compress(Expand(text)), text);
  }
}

}  // namespace
}  // namespace srunway::common
