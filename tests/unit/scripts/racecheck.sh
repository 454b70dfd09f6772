#!/usr/bin/env bash
# tests/gpu/racecheck.sh against a stand-in compute-sanitizer that prints a recorded racecheck report (an H200's,
# its hazards all in cuBLASLt's kernels) and, where asked, one more in a kernel of ours: cuBLASLt's pass, ours
# fail, and so does a program that fails.
set -euo pipefail
racecheck=${1:?usage: racecheck.sh tests/gpu/racecheck.sh}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$work/report.txt" <<'REPORT'
========= COMPUTE-SANITIZER
cuda_ops: NVIDIA H200 (0000:00:06.0)
  classifier logits kept 512         ========= Error: Race reported between Read access at nvjet_sm90_tst_64x32_64x16_2x4_h_bz_NNT+0xb00
=========     and Write access at nvjet_sm90_tst_64x32_64x16_2x4_h_bz_NNT+0x29f0 [384 hazards]
========= 
========= Error: Race reported between Read access at nvjet_sm90_tst_96x64_64x10_1x2_h_bz_geluauxbias_auxt_TNN+0xa50
=========     and Write access at nvjet_sm90_tst_96x64_64x10_1x2_h_bz_geluauxbias_auxt_TNN+0x7820 [512 hazards]
========= 
ok    worst [0]: gpu 1.7109375 cpu 1.7109375
cuda_ops: every operation matches its CPU twin
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
REPORT
cat >"$work/sanitizer" <<'FAKE'
#!/usr/bin/env bash
[[ $1 == --tool && $2 == racecheck ]] || { echo "fake sanitizer: want --tool racecheck, got $*" >&2; exit 9; }
cat "$(dirname "$0")/report.txt"
if [[ -n ${OURS:-} ]]; then
  echo "========= Error: Race reported between Write access at void srunway::trainer::cuda::(anonymous namespace)::$OURS+0x1a0"
  echo "=========     and Read access at void srunway::trainer::cuda::(anonymous namespace)::$OURS+0x2c0 [32 hazards]"
fi
exit "${PROGRAM_EXIT:-0}"
FAKE
chmod +x "$work/sanitizer"

out=$(bash "$racecheck" "$work/sanitizer" program) || fail "cuBLASLt's hazards alone failed the check: $out"
grep -q "^racecheck: hazards in cuBLASLt's kernels, not counted: nvjet_sm90_tst_64x32_64x16_2x4_h_bz_NNT nvjet_sm90" \
  <<<"$out" || fail "cuBLASLt's kernels not listed: $out"
grep -q "^racecheck: no hazard in our kernels$" <<<"$out" || fail "no verdict line: $out"

rc=0
out=$(OURS='ClassifierForward<128>(float *, Dims)' bash "$racecheck" "$work/sanitizer" program) || rc=$?
((rc == 1)) || fail "a hazard in our kernel: exit $rc, want 1"
grep -q "^racecheck: hazards in our kernels: void srunway::trainer::cuda::(anonymous namespace)::ClassifierForward<128>(float" \
  <<<"$out" || fail "our kernel not named: $out"

rc=0
out=$(PROGRAM_EXIT=3 bash "$racecheck" "$work/sanitizer" program) || rc=$?
((rc == 3)) || fail "a failed program: exit $rc, want its 3"
grep -q "^racecheck: the program failed under the sanitizer (exit 3)$" <<<"$out" || fail "no line for the failure: $out"
echo ok
