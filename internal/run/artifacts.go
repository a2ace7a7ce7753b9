package run

import (
	"context"
	"fmt"
	"regexp"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/record"
)

var tokenInArtifact = regexp.MustCompile(`stw-[0-9a-f]{48}`)

// keepArtifacts stores a published attempt's artifacts, with the real key
// and any gateway token removed from their contents.
func (l *dispatch) keepArtifacts(row record.Attempt, arts []record.Artifact) {
	if len(arts) == 0 {
		return
	}
	for i := range arts {
		if d := arts[i].Data; d != nil {
			d = l.scrubber.Bytes(d)
			arts[i].Data = tokenInArtifact.ReplaceAll(d, []byte(gateway.Redacted))
		}
		arts[i].Note = l.scrub(arts[i].Note)
	}
	if err := l.db.PutArtifacts(context.Background(), row.RunID, row.Seq, arts); err != nil {
		fmt.Fprintf(l.opts.Stderr, "steward: %s/%s#%d: artifacts not kept: %v\n", row.Task, row.Sample, row.Attempt, err)
	}
}
