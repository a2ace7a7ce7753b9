#!/bin/sh
# Prints the best of three wall times of the program built from /app/matmul.c, in seconds.
gcc -O2 -o /tmp/matmul /app/matmul.c || exit 1
python3 -c '
import subprocess, time
best = min((lambda s: (subprocess.run(["/tmp/matmul"], capture_output=True), time.perf_counter() - s)[1])(time.perf_counter()) for _ in range(3))
print(f"{best:.3f}")'
