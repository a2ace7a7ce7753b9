package record

import "encoding/json"

// migrationTries keeps, per attempt, how many tries it took and why the
// earlier ones were retried (issue 23 item 2: a retried attempt is visible
// in every report), and the agent's own exit status and output tail when
// the scorer judged an agent that exited non-zero (issue 30 item 1: shown
// beside the verdict).
const migrationTries = `ALTER TABLE attempts ADD COLUMN tries INTEGER NOT NULL DEFAULT 1;
	ALTER TABLE attempts ADD COLUMN retry_reasons TEXT NOT NULL DEFAULT '';
	ALTER TABLE attempts ADD COLUMN agent_exit INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE attempts ADD COLUMN agent_output TEXT NOT NULL DEFAULT '';`

// hasTries says whether a record of schema version v has those columns.
func hasTries(v int) bool {
	for i, m := range migrations {
		if m == migrationTries {
			return v > i
		}
	}
	return false
}

// triesCols are the columns migrationTries added, as attemptCols names
// them; triesDefaults stands in for them in records older than it.
const (
	triesCols     = `tries, retry_reasons, agent_exit, agent_output`
	triesDefaults = `1, '', 0, ''`
)

// selectCols are the attempts columns this record can read, in scan order.
func (r *DB) selectCols() string {
	if hasTries(r.version) {
		return baseAttemptCols + `, ` + triesCols + r.limitsSelect("") + r.gradingSelect("")
	}
	return baseAttemptCols + `, ` + triesDefaults + r.limitsSelect("") + r.gradingSelect("")
}

// carriedSelect is carriedCols with the tries columns of the source row.
func (r *DB) carriedSelect() string {
	if hasTries(r.version) {
		return carriedCols + `, a.tries, a.retry_reasons, a.agent_exit, a.agent_output` + r.limitsSelect("a.") + r.gradingSelect("a.")
	}
	return carriedCols + `, ` + triesDefaults + r.limitsSelect("a.") + r.gradingSelect("a.")
}

func encodeReasons(rs []string) string {
	if len(rs) == 0 {
		return ""
	}
	b, _ := json.Marshal(rs)
	return string(b)
}

func decodeReasons(s string) []string {
	if s == "" {
		return nil
	}
	var rs []string
	if json.Unmarshal([]byte(s), &rs) != nil {
		return []string{s}
	}
	return rs
}
