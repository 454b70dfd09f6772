#!/usr/bin/env bash
# The SPANK plugin in real job steps: per-task NICs, CPU masks and NCCL variables from a topology fixture,
# user options, admin locks, the user's own variables, bad values and a corrupt topology.
source "$(dirname "$0")/lib.sh"
require_cluster
# The build tree's topology helper: the plugin starts it (posix_spawn) for every step.
helper=${SRUNWAY_TOPO_HELPER:?SRUNWAY_TOPO_HELPER must name srunway-topo-helper}
plugin="${SRUNWAY_SPANK_PLUGIN:?SRUNWAY_SPANK_PLUGIN must name srunway.so} topo_helper=$helper"
fixture=$kSourceRoot/tests/fixtures/topology/local-2cpu.xml
work=$(mktemp -d)
mkdir -p "$work/tcpxo" && touch "$work/tcpxo/libnccl-net.so"  # stands in for an installed TCPXO plugin
at_exit "rm -rf '$work'"
use_plugstack "required $plugin topology_xml=$fixture plugin_path=$work/tcpxo"

echo "== srun --help lists the options"
help=$(srun --help 2>&1)
grep -q -- '--network-profile=auto|a3mega|a3high|generic|none' <<<"$help" || fail "srun --help lacks --network-profile"
grep -q -- '--gpu-affinity=closest|none' <<<"$help" || fail "srun --help lacks --gpu-affinity"

echo "== each task sees the NIC, CPUs and variables its GPU calls for"
out=$(srun -N2 --ntasks-per-node=8 --gpus-per-task=1 --time=2 -l bash -c \
  'echo "$CUDA_VISIBLE_DEVICES ${NCCL_FASTRAK_IFNAME%%,*} $NCCL_FASTRAK_CTRL_DEV $(grep Cpus_allowed_list /proc/self/status | cut -f2) $SRUNWAY_NETWORK_PROFILE $NCCL_PROTO ${LD_LIBRARY_PATH%%:*}"' 2>&1) ||
  fail "srun failed: $out"
echo "$out"
nics=(enp6s0 enp7s0 enp13s0 enp14s0 enp134s0 enp135s0 enp141s0 enp142s0)
expect_eq "task lines" "$(grep -c '^ *[0-9]*: ' <<<"$out")" 16
while read -r label gpu nic ctrl cpus profile proto libpath; do
  expect_eq "$label NIC of GPU $gpu" "$nic" "${nics[$gpu]}"
  expect_eq "$label control NIC" "$ctrl" enp0s12
  expect_eq "$label CPUs of GPU $gpu" "$cpus" $((gpu / 4))  # GPUs 0-3 on socket 0 (CPU 0), 4-7 on CPU 1
  expect_eq "$label profile" "$profile" a3mega  # auto: the A3 Mega layout and an installed plugin
  expect_eq "$label NCCL_PROTO" "$proto" "Simple,LL128"
  expect_eq "$label plugin dir first in LD_LIBRARY_PATH" "$libpath" "$work/tcpxo"
done <<<"$(sed 's/^ *//' <<<"$out")"

echo "== --network-profile=none leaves the environment and CPU mask alone"
out=$(srun -n1 --gpus-per-task=1 --network-profile=none --time=2 bash -c \
  'env | grep -cE "^(NCCL_|SRUNWAY_NETWORK|SRUNWAY_CPU)" || true; grep Cpus_allowed_list /proc/self/status | cut -f2')
expect_eq "none" "$(tr '\n' ' ' <<<"$out")" "0 0-1 "
out=$(SLURM_SPANK__SLURM_SPANK_OPTION_srunway_network_profile=none srun -n1 --gpus-per-task=1 --time=2 \
  bash -c 'echo ${SRUNWAY_NETWORK_PROFILE:-unset}')
expect_eq "profile from the environment" "$out" unset

echo "== the option given to sbatch and salloc reaches their steps"
sbatch --wait --output="$work/sbatch.out" --network-profile=generic -N1 -n1 --gpus-per-task=1 --time=2 \
  --wrap 'srun bash -c "echo profile=\$SRUNWAY_NETWORK_PROFILE"' >/dev/null || fail "sbatch --network-profile failed"
expect_eq "sbatch --network-profile=generic" "$(cat "$work/sbatch.out")" "profile=generic"
out=$(salloc -N1 -n1 --gpus-per-task=1 --time=2 --network-profile=none \
  srun bash -c 'echo "profile=${SRUNWAY_NETWORK_PROFILE:-unset}"' 2>/dev/null) || fail "salloc --network-profile failed"
expect_eq "salloc --network-profile=none" "$out" "profile=unset"
if sbatch --network-profile=bogus --wrap true 2>"$work/err"; then fail "sbatch accepted a bogus profile"; fi
grep -q "srunway: unknown network profile 'bogus'" "$work/err" || fail "unclear sbatch error: $(cat "$work/err")"

echo "== --gpu-affinity=none keeps the variables but not the CPU binding"
out=$(srun -n1 --gpus-per-task=1 --gpu-affinity=none --time=2 bash -c \
  'echo "$SRUNWAY_NETWORK_PROFILE $(grep Cpus_allowed_list /proc/self/status | cut -f2)"')
expect_eq "gpu-affinity=none" "$out" "a3mega 0-1"

echo "== a binding the user asked for wins: srun --cpu-bind, SLURM_CPU_BIND in the submit environment"
# The local cluster's task/none applies no binding of its own (srun says it lacks support), so a task the plugin
# leaves alone keeps 0-1; sbatch refuses --cpu-bind under task/none.
for how in "srun --cpu-bind=none" "srun --cpu-bind=map_cpu:0" "env SLURM_CPU_BIND=none srun"; do
  out=$($how -n1 --gpus-per-task=1 --time=2 bash -c \
    'echo "${SRUNWAY_CPU_BIND:-unset} $(grep Cpus_allowed_list /proc/self/status | cut -f2)"' 2>/dev/null)
  expect_eq "$how" "$out" "unset 0-1"
done
out=$(srun -n1 --gpus-per-task=1 --time=2 bash -c \
  'echo "${SRUNWAY_CPU_BIND:-unset} $(grep Cpus_allowed_list /proc/self/status | cut -f2)"')
expect_eq "no user binding: the task's GPU's core" "$out" "0 0"

echo "== a variable the user set is kept; one the profile enforces is replaced, and the user is told"
out=$(NCCL_SOCKET_IFNAME=mine NCCL_PROTO=LL srun -n1 --gpus-per-task=1 --time=2 \
  bash -c 'echo "$NCCL_SOCKET_IFNAME $NCCL_PROTO"' 2>"$work/err")
expect_eq "user and enforced variables" "$out" "mine Simple,LL128"
grep -q 'srunway: NCCL_PROTO=LL replaced by Simple,LL128: the a3mega profile requires it' "$work/err" ||
  fail "no message about the replaced NCCL_PROTO: $(cat "$work/err")"

echo "== malformed option values fail the step with one clear line"
if srun -n1 --network-profile=bogus true 2>"$work/err"; then fail "--network-profile=bogus was accepted"; fi
grep -q "srunway: unknown network profile 'bogus'" "$work/err" || fail "unclear error: $(cat "$work/err")"
if srun -n1 --gpu-affinity=near true 2>"$work/err"; then fail "--gpu-affinity=near was accepted"; fi
grep -q "srunway: --gpu-affinity=near is not closest or none" "$work/err" || fail "unclear error: $(cat "$work/err")"

echo "== the admin can lock the profile"
use_plugstack "required $plugin topology_xml=$fixture default_profile=generic allow_user_profile=no"
if srun -n1 --network-profile=a3mega true 2>"$work/err"; then fail "a locked profile was overridden"; fi
grep -q 'refused: the administrator fixed the profile to generic (allow_user_profile=no)' "$work/err" ||
  fail "unclear refusal: $(cat "$work/err")"
out=$(srun -n1 --gpus-per-task=1 --time=2 bash -c 'echo "$SRUNWAY_NETWORK_PROFILE $NCCL_SOCKET_IFNAME"')
expect_eq "locked generic profile" "$out" "generic enp6s0"

echo "== a corrupt topology warns and the step runs without affinity"
head -c 2000 "$fixture" >"$work/corrupt.xml"
use_plugstack "required $plugin topology_xml=$work/corrupt.xml"
out=$(srun -n1 --gpus-per-task=1 --time=2 bash -c 'echo "ran ${SRUNWAY_NETWORK_PROFILE:-unset}"' 2>"$work/err") ||
  fail "the step failed with a corrupt topology: $(cat "$work/err")"
expect_eq "corrupt topology" "$out" "ran unset"
grep -q "srunway: warning: $work/corrupt.xml: hwloc" "$work/err" || fail "no warning: $(cat "$work/err")"

echo "== nccl_topo_file=yes: one NCCL_TOPO_FILE per node for the step, removed when the step ends"
mkdir -p "$work/tmp"
use_plugstack "required $plugin topology_xml=$fixture plugin_path=$work/tcpxo nccl_topo_file=yes tmpdir=$work/tmp"
out=$(srun -N2 -n4 --gpus-per-task=1 --time=2 -l bash -c \
  'echo "$NCCL_TOPO_FILE $(grep -c "class=\"0x030200\"" "$NCCL_TOPO_FILE")"') || fail "srun with nccl_topo_file failed"
echo "$out"
expect_eq "tasks with a topology file of 8 GPUs" "$(grep -cE "^ *[0-3]: $work/tmp/srunway-nccl-topo\.[A-Za-z0-9]{6}/nccl_topo\.xml 8$" <<<"$out")" 4
expect_eq "one file per node" "$(awk '{print $2}' <<<"$out" | sort -u | wc -l)" 2
for ((i = 0; i < 50 && $(find "$work/tmp" -mindepth 1 | wc -l) > 0; i++)); do sleep 0.1; done
expect_eq "files left after the step" "$(find "$work/tmp" -mindepth 1 | wc -l)" 0

echo "== a file that crashes hwloc itself costs the helper process, not slurmstepd"
crasher=$kSourceRoot/tests/fixtures/topology/corrupt-no-complete-cpuset.xml
use_plugstack "required $plugin topology_xml=$crasher"
out=$(srun -N2 -n2 --gpus-per-task=1 --time=2 bash -c 'echo "ran ${SRUNWAY_NETWORK_PROFILE:-unset}"' 2>"$work/err") ||
  fail "the step failed when hwloc crashed: $(cat "$work/err")"
expect_eq "hwloc crash" "$(tr '\n' ' ' <<<"$out")" "ran unset ran unset "
grep -q "srunway: warning: $crasher: hwloc crashed (signal 11)" "$work/err" || fail "no warning: $(cat "$work/err")"

echo "== a missing topology helper warns and the step runs without affinity"
use_plugstack "required ${plugin% topo_helper=*} topo_helper=$work/no-such-helper topology_xml=$fixture"
out=$(srun -n1 --gpus-per-task=1 --time=2 bash -c 'echo "ran ${SRUNWAY_NETWORK_PROFILE:-unset}"' 2>"$work/err") ||
  fail "the step failed without a helper: $(cat "$work/err")"
expect_eq "missing helper" "$out" "ran unset"
grep -q "srunway: warning: $fixture: the topology helper: .*$work/no-such-helper" "$work/err" ||
  fail "no warning: $(cat "$work/err")"

echo "== a bad plugstack argument fails the step and names it"
use_plugstack "required $plugin colour=blue"
if srun -n1 true 2>"$work/err"; then fail "a bad plugstack argument was accepted"; fi
grep -q "srunway: plugstack.conf: unknown plugstack argument 'colour'" "$work/err" || fail "unclear: $(cat "$work/err")"
echo "ok"
