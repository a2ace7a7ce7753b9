#!/bin/sh
# A stand-in for a coding agent (so the example runs offline): what it does
# depends on the sample. Its last step runs the tests, as coding agents do,
# so it exits 1 whenever they still fail.
case "$STEWARD_SAMPLE_ID" in
  fixes-it)     # fixes the bug, skips the CHANGES.md the style check wants
    sed 's/\$1 - \$2/$1 + $2/' calc.sh > fixed.sh && mv fixed.sh calc.sh ;;
  gives-up)     # changes nothing
    echo "I could not find the bug" ;;
esac
sh run-tests.sh
