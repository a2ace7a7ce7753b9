package record

// migrationLimits keeps, per attempt, the limit it reached ("tokens",
// "model_calls", "cost_usd", "agent_time"; "" for none) and whether its
// agent ran out of time (timed_out: it got SIGTERM at its deadline, was
// frozen and judged on what it left), so reports show "pass within budget"
// beside the pass rate (issue 30 items 3 and 4).
const migrationLimits = `ALTER TABLE attempts ADD COLUMN limit_reached TEXT NOT NULL DEFAULT '';
	ALTER TABLE attempts ADD COLUMN timed_out INTEGER NOT NULL DEFAULT 0;`

// hasLimits says whether a record of schema version v has those columns.
func hasLimits(v int) bool {
	for i, m := range migrations {
		if m == migrationLimits {
			return v > i
		}
	}
	return false
}

// limitsCols are the columns migrationLimits added; limitsDefaults stands in
// for them in records older than it.
const (
	limitsCols     = `limit_reached, timed_out`
	limitsDefaults = `'', 0`
)

// limitsSelect is what selectCols and carriedSelect add for those columns
// (prefix "a." for a carried row's source).
func (r *DB) limitsSelect(prefix string) string {
	if hasLimits(r.version) {
		return `, ` + prefix + `limit_reached, ` + prefix + `timed_out`
	}
	return `, ` + limitsDefaults
}
