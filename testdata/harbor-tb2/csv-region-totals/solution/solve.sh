#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv, json
totals = {}
with open("/app/sales.csv") as f:
    for row in csv.DictReader(f):
        totals[row["region"]] = totals.get(row["region"], 0.0) + float(row["amount"])
with open("/app/totals.json", "w") as f:
    json.dump({k: round(totals[k], 2) for k in sorted(totals)}, f)
PY
