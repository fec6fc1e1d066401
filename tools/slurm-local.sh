#!/usr/bin/env bash
# A one-node Slurm on localhost (munged, slurmctld, slurmd from Debian's munge and slurm-wlm) to try
# slurm/*.sbatch and to run the tests labelled `slurm`. Its config, key, logs and spool live in a
# state folder, not in /etc, so it runs beside (or without) a system Slurm.
# Usage: tools/slurm-local.sh start|stop|status|env
#   start   writes the config and starts the three daemons (idempotent: a running one is kept),
#           waits until the node is idle, then prints the `export SLURM_CONF=...` line
#   stop    stops the daemons (jobs still queued stay in the state folder for the next start)
#   status  sinfo and squeue of the local Slurm; exit 1 when it is not running
#   env     prints `export SLURM_CONF=...`: eval "$(tools/slurm-local.sh env)" before sbatch
# Env: CRL_SLURM_STATE (default ~/.local/share/crl/slurm), CRL_SLURM_PORT (default 6817; slurmd
#      takes the next port), CRL_SLURM_KILL_WAIT (seconds between SIGTERM and SIGKILL when a job
#      ends early, default 30). Needs the packages of tools/setup.sh (slurm-wlm, munge).
set -euo pipefail

STATE=${CRL_SLURM_STATE:-$HOME/.local/share/crl/slurm}
PORT=${CRL_SLURM_PORT:-6817}
KILL_WAIT=${CRL_SLURM_KILL_WAIT:-30}
CONF=$STATE/slurm.conf
# munged wants every folder above its socket open to all (a home folder seldom is), and a socket
# path under 108 bytes: the socket goes to /tmp, one folder per user and port.
MUNGE_SOCKET_DIR=/tmp/crl-munge-$(id -u)-$PORT
MUNGE_SOCKET=$MUNGE_SOCKET_DIR/munge.socket.2
NODE=$(hostname -s)
SBIN=/usr/sbin

die() { echo "slurm-local: $*" >&2; exit 1; }

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_config() {
  # The node line is the machine's own (slurmd -C): its CPUs and memory, nothing made up.
  local node_line
  node_line=$("$SBIN/slurmd" -C | head -1 | sed -E "s/^NodeName=[^ ]+/NodeName=$NODE NodeAddr=127.0.0.1/")
  local user
  user=$(id -un)
  cat > "$CONF.new" <<EOF
# Written by tools/slurm-local.sh: a one-node Slurm on localhost (state in $STATE).
ClusterName=crl-local
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job waits before it may start again (default 120 s).
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=10
# No cgroups in containers and CI: track processes by parentage, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
SchedulerType=sched/backfill
# Look at pending jobs every second or two (a requeued job restarts soon after cred_expire).
SchedulerParameters=sched_interval=2,bf_interval=1
ReturnToService=2
JobRequeue=1
KillWait=$KILL_WAIT
MinJobAge=300
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
$node_line State=UNKNOWN
PartitionName=local Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$CONF.new" "$CONF"
  # PMIx's per-step folders in the state folder, not /tmp: one left behind there by another local
  # Slurm (its job ids start at 1 too) made a step of the same id fail to launch ("Cannot create
  # directory /tmp/spmix_appdir_0_12.0: File exists"), and srun still exited 0.
  mkdir -p "$STATE/pmix"
  echo "PMIxCliTmpDirBase=$STATE/pmix" > "$(dirname "$CONF")/mpi.conf"
}

start_munge() {
  pid_alive "$STATE/munge/munged.pid" && return
  mkdir -p "$STATE/munge" "$MUNGE_SOCKET_DIR"
  chmod 700 "$STATE/munge"
  chmod 755 "$MUNGE_SOCKET_DIR"
  # The key is this Slurm's own: made once, readable by its owner only (munged checks that).
  if [ ! -s "$STATE/munge/munge.key" ]; then
    dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$STATE/munge/munge.key"
  fi
  "$SBIN/munged" --socket="$MUNGE_SOCKET" --key-file="$STATE/munge/munge.key" \
    --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/log/munged.log" \
    --seed-file="$STATE/munge/munged.seed" \
    || die "munged did not start; see $STATE/log/munged.log"
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "$what within ${seconds}s; logs: $STATE/log/"
    sleep 0.1
  done
}

node_ready() {
  local state
  state=$(SLURM_CONF=$CONF sinfo -h -n "$NODE" -o %t 2>/dev/null) || return 1
  case "$state" in idle*|mix*|alloc*) return 0 ;; *) return 1 ;; esac
}

start() {
  for exe in munged slurmctld slurmd; do
    [ -x "$SBIN/$exe" ] || die "$SBIN/$exe is missing: run tools/setup.sh (it installs slurm-wlm and munge)"
  done
  mkdir -p "$STATE"/{ctld,spool,log}
  start_munge
  pid_alive "$STATE/slurmctld.pid" && pid_alive "$STATE/slurmd.pid" || write_config
  if ! pid_alive "$STATE/slurmctld.pid"; then
    "$SBIN/slurmctld" -f "$CONF" || die "slurmctld did not start; see $STATE/log/slurmctld.log"
  fi
  if ! pid_alive "$STATE/slurmd.pid"; then
    "$SBIN/slurmd" -f "$CONF" -N "$NODE" || die "slurmd did not start; see $STATE/log/slurmd.log"
  fi
  wait_for 30 "the node did not become idle" node_ready
  # A node left down or drained by an earlier stop comes back.
  SLURM_CONF=$CONF scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
  print_env
}

stop() {
  # All three asked at once (slurmctld takes a few seconds to save its state), then waited for.
  local pids=() pidfile
  for pidfile in "$STATE/slurmd.pid" "$STATE/slurmctld.pid" "$STATE/munge/munged.pid"; do
    pid_alive "$pidfile" && pids+=("$(cat "$pidfile")")
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill "${pids[@]}" 2>/dev/null || true
  local alive
  for _ in $(seq 100); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 1 ] || return 0
    sleep 0.1
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
}

status() {
  pid_alive "$STATE/slurmctld.pid" && pid_alive "$STATE/slurmd.pid" || { echo "slurm-local: not running (state $STATE)"; return 1; }
  SLURM_CONF=$CONF sinfo
  SLURM_CONF=$CONF squeue
}

print_env() { echo "export SLURM_CONF=$CONF"; }

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) print_env ;;
  *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
