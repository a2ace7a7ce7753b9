#!/bin/sh
# Harbor's verifier: the verdict is the reward file, not the exit status.
if [ "$(cat /app/hello.txt 2>/dev/null)" = "hello" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
