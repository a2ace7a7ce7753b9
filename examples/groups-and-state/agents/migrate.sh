# Agent for the migrations task: "applies" the migration named by the sample.
# STEWARD_SAMPLE_ID, STEWARD_INPUT and STEWARD_ATTEMPT are set by Steward.
echo "applying: $STEWARD_INPUT" >&2
echo "applied $STEWARD_SAMPLE_ID"
