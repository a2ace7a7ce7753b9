package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"time"

	"github.com/steward-evals/steward/internal/stats"
)

//go:embed assets/record.html.tmpl
var recordTmpl string

// NavLink is one link of the viewer's navigation bar.
type NavLink struct{ Href, Label string }

// ViewerNav is the navigation of `steward view`'s pages.
var ViewerNav = []NavLink{{"/", "newest run"}, {"/runs", "runs"}, {"/flaky", "flaky samples"}}

// RunListRow is one run on the viewer's list of runs.
type RunListRow struct {
	ID, Title, EvalSet, Status, Who string
	Started                         time.Time
	Took                            time.Duration
	Counts                          Counts
	SpendUSD                        float64
}

// FlakyListRow is one flaky sample of the ledger.
type FlakyListRow struct {
	Task, Sample            string
	Passed, Failed, Errored int
	Runs                    int
	Last                    time.Time
}

type recordRun struct {
	ID, Title, EvalSet, Status, Who, Started, Took, Spend string
	C                                                     Counts
	Errored                                               int
}

type recordFlaky struct {
	Task, Sample            string
	Passed, Failed, Errored int
	Runs                    int
	Rate, Last              string
}

type recordPage struct {
	CSP, Title, Record, Empty string
	CSS                       template.CSS
	Nav                       []NavLink
	Runs                      []recordRun
	Flaky                     []recordFlaky
}

func renderRecordPage(w io.Writer, p recordPage) error {
	css, err := htmlAssets.ReadFile("assets/report.css")
	if err != nil {
		return fmt.Errorf("render page: %w", err)
	}
	tmpl, err := template.New("record").Funcs(template.FuncMap{"c": func(s string) string { return clean(s, " ") }}).Parse(recordTmpl)
	if err != nil {
		return fmt.Errorf("render page: %w", err)
	}
	p.CSS = template.CSS(css)
	p.Nav = ViewerNav
	// No script at all; the compare form goes to the viewer itself.
	p.CSP = fmt.Sprintf("default-src 'none'; style-src '%s'; img-src data:; base-uri 'none'; form-action 'self'", cspHash(css))
	if err := tmpl.Execute(w, p); err != nil {
		return fmt.Errorf("render page: %w", err)
	}
	return nil
}

// RunsPage writes the viewer's list of a record's runs (newest first), with
// a form comparing any two.
func RunsPage(w io.Writer, recordPath string, rows []RunListRow) error {
	p := recordPage{Title: "Runs", Record: recordPath}
	for _, r := range rows {
		took := ""
		if r.Took > 0 {
			took = formatDuration(r.Took)
		}
		p.Runs = append(p.Runs, recordRun{ID: r.ID, Title: r.Title, EvalSet: r.EvalSet, Status: r.Status, Who: r.Who,
			Started: r.Started.UTC().Format("2006-01-02 15:04:05"), Took: took, Spend: fmt.Sprintf("$%.4f", r.SpendUSD),
			C: r.Counts, Errored: r.Counts.Errored + r.Counts.Infra})
	}
	if len(rows) == 0 {
		p.Empty = "The record holds no runs yet."
	}
	return renderRecordPage(w, p)
}

// FlakyPage writes the viewer's flaky-sample ledger.
func FlakyPage(w io.Writer, recordPath string, rows []FlakyListRow) error {
	p := recordPage{Title: "Flaky samples", Record: recordPath}
	for _, r := range rows {
		rate := "–"
		if j := r.Passed + r.Failed; j > 0 {
			ci := stats.Wilson(float64(r.Passed), float64(j), 0.95)
			rate = fmt.Sprintf("%.1f%% (%d/%d) [%.0f–%.0f%%]", 100*float64(r.Passed)/float64(j), r.Passed, j, ci.Lo*100, ci.Hi*100)
		}
		last := ""
		if !r.Last.IsZero() {
			last = r.Last.UTC().Format("2006-01-02 15:04")
		}
		p.Flaky = append(p.Flaky, recordFlaky{Task: r.Task, Sample: r.Sample, Passed: r.Passed, Failed: r.Failed, Errored: r.Errored, Runs: r.Runs, Rate: rate, Last: last})
	}
	if len(rows) == 0 {
		p.Empty = "No flaky sample: no sample both passed and failed at one definition."
	}
	return renderRecordPage(w, p)
}
