#!/usr/bin/env python3
"""The kernels of one profiled training step and their share of its GPU time, from a profiler's CSV.

    kernel_shares.py nsys KERN_SUM.csv [TOP]   nsys stats' cuda_gpu_kern_sum (gpukernsum) report: each kernel's
                                               time as it ran on the timeline
    kernel_shares.py ncu NCU.csv [TOP]         ncu --csv with gpu__time_duration.sum: each kernel timed alone
    kernel_shares.py timeline STEP.csv [TOP]   tests/bench/cupti_timeline.cc's records: each kernel, copy and memset
                                               as it ran, and where the GPU sat idle within the step

Prints the TOP kernels (default 15) by total time with their share, then the shares of GEMMs (cuBLASLt), attention,
NCCL and the rest. Kernels are grouped by function name (template arguments and parameters dropped)."""
import csv
import re
import sys
from collections import defaultdict

UNITS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


def short_name(name):
    name = re.sub(r"^void\s+", "", name.strip()).replace("(anonymous namespace)::", "")
    depth, out = 0, []
    for ch in name:  # drop template arguments and everything from the parameter list on
        if ch == "(" and depth == 0:
            break
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip() or name[:80]


def rows_after_header(path, must_have):
    """The CSV rows of the first header line that names every column in must_have (profilers print other lines)."""
    with open(path, newline="", errors="replace") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if all(f'"{column}"' in line or column in line.split(",") for column in must_have):
            return list(csv.DictReader(lines[i:]))
    sys.exit(f"kernel_shares: {path} has no CSV header with {', '.join(must_have)}")


def number(text):
    return float(text.replace(",", "")) if text and text.strip() not in ("", "n/a", "N/A") else 0.0


def from_nsys(path):
    totals, calls = defaultdict(float), defaultdict(int)
    for row in rows_after_header(path, ["Total Time (ns)", "Name"]):
        name = short_name(row["Name"])
        totals[name] += number(row["Total Time (ns)"])
        calls[name] += int(number(row.get("Instances", "0")))
    return totals, calls


def from_ncu(path):
    totals, calls = defaultdict(float), defaultdict(int)
    for row in rows_after_header(path, ["Kernel Name", "Metric Name", "Metric Value"]):
        if row["Metric Name"] != "gpu__time_duration.sum":
            continue
        scale = UNITS.get(row.get("Metric Unit", "nsecond").strip(), 1.0)
        name = short_name(row["Kernel Name"])
        totals[name] += number(row["Metric Value"]) * scale
        calls[name] += 1
    return totals, calls


def from_timeline(path):
    """Kernel totals as from_nsys, and the step's GPU timeline: the range, the time covered by at least one kernel,
    copy or memset, and the gaps between (each with what ran before and after it)."""
    with open(path, newline="", errors="replace") as f:
        first = f.readline().split()
        if first[:2] != ["#", "range"] or len(first) < 4:
            sys.exit(f"kernel_shares: {path} does not start with '# range START STOP' (cupti_timeline's CSV)")
        begin, end = int(first[2]), int(first[3])
        rows = [(int(r["start_ns"]), int(r["end_ns"]), short_name(r["name"])) for r in csv.DictReader(f)]
    totals, calls = defaultdict(float), defaultdict(int)
    for start, stop, name in rows:
        totals[name] += min(stop, end) - max(start, begin)
        calls[name] += 1
    gaps, busy, at, before = [], 0, begin, "the range's start"
    for start, stop, name in sorted(rows):
        start, stop = max(start, begin), min(stop, end)
        if start > at:
            gaps.append((start - at, before, name))
        if stop > at:
            busy += stop - max(start, at)
            at, before = stop, name
    if end > at:
        gaps.append((end - at, before, "the range's end"))
    return totals, calls, (end - begin, busy, gaps)


def print_timeline(span, busy, gaps):
    idle = span - busy
    print(f"timeline: {span / 1e6:.2f} ms from cuProfilerStart to cuProfilerStop, the GPU busy {busy / 1e6:.2f} ms "
          f"({100 * busy / span:.1f}%), idle {idle / 1e6:.2f} ms in {len(gaps)} gaps "
          f"({sum(1 for g in gaps if g[0] >= 10_000)} of them 10 us or more)")
    for ns, before, after in sorted(gaps, reverse=True)[:5]:
        print(f"  idle {ns / 1e3:9.1f} us after {before}, before {after}")


def kind(name):
    lowered = name.lower()
    if "nccl" in lowered:
        return "NCCL"
    # Before the GEMMs: cuDNN's fused attention kernels carry an architecture in their names too (sm90_...sdpa...).
    if any(k in lowered for k in ("attention", "flash", "sdpa", "fmha")):
        return "attention"
    if any(k in lowered for k in ("gemm", "xmma", "cutlass", "nvjet", "sm90_", "sm80_", "splitk")):
        return "GEMM (cuBLASLt)"
    return "other"


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("nsys", "ncu", "timeline"):
        sys.exit(__doc__)
    timeline = None
    if sys.argv[1] == "timeline":
        totals, calls, timeline = from_timeline(sys.argv[2])
    else:
        totals, calls = (from_nsys if sys.argv[1] == "nsys" else from_ncu)(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    whole = sum(totals.values())
    if whole <= 0:
        sys.exit(f"kernel_shares: no kernel times in {sys.argv[2]} (was the step inside the capture range?)")
    print(f"{len(totals)} kernels, {sum(calls.values())} launches, {whole / 1e6:.2f} ms of GPU time")
    print(f"{'share':>7} {'ms':>9} {'calls':>6}  kernel")
    for name, ns in sorted(totals.items(), key=lambda item: -item[1])[:top]:
        print(f"{100 * ns / whole:6.1f}% {ns / 1e6:9.3f} {calls[name]:6d}  {name}")
    kinds = defaultdict(float)
    for name, ns in totals.items():
        kinds[kind(name)] += ns
    print("by kind: " + ", ".join(f"{k} {100 * ns / whole:.1f}%" for k, ns in sorted(kinds.items(), key=lambda i: -i[1])))
    if timeline is not None:
        print_timeline(*timeline)


if __name__ == "__main__":
    main()
