#!/usr/bin/env bash
# The plugin installed as a site installs it, against the local cluster's own Slurm (22.05, its headers in
# /usr/include): scripts/package-deb.sh's .deb installed with dpkg -i, and scripts/install-site.sh into a fresh
# prefix. Each time a job runs through the plugin it installed (srun --help offers --network-profile; a step asked
# for the generic profile has SRUNWAY_NETWORK_PROFILE), the drop-in names the exact installed path, a second
# install adds no line, and removal leaves the plugin stack as it was. Headers of another Slurm release, a meson
# older than 1.0, a --cuda that is not a mode, and --cuda enabled without nvcc or without NCCL's headers are
# refused with one line, as is a mistyped --plugin-args (it would fail every job step). Builds the plugin once
# (plugin only) in a scratch build directory.
source "$(dirname "$0")/lib.sh"
require_cluster
work=$(mktemp -d)
at_exit "rm -rf '$work'"
plugstack=$(scontrol show config | awk '$1 == "PlugStackConfig" {print $3}')
[[ -f $plugstack ]] || fail "no PlugStackConfig from scontrol show config"
dropin_dir="$(dirname "$plugstack")/plugstack.conf.d"
# The local cluster's own drop-in (the build tree's plugin) steps aside for the test and comes back after it.
cp "$plugstack" "$work/plugstack.original"
mkdir -p "$work/dropins.original"
cp -a "$dropin_dir/." "$work/dropins.original/" 2>/dev/null || true
at_exit "cp '$work/plugstack.original' '$plugstack'; rm -rf '$dropin_dir'; mkdir -p '$dropin_dir'; cp -a '$work/dropins.original/.' '$dropin_dir/'"
"$kSourceRoot/scripts/plugstack-dropin.sh" remove --plugstack "$plugstack" >/dev/null
cp "$plugstack" "$work/plugstack.saved"
readonly kInclude="include $dropin_dir/*.conf"

# plugin_active: srun offers the plugin's option and a step asked for the generic profile gets it.
plugin_active() {
  srun --help 2>&1 | grep -q -- "--network-profile" || return 1
  [[ $(srun --quiet -N1 -n1 --network-profile=generic printenv SRUNWAY_NETWORK_PROFILE 2>&1) == generic ]]
}
plugin_absent() { ! srun --help 2>&1 | grep -q -- "--network-profile"; }

echo "== refusals"
# A malformed command line is exit 2 and one line, before anything is built (it was exit 1, as a failed build).
for args in "--prefx /opt/x:unknown option '--prefx'" "--prefix:--prefix needs a value" \
    "--prefix opt:--prefix opt: must be an absolute path" "--cuda yes:--cuda yes: give auto, enabled or disabled"; do
  rc=0
  # shellcheck disable=SC2086
  "$kSourceRoot/scripts/install-site.sh" ${args%%:*} >"$work/usage.out" 2>&1 || rc=$?
  expect_eq "install-site ${args%%:*}: exit code" "$rc" 2
  [[ $(cat "$work/usage.out") == "install-site: ${args#*:} (see --help)" ]] || fail "install-site ${args%%:*}: $(cat "$work/usage.out")"
done
rc=0
"$kSourceRoot/scripts/package-deb.sh" --outdir x >"$work/usage.out" 2>&1 || rc=$?
expect_eq "package-deb --outdir: exit code" "$rc" 2
[[ $(cat "$work/usage.out") == "package-deb: unknown option '--outdir' (see --help)" ]] || fail "$(cat "$work/usage.out")"
mkdir -p "$work/other/slurm"
cp /usr/include/slurm/*.h "$work/other/slurm/"
sed -i 's/^#define SLURM_VERSION_NUMBER .*/#define SLURM_VERSION_NUMBER 0x170201/' "$work/other/slurm/slurm_version.h"
rc=0
"$kSourceRoot/scripts/install-site.sh" --slurm-include "$work/other" --prefix "$work/prefix" --no-deps \
  >"$work/other.out" 2>&1 || rc=$?
expect_eq "exit code with another release's headers" "$rc" 1
expect_eq "lines" "$(wc -l <"$work/other.out")" 1
grep -q "^install-site: the Slurm headers in $work/other are for 23.02.1 but the running Slurm is 22.05.[0-9]*: " \
  "$work/other.out" || fail "$(cat "$work/other.out")"
mkdir -p "$work/oldmeson"
printf '#!/bin/sh\necho 0.61.2\n' >"$work/oldmeson/meson"
chmod +x "$work/oldmeson/meson"
rc=0
PATH="$work/oldmeson:$PATH" "$kSourceRoot/scripts/install-site.sh" --prefix "$work/prefix" --no-deps \
  >"$work/meson.out" 2>&1 || rc=$?
expect_eq "exit code with meson 0.61" "$rc" 1
grep -qx "install-site: meson 0.61.2 is older than 1.0, which srunway needs: .*" "$work/meson.out" ||
  fail "$(cat "$work/meson.out")"
# --cuda enabled where there is no nvcc (PATH without it, CUDA_HOME empty); a value that is no mode is above.
no_nvcc_path=$(tr ':' '\n' <<<"$PATH" | while read -r dir; do [[ -x $dir/nvcc ]] || echo "$dir"; done | paste -sd:)
rc=0
PATH=$no_nvcc_path CUDA_HOME="$work/nocuda" "$kSourceRoot/scripts/install-site.sh" --prefix "$work/prefix" \
  --no-deps --cuda enabled >"$work/cuda.out" 2>&1 || rc=$?
expect_eq "exit code with --cuda enabled" "$rc" 1
expect_eq "lines with --cuda enabled" "$(wc -l <"$work/cuda.out")" 1
grep -qx "install-site: --cuda enabled: no nvcc on PATH or in $work/nocuda/bin: install the CUDA toolkit .*" \
  "$work/cuda.out" || fail "$(cat "$work/cuda.out")"
# A toolkit with nvcc and cuda.h but no NCCL headers: the GPUs could not exchange gradients.
mkdir -p "$work/cuda/bin" "$work/cuda/include"
printf '#!/bin/sh\nexit 0\n' >"$work/cuda/bin/nvcc"
chmod +x "$work/cuda/bin/nvcc"
touch "$work/cuda/include/cuda.h"
rc=0
PATH=$no_nvcc_path CUDA_HOME="$work/cuda" "$kSourceRoot/scripts/install-site.sh" --prefix "$work/prefix" \
  --no-deps --cuda enabled >"$work/cuda.out" 2>&1 || rc=$?
expect_eq "exit code without nccl.h" "$rc" 1
[[ -f /usr/include/nccl.h ]] ||
  grep -qx "install-site: --cuda enabled: no nccl.h in $work/cuda/include or /usr/include: .*" "$work/cuda.out" ||
  fail "$(cat "$work/cuda.out")"
[[ ! -e $work/prefix ]] || fail "a refused install left $work/prefix"

echo "== the .deb"
plugin_absent || fail "the plugin is already in the stack before the test: $(cat "$plugstack")"
"$kSourceRoot/scripts/package-deb.sh" --plugin-only --build-dir "$work/build" --out "$work" >"$work/deb.out" 2>&1 ||
  fail "package-deb: $(cat "$work/deb.out")"
deb=$(tail -n 1 "$work/deb.out")
expect_eq "package name" "$(dpkg-deb -f "$deb" Package)" "srunway-spank-slurm22.05"
# Plugin arguments the plugin would refuse: the postinst fails before the drop-in names them.
rc=0
SRUNWAY_PLUGIN_ARGS="defualt_profile=a3mega" dpkg -i "$deb" >"$work/dpkg.out" 2>&1 || rc=$?
[[ $rc != 0 ]] || fail "dpkg -i with a mistyped SRUNWAY_PLUGIN_ARGS succeeded"
grep -q "^srunway: SRUNWAY_PLUGIN_ARGS='defualt_profile=a3mega': unknown plugstack argument 'defualt_profile'" \
  "$work/dpkg.out" || fail "$(cat "$work/dpkg.out")"
[[ ! -e $dropin_dir/srunway.conf ]] || fail "a refused SRUNWAY_PLUGIN_ARGS was added: $(cat "$dropin_dir/srunway.conf")"
dpkg -r srunway-spank-slurm22.05 >/dev/null 2>&1 || fail "dpkg -r of the half-configured package failed"
dpkg -i "$deb" >"$work/dpkg.out" 2>&1 || fail "dpkg -i: $(cat "$work/dpkg.out")"
at_exit "dpkg -r srunway-spank-slurm22.05 >/dev/null 2>&1"
installed=$(dpkg -L srunway-spank-slurm22.05 | grep '/srunway\.so$')
dpkg -L srunway-spank-slurm22.05 | grep -qx /usr/bin/srunway-topo || fail "the plugin's package has no srunway-topo"
grep -qx "required $installed default_profile=auto" "$dropin_dir/srunway.conf" ||
  fail "the drop-in does not name $installed: $(cat "$dropin_dir/srunway.conf")"
expect_eq "include lines" "$(grep -cxF "$kInclude" "$plugstack")" 1
plugin_active || fail "no job goes through the plugin the .deb installed"
dpkg -r srunway-spank-slurm22.05 >"$work/dpkg.out" 2>&1 || fail "dpkg -r: $(cat "$work/dpkg.out")"
[[ ! -e $installed && ! -e $dropin_dir/srunway.conf ]] || fail "dpkg -r left the plugin or its drop-in"
cmp -s "$plugstack" "$work/plugstack.saved" || fail "dpkg -r did not restore $plugstack: $(cat "$plugstack")"
plugin_absent || fail "srun still offers --network-profile after dpkg -r"
echo "ok: $deb installed, a job ran through it, removed cleanly"

echo "== install-site.sh into a fresh prefix"
prefix="$work/prefix"
# Where the CUDA toolkit is in /usr/local/cuda (off PATH, as in the CUDA images), --cuda enabled finds its nvcc.
cuda=auto
[[ -x /usr/local/cuda/bin/nvcc ]] && cuda=enabled
# A mistyped plugin argument would fail every job step: refused before anything is installed or added.
rc=0
PATH=$no_nvcc_path "$kSourceRoot/scripts/install-site.sh" --prefix "$prefix" --plugin-only --no-deps \
  --build-dir "$work/build" --cuda "$cuda" --plugin-args "defualt_profile=a3mega" >"$work/args.out" 2>&1 || rc=$?
expect_eq "exit code with a mistyped --plugin-args" "$rc" 2
grep -qx "install-site: --plugin-args 'defualt_profile=a3mega': unknown plugstack argument 'defualt_profile' .* (see --help)" \
  "$work/args.out" || fail "$(cat "$work/args.out")"
[[ ! -e $prefix && ! -e $dropin_dir/srunway.conf ]] || fail "a refused --plugin-args installed something"
for round in 1 2; do
  PATH=$no_nvcc_path "$kSourceRoot/scripts/install-site.sh" --prefix "$prefix" --plugin-only --no-deps \
    --build-dir "$work/build" --cuda "$cuda" >"$work/site.out" 2>&1 ||
    fail "install-site --cuda $cuda (round $round): $(cat "$work/site.out")"
  expect_eq "include lines after install $round" "$(grep -cxF "$kInclude" "$plugstack")" 1
  expect_eq "plugin lines after install $round" "$(grep -c '^required ' "$dropin_dir/srunway.conf")" 1
done
plugin=$(find "$prefix" -name srunway.so)
[[ -n $plugin ]] || fail "no srunway.so under $prefix"
grep -qx "required $plugin default_profile=auto" "$dropin_dir/srunway.conf" ||
  fail "the drop-in does not name $plugin: $(cat "$dropin_dir/srunway.conf")"
plugin_active || fail "no job goes through the plugin install-site installed"
"$kSourceRoot/scripts/install-site.sh" --uninstall --prefix "$prefix" >"$work/site.out" 2>&1 ||
  fail "uninstall: $(cat "$work/site.out")"
[[ -z $(find "$prefix" -type f) ]] || fail "uninstall left: $(find "$prefix" -type f)"
cmp -s "$plugstack" "$work/plugstack.saved" || fail "uninstall did not restore $plugstack: $(cat "$plugstack")"
plugin_absent || fail "srun still offers --network-profile after --uninstall"
echo "ok: install-site installed $plugin (twice, one line), a job ran through it, --uninstall removed it"
