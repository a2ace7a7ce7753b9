package report

import (
	"bytes"
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/transcript"
)

// AttemptDetails is what the HTML report shows of one attempt beside its
// row: where it is in the record, where a carried result came from, the
// fingerprint's parts and, once LoadTranscripts ran, the model calls the
// gateway captured.
type AttemptDetails struct {
	RunID       string            `json:"run_id,omitempty"`
	Seq         int               `json:"seq,omitempty"`
	CarriedFrom string            `json:"carried_from,omitempty"` // run id the result was carried from
	Parts       map[string]string `json:"parts,omitempty"`        // fingerprint part -> hash
	// Transcript is nil when none was captured (or not loaded).
	Transcript *transcript.Transcript `json:"transcript,omitempty"`
	// TranscriptError says why a stored transcript could not be read.
	TranscriptError string `json:"transcript_error,omitempty"`
	// Artifacts are the files the agent left (the task's artifacts globs).
	Artifacts []Artifact `json:"artifacts,omitempty"`
}

// Artifact is one file an attempt left: its text when it is UTF-8 text,
// else only its size. Note says why it was not kept (too large, a symlink).
type Artifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Note   string `json:"note,omitempty"`
	Text   string `json:"text,omitempty"`
	Binary bool   `json:"binary,omitempty"`
}

func artifactView(a record.Artifact) Artifact {
	v := Artifact{Path: a.Path, Size: a.Size, Note: a.Note}
	if a.Data != nil {
		if utf8.Valid(a.Data) && !bytes.ContainsRune(a.Data, 0) {
			v.Text = string(a.Data)
		} else {
			v.Binary = true
		}
	}
	return v
}

func detailsOf(a record.Attempt) *AttemptDetails {
	d := &AttemptDetails{RunID: a.RunID, Seq: a.Seq, CarriedFrom: a.CarriedFrom}
	if a.Parts != "" && a.Parts != "{}" {
		var parts map[string]string
		if json.Unmarshal([]byte(a.Parts), &parts) == nil {
			d.Parts = parts
		}
	}
	return d
}

// LoadTranscripts reads the captured transcript and the artifacts of every
// attempt of rep from the record (for a carried attempt, those of the
// attempt it was carried from). A transcript that cannot be read is noted
// on its attempt, not fatal.
func LoadTranscripts(ctx context.Context, db *record.DB, rep *Report) error {
	for i := range rep.Attempts {
		row := &rep.Attempts[i]
		d := row.Details
		if d == nil || d.RunID == "" {
			continue
		}
		arts, err := db.Artifacts(ctx, record.Attempt{RunID: d.RunID, Seq: d.Seq, CarriedFrom: d.CarriedFrom, Fingerprint: row.Fingerprint})
		if err != nil {
			return err
		}
		d.Artifacts = nil
		for _, a := range arts {
			d.Artifacts = append(d.Artifacts, artifactView(a))
		}
		// A carried attempt shows the transcript of the attempt it was
		// carried from (a merged record keeps a copy under its own row).
		_, blob, err := db.TranscriptOf(ctx, record.Attempt{RunID: d.RunID, Seq: d.Seq, CarriedFrom: d.CarriedFrom, Fingerprint: row.Fingerprint})
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			d.TranscriptError = err.Error()
			continue
		}
		if blob == nil {
			continue
		}
		t, err := transcript.Decode(blob)
		if err != nil {
			d.TranscriptError = err.Error()
			continue
		}
		d.Transcript = t
	}
	return nil
}
