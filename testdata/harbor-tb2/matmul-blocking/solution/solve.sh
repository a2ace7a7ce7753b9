#!/bin/bash
set -euo pipefail
# Loop order i-k-j keeps the inner loop on contiguous rows; the sum order per c[i][j] is unchanged
# for exact small integers, so the checksum stays the same.
python3 - <<'PY'
from pathlib import Path
p = Path("/app/matmul.c")
src = p.read_text()
naive = """	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			for (int k = 0; k < N; k++)
				c[i][j] += a[i][k] * b[k][j];"""
fast = """	for (int i = 0; i < N; i++)
		for (int k = 0; k < N; k++) {
			double aik = a[i][k];
			for (int j = 0; j < N; j++)
				c[i][j] += aik * b[k][j];
		}"""
p.write_text(src.replace(naive, fast))
PY
/app/bench.sh
