package report

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

// JUnit XML, the dialect test reporters read (Jenkins, GitLab, the common
// GitHub Actions reporters): one <testsuite> per task, one <testcase> per
// attempt. encoding/xml escapes every value and replaces characters XML
// cannot hold, so eval output cannot break the document.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string `xml:"name,attr"`
	Tests     int    `xml:"tests,attr"`
	Failures  int    `xml:"failures,attr"`
	Errors    int    `xml:"errors,attr"`
	Skipped   int    `xml:"skipped,attr"`
	Time      string `xml:"time,attr"`
	Timestamp string `xml:"timestamp,attr,omitempty"`
	// Properties carry the task's pass rate, its interval and, against a
	// base, the verdict (steward.* names).
	Properties *junitProperties `xml:"properties,omitempty"`
	Cases      []junitCase      `xml:"testcase"`
}

type junitProperties struct {
	P []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// suiteProperties are a task's steward.* properties.
func suiteProperties(r *Report, task string) *junitProperties {
	var ps []junitProperty
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
	for _, t := range r.Tasks {
		if Plain(t.Name, 200) != task || t.Score == nil {
			continue
		}
		ps = append(ps, junitProperty{"steward.reducer", reducerName(t.Reducer)},
			junitProperty{"steward.pass_rate", f(t.Score.Mean)},
			junitProperty{"steward.pass_rate.ci_low", f(t.Score.Interval.Lo)},
			junitProperty{"steward.pass_rate.ci_high", f(t.Score.Interval.Hi)},
			junitProperty{"steward.samples", strconv.Itoa(t.Score.Samples)})
		if t.CostUSD > 0 {
			ps = append(ps, junitProperty{"steward.cost_usd", strconv.FormatFloat(t.CostUSD, 'f', 6, 64)})
		}
		if t.GradingUSD > 0 {
			ps = append(ps, junitProperty{"steward.grading_usd", strconv.FormatFloat(t.GradingUSD, 'f', 6, 64)})
		}
		break
	}
	if c := r.Comparison; c != nil {
		for _, d := range c.Tasks {
			if Plain(d.Name, 200) != task || d.Test == nil {
				continue
			}
			ps = append(ps, junitProperty{"steward.verdict", string(d.Verdict)},
				junitProperty{"steward.delta", f(d.Delta)},
				junitProperty{"steward.delta.ci_low", f(d.Test.Interval.Lo)},
				junitProperty{"steward.delta.ci_high", f(d.Test.Interval.Hi)},
				junitProperty{"steward.p_regress", f(d.PRegress)},
				junitProperty{"steward.p_improve", f(d.PImprove)})
			break
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return &junitProperties{P: ps}
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Line      string        `xml:"line,attr,omitempty"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}

// JUnit writes the report as JUnit XML.
func JUnit(w io.Writer, r *Report) error {
	root := junitSuites{Name: Plain(r.Title, 200)}
	if root.Name == "" {
		root.Name = "steward"
	}
	index := map[string]int{}
	var total time.Duration
	for _, a := range r.Attempts {
		i, ok := index[Plain(a.Task, 200)]
		if !ok {
			i = len(root.Suites)
			index[Plain(a.Task, 200)] = i
			s := junitSuite{Name: Plain(a.Task, 200)}
			if !r.Started.IsZero() {
				s.Timestamp = r.Started.UTC().Format("2006-01-02T15:04:05")
			}
			root.Suites = append(root.Suites, s)
		}
		s := &root.Suites[i]
		c := junitCase{
			Name:      Plain(a.Sample, 200) + " #" + strconv.Itoa(a.Attempt),
			Classname: Plain(a.Task, 200),
			Time:      seconds(a.Duration),
		}
		c.File, c.Line = splitSource(Plain(a.Source, 0))
		msg := Plain(rowReason(a), 500)
		detail := textBlock(a.Explanation)
		if a.Log != "" {
			if detail != "" {
				detail += "\n\n"
			}
			detail += textBlock(a.Log)
		}
		switch a.Status {
		case status.Passed:
		case status.Failed:
			c.Failure = &junitProblem{Message: msg, Type: string(a.Status), Text: detail}
			s.Failures++
		case status.Skipped:
			c.Skipped = &junitProblem{Message: msg}
			s.Skipped++
		default: // errored, infra, interrupted, or anything unknown
			c.Error = &junitProblem{Message: msg, Type: string(a.Status), Text: detail}
			s.Errors++
		}
		if n := limitNote(a); n != "" && a.Status == status.Passed {
			c.SystemOut = Plain(n, 500) // limits.go: a pass that reached a limit says so
		}
		if a.Carried {
			c.SystemOut = "carried from an earlier run"
			if a.Fingerprint != "" {
				c.SystemOut += " (fingerprint " + Plain(a.Fingerprint, 100) + ")"
			}
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
		total += a.Duration
	}
	for i := range root.Suites {
		s := &root.Suites[i]
		var d time.Duration
		for _, a := range r.Attempts {
			if Plain(a.Task, 200) == s.Name {
				d += a.Duration
			}
		}
		s.Time = seconds(d)
		s.Properties = suiteProperties(r, s.Name)
		root.Tests += s.Tests
		root.Failures += s.Failures
		root.Errors += s.Errors
		root.Skipped += s.Skipped
	}
	root.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(root); err != nil {
		return fmt.Errorf("encode junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	return nil
}

// splitSource splits "file:line" into its parts; a source without a numeric
// line is all file.
func splitSource(src string) (file, line string) {
	for i := len(src) - 1; i >= 0; i-- {
		if src[i] == ':' {
			if _, err := strconv.Atoi(src[i+1:]); err == nil && i+1 < len(src) {
				return src[:i], src[i+1:]
			}
			break
		}
	}
	return src, ""
}

// SplitSource splits an AttemptRow.Source "file:line" into file and line
// (0 when there is none).
func SplitSource(src string) (file string, line int) {
	f, l := splitSource(src)
	n, _ := strconv.Atoi(l)
	return f, n
}

// JSON writes the report as indented JSON (the Report struct's own tags).
func JSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encode json report: %w", err)
	}
	return nil
}

// ReadJSON reads a report written by JSON.
func ReadJSON(rd io.Reader) (*Report, error) {
	var r Report
	dec := json.NewDecoder(rd)
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decode json report: %w", err)
	}
	return &r, nil
}
