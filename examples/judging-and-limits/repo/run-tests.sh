#!/bin/sh
# The task's own tests, as a coding agent runs them: exit 1 while they fail.
fail=0
[ "$(sh calc.sh 2 3)" = 5 ] || { echo "FAIL: calc.sh 2 3 should print 5, printed $(sh calc.sh 2 3)"; fail=1; }
[ "$(sh calc.sh 10 -4)" = 6 ] || { echo "FAIL: calc.sh 10 -4 should print 6"; fail=1; }
[ -f CHANGES.md ] || { echo "FAIL: the style check wants a CHANGES.md entry"; fail=1; }
[ $fail = 0 ] && echo "all tests pass"
exit $fail
