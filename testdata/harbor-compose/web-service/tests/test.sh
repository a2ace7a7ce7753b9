#!/bin/sh
# Runs in main: the verifier reaches the web service by its name too, and
# compares what the agent fetched with what the service serves.
want=$(wget -q -O - http://web:8080/secret.txt)
got=$(cat /app/fetched.txt 2>/dev/null)
if [ -n "$want" ] && [ "$got" = "$want" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "want '$want', got '$got'"
  echo 0 > /logs/verifier/reward.txt
fi
