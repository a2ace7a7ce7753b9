# Agent for flaky-search: misses on the first attempt, finds it afterwards.
# STEWARD_ATTEMPT counts attempts from 1.
if [ "${STEWARD_ATTEMPT:-1}" -ge 2 ]; then
  echo found
else
  echo "not yet"
fi
