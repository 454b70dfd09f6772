#!/usr/bin/env bash
# scripts/kernel_shares.py on the profilers' CSV layouts (nsys stats' cuda_gpu_kern_sum, ncu --csv with
# gpu__time_duration.sum, tests/bench/cupti_timeline.cc's records): kernels grouped by function name, their shares,
# units, and the shares by kind; the timeline's busy time and idle gaps within its range (overlapping kernels
# counted once, records that cross the range's ends cut at them); a file without the report's header is one error
# line.
set -euo pipefail
shares=${1:?usage: kernel_shares.sh scripts/kernel_shares.py}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
same() {  # same WHAT GOT WANT
  [[ $2 == "$3" ]] || fail "$1: got
$2
want
$3"
}

cat >"$work/nsys.csv" <<'CSV'
Generating SQLite file step.sqlite
"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"
"40.0","4000000","48","83333.3","83000","80000","90000","100","sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"
"20.0","2000000","12","166666","166666","160000","170000","10","void srunway::trainer::cuda::(anonymous namespace)::FlashForward<(int)64>(__nv_bfloat16 *, float *, const __nv_bfloat16 *, Dims)"
"10.0","1000000","12","83333","83333","80000","90000","10","void srunway::trainer::cuda::(anonymous namespace)::FlashForward<(int)128>(__nv_bfloat16 *, float *, const __nv_bfloat16 *, Dims)"
"10.0","1000000","12","83333","83333","80000","90000","10","cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_7_64x128x64_4x1x1_kernel0_0"
"30.0","3000000","24","125000","125000","120000","130000","10","ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
CSV
out=$(python3 "$shares" nsys "$work/nsys.csv" 2)
expected="4 kernels, 108 launches, 11.00 ms of GPU time
  share        ms  calls  kernel
  36.4%     4.000     48  sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas
  27.3%     3.000     24  srunway::trainer::cuda::FlashForward
by kind: GEMM (cuBLASLt) 36.4%, attention 36.4%, NCCL 27.3%"
same nsys "$out" "$expected"

cat >"$work/ncu.csv" <<'CSV'
==PROF== Connected to process 4242 (/opt/bundle/bin/srunway-train)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","srunway-train","127.0.0.1","void Embed<float>(int *, float *)","1","13","(256, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1,500.5"
"1","4242","srunway-train","127.0.0.1","void Embed<float>(int *, float *)","1","13","(256, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","499.5"
"2","4242","srunway-train","127.0.0.1","Cast(const float *, __nv_bfloat16 *)","1","13","(256, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","msecond","0.5"
CSV
out=$(python3 "$shares" ncu "$work/ncu.csv")
grep -qx '2 kernels, 3 launches, 2.00 ms of GPU time' <<<"$out" || fail "ncu totals: $out"
grep -qx ' *75.0% *1.501 *2  Embed' <<<"$out" || fail "ncu: Embed's two launches in two units: $out"
grep -qx ' *25.0% *0.500 *1  Cast' <<<"$out" || fail "ncu: Cast in ms: $out"

# Times in ns: a memset before the range cut at its start; two streams' kernels overlapping (busy once); a gap of
# 20 us; a kernel past the range's end cut at it.
cat >"$work/timeline.csv" <<'CSV'
# range 1000 101000
kind,start_ns,end_ns,stream,name
S,500,1500,7,"[memset]"
K,2000,30000,7,"void srunway::trainer::cuda::(anonymous namespace)::AdamWKernel(float*, int)"
K,29000,40000,8,"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
C,40000,41000,7,"[copy device to host]"
K,61000,120000,7,"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
CSV
out=$(python3 "$shares" timeline "$work/timeline.csv" 3)
expected="5 kernels, 5 launches, 0.08 ms of GPU time
  share        ms  calls  kernel
  49.7%     0.040      1  nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT
  34.8%     0.028      1  srunway::trainer::cuda::AdamWKernel
  13.7%     0.011      1  ncclDevKernel_AllReduce_Sum_f32_RING_LL
by kind: GEMM (cuBLASLt) 49.7%, other 36.6%, NCCL 13.7%
timeline: 0.10 ms from cuProfilerStart to cuProfilerStop, the GPU busy 0.08 ms (79.5%), idle 0.02 ms in 2 gaps (1 of them 10 us or more)
  idle      20.0 us after [copy device to host], before nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT
  idle       0.5 us after [memset], before srunway::trainer::cuda::AdamWKernel"
same timeline "$out" "$expected"
echo "kind,start_ns,end_ns,stream,name" >"$work/no-range.csv"
if err=$(python3 "$shares" timeline "$work/no-range.csv" 2>&1); then fail "a timeline without its range was read: $err"; fi
[[ $(wc -l <<<"$err") == 1 && $err == *"does not start with '# range START STOP'"* ]] || fail "no range: $err"

echo "no header here" >"$work/other.csv"
if err=$(python3 "$shares" nsys "$work/other.csv" 2>&1); then fail "a file without the header was read: $err"; fi
[[ $(wc -l <<<"$err") == 1 && $err == *"other.csv has no CSV header with Total Time (ns), Name"* ]] ||
  fail "no header: $err"
echo "ok: nsys, ncu and timeline layouts, units, grouping, kinds, busy time and gaps, files without their header"
