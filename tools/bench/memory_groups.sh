#!/usr/bin/env bash
# Groups of correct candidates at full scale that must all be judged ok beside the judge and the
# reference's timing worker on one card (issue 40 item 6): MEMORY_COPIES (16) copies of the reference
# of each of the MEMORY_TASKS (10) tasks of most memory traffic, one `crl eval` per task, so a run cut
# short keeps the tasks it finished. Writes OUT/memory_<task>.json (the verdicts) and prints a line
# per task: its verdicts by status and the judge step's memory plan.
# Usage: tools/bench/memory_groups.sh CRL OUT   (MEMORY_TASKS, MEMORY_COPIES, MEMORY_TIME_BUDGET, MEMORY_ORDER,
#   MEMORY_TASK_SECONDS: each task's `crl eval` cut after this long; its log's progress lines then
#   still give the verdicts so far: on the H100, 16 full-scale copies of one task took over 200 s)
set -uo pipefail
crl=$1 out=$2
cd "$(dirname "$0")/../.."
all="$out/memory_groups.jsonl"
"$crl" tasks list --json | tools/bench/largest_tasks.py --count "${MEMORY_TASKS:-10}" --copies "${MEMORY_COPIES:-16}" > "$all"
tasks=$(python3 -c 'import json, sys; print(" ".join(dict.fromkeys(json.loads(l)["task"] for l in sys.stdin)))' < "$all")
# MEMORY_ORDER="level1/038_l1_norm ...": these of the tasks first (a call of limited time)
for task in ${MEMORY_ORDER:-}; do tasks="$task ${tasks//$task/}"; done
for task in $tasks; do
  one="$out/memory_${task//\//_}"
  python3 -c 'import json, sys; [print(l, end="") for l in open(sys.argv[1]) if json.loads(l)["task"] == sys.argv[2]]' "$all" "$task" > "$one.jsonl"
  start=$(date +%s)
  timeout "${MEMORY_TASK_SECONDS:-0}" "$crl" eval "$one.jsonl" --trials 3 --time-budget "${MEMORY_TIME_BUDGET:-0.5}" --json \
    > "$one.json" 2> "$one.log"
  if [ ! -s "$one.json" ]; then  # cut short: the verdicts its progress lines name
    echo "$task: cut after ${MEMORY_TASK_SECONDS:-0} s; $(grep -c '^crl eval: judged' "$one.log") verdicts: $(grep '^crl eval: judged' "$one.log" | sed -E 's/.*; ([a-z_:]+): .*/\1/' | sort | uniq -c | awk '{printf "%s %s; ", $2, $1}')"
    continue
  fi
  python3 - "$one.json" "$task" "$(( $(date +%s) - start ))" <<'PY'
import collections, json, sys
verdicts = json.load(open(sys.argv[1]))
verdicts = verdicts if isinstance(verdicts, list) else verdicts.get("verdicts", [])
by = collections.Counter(v.get("status") for v in verdicts)
plan = next((s.get("detail", "") for v in verdicts for s in v.get("steps", []) if s.get("name") == "judge"), "")
plan = plan[plan.find("GPU memory"):].split("; precision")[0] if "GPU memory" in plan else plan[:300]
first_bad = next((v.get("message", "")[:300] for v in verdicts if v.get("status") != "ok"), "")
print(f"{sys.argv[2]}: {dict(by)} in {sys.argv[3]} s; {plan}" + (f"; first not ok: {first_bad}" if first_bad else ""), flush=True)
PY
done
