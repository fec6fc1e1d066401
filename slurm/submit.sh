#!/usr/bin/env bash
# slurm/submit.sh: sbatch for crl's scripts, from the checkout or any other folder. It takes
# sbatch's own arguments:
#   slurm/submit.sh [sbatch options] slurm/crl.sbatch JOB.yaml [crl run options]
#   ~/crl/slurm/submit.sh -p gpu -n 8 --gpus-per-task=1 ~/crl/slurm/crl.sbatch my-job.yaml
# Slurm opens a job's log (--output, --error) before the script's first line runs, so a log folder
# that is missing or not writable ends the job with no log at all (the scripts' default is
# results/, relative to the folder you submit from). This script makes each log folder (taken, as
# sbatch takes it, from -o/-e, else SBATCH_OUTPUT/SBATCH_ERROR, else the script's #SBATCH lines;
# relative to -D/--chdir or the current folder) or stops, naming it, before sbatch runs; and it
# points the scripts at this checkout (CRL_SOURCE_DIR, unless set), so that a job submitted from
# another folder finds slurm/common.sh and build/apps/crl/crl there.
# Exit: sbatch's own; 3 when a log folder cannot be made or written; 2 when no script is given.
set -euo pipefail

CHECKOUT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "slurm/submit.sh: $1" >&2; exit "${2:-3}"; }

# The sbatch options before the script: the ones that place the logs.
output="" error="" chdir="" script=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  a=${args[i]}
  next=${args[i + 1]:-}
  case "$a" in
    -o | --output) output=$next; i=$((i + 1)) ;;
    -e | --error) error=$next; i=$((i + 1)) ;;
    -D | --chdir) chdir=$next; i=$((i + 1)) ;;
    --output=*) output=${a#--output=} ;;
    --error=*) error=${a#--error=} ;;
    --chdir=*) chdir=${a#--chdir=} ;;
    -o?*) output=${a#-o} ;;
    -e?*) error=${a#-e} ;;
    -D?*) chdir=${a#-D} ;;
    -*) ;;
    *) if [[ "$a" == *.sbatch && -f "$a" ]]; then script=$a; break; fi ;;
  esac
done
[ -n "$script" ] || die "no script: usage: slurm/submit.sh [sbatch options] slurm/SCRIPT.sbatch [its arguments]" 2

# A #SBATCH line of the script (the first that sets the option), as sbatch reads them: up to the
# first line that is not a comment.
directive() {
  local long=$1 short=$2 line value
  while IFS= read -r line; do
    [[ "$line" == "#!"* || -z "$line" ]] && continue
    [[ "$line" == "#"* ]] || break
    [[ "$line" =~ ^#SBATCH[[:space:]]+(--$long[=[:space:]]+|-$short[[:space:]]*)([^[:space:]]+) ]] || continue
    value=${BASH_REMATCH[2]}
    echo "$value"
    return
  done < "$script"
}
[ -n "$output" ] || output=${SBATCH_OUTPUT:-$(directive output o)}
[ -n "$error" ] || error=${SBATCH_ERROR:-$(directive error e)}
[ -n "$chdir" ] || chdir=$(directive chdir D)
base=${chdir:-$PWD}
[ -d "$base" ] || die "the job's folder '$base' (--chdir) does not exist"

# Makes the folder of one log path, or stops naming it.
make_log_folder() {
  local path=$1 what=$2 folder
  case "$path" in "" | none | /dev/*) return ;; esac
  folder=$(dirname "$path")
  if [[ "$folder" == *%* ]]; then
    echo "slurm/submit.sh: the $what folder '$folder' has a %-pattern Slurm fills in: it cannot be made before the job starts; make sure it exists" >&2
    return
  fi
  [[ "$folder" == /* ]] || folder=$base/$folder
  mkdir -p -- "$folder" 2>/dev/null || die "cannot make the $what folder '$folder' ($path): the job would end with no log"
  [ -w "$folder" ] || die "the $what folder '$folder' ($path) is not writable: the job would end with no log"
}
make_log_folder "$output" "log (--output)"
make_log_folder "$error" "error log (--error)"

export CRL_SOURCE_DIR=${CRL_SOURCE_DIR:-$CHECKOUT}
exec sbatch "$@"
