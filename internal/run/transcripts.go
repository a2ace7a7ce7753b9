package run

import (
	"context"
	"fmt"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/transcript"
)

// captureConfig is what the gateway keeps of the attempts' model calls
// (the fleet setting transcripts).
func (l *launch) captureConfig() gateway.Capture {
	// l.secrets holds secret.EnvNames' values (the GitHub and runner
	// tokens) besides the eval set's; the gateway adds the key and tokens.
	return gateway.Capture{Mode: l.es.Fleet.Transcripts, Secrets: append([]string{}, l.secrets...)}
}

// keepTranscript stores a published attempt's transcript. A transcript the
// record cannot take is reported and dropped: the attempt's result stands.
func (d *dispatch) keepTranscript(row record.Attempt, tr *transcript.Transcript) {
	if tr == nil || (len(tr.Calls) == 0 && tr.Dropped == 0) {
		return
	}
	blob, err := transcript.Encode(tr)
	if err == nil {
		var raw int64
		for _, c := range tr.Calls {
			raw += int64(len(c.Request) + len(c.Response) + len(c.ResponseText))
		}
		err = d.db.PutTranscript(context.Background(), row.RunID, row.Seq,
			record.TranscriptInfo{Calls: len(tr.Calls), RawBytes: raw, Truncated: tr.Truncated != "" || tr.Dropped > 0}, blob)
	}
	if err != nil {
		fmt.Fprintf(d.opts.Stderr, "steward: %s/%s#%d: transcript not kept: %v\n", row.Task, row.Sample, row.Attempt, err)
	}
}
