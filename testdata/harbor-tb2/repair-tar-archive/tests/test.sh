#!/bin/bash
# Verifier: pytest over test_outputs.py. The reward file is the verdict, not the exit status.

cd /app || exit 1
python3 -m pytest -rA /tests/test_outputs.py > /logs/verifier/test-stdout.txt 2>&1
status=$?
cat /logs/verifier/test-stdout.txt
if [ "$status" -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
