#!/usr/bin/env bash
# A test double for `crl run JOB --run-dir DIR` that follows the stop/resume contract
# (notes: SIGUSR1/SIGTERM/SIGINT stop at the next step boundary with exit code 5, a rerun
# resumes after the last finished step), so tests/slurm can check slurm/crl.sbatch's signal
# forwarding and requeue logic in seconds, apart from the real job (tested by the job cases).
# Each finished step appends "<step> <restart>" to DIR/steps.txt; STEPS (default 16) steps of
# STEP_SECONDS (default 0.5) each. Like crl, it writes DIR/finished.json when it ends complete.
# LAUNCH_FAILS_AT_RESTART=N: at restart N it plays an srun whose tasks failed to launch (srun's
# error line, exit code 0, nothing run).
set -u
[ "${1:-}" = run ] || { echo "stop_contract_double: only 'run JOB --run-dir DIR' is played" >&2; exit 2; }
run_dir=""
while [ $# -gt 0 ]; do
  [ "$1" = --run-dir ] && run_dir=$2
  shift
done
[ -n "$run_dir" ] || { echo "stop_contract_double: --run-dir is missing" >&2; exit 2; }
mkdir -p "$run_dir"
if [ "${LAUNCH_FAILS_AT_RESTART:-}" = "${SLURM_RESTART_COUNT:-0}" ]; then
  echo "srun: error: task 0 launch failed: Unspecified error (stop_contract_double)"
  exit 0
fi
rm -f "$run_dir/finished.json"
steps=${STEPS:-16}
stop=""
for sig in USR1 TERM INT; do trap "stop=\${stop:-$sig}" "$sig"; done
done_steps=$( [ -r "$run_dir/steps.txt" ] && wc -l < "$run_dir/steps.txt" || echo 0)
[ "$done_steps" -gt 0 ] && echo "resuming from step $done_steps"
for ((step = done_steps; step < steps; step++)); do
  sleep "${STEP_SECONDS:-0.5}" & wait $!
  # A signal during the sleep interrupts `wait`; the step still finishes before the stop.
  wait $! 2>/dev/null
  echo "$step ${SLURM_RESTART_COUNT:-0}" >> "$run_dir/steps.txt"
  echo "step $((step + 1))/$steps 120.0 steps/min"
  if [ -n "$stop" ]; then
    echo "stopped at double step $((step + 1)) (SIG$stop); run the same command to resume"
    exit 5
  fi
done
echo '{"job": "stop_contract_double"}' > "$run_dir/finished.json"
exit 0
