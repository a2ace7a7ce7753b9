package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/transcript"
)

// transcriptFixture is two calls: an OpenAI chat call that asked for a
// tool and was retried once after a 429, and an Anthropic call answering
// with text after a tool result.
func transcriptFixture(hostileText string) *transcript.Transcript {
	req1, _ := json.Marshal(map[string]any{
		"model": "gpt-4o-mini",
		"messages": []any{
			map[string]any{"role": "system", "content": "You answer with one word."},
			map[string]any{"role": "user", "content": "What is the capital of France? " + hostileText},
		},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "parameters": map[string]any{"type": "object"}}}},
	})
	resp1, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
			"role": "assistant", "content": nil,
			"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "lookup", "arguments": `{"q":"` + strings.ReplaceAll(hostileText, `"`, `'`) + `"}`}}},
		}}},
	})
	req2, _ := json.Marshal(map[string]any{
		"model": "claude-sonnet", "max_tokens": 100, "system": "Be brief.",
		"messages": []any{
			map[string]any{"role": "user", "content": "capital of France?"},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "tu_1", "name": "lookup", "input": map[string]any{"q": "France"}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "tu_1", "content": "Paris " + hostileText}}},
		},
	})
	resp2, _ := json.Marshal(map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "end_turn",
		"content": []any{map[string]any{"type": "text", "text": "Paris. " + hostileText}},
	})
	return &transcript.Transcript{Mode: transcript.ModeFull, Calls: []transcript.Call{
		{Time: t0.Add(time.Second), Method: "POST", Route: "/v1/chat/completions", Model: "gpt-4o-mini", Status: 200,
			Latency: 2300 * time.Millisecond, InputTokens: 120, OutputTokens: 14, CostUSD: 0.0000264,
			Tries: []transcript.Try{{Start: t0.Add(time.Second), Status: 429, Latency: 20 * time.Millisecond},
				{Start: t0.Add(3 * time.Second), Wait: 2 * time.Second, Status: 200, Latency: 300 * time.Millisecond}},
			Request: req1, Response: resp1},
		{Time: t0.Add(4 * time.Second), Method: "POST", Route: "/v1/messages", Model: "claude-sonnet", Stream: true, Status: 200,
			Latency: 800 * time.Millisecond, InputTokens: 200, OutputTokens: 5,
			Tries:   []transcript.Try{{Start: t0.Add(4 * time.Second), Status: 200, Latency: 800 * time.Millisecond}},
			Request: req2, Response: resp2, Truncated: true},
	}, Truncated: "the attempt's transcript reached its cap (4 MiB): later content left out"}
}

func htmlFixture() *Report {
	r := fixture()
	for i := range r.Attempts {
		r.Attempts[i].Details = &AttemptDetails{RunID: "run-1", Seq: i, Parts: map[string]string{"sample": "ab12", "task": "cd34"}}
	}
	r.Attempts[0].Details.Transcript = transcriptFixture("")
	r.Attempts[0].Details.Artifacts = []Artifact{
		{Path: "out/notes.md", Size: 24, Text: "# Notes\nParis is the one."},
		{Path: "out/plot.png", Size: 2048, Binary: true},
		{Path: "out/link.txt", Note: "a symlink: refused"},
	}
	r.Attempts[2].Details.CarriedFrom = "run-0"
	r.Attempts[1].Log = "agent: thinking\nscorer: expected 4, got 5"
	return r
}

// htmlStructure is the page with its (long, separately tested) inline CSS
// and JS left out, for the golden file.
func htmlStructure(page string) string {
	page = regexp.MustCompile(`(?s)<style>.*?</style>`).ReplaceAllString(page, "<style>…</style>")
	page = regexp.MustCompile(`(?s)<script>.*?</script>`).ReplaceAllString(page, "<script>…</script>")
	page = regexp.MustCompile(`sha256-(?:[A-Za-z0-9+/=]|&#43;)+`).ReplaceAllString(page, "sha256-…")
	return page
}

func TestHTMLGoldenStructure(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, htmlFixture(), HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.html.golden", []byte(htmlStructure(b.String())))
}

var scriptTag = regexp.MustCompile(`(?is)<script\b[^>]*>`)

// jsonBlocks returns the JSON data blocks of a page by id.
func jsonBlocks(t *testing.T, page string) map[string]string {
	t.Helper()
	out := map[string]string{}
	re := regexp.MustCompile(`(?s)<script type="application/json" id="([^"]+)">(.*?)</script>`)
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		out[m[1]] = m[2]
	}
	return out
}

func TestHTMLSelfContainedAndCSP(t *testing.T) {
	var b bytes.Buffer
	r := htmlFixture()
	if err := HTML(&b, r, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// No network: no external resource of any kind.
	for _, bad := range []string{"http://", "https://", "src=", "<link", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("page refers to something outside itself (%q)", bad)
		}
	}
	// The CSP admits exactly the page's own script and style.
	js, _ := htmlAssets.ReadFile("assets/report.js")
	css, _ := htmlAssets.ReadFile("assets/report.css")
	csp := html.UnescapeString(regexp.MustCompile(`http-equiv="Content-Security-Policy" content="([^"]*)"`).FindStringSubmatch(page)[1])
	if !strings.Contains(csp, "script-src '"+cspHash(js)+"'") || !strings.Contains(page, "<script>"+string(js)+"</script>") {
		t.Errorf("the CSP does not pin the inline script by its hash, or the script is not inline as hashed")
	}
	if !strings.Contains(csp, "style-src '"+cspHash(css)+"'") || !strings.Contains(page, "<style>"+string(css)+"</style>") {
		t.Errorf("the CSP does not pin the inline style by its hash")
	}
	if !strings.Contains(csp, "connect-src 'none'") {
		t.Errorf("a file report must not be allowed to connect anywhere")
	}
	// One data block per attempt, plus the rows.
	blocks := jsonBlocks(t, page)
	if len(blocks) != len(r.Attempts)+1 {
		t.Fatalf("%d JSON blocks, want %d", len(blocks), len(r.Attempts)+1)
	}
	var rows []htmlRow
	if err := json.Unmarshal([]byte(blocks["rows"]), &rows); err != nil {
		t.Fatalf("rows block: %v", err)
	}
	if len(rows) != len(r.Attempts) || rows[0].Calls != 2 || rows[2].Carried != 1 {
		t.Errorf("rows block = %+v", rows)
	}
	var d htmlDetail
	if err := json.Unmarshal([]byte(blocks["d-0"]), &d); err != nil {
		t.Fatal(err)
	}
	if d.AttemptDetails == nil || d.Transcript == nil || len(d.Transcript.Calls) != 2 || d.Transcript.Calls[0].Tries[1].Wait != 2*time.Second {
		t.Errorf("details of attempt 0 lost the transcript: %+v", d.AttemptDetails)
	}
}

func TestHTMLHostileStaysText(t *testing.T) {
	r := hostileReport()
	h := "</script><script>alert(1)</script><!-- <img src=x onerror=alert(1)> ]]> \u2028"
	for i := range r.Attempts {
		r.Attempts[i].Details = &AttemptDetails{RunID: "run-1", Seq: i, CarriedFrom: h, Parts: map[string]string{h: h}}
		r.Attempts[i].Log += h
	}
	r.Attempts[0].Details.Transcript = transcriptFixture(h)
	r.Ramp[0].Task = h
	var b bytes.Buffer
	if err := HTML(&b, r, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// Exactly our script elements: the rows, one block per attempt, the page script.
	if n, want := len(scriptTag.FindAllString(page, -1)), len(r.Attempts)+2; n != want {
		t.Errorf("%d <script> tags, want %d: eval output opened a script", n, want)
	}
	for _, bad := range []string{"<img", "<!--", "<b>", "onerror=alert(1)>", "\u202E", "\x1b"} {
		if strings.Contains(page, bad) {
			t.Errorf("hostile text survived as markup: %q", bad)
		}
	}
	// What the JSON carries reads back as the same text (nothing lost, nothing run).
	blocks := jsonBlocks(t, page)
	var d htmlDetail
	if err := json.Unmarshal([]byte(blocks["d-0"]), &d); err != nil {
		t.Fatalf("d-0: %v", err)
	}
	if d.Sample != hostile || d.CarriedFrom != h || !strings.HasSuffix(d.Log, h) {
		t.Errorf("details did not round-trip: sample %q carried %q", d.Sample, d.CarriedFrom)
	}
	var req map[string]any
	if err := json.Unmarshal(d.Transcript.Calls[0].Request, &req); err != nil || !strings.Contains(fmt.Sprint(req["messages"]), h) {
		t.Errorf("the transcript request lost the hostile text: %v", err)
	}
	for id, blk := range blocks {
		if strings.Contains(strings.ToLower(blk), "</script") || strings.Contains(blk, "<!--") || strings.Contains(blk, "\u2028") {
			t.Errorf("block %s carries a sequence that ends or confuses a script element", id)
		}
	}
}

// TestHTMLSize10k renders 10 000 attempts, each with a log and a
// three-call transcript, and checks the page grows with the content and
// not much more: details are data, rendered on demand.
func TestHTMLSize10k(t *testing.T) {
	r := bigReport(10000)
	var content int
	for _, a := range r.Attempts {
		b, _ := json.Marshal(a.Details.Transcript)
		content += len(b) + len(a.Log)
	}
	var b bytes.Buffer
	if err := HTML(&b, r, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	over := b.Len() - content
	t.Logf("10 000 attempts: %d bytes (%.1f MiB); content %d bytes; overhead %d bytes per attempt", b.Len(), float64(b.Len())/(1<<20), content, over/10000)
	if per := over / 10000; per > 700 {
		t.Errorf("the page spends %d bytes per attempt beyond its content, want at most 700", per)
	}
	// Without transcripts or logs: the table and details alone.
	for i := range r.Attempts {
		r.Attempts[i].Log, r.Attempts[i].Details.Transcript = "", nil
	}
	b.Reset()
	if err := HTML(&b, r, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("10 000 attempts without transcripts or logs: %d bytes (%.1f MiB)", b.Len(), float64(b.Len())/(1<<20))
	if b.Len() > 10000*700 {
		t.Errorf("10 000 bare attempts take %d bytes, want at most 700 per attempt", b.Len())
	}
}

func bigReport(n int) *Report {
	r := fixture()
	r.Attempts = nil
	tr := transcriptFixture("")
	tr.Truncated = ""
	tr.Calls = append(tr.Calls, tr.Calls[0])
	for i := 0; i < n; i++ {
		st := status.Passed
		if i%7 == 0 {
			st = status.Failed
		}
		r.Attempts = append(r.Attempts, AttemptRow{Task: fmt.Sprintf("task-%d", i%5), Sample: fmt.Sprintf("sample-%05d", i/2), Attempt: i%2 + 1,
			Status: st, Score: f64(1), Duration: time.Duration(i) * time.Millisecond, InputTokens: 1234, OutputTokens: 56, CostUSD: 0.0002,
			Explanation: "expected Paris", Fingerprint: "f1e2d3c4b5a69788", Source: "capitals.jsonl:12",
			Log:     strings.Repeat("agent log line\n", 30),
			Details: &AttemptDetails{RunID: "r-0123456789abcdef", Seq: i, Parts: map[string]string{"task": "aa", "sample": "bb", "model": "cc"}, Transcript: tr}})
	}
	r.Recount()
	return r
}

func BenchmarkHTML10k(b *testing.B) {
	r := bigReport(10000)
	for i := 0; i < b.N; i++ {
		var w bytes.Buffer
		if err := HTML(&w, r, HTMLOptions{}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(w.Len())/(1<<20), "MiB")
	}
}
