package report

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/transcript"
)

// The real Inspect logs the export is checked against (shared/fixtures).
const inspectFixtures = "../../../shared/fixtures/inspect-logs"

func inspectFixtureFiles(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(inspectFixtures, "*.eval"))
	more, _ := filepath.Glob(filepath.Join(inspectFixtures, "*.json"))
	files = append(files, more...)
	if len(files) == 0 {
		t.Skipf("no Inspect logs in %s", inspectFixtures)
	}
	sort.Strings(files)
	return files
}

// ---- the checks, the same for Inspect's logs and Steward's ----

type checker struct {
	t    *testing.T
	file string
}

func (c checker) fail(path, format string, args ...any) {
	c.t.Helper()
	c.t.Errorf("%s: %s: %s", c.file, path, fmt.Sprintf(format, args...))
}

func (c checker) obj(path string, v any) map[string]any {
	c.t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		c.fail(path, "want an object, got %T", v)
	}
	return m
}

func (c checker) list(path string, v any) []any {
	c.t.Helper()
	l, ok := v.([]any)
	if !ok {
		c.fail(path, "want a list, got %T", v)
	}
	return l
}

func (c checker) str(path string, v any) string {
	c.t.Helper()
	s, ok := v.(string)
	if !ok {
		c.fail(path, "want a string, got %T", v)
	}
	return s
}

func (c checker) num(path string, v any) float64 {
	c.t.Helper()
	f, ok := v.(float64)
	if !ok {
		c.fail(path, "want a number, got %T", v)
	}
	return f
}

func (c checker) integer(path string, v any) int {
	c.t.Helper()
	f := c.num(path, v)
	if f != float64(int(f)) {
		c.fail(path, "want an integer, got %v", f)
	}
	return int(f)
}

func (c checker) boolean(path string, v any) {
	c.t.Helper()
	if _, ok := v.(bool); !ok {
		c.fail(path, "want a bool, got %T", v)
	}
}

// optional runs check on m[key] when it is present and not null.
func optional(m map[string]any, key string, check func(any)) {
	if v, ok := m[key]; ok && v != nil {
		check(v)
	}
}

func (c checker) strOrStrings(path string, v any) {
	c.t.Helper()
	if l, ok := v.([]any); ok {
		for i, x := range l {
			c.str(fmt.Sprintf("%s[%d]", path, i), x)
		}
		return
	}
	c.str(path, v)
}

func (c checker) sampleID(path string, v any) string {
	c.t.Helper()
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return fmt.Sprint(int(x))
	}
	c.fail(path, "want an int or a string id, got %T", v)
	return ""
}

// header checks an EvalLog's header: what Inspect's EvalLog requires.
func (c checker) header(h map[string]any, withResults bool) {
	c.t.Helper()
	if v := c.integer("version", h["version"]); v != 2 {
		c.fail("version", "want 2, got %d", v)
	}
	if s := c.str("status", h["status"]); !map[string]bool{"started": true, "success": true, "cancelled": true, "error": true}[s] {
		c.fail("status", "%q is not an Inspect status", s)
	}
	c.start(h)
	if !withResults {
		return
	}
	res := c.obj("results", h["results"])
	c.integer("results.total_samples", res["total_samples"])
	c.integer("results.completed_samples", res["completed_samples"])
	for i, s := range c.list("results.scores", res["scores"]) {
		p := fmt.Sprintf("results.scores[%d]", i)
		sc := c.obj(p, s)
		c.str(p+".name", sc["name"])
		c.str(p+".scorer", sc["scorer"])
		optional(sc, "reducer", func(v any) { c.str(p+".reducer", v) })
		optional(sc, "scored_samples", func(v any) { c.integer(p+".scored_samples", v) })
		for k, m := range c.obj(p+".metrics", sc["metrics"]) {
			mp := p + ".metrics." + k
			mm := c.obj(mp, m)
			if c.str(mp+".name", mm["name"]) != k {
				c.fail(mp+".name", "want %q", k)
			}
			c.num(mp+".value", mm["value"])
		}
	}
	st := c.obj("stats", h["stats"])
	c.str("stats.started_at", st["started_at"])
	c.str("stats.completed_at", st["completed_at"])
	for k, u := range c.obj("stats.model_usage", st["model_usage"]) {
		c.usage("stats.model_usage."+k, u)
	}
	optional(h, "error", func(v any) { c.evalError("error", v) })
}

// start checks what _journal/start.json holds: the eval spec and the plan.
func (c checker) start(h map[string]any) {
	c.t.Helper()
	ev := c.obj("eval", h["eval"])
	c.str("eval.created", ev["created"])
	if _, err := time.Parse(time.RFC3339, c.str("eval.created", ev["created"])); err != nil {
		c.fail("eval.created", "%v", err)
	}
	c.str("eval.task", ev["task"])
	c.str("eval.task_id", ev["task_id"])
	c.str("eval.run_id", ev["run_id"])
	c.str("eval.model", ev["model"])
	c.obj("eval.config", ev["config"])
	c.obj("eval.task_args", ev["task_args"])
	c.obj("eval.model_args", ev["model_args"])
	c.obj("eval.packages", ev["packages"])
	ds := c.obj("eval.dataset", ev["dataset"])
	optional(ds, "name", func(v any) { c.str("eval.dataset.name", v) })
	optional(ds, "samples", func(v any) { c.integer("eval.dataset.samples", v) })
	optional(ds, "sample_ids", func(v any) {
		for i, id := range c.list("eval.dataset.sample_ids", v) {
			c.sampleID(fmt.Sprintf("eval.dataset.sample_ids[%d]", i), id)
		}
	})
	plan := c.obj("plan", h["plan"])
	c.str("plan.name", plan["name"])
	for i, s := range c.list("plan.steps", plan["steps"]) {
		p := fmt.Sprintf("plan.steps[%d]", i)
		step := c.obj(p, s)
		c.str(p+".solver", step["solver"])
		c.obj(p+".params", step["params"])
	}
	c.obj("plan.config", plan["config"])
}

func (c checker) usage(path string, v any) {
	c.t.Helper()
	u := c.obj(path, v)
	for _, k := range []string{"input_tokens", "output_tokens", "total_tokens"} {
		c.integer(path+"."+k, u[k])
	}
}

func (c checker) evalError(path string, v any) {
	c.t.Helper()
	e := c.obj(path, v)
	c.str(path+".message", e["message"])
	c.str(path+".traceback", e["traceback"])
	c.str(path+".traceback_ansi", e["traceback_ansi"])
}

// message checks one ChatMessage.
func (c checker) message(path string, v any) {
	c.t.Helper()
	m := c.obj(path, v)
	role := c.str(path+".role", m["role"])
	if !map[string]bool{"system": true, "user": true, "assistant": true, "tool": true}[role] {
		c.fail(path+".role", "%q is not an Inspect role", role)
	}
	c.content(path+".content", m["content"])
	if role == "assistant" {
		optional(m, "tool_calls", func(v any) {
			for i, tc := range c.list(path+".tool_calls", v) {
				p := fmt.Sprintf("%s.tool_calls[%d]", path, i)
				t := c.obj(p, tc)
				c.str(p+".id", t["id"])
				c.str(p+".function", t["function"])
				c.obj(p+".arguments", t["arguments"])
			}
		})
	}
	if role == "tool" {
		optional(m, "tool_call_id", func(v any) { c.str(path+".tool_call_id", v) })
		optional(m, "function", func(v any) { c.str(path+".function", v) })
	}
}

func (c checker) content(path string, v any) {
	c.t.Helper()
	if _, ok := v.(string); ok {
		return
	}
	for i, part := range c.list(path, v) {
		p := fmt.Sprintf("%s[%d]", path, i)
		cp := c.obj(p, part)
		switch typ := c.str(p+".type", cp["type"]); typ {
		case "text":
			c.str(p+".text", cp["text"])
		case "reasoning":
			c.str(p+".reasoning", cp["reasoning"])
		case "image":
			c.str(p+".image", cp["image"])
		}
	}
}

func (c checker) input(path string, v any) {
	c.t.Helper()
	if l, ok := v.([]any); ok {
		for i, m := range l {
			c.message(fmt.Sprintf("%s[%d]", path, i), m)
		}
		return
	}
	c.str(path, v)
}

func (c checker) score(path string, v any) {
	c.t.Helper()
	s := c.obj(path, v)
	if _, ok := s["value"]; !ok {
		c.fail(path, "a score without a value")
	}
	optional(s, "answer", func(v any) { c.str(path+".answer", v) })
	optional(s, "explanation", func(v any) { c.str(path+".explanation", v) })
	optional(s, "metadata", func(v any) { c.obj(path+".metadata", v) })
}

func (c checker) modelOutput(path string, v any) {
	c.t.Helper()
	o := c.obj(path, v)
	c.str(path+".model", o["model"])
	for i, ch := range c.list(path+".choices", o["choices"]) {
		p := fmt.Sprintf("%s.choices[%d]", path, i)
		cm := c.obj(p, ch)
		c.message(p+".message", cm["message"])
		stop := c.str(p+".stop_reason", cm["stop_reason"])
		if !map[string]bool{"stop": true, "max_tokens": true, "model_length": true, "tool_calls": true, "content_filter": true, "unknown": true}[stop] {
			c.fail(p+".stop_reason", "%q is not an Inspect stop reason", stop)
		}
	}
	optional(o, "usage", func(v any) { c.usage(path+".usage", v) })
}

// sample checks one EvalSample (a samples/ member or a .json's sample).
func (c checker) sample(path string, v any) map[string]any {
	c.t.Helper()
	s := c.obj(path, v)
	c.sampleID(path+".id", s["id"])
	c.integer(path+".epoch", s["epoch"])
	c.input(path+".input", s["input"])
	c.strOrStrings(path+".target", s["target"])
	for i, m := range c.list(path+".messages", s["messages"]) {
		c.message(fmt.Sprintf("%s.messages[%d]", path, i), m)
	}
	c.modelOutput(path+".output", s["output"])
	optional(s, "scores", func(v any) {
		for k, sc := range c.obj(path+".scores", v) {
			c.score(path+".scores."+k, sc)
		}
	})
	c.obj(path+".metadata", s["metadata"])
	c.obj(path+".store", s["store"])
	optional(s, "model_usage", func(v any) {
		for k, u := range c.obj(path+".model_usage", v) {
			c.usage(path+".model_usage."+k, u)
		}
	})
	optional(s, "error", func(v any) { c.evalError(path+".error", v) })
	optional(s, "limit", func(v any) {
		l := c.obj(path+".limit", v)
		// EvalSampleLimit's type is one of Inspect's literals.
		switch typ := c.str(path+".limit.type", l["type"]); typ {
		case "context", "time", "working", "message", "token", "cost", "operator", "custom":
		default:
			c.fail(path+".limit.type", "%q is not one of Inspect's limit types", typ)
		}
		c.num(path+".limit.limit", l["limit"])
	})
	optional(s, "total_time", func(v any) { c.num(path+".total_time", v) })
	optional(s, "uuid", func(v any) { c.str(path+".uuid", v) })
	// Events (a log before 0.3.4x keeps them as "transcript").
	events, ok := s["events"]
	if !ok {
		if tr, ok := s["transcript"].(map[string]any); ok {
			events = tr["events"]
		}
	}
	for i, e := range c.list(path+".events", events) {
		p := fmt.Sprintf("%s.events[%d]", path, i)
		ev := c.obj(p, e)
		c.str(p+".timestamp", ev["timestamp"])
		optional(ev, "working_start", func(v any) { c.num(p+".working_start", v) })
		switch kind := c.str(p+".event", ev["event"]); kind {
		case "model":
			c.str(p+".model", ev["model"])
			for j, m := range c.list(p+".input", ev["input"]) {
				c.message(fmt.Sprintf("%s.input[%d]", p, j), m)
			}
			for j, tool := range c.list(p+".tools", ev["tools"]) {
				tp := fmt.Sprintf("%s.tools[%d]", p, j)
				ti := c.obj(tp, tool)
				c.str(tp+".name", ti["name"])
				c.str(tp+".description", ti["description"])
				params := c.obj(tp+".parameters", ti["parameters"])
				c.obj(tp+".parameters.properties", params["properties"])
			}
			if _, ok := ev["tool_choice"].(string); !ok {
				tc := c.obj(p+".tool_choice", ev["tool_choice"])
				c.str(p+".tool_choice.name", tc["name"])
			}
			c.obj(p+".config", ev["config"])
			c.modelOutput(p+".output", ev["output"])
			optional(ev, "call", func(v any) {
				call := c.obj(p+".call", v)
				c.obj(p+".call.request", call["request"])
			})
		case "score":
			c.score(p+".score", ev["score"])
			optional(ev, "intermediate", func(v any) { c.boolean(p+".intermediate", v) })
		case "sample_init":
			si := c.obj(p+".sample", ev["sample"])
			c.input(p+".sample.input", si["input"])
			c.obj(p+".state", ev["state"])
		case "error":
			c.evalError(p+".error", ev["error"])
		case "span_begin":
			c.str(p+".id", ev["id"])
			c.str(p+".name", ev["name"])
		case "span_end":
			c.str(p+".id", ev["id"])
		}
	}
	return s
}

func (c checker) summary(path string, v any) map[string]any {
	c.t.Helper()
	s := c.obj(path, v)
	c.sampleID(path+".id", s["id"])
	c.integer(path+".epoch", s["epoch"])
	c.input(path+".input", s["input"])
	c.strOrStrings(path+".target", s["target"])
	optional(s, "scores", func(v any) {
		for k, sc := range c.obj(path+".scores", v) {
			c.score(path+".scores."+k, sc)
		}
	})
	optional(s, "error", func(v any) { c.str(path+".error", v) })
	optional(s, "limit", func(v any) { c.str(path+".limit", v) })
	optional(s, "completed", func(v any) { c.boolean(path+".completed", v) })
	return s
}

func (c checker) reductions(path string, v any) {
	c.t.Helper()
	for i, r := range c.list(path, v) {
		p := fmt.Sprintf("%s[%d]", path, i)
		red := c.obj(p, r)
		c.str(p+".scorer", red["scorer"])
		optional(red, "reducer", func(v any) { c.str(p+".reducer", v) })
		for j, s := range c.list(p+".samples", red["samples"]) {
			sp := fmt.Sprintf("%s.samples[%d]", p, j)
			sc := c.obj(sp, s)
			c.num(sp+".value", sc["value"])
			c.sampleID(sp+".sample_id", sc["sample_id"])
		}
	}
}

var sampleMember = regexp.MustCompile(`(?s)^samples/(.+)_epoch_([0-9]+)\.json$`)

// parsedLog is one log read back: its header and samples by "id#epoch".
type parsedLog struct {
	header     map[string]any
	samples    map[string]map[string]any
	summaries  map[string]map[string]any
	reductions []any
	members    []string
}

func decodeJSON(t *testing.T, file, member string, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %s: %v", file, member, err)
	}
	return v
}

// checkInspectLog reads an Inspect log in either encoding and checks it.
func checkInspectLog(t *testing.T, file string, data []byte) parsedLog {
	t.Helper()
	c := checker{t, file}
	out := parsedLog{samples: map[string]map[string]any{}, summaries: map[string]map[string]any{}}
	if strings.HasSuffix(file, ".json") {
		h := c.obj("", decodeJSON(t, file, "", data))
		c.header(h, true)
		out.header = h
		samples, _ := h["samples"].([]any)
		for i, s := range samples {
			sm := c.sample(fmt.Sprintf("samples[%d]", i), s)
			out.samples[fmt.Sprintf("%s#%d", c.sampleID("id", sm["id"]), c.integer("epoch", sm["epoch"]))] = sm
		}
		if r, ok := h["reductions"]; ok {
			out.reductions = c.list("reductions", r)
		} else if res, ok := h["results"].(map[string]any); ok {
			out.reductions, _ = res["sample_reductions"].([]any)
		}
		c.reductions("reductions", out.reductions)
		return out
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("%s: not a ZIP archive: %v", file, err)
	}
	members := map[string][]byte{}
	for _, f := range zr.File {
		out.members = append(out.members, f.Name)
		if f.Method != zip.Deflate && f.Method != zip.Store {
			t.Errorf("%s: %s: compression method %d", file, f.Name, f.Method)
		}
		if f.Flags&0x8 != 0 { // Python's zipfile writes sizes in the local header
			t.Errorf("%s: %s: sizes in a data descriptor, not the local header", file, f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatalf("%s: %s: %v", file, f.Name, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %s: %v", file, f.Name, err)
		}
		members[f.Name] = b
	}
	for _, m := range []string{"header.json", "summaries.json", "reductions.json", "_journal/start.json"} {
		if _, ok := members[m]; !ok {
			t.Errorf("%s: no member %s (members: %v)", file, m, out.members)
		}
	}
	journal := 0
	for name, b := range members {
		switch {
		case sampleMember.MatchString(name):
			m := sampleMember.FindStringSubmatch(name)
			s := c.sample(name, decodeJSON(t, file, name, b))
			id, epoch := c.sampleID(name+": id", s["id"]), c.integer(name+": epoch", s["epoch"])
			if id != m[1] || fmt.Sprint(epoch) != m[2] {
				t.Errorf("%s: %s holds sample %s epoch %d", file, name, id, epoch)
			}
			out.samples[fmt.Sprintf("%s#%d", id, epoch)] = s
		case strings.HasPrefix(name, "_journal/summaries/"):
			journal++
			for i, s := range c.list(name, decodeJSON(t, file, name, b)) {
				c.summary(fmt.Sprintf("%s[%d]", name, i), s)
			}
		case name == "_journal/start.json":
			st := c.obj(name, decodeJSON(t, file, name, b))
			c.integer(name+": version", st["version"])
			c.start(st)
		case name == "header.json":
			out.header = c.obj(name, decodeJSON(t, file, name, b))
			checker{t, file + ": header.json"}.header(out.header, true)
		case name == "summaries.json":
			for i, s := range c.list(name, decodeJSON(t, file, name, b)) {
				sm := c.summary(fmt.Sprintf("%s[%d]", name, i), s)
				out.summaries[fmt.Sprintf("%s#%d", c.sampleID("id", sm["id"]), c.integer("epoch", sm["epoch"]))] = sm
			}
		case name == "reductions.json":
			out.reductions = c.list(name, decodeJSON(t, file, name, b))
			c.reductions(name, out.reductions)
		default:
			t.Errorf("%s: unexpected member %s", file, name)
		}
	}
	if journal == 0 && len(out.samples) > 0 {
		t.Errorf("%s: no _journal/summaries/N.json", file)
	}
	// The summaries name exactly the samples, with the same scores.
	if len(out.summaries) != len(out.samples) {
		t.Errorf("%s: %d summaries for %d samples", file, len(out.summaries), len(out.samples))
	}
	for k, s := range out.samples {
		sum, ok := out.summaries[k]
		if !ok {
			t.Errorf("%s: sample %s has no summary", file, k)
			continue
		}
		a, _ := json.Marshal(s["scores"])
		b, _ := json.Marshal(sum["scores"])
		if !bytes.Equal(a, b) {
			t.Errorf("%s: sample %s: summary scores %s, sample scores %s", file, k, b, a)
		}
	}
	if h := out.header; h != nil {
		if res, ok := h["results"].(map[string]any); ok {
			if n, _ := res["total_samples"].(float64); int(n) != len(out.samples) {
				t.Errorf("%s: results.total_samples %v, %d sample members", file, n, len(out.samples))
			}
		}
	}
	return out
}

// TestInspectChecksReadTheRealLogs: the checks hold for Inspect's own logs,
// so what they say of Steward's export means something.
func TestInspectChecksReadTheRealLogs(t *testing.T) {
	for _, f := range inspectFixtureFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			l := checkInspectLog(t, filepath.Base(f), data)
			if len(l.samples) == 0 {
				t.Errorf("no samples read")
			}
		})
	}
}

// ---- Steward's export ----

func ptr[T any](v T) *T { return &v }

func call(route, model string, at time.Time, req, resp string, status int, tries int) transcript.Call {
	c := transcript.Call{Time: at, Method: "POST", Route: route, Model: model, Status: status,
		Latency: 1200 * time.Millisecond, InputTokens: 120, OutputTokens: 14, CostUSD: 0.0001,
		Request: json.RawMessage(req)}
	if resp != "" && json.Valid([]byte(resp)) {
		c.Response = json.RawMessage(resp)
	} else {
		c.ResponseText = resp
	}
	for i := 0; i < tries; i++ {
		c.Tries = append(c.Tries, transcript.Try{Start: at, Status: 429})
	}
	return c
}

// inspectFixture is a run with every status Steward has and transcripts of
// every API the gateway serves.
func inspectFixture() *Report {
	r := fixture()
	r.RunIDs = []string{"20261129-120000-abcdef"}
	r.Version = "v1.2.3 (0123456789ab)"
	at := t0.Add(10 * time.Second)
	chat := call("/v1/chat/completions", "gpt-4o-mini", at,
		`{"model":"gpt-4o-mini","temperature":0,"messages":[{"role":"system","content":"You add numbers."},{"role":"user","content":"What is 2+2?"},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"add","arguments":"{\"a\":2,\"b\":2}"}}]},`+
			`{"role":"tool","tool_call_id":"call_1","content":"4"}],"tools":[{"type":"function","function":{"name":"add","description":"adds","parameters":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}}}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"4"},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":14}}`,
		200, 2)
	responses := call("/v1/responses", "gpt-4.1", at,
		`{"model":"gpt-4.1","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"What is 2+3?"}]},{"type":"function_call","call_id":"fc_1","name":"add","arguments":"{\"a\":2,\"b\":3}"},{"type":"function_call_output","call_id":"fc_1","output":"5"}],"tools":[{"type":"function","name":"add","description":"adds","parameters":{"type":"object","properties":{}}}]}`,
		`{"id":"resp_1","object":"response","status":"completed","model":"gpt-4.1","output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"add them"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"5"}]}],"usage":{"input_tokens":120,"output_tokens":14}}`,
		200, 1)
	anthropic := call("/v1/messages", "claude-sonnet-4", at,
		`{"model":"claude-sonnet-4","max_tokens":1024,"system":[{"type":"text","text":"You are careful."}],"messages":[{"role":"user","content":"List the repo."},`+
			`{"role":"assistant","content":[{"type":"thinking","thinking":"use ls","signature":"sig"},{"type":"text","text":"Listing."},{"type":"tool_use","id":"toolu_1","name":"bash","input":{"cmd":"ls"}}]},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"README.md"}]},{"type":"text","text":"and now?"}]}],`+
			`"tools":[{"name":"bash","description":"runs bash","input_schema":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}}],"tool_choice":{"type":"auto"}}`,
		`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"text","text":"Done."},{"type":"tool_use","id":"toolu_2","name":"bash","input":{"cmd":"cat README.md"}}],"stop_reason":"tool_use","usage":{"input_tokens":120,"output_tokens":14}}`,
		200, 1)
	refused := call("/v1/chat/completions", "gpt-4o-mini", at.Add(2*time.Second),
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"again"}]}`, "upstream said no", 502, 4)
	tr := func(calls ...transcript.Call) *AttemptDetails {
		return &AttemptDetails{RunID: r.RunIDs[0], Transcript: &transcript.Transcript{Mode: transcript.ModeFull, Calls: calls}}
	}
	for i := range r.Attempts {
		a := &r.Attempts[i]
		a.Run = r.RunIDs[0]
		a.Fingerprint = fmt.Sprintf("fp%02d", i)
	}
	r.Attempts[0].Answer = "4"
	r.Attempts[0].Details = tr(chat)
	r.Attempts[1].Answer = "5"
	r.Attempts[1].Details = tr(responses, refused)
	r.Attempts[2].CarriedFrom = "20261128-090000-123456"
	r.Attempts[2].Answer = "7"
	r.Attempts[3].Reason = "agent timed out (task timeout 30s)"
	r.Attempts[3].Log = "Traceback: killed"
	r.Attempts[4].Answer = "the repo holds README.md"
	r.Attempts[4].Explanation = "3 of 4 checks"
	r.Attempts[4].Details = tr(anthropic)
	r.Attempts[4].Tries = 2
	r.Attempts[4].RetryReasons = []string{"docker: daemon hung"}
	r.Attempts = append(r.Attempts,
		AttemptRow{Task: "slow", Sample: "repo-3", Attempt: 1, Status: status.Interrupted, Reason: "cancelled while running", Run: r.RunIDs[0], Source: "evals/steward.yaml:48"},
		AttemptRow{Task: "slow", Sample: "repo-3", Attempt: 2, Status: status.Failed, Score: ptr(0.0), Answer: "no", Explanation: "wrong", Run: r.RunIDs[0], Source: "evals/steward.yaml:48"},
	)
	r.Tasks[1].Reducer = "at_least: 1"
	r.Tasks[1].Planned = 2
	r.Tasks[0].Planned = 1
	r.Recount()
	return r
}

func inspectOptions() InspectOptions {
	return InspectOptions{
		Samples: map[string]InspectSample{
			InspectKey("fast", "add-1"):  {Input: "What is 2+2?", Target: "4", Metadata: map[string]any{"level": 1}},
			InspectKey("fast", "add-2"):  {Input: []any{map[string]any{"role": "system", "content": "Add."}, map[string]any{"role": "user", "content": "2+3?"}}, Target: []string{"5", "five"}},
			InspectKey("slow", "repo-1"): {Input: "Which is the README?", Target: "B", Choices: []string{"LICENSE", "README.md"}},
		},
		Tasks: map[string]InspectTask{"fast": {Scorer: "match", Agent: "python agent.py", File: "evals/steward.yaml"}},
	}
}

func exportInspect(t *testing.T, rep *Report, opts InspectOptions) []InspectLog {
	t.Helper()
	logs, err := Inspect(rep, opts)
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// TestInspectExportHasTheShapeOfInspectLogs: Steward's export passes the
// checks the real logs pass, member for member, in both encodings.
func TestInspectExportHasTheShapeOfInspectLogs(t *testing.T) {
	rep := inspectFixture()
	for _, format := range []string{InspectEval, InspectJSON} {
		opts := inspectOptions()
		opts.Format = format
		logs := exportInspect(t, rep, opts)
		if len(logs) != 2 || logs[0].Task != "fast" || logs[1].Task != "slow" {
			t.Fatalf("%s: want one log per task in discovery order, got %d", format, len(logs))
		}
		for _, l := range logs {
			if !regexp.MustCompile(`^2026-11-29T12-00-00\+00-00_[a-z]+_[0-9A-Za-z]{22}\.` + format + `$`).MatchString(l.Name) {
				t.Errorf("file name %q is not Inspect's {created}_{task}_{id}.%s", l.Name, format)
			}
			p := checkInspectLog(t, l.Name, l.Data)
			if format == InspectEval {
				// The members Inspect's recorder writes, in its order.
				var want []string
				want = append(want, "_journal/start.json")
				for _, a := range rep.Attempts {
					if a.Task == l.Task {
						want = append(want, InspectSampleFile(a.Sample, a.Attempt))
					}
				}
				want = append(want, "_journal/summaries/1.json", "summaries.json", "reductions.json", "header.json")
				if strings.Join(p.members, " ") != strings.Join(want, " ") {
					t.Errorf("%s: members\n%v\nwant\n%v", l.Name, p.members, want)
				}
			}
		}
	}
}

// TestInspectExportRoundTripsTheReport: every attempt's status, score,
// answer, explanation, carried source and error read back from the export.
func TestInspectExportRoundTripsTheReport(t *testing.T) {
	rep := inspectFixture()
	seen := map[status.Attempt]bool{}
	for _, format := range []string{InspectEval, InspectJSON} {
		opts := inspectOptions()
		opts.Format = format
		byTask := map[string]parsedLog{}
		for _, l := range exportInspect(t, rep, opts) {
			byTask[l.Task] = checkInspectLog(t, l.Name, l.Data)
		}
		for _, a := range rep.Attempts {
			name := fmt.Sprintf("%s %s/%s#%d", format, a.Task, a.Sample, a.Attempt)
			s := byTask[a.Task].samples[fmt.Sprintf("%s#%d", a.Sample, a.Attempt)]
			if s == nil {
				t.Errorf("%s: not in the export", name)
				continue
			}
			seen[a.Status] = true
			st, _ := s["metadata"].(map[string]any)["steward"].(map[string]any)
			if st["status"] != string(a.Status) {
				t.Errorf("%s: status %v", name, st["status"])
			}
			if a.Score != nil && st["score"] != *a.Score || a.Score == nil && st["score"] != nil {
				t.Errorf("%s: score %v, want %v", name, st["score"], a.Score)
			}
			if (st["answer"] == nil && a.Answer != "") || (st["answer"] != nil && st["answer"] != a.Answer) {
				t.Errorf("%s: answer %v", name, st["answer"])
			}
			if a.Carried != (st["carried"] == true) || a.CarriedFrom != "" && st["carried_from"] != a.CarriedFrom {
				t.Errorf("%s: carried %v from %v", name, st["carried"], st["carried_from"])
			}
			scores, _ := s["scores"].(map[string]any)
			pass, judged := judgedOutcome(a.Status)
			if judged != (len(scores) == 1) {
				t.Errorf("%s: scores %v", name, scores)
			}
			for _, sc := range scores {
				sc := sc.(map[string]any)
				want := "I"
				if pass {
					want = "C"
				}
				if sc["value"] != want || (a.Answer != "" && sc["answer"] != a.Answer) ||
					(a.Explanation != "" && sc["explanation"] != a.Explanation) {
					t.Errorf("%s: score %v", name, sc)
				}
			}
			hasErr := s["error"] != nil
			if hasErr != (a.Status == status.Errored || a.Status == status.Infra || a.Status == status.Interrupted) {
				t.Errorf("%s: error %v", name, s["error"])
			}
			if hasErr && !strings.Contains(s["error"].(map[string]any)["message"].(string), a.Reason) {
				t.Errorf("%s: error %v does not say %q", name, s["error"], a.Reason)
			}
			if a.Carried {
				if !hasEvent(s, "info", "carried_from", a.CarriedFrom) {
					t.Errorf("%s: no info event saying where it was carried from", name)
				}
			}
		}
		// The timed-out attempt hit Inspect's time limit.
		s := byTask["fast"].samples["add-4#1"]
		if l, _ := s["limit"].(map[string]any); l["type"] != "time" || l["limit"] != 30.0 {
			t.Errorf("%s: timed out attempt's limit %v", format, s["limit"])
		}
		if sum := byTask["fast"].summaries["add-4#1"]; format == InspectEval && sum["limit"] != "time" {
			t.Errorf("summary limit %v", sum["limit"])
		}
	}
	for _, st := range status.Attempts {
		if !seen[st] {
			t.Errorf("the fixture has no %s attempt", st)
		}
	}
}

func hasEvent(s map[string]any, kind, key, value string) bool {
	for _, e := range s["events"].([]any) {
		ev := e.(map[string]any)
		if ev["event"] != kind {
			continue
		}
		if d, ok := ev["data"].(map[string]any); ok && d[key] == value {
			return true
		}
	}
	return false
}

// TestInspectResultsCarryTheReducersMetrics: accuracy is the task's score
// under its reducer (with its interval), reductions the per-sample values,
// stats the usage and the ramp.
func TestInspectResultsCarryTheReducersMetrics(t *testing.T) {
	rep := inspectFixture()
	opts := inspectOptions()
	opts.Format = InspectJSON
	for i, l := range exportInspect(t, rep, opts) {
		p := checkInspectLog(t, l.Name, l.Data)
		tr := rep.Tasks[i]
		res := p.header["results"].(map[string]any)
		sc := res["scores"].([]any)[0].(map[string]any)
		acc := sc["metrics"].(map[string]any)["accuracy"].(map[string]any)
		if acc["value"] != tr.Score.Mean {
			t.Errorf("%s: accuracy %v, want %v", tr.Name, acc["value"], tr.Score.Mean)
		}
		iv := acc["metadata"].(map[string]any)["interval"].([]any)
		if iv[0] != tr.Score.Interval.Lo || iv[1] != tr.Score.Interval.Hi {
			t.Errorf("%s: interval %v", tr.Name, iv)
		}
		if sc["reducer"] != inspectReducer(tr.Reducer) {
			t.Errorf("%s: reducer %v", tr.Name, sc["reducer"])
		}
		var sum float64
		red := p.reductions[0].(map[string]any)["samples"].([]any)
		for _, s := range red {
			sum += s.(map[string]any)["value"].(float64)
		}
		if got := sum / float64(len(red)); got != tr.Score.Mean {
			t.Errorf("%s: mean of reductions %v, accuracy %v", tr.Name, got, tr.Score.Mean)
		}
		stats := p.header["stats"].(map[string]any)
		ramp := stats["steward"].(map[string]any)["ramp"].([]any)
		want := 0
		for _, pt := range rep.Ramp {
			if pt.Task == tr.Name {
				want++
			}
		}
		if len(ramp) != want {
			t.Errorf("%s: %d ramp points, want %d", tr.Name, len(ramp), want)
		}
		if tr.Name == "fast" {
			u := stats["model_usage"].(map[string]any)
			// Run here: add-1 (chat) and add-2 (responses and the refused
			// call); add-3 was carried and paid for by its own run.
			if len(u) != 2 || u["openai/gpt-4o-mini"].(map[string]any)["input_tokens"] != 240.0 {
				t.Errorf("model usage %v", u)
			}
			if p.header["eval"].(map[string]any)["model"] != "openai/gpt-4o-mini" {
				t.Errorf("model %v", p.header["eval"].(map[string]any)["model"])
			}
		}
		if tr.Name == "slow" && p.header["eval"].(map[string]any)["config"].(map[string]any)["max_samples"] != 1.0 {
			t.Errorf("slow's max_samples: %v", p.header["eval"].(map[string]any)["config"])
		}
	}
}

// TestInspectTranslatesMessages: each API's messages become Inspect's.
func TestInspectTranslatesMessages(t *testing.T) {
	rep := inspectFixture()
	opts := inspectOptions()
	opts.Format = InspectJSON
	logs := exportInspect(t, rep, opts)
	fast := checkInspectLog(t, logs[0].Name, logs[0].Data)
	slow := checkInspectLog(t, logs[1].Name, logs[1].Data)
	model := func(s map[string]any, n int) map[string]any {
		i := 0
		for _, e := range s["events"].([]any) {
			if ev := e.(map[string]any); ev["event"] == "model" {
				if i == n {
					return ev
				}
				i++
			}
		}
		t.Fatalf("no model event %d", n)
		return nil
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	cases := []struct {
		name string
		ev   map[string]any
		want []string // substrings of the event's JSON
	}{
		{"openai chat", model(fast.samples["add-1#1"], 0), []string{
			`"input":[{"content":"You add numbers.","role":"system"},{"content":"What is 2+2?","role":"user"},{"content":"","role":"assistant","tool_calls":[{"arguments":{"a":2,"b":2},"function":"add","id":"call_1","type":"function"}]},{"content":"4","function":"add","role":"tool","tool_call_id":"call_1"}]`,
			`"tools":[{"description":"adds","name":"add","parameters":{"additionalProperties":false,"properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"],"type":"object"}}]`,
			`"tool_choice":"auto"`, `"config":{"temperature":0}`, `"retries":1`,
			`"choices":[{"message":{"content":"4","model":"gpt-4o-mini-2024-07-18","role":"assistant","source":"generate"},"stop_reason":"stop"}]`,
		}},
		{"responses", model(fast.samples["add-2#1"], 0), []string{
			`{"content":"Be brief.","role":"system"}`,
			`{"content":[{"text":"What is 2+3?","type":"text"}],"role":"user"}`,
			`{"content":"","role":"assistant","tool_calls":[{"arguments":{"a":2,"b":3},"function":"add","id":"fc_1","type":"function"}]}`,
			`{"content":"5","function":"add","role":"tool","tool_call_id":"fc_1"}`,
			`"content":[{"reasoning":"add them","redacted":false,"type":"reasoning"},{"text":"5","type":"text"}]`,
		}},
		{"refused call", model(fast.samples["add-2#1"], 1), []string{`"error":"HTTP 502: upstream said no"`, `"retries":3`, `"response":{"text":"upstream said no"}`}},
		{"anthropic", model(slow.samples["repo-1#1"], 0), []string{
			`{"content":"You are careful.","role":"system"}`,
			`{"content":[{"reasoning":"use ls","redacted":false,"signature":"sig","type":"reasoning"},{"text":"Listing.","type":"text"}],"role":"assistant","tool_calls":[{"arguments":{"cmd":"ls"},"function":"bash","id":"toolu_1","type":"function"}]}`,
			`{"content":[{"text":"README.md","type":"text"}],"function":"bash","role":"tool","tool_call_id":"toolu_1"}`,
			`{"content":"and now?","role":"user"}`,
			`"stop_reason":"tool_calls"`, `"model":"anthropic/claude-sonnet-4"`, `"config":{"max_tokens":1024}`,
		}},
	}
	for _, c := range cases {
		got := js(c.ev)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: no %s in\n%s", c.name, w, got)
			}
		}
	}
	// The sample's conversation ends with the last call's answer; its input
	// is the eval set's; a sample without an eval set entry takes its
	// input from its first call.
	s := fast.samples["add-1#1"]
	msgs := s["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any); last["role"] != "assistant" || last["content"] != "4" {
		t.Errorf("last message %v", last)
	}
	if s["input"] != "What is 2+2?" || s["target"] != "4" {
		t.Errorf("input %v target %v", s["input"], s["target"])
	}
	if in := js(fast.samples["add-2#1"]["input"]); in != `[{"content":"Add.","role":"system","source":"input"},{"content":"2+3?","role":"user","source":"input"}]` {
		t.Errorf("message input %s", in)
	}
	if tg := js(fast.samples["add-2#1"]["target"]); tg != `["5","five"]` {
		t.Errorf("target list %s", tg)
	}
	if in := slow.samples["repo-1#1"]["input"]; in != "Which is the README?" {
		t.Errorf("input %v", in)
	}
	if ch := js(slow.samples["repo-1#1"]["choices"]); ch != `["LICENSE","README.md"]` {
		t.Errorf("choices %s", ch)
	}
}

// TestInspectGolden: the .json encoding of the fixture (the readable one;
// the .eval archive holds the same documents).
func TestInspectGolden(t *testing.T) {
	opts := inspectOptions()
	opts.Format = InspectJSON
	logs := exportInspect(t, inspectFixture(), opts)
	var b bytes.Buffer
	for _, l := range logs {
		fmt.Fprintf(&b, "=== %s\n%s\n", l.Name, l.Data)
	}
	golden(t, "inspect.json.golden", b.Bytes())
}

// TestInspectExportIsDeterministic: the same report gives the same bytes.
func TestInspectExportIsDeterministic(t *testing.T) {
	a := exportInspect(t, inspectFixture(), inspectOptions())
	b := exportInspect(t, inspectFixture(), inspectOptions())
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Data, b[i].Data) {
			t.Errorf("%s: two exports differ", a[i].Name)
		}
	}
}

// TestWriteInspect writes the files inspect view --log-dir reads.
func TestWriteInspect(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "inspect")
	files, err := WriteInspect(dir, inspectFixture(), InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("files %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkInspectLog(t, filepath.Base(f), data)
	}
	if _, err := Inspect(inspectFixture(), InspectOptions{Format: "yaml"}); err == nil {
		t.Error("an unknown format was accepted")
	}
}

// TestInspectOptionsForAnEvalSet: the samples' inputs, targets, choices and
// metadata, the tasks' scorers and the model come from the eval set.
func TestInspectOptionsForAnEvalSet(t *testing.T) {
	dir := t.TempDir()
	yaml := `name: quiz
model:
  upstream: openai
  name: gpt-4o-mini
  base_url: http://127.0.0.1:9/v1
tasks:
  - name: arithmetic
    agent: echo 4
    scorer: {match: includes}
    samples:
      - {id: add, input: "2 + 2", target: "4", metadata: {level: 1}}
      - {id: chat, input: [{role: system, content: "Add."}, {role: user, content: "1 + 1"}], target: ["2", "two"]}
  - name: graded
    agent: echo ok
    scorer: {command: "true"}
    samples:
      - {id: one, input: "go"}
`
	path := filepath.Join(dir, "steward.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := InspectOptionsFor(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if opts.Model != "openai/gpt-4o-mini" || opts.ModelBaseURL != "http://127.0.0.1:9/v1" {
		t.Errorf("model %q at %q", opts.Model, opts.ModelBaseURL)
	}
	if opts.Tasks["arithmetic"].Scorer != "includes" || opts.Tasks["graded"].Scorer != "command" || opts.Tasks["arithmetic"].Agent != "echo 4" {
		t.Errorf("tasks %+v", opts.Tasks)
	}
	add := opts.Samples[InspectKey("arithmetic", "add")]
	if add.Input != "2 + 2" || add.Target != "4" || add.Metadata["level"] != 1 {
		t.Errorf("add %+v", add)
	}
	chat := opts.Samples[InspectKey("arithmetic", "chat")]
	if b, _ := json.Marshal(chat); string(b) != `{"Input":[{"content":"Add.","role":"system"},{"content":"1 + 1","role":"user"}],"Target":["2","two"],"Choices":null,"Metadata":null}` {
		t.Errorf("chat %s", b)
	}
	if one := opts.Samples[InspectKey("graded", "one")]; one.Target != nil {
		t.Errorf("one's target %v", one.Target)
	}
	if _, err := InspectOptionsFor(filepath.Join(dir, "missing.yaml"), nil); err == nil {
		t.Error("a missing eval set gave no reason")
	}
}

// TestInspectHostileStaysData: eval output written to break formats stays
// data in the logs (JSON escapes it; file names keep only safe characters).
func TestInspectHostileStaysData(t *testing.T) {
	rep := hostileReport()
	for i := range rep.Attempts {
		rep.Attempts[i].Sample = fmt.Sprintf("%s%d", hostile, i) // ids are unique in a task
	}
	for _, format := range []string{InspectEval, InspectJSON} {
		for _, l := range exportInspect(t, rep, InspectOptions{Format: format}) {
			if strings.ContainsAny(l.Name, "/\\<>|\x00 ") {
				t.Errorf("file name %q", l.Name)
			}
			p := checkInspectLog(t, l.Name, l.Data)
			for k, s := range p.samples {
				if id, _ := s["id"].(string); !strings.HasPrefix(id, hostile) || s["metadata"].(map[string]any)["steward"].(map[string]any)["answer"] != hostile {
					t.Errorf("%q: id %q", k, s["id"])
				}
			}
		}
	}
}

// TestInspectSampleOutputIsTheAnswer: the sample's completion is the
// agent's answer; the model event keeps what the model said.
func TestInspectSampleOutputIsTheAnswer(t *testing.T) {
	rep := inspectFixture()
	rep.Attempts[0].Answer = "four (from answer.txt)"
	logs := exportInspect(t, rep, InspectOptions{Format: InspectJSON})
	s := checkInspectLog(t, logs[0].Name, logs[0].Data).samples["add-1#1"]
	if c := s["output"].(map[string]any)["completion"]; c != "four (from answer.txt)" {
		t.Errorf("sample completion %v", c)
	}
	for _, e := range s["events"].([]any) {
		if ev := e.(map[string]any); ev["event"] == "model" {
			if c := ev["output"].(map[string]any)["completion"]; c != "4" {
				t.Errorf("model event completion %v", c)
			}
		}
	}
}

// TestInspectTranslatesTheRest: metadata-only calls (transcripts:
// metadata), legacy completions, images and refusals still make valid
// model events.
func TestInspectTranslatesTheRest(t *testing.T) {
	rep := inspectFixture()
	at := t0.Add(5 * time.Second)
	meta := transcript.Call{Time: at, Method: "POST", Route: "/v1/chat/completions", Model: "gpt-4o-mini", Status: 200,
		Latency: time.Second, InputTokens: 7, OutputTokens: 3}
	legacy := call("/v1/completions", "davinci-002", at, `{"model":"davinci-002","prompt":"Say hi","max_tokens":5,"stop":"\n"}`,
		`{"object":"text_completion","choices":[{"text":"hi","finish_reason":"length"}]}`, 200, 1)
	images := call("/v1/chat/completions", "gpt-4o", at,
		`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],"tool_choice":"required","tools":[{"type":"function","function":{"name":"look"}}]}`,
		`{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't."},"finish_reason":"content_filter"}]}`, 200, 1)
	claudeImage := call("/v1/messages", "claude-haiku", at,
		`{"model":"claude-haiku","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"text","text":"and this?"}]}],"tool_choice":{"type":"tool","name":"look"},"tools":[{"name":"look","input_schema":{"type":"object","properties":{}}}]}`,
		`{"type":"message","content":[{"type":"text","text":"a square"}],"stop_reason":"max_tokens"}`, 200, 1)
	rep.Attempts[0].Details.Transcript = &transcript.Transcript{Mode: transcript.ModeMetadata, Calls: []transcript.Call{meta, legacy, images, claudeImage}}
	logs := exportInspect(t, rep, InspectOptions{})
	s := checkInspectLog(t, logs[0].Name, logs[0].Data).samples["add-1#1"]
	var got []string
	for _, e := range s["events"].([]any) {
		if ev := e.(map[string]any); ev["event"] == "model" {
			b, _ := json.Marshal(ev)
			got = append(got, string(b))
		}
	}
	want := [][]string{
		{`"input":[]`, `"usage":{"input_tokens":7,"output_tokens":3,"total_tokens":10}`, `"request":{}`},
		{`"input":[{"content":"Say hi","role":"user"}]`, `"stop_reason":"max_tokens"`, `"content":"hi"`, `"config":{"max_tokens":5,"stop_seqs":["\n"]}`},
		{`{"image":"data:image/png;base64,AAAA","type":"image"}`, `"tool_choice":"any"`, `{"refusal":true,"text":"I can't.","type":"text"}`, `"stop_reason":"content_filter"`,
			`"tools":[{"description":"","name":"look","parameters":{"additionalProperties":false,"properties":{},"required":[],"type":"object"}}]`},
		{`{"image":"data:image/png;base64,AAAA","type":"image"},{"text":"and this?","type":"text"}`, `"tool_choice":{"name":"look"}`, `"stop_reason":"max_tokens"`, `"content":"a square"`},
	}
	if len(got) != len(want) {
		t.Fatalf("%d model events", len(got))
	}
	for i := range want {
		for _, w := range want[i] {
			if !strings.Contains(got[i], w) {
				t.Errorf("call %d: no %s in\n%s", i, w, got[i])
			}
		}
	}
	// The summary's input keeps text only, as Inspect's does.
	sum := summaryInput([]obj{{"role": "user", "content": []obj{{"type": "image", "image": "x"}}}})
	if b, _ := json.Marshal(sum); string(b) != `[{"content":[{"text":"(Image)","type":"text"}],"role":"user"}]` {
		t.Errorf("summary input %s", b)
	}
}

// TestInspectNamesCallsAsTheEvalNamesItsModel: calls to the eval set's
// model (the mock upstream speaks OpenAI's API) carry the eval's name.
func TestInspectNamesCallsAsTheEvalNamesItsModel(t *testing.T) {
	logs := exportInspect(t, inspectFixture(), InspectOptions{Format: InspectJSON, Model: "mockllm/gpt-4o-mini"})
	p := checkInspectLog(t, logs[0].Name, logs[0].Data)
	s := p.samples["add-1#1"]
	if _, ok := s["model_usage"].(map[string]any)["mockllm/gpt-4o-mini"]; !ok {
		t.Errorf("usage %v", s["model_usage"])
	}
	u := p.header["stats"].(map[string]any)["model_usage"].(map[string]any)
	if _, ok := u["openai/gpt-4.1"]; !ok || len(u) != 2 {
		t.Errorf("run usage %v: another model keeps its own name", u)
	}
	if p.header["eval"].(map[string]any)["model"] != "mockllm/gpt-4o-mini" {
		t.Errorf("model %v", p.header["eval"].(map[string]any)["model"])
	}
}
