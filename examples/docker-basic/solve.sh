# Agent: evaluates the arithmetic in STEWARD_INPUT with the shell and prints it.
# (An agent is any command; its trimmed stdout is the answer.)
case "$STEWARD_INPUT" in
  *[!0-9+*/\ \(\)-]*) echo "refusing: not arithmetic" >&2; exit 1 ;;
esac
echo $(( STEWARD_INPUT ))
