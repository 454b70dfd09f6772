#!/usr/bin/env bash
# scripts/kernel_shares.py on the two profilers' CSV layouts (nsys stats' cuda_gpu_kern_sum, ncu --csv with
# gpu__time_duration.sum): kernels grouped by function name, their shares, units, and the shares by kind; a file
# without the report's header is one error line.
set -euo pipefail
shares=${1:?usage: kernel_shares.sh scripts/kernel_shares.py}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

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
[[ $out == "$expected" ]] || fail "nsys: got
$out
want
$expected"

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

echo "no header here" >"$work/other.csv"
if err=$(python3 "$shares" nsys "$work/other.csv" 2>&1); then fail "a file without the header was read: $err"; fi
[[ $(wc -l <<<"$err") == 1 && $err == *"other.csv has no CSV header with Total Time (ns), Name"* ]] ||
  fail "no header: $err"
echo "ok: nsys and ncu layouts, units, grouping, kinds, a file without the header"
