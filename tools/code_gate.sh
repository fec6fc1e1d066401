#!/usr/bin/env bash
# The redesign's gate (run by ctest as `code_gate`): the core paths stay short named steps. No
# function in lib/eval, lib/worker, lib/rl or lib/dist over 120 lines or cyclomatic complexity 40
# (lizard, from PyPI, in the venv tools/setup.sh makes).
# Usage: tools/code_gate.sh [--json]   Exit 0 when that holds, 1 when not (each offender printed).
set -euo pipefail
cd "$(dirname "$0")/.."
CRL_HOME=${CRL_HOME:-$HOME/.local/share/crl}
LIZARD=${LIZARD:-$CRL_HOME/venv/bin/lizard}
command -v "$LIZARD" >/dev/null || { echo "code_gate: lizard not found at $LIZARD (tools/setup.sh installs it)"; exit 2; }
json=0
[ "${1:-}" = "--json" ] && json=1
DIRS=(lib/eval lib/worker lib/rl lib/dist)

# lizard -w prints one warning line per function over a limit.
long=$("$LIZARD" -l cpp -w -L 120 -C 40 "${DIRS[@]}" 2>/dev/null || true)
# (lizard lists a function again under its warnings: sort -u; head closes the pipe early: || true)
longest=$("$LIZARD" -l cpp "${DIRS[@]}" 2>/dev/null | awk '$1 ~ /^[0-9]+$/ && NF==6 && $6 ~ /@/ {print $5, $2, $6}' |
  sort -u | sort -n -r | head -5 || true)

if [ "$json" = 1 ]; then
  python3 - "$long" "$longest" <<'PY'
import json, sys
long, longest = sys.argv[1], sys.argv[2]
print(json.dumps({"functions_over_limits": [l for l in long.splitlines() if l.strip()],
                  "longest": [dict(zip(("lines", "cyclomatic", "function"), l.split(" ", 2))) for l in longest.splitlines()],
                  "limits": {"lines": 120, "cyclomatic": 40}, "ok": not long.strip()}, indent=1))
PY
else
  echo "longest functions in ${DIRS[*]} (lines, cyclomatic, where):"
  echo "$longest" | sed 's/^/  /'
  [ -n "$long" ] && { echo "over 120 lines or cyclomatic 40:"; echo "$long" | sed 's/^/  /'; }
fi
[ -z "$long" ]
