#!/usr/bin/env bash
# One step of a profiled build (tools/build_profile.sh): runs a compile or link, appends its CPU and wall seconds.
# Usage (as the build's compiler and linker launcher): build_profile_record.sh COMMAND...
# Env: CRL_BUILD_PROFILE_OUT, the file that gets "cpu_seconds<TAB>wall_seconds<TAB>output" per step.
start=$(date +%s.%N)
"$@"
rc=$?
end=$(date +%s.%N)
out="?"
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out=$a
  prev=$a
done
# `times` prints the shell's own user and system time, then its children's (the step's); it runs
# here, not in a $(...) subshell, whose children would be none.
record=$(mktemp)
times >"$record"
awk -v start="$start" -v end="$end" -v out="$out" 'NR == 2 {
  cpu = 0
  for (i = 1; i <= 2; i++) { split($i, ms, "m"); sub("s", "", ms[2]); cpu += ms[1] * 60 + ms[2] }
  printf "%.3f\t%.3f\t%s\n", cpu, end - start, out
}' "$record" >>"${CRL_BUILD_PROFILE_OUT:-/dev/null}"
rm -f "$record"
exit $rc
