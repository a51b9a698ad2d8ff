#!/usr/bin/env bash
# A real one-node SLURM cluster on this machine, for the tests marked `slurm`
# (tests/test_slurm.py); scripts/test.sh starts it before them and stops it after.
#
#   scripts/slurm/local_cluster.sh check   exit 0 if a cluster can be brought up here, else
#                                          print one line saying why not and exit 1
#   scripts/slurm/local_cluster.sh start   install slurm-wlm and munge from the OS packages
#                                          if missing (apt-get), then start munged, slurmctld
#                                          and slurmd; returns when the node is idle
#   scripts/slurm/local_cluster.sh stop    stop the daemons `start` started
#   scripts/slurm/local_cluster.sh env     print `export SLURM_CONF=...` for sbatch & co.
#
# Root only (slurmd runs the jobs as their user). Everything lives in $DCPMI_SLURM_DIR
# (default /tmp/dcpmi-slurm): its own slurm.conf (sbatch, squeue and scontrol find it through
# SLURM_CONF), its own munge key and socket, spool, state, logs and pid files; its own
# ports. Nothing under /etc is written, so a machine's own SLURM or munge is left alone.
# The node is this machine: all its cores, and $DCPMI_SLURM_MEMORY_MB of memory to schedule
# (default: half of it; the tests' jobs ask for theirs with --mem), so that jobs run side by
# side, one per core, rather than one at a time.
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin  # slurmctld, slurmd and munged live there; a CI's PATH may lack it

state=${DCPMI_SLURM_DIR:-/tmp/dcpmi-slurm}
ctld_port=${DCPMI_SLURM_PORT:-6917}
conf=$state/slurm.conf

why_not() {
  if [ "$(id -u)" != 0 ]; then
    echo "not root (slurmd and munged must run as root)"
  elif ! command -v sbatch >/dev/null && ! command -v apt-get >/dev/null; then
    echo "neither SLURM (sbatch) nor apt-get to install it (slurm-wlm, munge) is here"
  fi
}

install_packages() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
    && command -v munged >/dev/null && command -v sbatch >/dev/null && return 0
  echo "local_cluster: apt-get install slurm-wlm munge"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q slurm-wlm munge >"$state/apt.log" 2>&1; then
    apt-get update -q >>"$state/apt.log" 2>&1
    apt-get install -y -q slurm-wlm munge >>"$state/apt.log" 2>&1 || {
      echo "local_cluster: apt-get install slurm-wlm munge failed; see $state/apt.log" >&2
      return 1
    }
  fi
}

write_conf() {
  local host cpus memory_mb
  host=$(hostname -s)
  cpus=$(nproc)
  memory_mb=${DCPMI_SLURM_MEMORY_MB:-$(awk '/^MemTotal:/ {print int($2 / 1024 / 2)}' /proc/meminfo)}
  mkdir -p "$state/spool/slurmd" "$state/spool/slurmctld" "$state/log" "$state/run"
  cat >"$conf" <<EOF
# written by scripts/slurm/local_cluster.sh: a one-node cluster for the tests
ClusterName=dcpmi-local
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/run/munge.socket
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
# a requeued or cancelled job's processes get SIGTERM, then SIGKILL this many seconds later
KillWait=10
DefMemPerCPU=1000
# a finished job stays known to scontrol (its state, scontrol requeue) for an hour
MinJobAge=3600
StateSaveLocation=$state/spool/slurmctld
SlurmdSpoolDir=$state/spool/slurmd
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  # sbatch's --gpus needs no gres here; slurmd reads a cgroup.conf only with cgroup plugins
}

start_munge() {
  local key=$state/munge.key
  if [ ! -s "$key" ]; then
    head -c 1024 /dev/urandom >"$key"
  fi
  chmod 400 "$key"
  munged --force --key-file="$key" --socket="$state/run/munge.socket" \
    --pid-file="$state/run/munged.pid" --log-file="$state/log/munged.log" \
    --seed-file="$state/munged.seed"
}

wait_idle() {
  local i
  for i in $(seq 1 60); do
    if SLURM_CONF=$conf sinfo -h -o %T 2>/dev/null | grep -qx idle; then
      return 0
    fi
    sleep 1
  done
  echo "local_cluster: the node is not idle after 60 s; see $state/log/" >&2
  SLURM_CONF=$conf sinfo >&2 || true
  return 1
}

stop_pid_file() {
  local file=$1 pid
  [ -s "$file" ] || return 0
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$file"
}

stop() {
  # the jobs first (slurmd's job steps), then the daemons
  if [ -s "$state/run/slurmctld.pid" ]; then
    SLURM_CONF=$conf scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
  fi
  stop_pid_file "$state/run/slurmd.pid"
  stop_pid_file "$state/run/slurmctld.pid"
  stop_pid_file "$state/run/munged.pid"
  rm -f "$conf"  # no cluster answers here now: the tests skip at once
}

case "${1:-}" in
  check)
    reason=$(why_not)
    if [ -n "$reason" ]; then echo "$reason"; exit 1; fi
    ;;
  start)
    reason=$(why_not)
    if [ -n "$reason" ]; then echo "local_cluster: cannot start: $reason" >&2; exit 1; fi
    mkdir -p "$state"
    chmod 700 "$state"
    install_packages
    stop  # what a previous start left running
    write_conf
    start_munge
    # -c: a clean start, no jobs from a previous cluster's state
    slurmctld -c -f "$conf"
    slurmd -c -f "$conf"
    wait_idle
    echo "local_cluster: up ($(hostname -s), $(nproc) CPUs; SLURM_CONF=$conf)"
    ;;
  stop)
    stop
    echo "local_cluster: stopped"
    ;;
  env)
    echo "export SLURM_CONF=$conf"
    ;;
  *)
    echo "usage: $0 check|start|stop|env" >&2
    exit 2
    ;;
esac
