#!/bin/sh
# The verifier (Harbor's tests/test.sh): it alone decides, on what the agent
# left in the workdir, whatever the agent's exit status. It runs from
# $STEWARD_SCORER_DIR, which the agent never saw.
[ "$(sh calc.sh 2 3)" = 5 ] && [ "$(sh calc.sh 10 -4)" = 6 ] && [ "$(sh calc.sh 0 0)" = 0 ] && exit 0
echo "calc.sh 2 3 printed $(sh calc.sh 2 3), want 5"
exit 1
