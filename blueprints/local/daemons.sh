#!/usr/bin/env bash
# Starts, stops and describes the daemons of the local Slurm cluster (munge, slurmctld, one slurmd per node) on
# this machine, from a configuration srunway-blueprint rendered.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: blueprints/local/daemons.sh up|down|status|env

Run by `srunway-blueprint up|down` (through scripts/local-cluster.sh) once it has rendered the configuration of
blueprints/local/local.yaml into $SRUNWAY_CLUSTER_DIR/etc; status and env need no blueprint.

  up      start munged, slurmctld and one slurmd per node from the rendered configuration; idempotent
  down    cancel the cluster's jobs and stop the daemons started here, by their pid files
  status  show which daemons run, sinfo, and where the logs are
  env     print the exports a shell needs to use the cluster

environment (set by srunway-blueprint from the blueprint's controller and nodeset settings):
  SRUNWAY_CLUSTER_DIR        state directory (default /var/tmp/srunway-cluster)
  SRUNWAY_CLUSTER_PORT_BASE  slurmctld port; the slurmd use the next ones (default 16817)
  SRUNWAY_CLUSTER_NODES      node names, space-separated (default "node1 node2")
EOF
}

readonly kState=${SRUNWAY_CLUSTER_DIR:-/var/tmp/srunway-cluster}
readonly kPortBase=${SRUNWAY_CLUSTER_PORT_BASE:-16817}
readonly kConf=$kState/etc/slurm.conf
readonly kHere=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
read -r -a kNodes <<<"${SRUNWAY_CLUSTER_NODES:-node1 node2}"
readonly kNodes
readonly kStartTimeoutS=60

die() { echo "local-cluster: $*" >&2; exit 1; }
note() { echo "local-cluster: $*"; }

# Prints the last lines of a log so that a failed start explains itself.
show_log_tail() {
  local log=$1
  if [[ -s $log ]]; then
    echo "---- last lines of $log ----" >&2
    tail -n 15 "$log" >&2
    echo "----" >&2
  else
    echo "(no log at $log)" >&2
  fi
}

# pid_of NAME: the pid in NAME's pid file if that process is alive and is the daemon we started, else nothing.
pid_of() {
  local pidfile
  case $1 in
    munged) pidfile=$kState/munge/munged.pid ;;
    slurmctld) pidfile=$kState/run/slurmctld.pid ;;
    *) pidfile=$kState/run/slurmd-$1.pid ;;
  esac
  [[ -r $pidfile ]] || return 0
  local pid
  pid=$(tr -dc '0-9' <"$pidfile")
  [[ -n $pid && -r /proc/$pid/cmdline ]] || return 0
  # A pid file can outlive its daemon and the pid be reused: only claim a process that is ours.
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
  case $1 in
    munged) [[ $cmd == *munged*"$kState"* ]] && echo "$pid" ;;
    slurmctld) [[ $cmd == *slurmctld*"$kConf"* ]] && echo "$pid" ;;
    *) [[ $cmd == *slurmd*"-N $1 -f $kConf"* ]] && echo "$pid" ;;
  esac
  return 0
}

# Fails with the port and its owner when a port this cluster needs is taken by someone else.
check_port_free() {
  local port=$1 what=$2
  local owner
  owner=$(ss -Hltnp "sport = :$port" 2>/dev/null | head -n 1)
  [[ -z $owner ]] && return 0
  local proc
  proc=$(grep -o 'users:(([^)]*))' <<<"$owner" | sed -E 's/users:\(\("([^"]*)",pid=([0-9]+).*/\1 (pid \2)/')
  die "port $port, needed for $what, is already in use by ${proc:-another process}; set SRUNWAY_CLUSTER_PORT_BASE to another port"
}

start_munge() {
  [[ -n $(pid_of munged) ]] && return 0
  local dir=$kState/munge
  mkdir -p "$dir"
  if [[ ! -s $dir/munge.key ]]; then
    dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
  fi
  touch "$kState/log/munged.log"
  chown -R munge:munge "$dir" "$kState/log/munged.log"
  chmod 0755 "$dir"
  chmod 0400 "$dir/munge.key"
  rm -f "$dir/munge.socket" "$dir/munge.socket.lock"
  if ! runuser -u munge -- /usr/sbin/munged --force \
      --socket="$dir/munge.socket" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
      --log-file="$kState/log/munged.log" --seed-file="$dir/munged.seed" 2>>"$kState/log/munge-start.log"; then
    show_log_tail "$kState/log/munge-start.log"
    show_log_tail "$kState/log/munged.log"
    die "munged failed to start"
  fi
}

# task/cgroup and proctrack/cgroup need a writable cpuset controller (cgroup v1's cpuset hierarchy, or v2 with
# cpuset enabled); say so in one line rather than let slurmd fail in its log.
check_cgroups() {
  if [[ -w /sys/fs/cgroup/cpuset ]]; then return 0; fi
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw cpuset /sys/fs/cgroup/cgroup.controllers &&
     [[ -w /sys/fs/cgroup ]]; then return 0; fi
  die "$kConf uses proctrack/cgroup and task/cgroup, but this machine has no writable cpuset cgroup (/sys/fs/cgroup): use a blueprint with task_plugin: task/none"
}

start_slurmctld() {
  [[ -n $(pid_of slurmctld) ]] && return 0
  # A fresh controller state each start: no drained nodes or stale jobs from an earlier run.
  if ! slurmctld -c -f "$kConf" 2>>"$kState/log/slurmctld.log"; then
    show_log_tail "$kState/log/slurmctld.log"
    die "slurmctld failed to start"
  fi
}

start_slurmd() {
  local node=$1
  [[ -n $(pid_of "$node") ]] && return 0
  local log=$kState/log/slurmd-$node.log
  # Each node gets its own mount namespace in which its spool directory is the one fixed SlurmdSpoolDir;
  # PMIx across the two nodes needs that (see shared/facts.md). Its /etc/hosts also names the nodes, as a real
  # cluster's DNS does, so a job step can resolve its nodes' names without asking slurmctld.
  if ! unshare -m --propagation private \
      sh -c 'mount --bind "$1" "$2" && mount --bind "$3" /etc/hosts && exec slurmd -N "$4" -f "$5"' \
      slurmd-"$node" "$kState/nodes/$node/spool" "$kState/spool" "$kState/etc/hosts" "$node" "$kConf" \
      2>>"$log"; then
    show_log_tail "$log"
    die "slurmd $node failed to start"
  fi
}

# Waits until the daemon's pid file names a live process; shows its log if it never does.
wait_for_daemon() {
  local name=$1 log=$2
  local deadline=$((SECONDS + kStartTimeoutS))
  until [[ -n $(pid_of "$name") ]]; do
    if ((SECONDS > deadline)); then
      show_log_tail "$log"
      die "$name did not start within ${kStartTimeoutS}s"
    fi
    sleep 0.2
  done
}

wait_for_nodes() {
  local deadline=$((SECONDS + kStartTimeoutS))
  local states
  while :; do
    states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u || true)
    if [[ $(grep -cE ' (idle|mix|alloc)$' <<<"$states") -eq ${#kNodes[@]} ]]; then
      return 0
    fi
    if ((SECONDS > deadline)); then
      echo "node states: ${states:-none (slurmctld does not answer)}" >&2
      local node
      for node in "${kNodes[@]}"; do show_log_tail "$kState/log/slurmd-$node.log"; done
      show_log_tail "$kState/log/slurmctld.log"
      die "nodes did not become idle within ${kStartTimeoutS}s"
    fi
    sleep 0.5
  done
}

cmd_up() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (it starts munged and slurm daemons)"
  local tool
  for tool in munged slurmctld slurmd sinfo unshare runuser ss; do
    command -v "$tool" >/dev/null 2>&1 || [[ -x /usr/sbin/$tool ]] ||
      die "$tool not found; run scripts/install-deps.sh first"
  done
  [[ -n $(pid_of slurmctld) ]] || check_port_free "$kPortBase" slurmctld
  local i
  for i in "${!kNodes[@]}"; do
    [[ -n $(pid_of "${kNodes[$i]}") ]] || check_port_free $((kPortBase + 1 + i)) "slurmd ${kNodes[$i]}"
  done
  [[ -r $kConf ]] || die "no configuration at $kConf (srunway-blueprint up renders it)"
  export SLURM_CONF=$kConf
  if grep -q '^ProctrackType=proctrack/cgroup' "$kConf"; then check_cgroups; fi
  # slurm-gcp's prolog/epilog multiplexer and its script directories, for configurations that name it.
  install -m 0755 "$kHere/slurm-mux.sh" "$kState/etc/slurm-mux.sh"
  mkdir -p "$kState"/adm/slurm/{prolog,epilog}_slurmd.d
  start_munge
  wait_for_daemon munged "$kState/log/munged.log"
  start_slurmctld
  wait_for_daemon slurmctld "$kState/log/slurmctld.log"
  # The nodes' /etc/hosts: this machine's, plus every node at its NodeAddr (nodes.hosts, rendered with slurm.conf).
  cat /etc/hosts "$kState/etc/nodes.hosts" >"$kState/etc/hosts.tmp" && mv "$kState/etc/hosts.tmp" "$kState/etc/hosts"
  local node
  for node in "${kNodes[@]}"; do
    start_slurmd "$node"
    wait_for_daemon "$node" "$kState/log/slurmd-$node.log"
  done
  wait_for_nodes
  note "up: ${kNodes[*]} idle; state in $kState"
  note "use it with: eval \"\$(scripts/local-cluster.sh env)\""
}

stop_daemon() {
  local name=$1
  local pid
  pid=$(pid_of "$name")
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  local deadline=$((SECONDS + 15))
  while [[ -d /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.2; done
  if [[ -d /proc/$pid ]]; then
    note "$name (pid $pid) ignored SIGTERM for 15s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  note "stopped $name (pid $pid)"
}

cmd_down() {
  export SLURM_CONF=$kConf
  if [[ -n $(pid_of slurmctld) ]]; then
    local jobs
    jobs=$(squeue -h -o %i 2>/dev/null || true)
    if [[ -n $jobs ]]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      local deadline=$((SECONDS + 20))
      while [[ -n $(squeue -h -o %i 2>/dev/null) ]] && ((SECONDS < deadline)); do sleep 0.5; done
    fi
  fi
  local node
  for node in "${kNodes[@]}"; do stop_daemon "$node"; done
  stop_daemon slurmctld
  stop_daemon munged
  note "down"
}

cmd_status() {
  local name pid running=0
  for name in munged slurmctld "${kNodes[@]}"; do
    pid=$(pid_of "$name")
    if [[ -n $pid ]]; then
      echo "$name: running (pid $pid)"
      running=$((running + 1))
    else
      echo "$name: stopped"
    fi
  done
  if [[ -n $(pid_of slurmctld) ]]; then
    SLURM_CONF=$kConf sinfo || true
  fi
  echo "config: $kConf"
  echo "logs:   $kState/log/{munged,slurmctld$(printf ',slurmd-%s' "${kNodes[@]}")}.log"
  ((running == 2 + ${#kNodes[@]}))
}

cmd_env() {
  echo "export SLURM_CONF=$kConf"
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
