package report

import (
	"io"
	"testing"

	"github.com/steward-evals/steward/internal/status"
)

// A 10 000-attempt run with 2 000 failures and 500 ramp decisions.
func benchReport() *Report {
	r := big(2000, 500)
	for i := 0; i < 8000; i++ {
		r.Attempts = append(r.Attempts, AttemptRow{Task: "fast", Sample: "ok", Attempt: 1, Status: status.Passed})
	}
	r.Recount()
	return r
}

func BenchmarkTerminal(b *testing.B) {
	r := benchReport()
	for b.Loop() {
		if err := Terminal(io.Discard, r, TerminalOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarkdown(b *testing.B) {
	r := benchReport()
	for b.Loop() {
		if err := Markdown(io.Discard, r, MarkdownOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkComment(b *testing.B) {
	r := benchReport()
	for b.Loop() {
		_ = Comment(r, CommentOptions{SummaryURL: "https://github.com/o/r/actions/runs/1"})
	}
}

func BenchmarkJUnit(b *testing.B) {
	r := benchReport()
	for b.Loop() {
		if err := JUnit(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}
