#!/bin/sh
# The service must answer now, while the verifier runs (Harbor's shared
# verifier runs beside the processes the agent left).
if [ "$(wget -q -O - http://127.0.0.1:8080/status.txt 2>/dev/null)" = "ready" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
