package record

// migrationGrading keeps, per attempt, what its model judge's graders
// spent (scorer.model_graded, issue 30 item 2), apart from the agent's
// input_tokens, output_tokens, cost_usd and requests: reports say
// "agent $X · grading $Y".
const migrationGrading = `ALTER TABLE attempts ADD COLUMN grading_input_tokens INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE attempts ADD COLUMN grading_output_tokens INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE attempts ADD COLUMN grading_cost_usd REAL NOT NULL DEFAULT 0;
	ALTER TABLE attempts ADD COLUMN grading_requests INTEGER NOT NULL DEFAULT 0;`

// Spend is what some model calls cost.
type Spend struct {
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
	Requests     int64
}

// IsZero says no call was made.
func (s Spend) IsZero() bool { return s == Spend{} }

// hasGrading says whether a record of schema version v has those columns.
func hasGrading(v int) bool {
	for i, m := range migrations {
		if m == migrationGrading {
			return v > i
		}
	}
	return false
}

// gradingCols are the columns migrationGrading added.
const gradingCols = `grading_input_tokens, grading_output_tokens, grading_cost_usd, grading_requests`

// gradingSelect is what selectCols and carriedSelect add for those columns
// (prefix "a." for a carried row's source), zeros in older records.
func (r *DB) gradingSelect(prefix string) string {
	if hasGrading(r.version) {
		return `, ` + prefix + `grading_input_tokens, ` + prefix + `grading_output_tokens, ` + prefix + `grading_cost_usd, ` + prefix + `grading_requests`
	}
	return `, 0, 0, 0, 0`
}
