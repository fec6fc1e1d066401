# shellcheck shell=bash
# slurm/common.sh: what every slurm/*.sbatch script shares (sourced, not run): the log prefix with
# job id and restart count, the printed command, the launcher (srun --mpi=pmix or mpirun), the
# stop signals forwarded to the running step, and what a stopped step's exit code becomes
# (a requeue after the time-limit signal, a clean end after SIGTERM).
# Variables it reads (all optional):
#   CRL_BIN          the crl executable (default $CRL_SOURCE_DIR/build/apps/crl/crl)
#   CRL_LAUNCH       srun (default: srun --mpi=pmix, one task per rank) or mpirun (where srun has no
#                    PMIx; a SIGTERM stop then writes no checkpoint, see crl_launcher)
#   CRL_MAX_RESTARTS requeues after the time-limit signal before the script gives up (default 20)
#   CRL_FINISHED_MARK a file the step writes only when it ran the job to its end (crl run's
#                    RUN_DIR/finished.json); set, an exit code 0 without it is no success

CRL_BIN=${CRL_BIN:-$CRL_SOURCE_DIR/build/apps/crl/crl}
CRL_LAUNCH=${CRL_LAUNCH:-srun}
CRL_MAX_RESTARTS=${CRL_MAX_RESTARTS:-20}
# crl's exit code for "stopped at a step boundary after a signal, checkpoint written: resumable".
readonly CRL_EXIT_STOPPED=5

crl_log() { echo "[$(date -u +%FT%TZ) ${CRL_SCRIPT_NAME} job ${SLURM_JOB_ID:-none} restart ${SLURM_RESTART_COUNT:-0}] $*"; }

# The job's time left as squeue shows it (D-HH:MM:SS), or "?" outside Slurm.
crl_time_left() { squeue -h -j "${SLURM_JOB_ID:-0}" -o %L 2>/dev/null || echo "?"; }

crl_die() { crl_log "error: $*" >&2; exit 3; }

# One line with the job, its restart count, its nodes and its GPUs, at every (re)start.
crl_banner() {
  crl_log "start on ${SLURM_JOB_NODELIST:-$(hostname -s)}: ${SLURM_NTASKS:-1} tasks on ${SLURM_JOB_NUM_NODES:-1} nodes," \
    "partition ${SLURM_JOB_PARTITION:-?}, account ${SLURM_JOB_ACCOUNT:-?}, submitted from ${SLURM_SUBMIT_DIR:-$PWD}"
  if [ -n "${SLURM_GPUS_PER_TASK:-}" ]; then
    crl_log "GPUs: ${SLURM_GPUS_PER_TASK} per task (each rank sees its own)"
  elif [ -n "${SLURM_GPUS_PER_NODE:-}${SLURM_GPUS_ON_NODE:-}" ]; then
    crl_log "GPUs: ${SLURM_GPUS_PER_NODE:-${SLURM_GPUS_ON_NODE}} per node, shared by the node's ranks (each takes SLURM_LOCALID's)"
  else
    crl_log "GPUs: none asked for (the cpu backend; add --gpus-per-task=1 or --gpus-per-node=N for cuda)"
  fi
  [ -x "$CRL_BIN" ] || crl_die "$CRL_BIN is not an executable: build crl (tools/setup.sh) or set CRL_BIN"
}

# The launcher for an MPI job over the allocation's tasks, in CRL_LAUNCHER (an array).
crl_launcher() {
  case "$CRL_LAUNCH" in
    srun) CRL_LAUNCHER=(srun --mpi=pmix --ntasks="${SLURM_NTASKS:-1}") ;;
    mpirun)
      CRL_LAUNCHER=(mpirun -np "${SLURM_NTASKS:-1}")
      if [ "$(id -u)" -eq 0 ]; then
        # Open MPI refuses root unless told twice (CI's containers run as root).
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      fi
      # mpirun passes SIGUSR1 on to the ranks (the time-limit stop works), but on scancel's or
      # preemption's SIGTERM it ends the ranks itself before they reach a step boundary (seen on
      # Open MPI 4.1): under mpirun such a stop resumes from the checkpoint before. srun does not.
      crl_log "launcher mpirun: the time-limit stop checkpoints; a SIGTERM stop (scancel, preemption) resumes from the checkpoint before (checkpoint.every_minutes bounds the loss)" ;;
    *) crl_die "CRL_LAUNCH='$CRL_LAUNCH': give srun or mpirun" ;;
  esac
}

# Runs the command as the job's step, printing it first. A stop signal that reaches this shell
# (the time-limit --signal=B:USR1@margin, scancel's or preemption's SIGTERM, SIGINT) is
# remembered in CRL_STOP_SIGNAL and passed on to the step as SIGUSR1: crl stops at the next step
# boundary on any of them, and USR1 never counts as the "second signal, exit at once" that a
# second SIGTERM is (Slurm already sends its SIGTERM to the step's tasks itself).
# Sets CRL_STEP_RC to the step's exit code.
crl_run_step() {
  CRL_STOP_SIGNAL=""
  CRL_STEP_PID=""
  # The traps come before the step starts: a stop signal in between (the step's log line is what a
  # watcher sees first) would otherwise end this script by its default action, the job FAILED. One
  # that comes before the step exists is passed on as soon as it does.
  local sig
  for sig in USR1 TERM INT; do
    # shellcheck disable=SC2064  # $sig is fixed now, on purpose
    trap "CRL_STOP_SIGNAL=\${CRL_STOP_SIGNAL:-$sig}; crl_log \"got SIG$sig with \$(crl_time_left) left: passing it on to the step as SIGUSR1\"; [ -z \"\$CRL_STEP_PID\" ] || kill -USR1 \$CRL_STEP_PID 2>/dev/null" "$sig"
  done
  crl_log "+ $(printf '%q ' "$@")"
  "$@" &
  local pid=$!
  CRL_STEP_PID=$pid
  [ -z "$CRL_STOP_SIGNAL" ] || kill -USR1 "$pid" 2>/dev/null
  # `wait` returns early (status > 128) each time a trapped signal arrives: wait again until the
  # step itself has ended (a finished child that was not yet reaped still answers kill -0).
  while :; do
    wait "$pid"
    CRL_STEP_RC=$?
    kill -0 "$pid" 2>/dev/null || break
  done
  trap - USR1 TERM INT
  crl_log "step exited with code $CRL_STEP_RC${CRL_STOP_SIGNAL:+ after SIG$CRL_STOP_SIGNAL}"
}

# A step that exited 0 without running the job to its end: srun exits 0 when its tasks failed to
# launch (seen: a PMIx folder of an earlier step left in /tmp, "task 0 launch failed: Unspecified
# error"). A requeue runs it again, from its checkpoint, as far as CRL_MAX_RESTARTS allows; then
# the job fails with exit code 1.
crl_not_finished() {
  local resume_hint=$1
  crl_log "the step exited with code 0 but did not run the job to its end (no $CRL_FINISHED_MARK): its tasks" \
    "did not start or ended early (srun's lines above say why)"
  if [ "${SLURM_RESTART_COUNT:-0}" -ge "$CRL_MAX_RESTARTS" ] || [ -z "${SLURM_JOB_ID:-}" ]; then
    crl_log "not requeued (restart ${SLURM_RESTART_COUNT:-0} of CRL_MAX_RESTARTS $CRL_MAX_RESTARTS); resume with: $resume_hint"
    exit 1
  fi
  crl_requeue "requeueing job $SLURM_JOB_ID to run the step again (restart $((${SLURM_RESTART_COUNT:-0} + 1)))" "$resume_hint"
}

# Logs why, requeues this job (it starts again and resumes from its checkpoint) and ends the script.
crl_requeue() {
  local why=$1 resume_hint=$2
  crl_log "$why"
  scontrol requeue "$SLURM_JOB_ID" || crl_die "scontrol requeue $SLURM_JOB_ID failed; resume with: $resume_hint"
  exit 0
}

crl_fail() {
  crl_log "failed with exit code $CRL_STEP_RC (3 bad input, 4 internal error, 128+N killed by signal N);" \
    "after a crash, resume from the newest good checkpoint with: $1"
  exit "$CRL_STEP_RC"
}

# What a step's exit code means for the job: 0 done (with CRL_FINISHED_MARK, only where the step
# wrote it); 5 (stopped, checkpoint written) is requeued after the time-limit signal and ends
# cleanly after SIGTERM/SIGINT (preemption requeues by itself; scancel means stop); anything else
# fails the job with that code. `resume_hint` is the command that resumes by hand.
crl_finish() {
  local resume_hint=$1
  case "$CRL_STEP_RC" in
    0)
      [ -z "${CRL_FINISHED_MARK:-}" ] || [ -e "$CRL_FINISHED_MARK" ] || crl_not_finished "$resume_hint"
      crl_log "done"; exit 0 ;;
    "$CRL_EXIT_STOPPED" | 130 | 143)
      # Slurm's SIGTERM (scancel, preemption, requeue) reaches srun too, which then ends with 143
      # whatever its tasks returned: after SIGTERM, 143 is the same stop as 5.
      if [ "$CRL_STOP_SIGNAL" = TERM ] || [ "$CRL_STOP_SIGNAL" = INT ]; then
        crl_log "stopped after SIG$CRL_STOP_SIGNAL (crl stops at a step boundary with a checkpoint); if Slurm preempted or requeued" \
          "the job it starts again by itself and resumes, otherwise resume with: $resume_hint"
        exit 0
      fi
      [ "$CRL_STEP_RC" -eq "$CRL_EXIT_STOPPED" ] || crl_fail "$resume_hint"
      if [ "${SLURM_RESTART_COUNT:-0}" -ge "$CRL_MAX_RESTARTS" ]; then
        crl_log "stopped with a checkpoint, but already restarted $CRL_MAX_RESTARTS times (CRL_MAX_RESTARTS); resume with: $resume_hint"
        exit "$CRL_EXIT_STOPPED"
      fi
      crl_requeue "stopped with a checkpoint before the time limit: requeueing job $SLURM_JOB_ID (restart $((${SLURM_RESTART_COUNT:-0} + 1)))" \
        "$resume_hint" ;;
    *) crl_fail "$resume_hint" ;;
  esac
}
