#!/usr/bin/env bash
# srunway-blueprint as users run it: every shipped blueprint validates and expands to a fixed point, each negative
# fixture gives its exact file:line:column line, render writes the Slurm files, deploy prints the toolkit's
# commands, and bad input gets one clear line and its exit code.
# Usage: blueprint_cli.sh SRUNWAY_BLUEPRINT SOURCE_ROOT
set -euo pipefail
readonly kTool=$(realpath "$1") kRoot=$2
readonly kWork=$(mktemp -d)
trap 'rm -rf "$kWork"' EXIT
cd "$kRoot"

fail() { echo "FAIL: $*" >&2; exit 1; }
# expect CODE ARGS...: runs the tool, output in $kWork/out; fails unless it exits CODE.
expect() {
  local want=$1 rc=0
  shift
  "$kTool" "$@" >"$kWork/out" 2>&1 || rc=$?
  [[ $rc == "$want" ]] || fail "srunway-blueprint $*: exit $rc, want $want: $(cat "$kWork/out")"
}
has() { grep -qF -- "$1" "$kWork/out" || fail "no '$1' in: $(cat "$kWork/out")"; }

echo "== every shipped blueprint validates, and expanding the expansion changes nothing"
for pair in local/local.yaml: \
    a3mega/slurm-a3mega-base.yaml:a3mega/deployment-base.yaml \
    a3mega/slurm-a3mega-image.yaml:a3mega/deployment-image-cluster.yaml \
    a3mega/slurm-a3mega-cluster.yaml:a3mega/deployment-image-cluster.yaml \
    a3mega/a3mega-slurm-blueprint.yaml:a3mega/a3mega-slurm-deployment.yaml \
    a3high/a3high-slurm-blueprint.yaml:a3high/a3high-slurm-deployment.yaml; do
  bp=blueprints/${pair%%:*} dep=${pair##*:}
  args=("$bp")
  [[ -z $dep ]] || args+=(-d "blueprints/$dep")
  expect 0 validate "${args[@]}"
  has "$bp: valid:"
  ! grep -q 'warning' "$kWork/out" || fail "$bp: warnings: $(cat "$kWork/out")"
  expect 0 expand "${args[@]}" -o "$kWork/once.yaml"
  expect 0 validate "$kWork/once.yaml"
  expect 0 expand "$kWork/once.yaml" -o "$kWork/twice.yaml"
  cmp -s "$kWork/once.yaml" "$kWork/twice.yaml" || fail "$bp: expand is not stable: $(diff "$kWork/once.yaml" "$kWork/twice.yaml")"
  ! grep -q '\$(vars\.[a-z_]*)' "$kWork/once.yaml" || fail "$bp: a plain \$(vars.x) survived expansion"
done
grep -q 'skipped (skip: true)' <("$kTool" validate blueprints/a3mega/slurm-a3mega-cluster.yaml \
  -d blueprints/a3mega/deployment-image-cluster.yaml) || fail "skip: true not honoured"

echo "== negative fixtures: the exact line for each"
readonly kFix=tests/fixtures/blueprints
expect 1 validate $kFix/dangling-use.yaml
has "$kFix/dangling-use.yaml:13:10: module 'debug' uses 'nodez', which is not a module of this blueprint"
expect 1 validate $kFix/undefined-var.yaml
has "$kFix/undefined-var.yaml:10:14: \$(vars.node_count): no deployment variable 'node_count'"
expect 1 validate $kFix/duplicate-id.yaml
has "$kFix/duplicate-id.yaml:9:9: module id 'nodes' is used twice (ids must be unique in the blueprint)"
expect 1 validate $kFix/wrong-type.yaml
has "$kFix/wrong-type.yaml:10:26: setting 'node_count_static' of module 'a3_nodeset' (community/modules/compute/schedmd-slurm-gcp-v6-nodeset) must be a number, not a string"
expect 1 validate $kFix/bad-indentation.yaml
has "$kFix/bad-indentation.yaml:9:14: illegal map value"
expect 1 validate $kFix/unknown-key.yaml
has "$kFix/unknown-key.yaml:4:1: unknown top-level key 'deployment_group' (expected one of: blueprint_name,"
expect 1 validate $kFix/several-errors.yaml
[[ $(grep -c "^$kFix/several-errors.yaml:[0-9]*:[0-9]*: " "$kWork/out") == 5 ]] || fail "not every error: $(cat "$kWork/out")"
has "srunway-blueprint: $kFix/several-errors.yaml: 5 errors"

echo "== render"
expect 0 render blueprints/local/local.yaml --out "$kWork/local" --set state_dir=/st --set host=h
for f in slurm.conf gres.conf plugstack.conf mpi.conf nodes.hosts; do [[ -s $kWork/local/$f ]] || fail "no $f"; done
grep -qx 'NodeName=node\[1-2\] NodeHostname=h NodeAddr=127.0.0.1 Port=16818-16819 Sockets=2 CoresPerSocket=4 ThreadsPerCore=1 CPUs=8 Gres=gpu:8 State=UNKNOWN' \
  "$kWork/local/slurm.conf" || fail "local nodes: $(cat "$kWork/local/slurm.conf")"
grep -qx 'MpiDefault=pmix' "$kWork/local/slurm.conf" || fail "no MpiDefault=pmix"
grep -qx 'NodeName=node1 Name=gpu File=/st/dev/node1/nvidia\[0-7\]' "$kWork/local/gres.conf" || fail "local gres"
# Where the files cannot go, the line names the option.
expect 1 render blueprints/local/local.yaml --out /proc/srunway-render
has "srunway-blueprint: --out /proc/srunway-render: create /proc/srunway-render: No such file or directory"
# The files are one configuration: a render that cannot write them all leaves none of its own beside the earlier
# render's (here plugstack.conf cannot be replaced; gres.conf and mpi.conf, written before it, named the new state
# directory beside the old slurm.conf).
expect 0 render blueprints/local/local.yaml --out "$kWork/set" --set state_dir=/st1 --set host=h
rm "$kWork/set/plugstack.conf" && mkdir -p "$kWork/set/plugstack.conf/in-the-way"
expect 1 render blueprints/local/local.yaml --out "$kWork/set" --set state_dir=/st2 --set host=h
has "plugstack.conf: Is a directory"
! grep -rl /st2 "$kWork/set" || fail "a failed render left some of its files: $(grep -rl /st2 "$kWork/set")"
grep -q /st1 "$kWork/set/slurm.conf" || fail "the earlier slurm.conf is gone"
expect 1 expand blueprints/local/local.yaml -o "$kWork/none/x.yaml"
has "srunway-blueprint: --output $kWork/none/x.yaml: create temporary file in $kWork/none: No such file or directory"
expect 0 render blueprints/a3mega/slurm-a3mega-cluster.yaml -d blueprints/a3mega/deployment-image-cluster.yaml --out "$kWork/a3"
grep -qx 'NodeName=a3megaclus-a3meganodeset-\[0-1\] CPUs=208 RealMemory=1821081 Gres=gpu:8 CoresPerSocket=52 ThreadsPerCore=2 State=UNKNOWN' \
  "$kWork/a3/slurm.conf" || fail "a3mega nodes: $(cat "$kWork/a3/slurm.conf")"
grep -q '^PartitionName=a3mega Nodes=a3megaclus-a3meganodeset-\[0-1\] Default=YES' "$kWork/a3/slurm.conf" || fail "a3mega partition"
grep -qx 'include /etc/slurm/plugstack.conf.d/\*.conf' "$kWork/a3/plugstack.conf" || fail "a3mega plugstack: $(cat "$kWork/a3/plugstack.conf")"
dropin=$(grep '^required ' "$kWork/a3/plugstack.conf.d/srunway.conf") || fail "no a3mega drop-in"
[[ $dropin == *" default_profile=a3mega" ]] || fail "a3mega drop-in: $dropin"
# The drop-in names the path a build with the image stage's options installs the plugin to (meson's own list;
# the image runs scripts/install-site.sh --prefix /usr/local on x86_64 Ubuntu, which builds with these options).
for bp in blueprints/a3mega/slurm-a3mega-image.yaml blueprints/a3mega/a3mega-slurm-blueprint.yaml \
    blueprints/a3high/a3high-slurm-blueprint.yaml; do
  grep -qE 'scripts/install-site.sh --prefix (/usr/local|"\$PREFIX")' "$bp" || fail "$bp does not install with install-site.sh"
  # GPU images: srunway-train with its CUDA kernels and NCCL, or no image (not a CPU-only trainer).
  grep -A2 'scripts/install-site.sh' "$bp" | grep -q -- '--cuda enabled$' || fail "$bp installs without --cuda enabled"
done
grep -qx '          PREFIX=/usr/local' blueprints/a3mega/slurm-a3mega-image.yaml || fail "the image's PREFIX is not /usr/local"
if [[ -f /usr/include/slurm/spank.h && $(uname -m) == x86_64 ]] && command -v meson >/dev/null; then
  meson setup "$kWork/image-build" "$kRoot" --prefix /usr/local --buildtype=release -Dslurm=enabled \
    -Dslurm_include_dir=/usr/include -Dsanitized_tests=disabled -Dthread_sanitized_tests=disabled \
    >"$kWork/setup.log" 2>&1 ||
    fail "meson setup with the image's options: $(tail -n 5 "$kWork/setup.log")"
  installed=$(meson introspect "$kWork/image-build" --installed |
    python3 -c 'import json, sys; print(*[p for p in json.load(sys.stdin).values() if p.endswith("/srunway.so")])')
  [[ $dropin == "required $installed default_profile=a3mega" ]] ||
    fail "the drop-in names ${dropin#required } but a build with the image's options installs $installed"
  echo "ok: the rendered drop-in names $installed, where the image's build installs it"
fi
expect 1 render blueprints/a3mega/a3mega-slurm-blueprint.yaml -d blueprints/a3mega/a3mega-slurm-deployment.yaml --out "$kWork/x"
has "setting node_count_static is '\$(vars.a3mega_provisioning == \"dws-flex\" ? 0 : vars.a3mega_cluster_size)', known only when Terraform evaluates it"

echo "== deploy prints the toolkit's commands"
expect 0 deploy blueprints/a3mega/a3mega-slurm-blueprint.yaml -d blueprints/a3mega/a3mega-slurm-deployment.yaml --target gcp
has "gcluster create -d blueprints/a3mega/a3mega-slurm-deployment.yaml blueprints/a3mega/a3mega-slurm-blueprint.yaml --out ."
has "gcluster deploy a3mega-srunway"
if ! command -v gcluster >/dev/null; then
  has "srunway-blueprint: note: gcluster is not on PATH"
  expect 1 deploy blueprints/a3mega/a3mega-slurm-blueprint.yaml -d blueprints/a3mega/a3mega-slurm-deployment.yaml --target gcp --run
  has "deploy --run needs gcluster"
fi
# --run with stand-ins for the toolkit: each command is run in turn, and the one that fails is named with its
# exit code or the signal that killed it (system()'s wait status was printed raw: 'failed (768)').
mkdir "$kWork/bin"
printf '#!/bin/sh\necho "$*" >>"%s/calls"\n[ "$1" != deploy ] || exit "${GCLUSTER_DEPLOY_EXIT:-0}"\n' "$kWork" \
  >"$kWork/bin/gcluster"
printf '#!/bin/sh\nkill -TERM $$\n' >"$kWork/bin/terraform-killed"
cp "$kWork/bin/gcluster" "$kWork/bin/terraform"
chmod +x "$kWork/bin/"*
deploy_run=(deploy blueprints/a3mega/a3mega-slurm-blueprint.yaml -d blueprints/a3mega/a3mega-slurm-deployment.yaml
            --target gcp --run)
PATH="$kWork/bin:$PATH" expect 0 "${deploy_run[@]}"
has "+ gcluster deploy a3mega-srunway"
[[ $(cat "$kWork/calls") == $'create -d blueprints/a3mega/a3mega-slurm-deployment.yaml '*$'\ndeploy a3mega-srunway' ]] ||
  fail "deploy --run ran: $(cat "$kWork/calls")"
GCLUSTER_DEPLOY_EXIT=3 PATH="$kWork/bin:$PATH" expect 1 "${deploy_run[@]}"
has "srunway-blueprint: 'gcluster deploy a3mega-srunway' failed with exit code 3"
cp "$kWork/bin/terraform-killed" "$kWork/bin/gcluster"
PATH="$kWork/bin:$PATH" expect 1 "${deploy_run[@]}"
has "srunway-blueprint: 'gcluster create -d blueprints/a3mega/a3mega-slurm-deployment.yaml"
has "' was killed by SIGTERM"

echo "== bad input"
expect 2 validate "$kWork/missing.yaml"
has "srunway-blueprint: open $kWork/missing.yaml: No such file or directory"
expect 2 validate blueprints/local/local.yaml -d "$kWork/missing.yaml"
has "srunway-blueprint: --deployment: open $kWork/missing.yaml: No such file or directory"
# gcluster cannot deploy the local target's modules: refused before any command is printed or run.
expect 1 deploy blueprints/local/local.yaml --target gcp
has "srunway-blueprint: blueprints/local/local.yaml: a local blueprint (module srunway/local/controller), not one for gcp: start it with srunway-blueprint up"
! grep -q gcluster "$kWork/out" || fail "deploy of a local blueprint printed commands: $(cat "$kWork/out")"
# A setting that is one deployment variable is checked with the variable's value: --set a3mega_cluster_size=abc
# validated, and failed only at render (or in Terraform).
expect 1 validate blueprints/a3mega/slurm-a3mega-cluster.yaml -d blueprints/a3mega/deployment-image-cluster.yaml \
  --set a3mega_cluster_size=abc
has "blueprints/a3mega/slurm-a3mega-cluster.yaml:91:26: setting 'node_count_static' of module 'a3mega_nodeset' (community/modules/compute/schedmd-slurm-gcp-v6-nodeset) must be a number, not a string: \$(vars.a3mega_cluster_size) is 'abc'"
expect 2 validate blueprints/local/local.yaml --set novalue
has "srunway-blueprint: --set novalue: expected NAME=VALUE"
expect 1 up blueprints/a3mega/slurm-a3mega-base.yaml -d blueprints/a3mega/deployment-base.yaml
has "no srunway/local/controller module: not a local blueprint"
expect 2 render blueprints/local/local.yaml --target pbs --out "$kWork/y"
echo "ok"
