#!/bin/sh
# The forecast against repeated runs of examples/quickstart (the mock model,
# local sandboxes): each run changes a task env value (a new fingerprint, so
# nothing carries) but not what an attempt costs; before each run
# `launch --dry` forecasts it from the runs before. Prints one line per run:
#   run  forecast_usd lo hi  actual_usd  forecast_s lo hi  actual_s
# Usage: bench/forecast/quickstart.sh STEWARD_BIN [RUNS]
set -eu
bin=$1
runs=${2:-12}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp -r "$(dirname "$0")/../../examples/quickstart/." "$dir/"
cd "$dir"
# Prices make the mock's (deterministic) tokens cost something.
sed 's/^  name: mock-1$/  name: mock-1\n  prices: {input_per_mtok: 3, output_per_mtok: 15}/' steward.yaml > base.yaml
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
