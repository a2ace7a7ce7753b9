#!/bin/sh
ok=1
[ "$(cat /etc/fixture/mode 2>/dev/null)" = "$EXPECTED_MODE" ] || ok=0
[ "$(/usr/local/bin/greet 2>/dev/null)" = "hi" ] || ok=0
echo $ok > /logs/verifier/reward.txt
