#!/bin/sh
# The forecast against repeated runs of examples/quickstart (the mock model,
# local sandboxes): each run changes a task env value (a new fingerprint, so
# nothing carries) but not what an attempt costs; before each run
# `launch --dry` forecasts it from the runs before. Prints one line per run:
#   run  forecast_usd lo hi  actual_usd  forecast_s lo hi  actual_s
# With SLEEPY=1 a third task is added: eight samples whose agent sleeps a
# random 0.3–0.9 s, at most three at once (the scheduler model is measured
# against the real dispatcher).
# Usage: [SLEEPY=1] bench/forecast/quickstart.sh STEWARD_BIN [RUNS]
set -eu
bin=$1
runs=${2:-12}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp -r "$(dirname "$0")/../../examples/quickstart/." "$dir/"
cd "$dir"
# Prices make the mock's (deterministic) tokens cost something.
sed 's/^  name: mock-1$/  name: mock-1\n  prices: {input_per_mtok: 3, output_per_mtok: 15}/' steward.yaml > base.yaml
if [ "${SLEEPY:-}" = 1 ]; then
	cat >> base.yaml <<'YAML'
  - name: sleepy
    sandbox:
      provider: local
    exclusive: false
    max_samples: 3
    agent: 'sleep "$(awk "BEGIN{srand(); printf \"%.2f\", 0.3 + rand() * 0.6}")"; echo done'
    scorer:
      command: 'echo "{\"passed\": true, \"score\": 1}"'
    samples:
      - {id: z1, input: "1", target: "1"}
      - {id: z2, input: "2", target: "2"}
      - {id: z3, input: "3", target: "3"}
      - {id: z4, input: "4", target: "4"}
      - {id: z5, input: "5", target: "5"}
      - {id: z6, input: "6", target: "6"}
      - {id: z7, input: "7", target: "7"}
      - {id: z8, input: "8", target: "8"}
YAML
fi
i=1
while [ "$i" -le "$runs" ]; do
	sed "s/^    agent: /    env: {REP: \"$i\"}\n    agent: /" base.yaml > steward.yaml
	"$bin" launch --dry --json steward.yaml 2>/dev/null | python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin)[\"forecast\"]))" > forecast.json
	"$bin" launch steward.yaml > /dev/null 2>&1
	"$bin" runs --json steward.yaml > runs.json
	python3 - "$i" <<'PY'
import json, sys
f = json.load(open("forecast.json")) if open("forecast.json").read().strip() else None
r = json.load(open("runs.json"))[0]
import sqlite3
db = sqlite3.connect(".steward/record.sqlite")
usd = db.execute("SELECT COALESCE(SUM(cost_usd),0) FROM attempts WHERE run_id=? AND carried_from=''", (r["id"],)).fetchone()[0]
sec = r["duration_ns"] / 1e9
if f is None or f["runs"] == 0:
    print(sys.argv[1], "no-forecast", "%.6f" % usd, "%.3f" % sec)
else:
    u, s = f["usd"], f["seconds"]
    print(sys.argv[1], f["runs"], "%.6f %.6f %.6f" % (u["point"], u["lo"], u["hi"]), "%.6f" % usd,
          "%.3f %.3f %.3f" % (s["point"], s["lo"], s["hi"]), "%.3f" % sec, int(u["range_known"]))
PY
	i=$((i + 1))
done
