# Scorer: STEWARD_ANSWER is the agent's answer (answer.txt, trimmed) and
# STEWARD_TARGET the sample's target. The last line of output decides.
if [ "$STEWARD_ANSWER" = "$STEWARD_TARGET" ]; then
  echo '{"passed": true, "score": 1, "explanation": "sorted without duplicates"}'
else
  lines=$(printf '%s\n' "$STEWARD_ANSWER" | wc -l)
  echo "{\"passed\": false, \"score\": 0, \"explanation\": \"unexpected output ($lines lines)\"}"
fi
