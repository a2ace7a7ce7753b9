#!/bin/sh
n=0
for w in a b c; do grep -qx "$w" /app/answers.txt 2>/dev/null && n=$((n+1)); done
if [ $n -eq 3 ]; then r=1; else r=0; fi
printf '{"reward": %s, "lines_found": %s, "lines_wanted": 3}\n' "$r" "$n" > /logs/verifier/reward.json
