package report

// Inspect logs: one log per task in Inspect AI's log format, so `inspect
// view`, the VS Code extension and Inspect's dataframe tools read Steward's
// runs. The .eval encoding is a ZIP archive (the members Inspect's own
// EvalRecorder writes: _journal/start.json, samples/{id}_epoch_{n}.json,
// _journal/summaries/1.json, summaries.json, reductions.json, header.json);
// the .json encoding is one EvalLog document with the samples inline. The
// shapes follow the real logs in ../shared/fixtures/inspect-logs (tested
// with the same checks by inspect_test.go). docs/inspect.md.

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	mathbig "math/big"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/transcript"
)

// Inspect log encodings.
const (
	InspectEval = "eval" // the ZIP archive (Inspect's default)
	InspectJSON = "json" // one JSON document
)

// InspectSchemaVersion is the log schema version the export writes (the
// fixtures' "version": 2).
const InspectSchemaVersion = 2

// InspectOptions are what an export needs beyond the report: the eval
// set's samples (the record keeps ids, not inputs) and the model.
type InspectOptions struct {
	// Format is InspectEval (default) or InspectJSON.
	Format string
	// Samples holds each sample's dataset fields by InspectKey(task, id);
	// a sample without an entry takes its input from its first model call.
	Samples map[string]InspectSample
	// Tasks holds what the eval set says of each task, by name.
	Tasks map[string]InspectTask
	// Model is the eval's model as Inspect names it ("openai/gpt-4o");
	// "" takes the one the transcripts used most ("none/none" without).
	Model        string
	ModelBaseURL string
}

// InspectSample is one sample's dataset fields as the eval set has them.
type InspectSample struct {
	Input    any // a string, or a list of {role, content} messages
	Target   any // nil, a string or a []string
	Choices  []string
	Metadata map[string]any
}

// InspectTask is what the eval set says of a task.
type InspectTask struct {
	Scorer string // the score's name (default "steward")
	Agent  string // the agent command (the plan's one step)
	File   string // the eval set file (task_file)
	// Limits are the task's per-attempt limits: the eval's config and the
	// limit a sample reached name them.
	Limits InspectLimits
}

// InspectLimits are a task's per-attempt limits (zero: unlimited), as
// Inspect's token_limit, message_limit, cost_limit and time_limit.
type InspectLimits struct {
	Tokens    int64
	Calls     int64
	CostUSD   float64
	AgentTime time.Duration // the agent's time: agent_timeout, bounded by limits.agent_time
}

// InspectKey is the key of InspectOptions.Samples.
func InspectKey(task, sample string) string { return task + "\x00" + sample }

// InspectLog is one task's log, ready to write.
type InspectLog struct {
	Task string
	Name string // file name: {created}_{task}_{task_id}.eval (or .json)
	Data []byte
}

// WriteInspect writes one log per task into dir (made if missing) and
// returns the files it wrote.
func WriteInspect(dir string, rep *Report, opts InspectOptions) ([]string, error) {
	logs, err := Inspect(rep, opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("inspect logs: %w", err)
	}
	var out []string
	for _, l := range logs {
		p := filepath.Join(dir, l.Name)
		if err := os.WriteFile(p, l.Data, 0o644); err != nil {
			return out, fmt.Errorf("inspect logs: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Inspect renders one log per task of rep, in discovery order.
func Inspect(rep *Report, opts InspectOptions) ([]InspectLog, error) {
	format := opts.Format
	if format == "" {
		format = InspectEval
	}
	if format != InspectEval && format != InspectJSON {
		return nil, fmt.Errorf("inspect format %q: want eval or json", format)
	}
	var out []InspectLog
	for _, name := range taskOrder(rep) {
		l := buildInspect(rep, name, opts)
		var data []byte
		var err error
		if format == InspectJSON {
			data, err = l.jsonDocument()
		} else {
			data, err = l.evalArchive()
		}
		if err != nil {
			return nil, fmt.Errorf("inspect log of task %s: %w", name, err)
		}
		out = append(out, InspectLog{Task: name, Name: l.fileName(format), Data: data})
	}
	return out, nil
}

// taskOrder is the tasks of rep in discovery order (those with attempts but
// no task row after them).
func taskOrder(rep *Report) []string {
	var names []string
	seen := map[string]bool{}
	for _, t := range rep.Tasks {
		if !seen[t.Name] {
			seen[t.Name] = true
			names = append(names, t.Name)
		}
	}
	for _, a := range rep.Attempts {
		if !seen[a.Task] {
			seen[a.Task] = true
			names = append(names, a.Task)
		}
	}
	return names
}

// ---- the log's parts ----

type obj = map[string]any

type inspectLog struct {
	task      string
	created   time.Time
	taskID    string
	status    string
	eval      obj
	plan      obj
	results   obj
	stats     obj
	err       obj
	samples   []obj
	summaries []obj
	reduction []obj
}

// inspectID is a deterministic 22-character id (Inspect's are shortuuids).
func inspectID(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	const alphabet = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	n := new(mathbig.Int).SetBytes(h[:16])
	base := mathbig.NewInt(int64(len(alphabet)))
	var b []byte
	m := new(mathbig.Int)
	for len(b) < 22 {
		n.DivMod(n, base, m)
		b = append(b, alphabet[m.Int64()])
	}
	return string(b)
}

// isoTime and isoMicro are Inspect's timestamps (UTC, "+00:00").
func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05-07:00") }
func isoMicro(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000-07:00")
}

var fileUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func (l *inspectLog) fileName(format string) string {
	created := strings.ReplaceAll(isoTime(l.created), ":", "-")
	task := strings.Trim(fileUnsafe.ReplaceAllString(l.task, "-"), "-")
	if task == "" {
		task = "task"
	}
	return created + "_" + task + "_" + l.taskID + "." + format
}

// inspectReducer is the reducer as Inspect names its own ("at_least_2").
func inspectReducer(r string) string {
	if r == "" {
		r = "mean"
	}
	return strings.ReplaceAll(strings.ReplaceAll(r, ": ", "_"), ":", "_")
}

func buildInspect(rep *Report, task string, opts InspectOptions) *inspectLog {
	var tr TaskReport
	for _, t := range rep.Tasks {
		if t.Name == task {
			tr = t
		}
	}
	ti := opts.Tasks[task]
	scorer := ti.Scorer
	if scorer == "" {
		scorer = "steward"
	}
	// One sample epoch per (sample, attempt): a later duplicate (only a
	// malformed report has one) would be a second member of the same name.
	var rows []AttemptRow
	epochSeen := map[string]bool{}
	for _, a := range rep.Attempts {
		k := a.Sample + "\x00" + strconv.Itoa(a.Attempt)
		if a.Task == task && !epochSeen[k] {
			epochSeen[k] = true
			rows = append(rows, a)
		}
	}
	runID := strings.Join(rep.RunIDs, "+")
	created := rep.Started
	if created.IsZero() {
		created = time.Unix(0, 0).UTC()
	}
	l := &inspectLog{task: task, created: created, taskID: inspectID("task", runID, task)}

	model := opts.Model
	if model == "" {
		model = commonModel(rows)
	}

	// The dataset: sample ids in discovery order.
	var sampleIDs []any
	seen := map[string]bool{}
	epochs := tr.Planned
	for _, a := range rows {
		if !seen[a.Sample] {
			seen[a.Sample] = true
			sampleIDs = append(sampleIDs, a.Sample)
		}
		epochs = max(epochs, a.Attempt)
	}
	config := obj{"epochs": max(epochs, 1), "epochs_reducer": []string{inspectReducer(tr.Reducer)}}
	if l := ti.Limits; l.Tokens > 0 {
		config["token_limit"] = l.Tokens
	}
	if l := ti.Limits; l.Calls > 0 {
		config["message_limit"] = l.Calls
	}
	if l := ti.Limits; l.CostUSD > 0 {
		config["cost_limit"] = l.CostUSD
	}
	if l := ti.Limits; l.AgentTime > 0 {
		config["time_limit"] = int64(math.Ceil(l.AgentTime.Seconds()))
	}
	if n, ok := strings.CutPrefix(tr.Limit, "≤"); ok {
		if v, err := strconv.Atoi(n); err == nil {
			config["max_samples"] = v
		}
	}
	reducer := tr.Reducer
	if reducer == "" {
		reducer = "mean"
	}
	stewardMeta := obj{"eval_set": rep.EvalSet, "run_ids": rep.RunIDs, "plan": rep.Plan, "reducer": reducer}
	if rep.Title != "" {
		stewardMeta["title"] = rep.Title
	}
	if tr.Setpoint > 0 {
		stewardMeta["setpoint"] = tr.Setpoint
	}
	if tr.Limit != "" {
		stewardMeta["limit"] = tr.Limit
	}
	if rep.Shard != "" {
		stewardMeta["shard"] = rep.Shard
	}
	if rep.Version != "" {
		stewardMeta["version"] = rep.Version
	}
	eval := obj{
		"eval_id":      inspectID("eval", runID, task),
		"run_id":       inspectID("run", runID),
		"created":      isoTime(created),
		"task":         task,
		"task_id":      l.taskID,
		"task_version": 0,
		"task_attribs": obj{},
		"task_args":    obj{},
		"dataset": obj{
			"name":       task,
			"location":   rep.EvalSet,
			"samples":    len(sampleIDs),
			"sample_ids": sampleIDs,
			"shuffled":   false,
		},
		"model":                 model,
		"model_generate_config": obj{},
		"model_args":            obj{},
		"config":                config,
		"packages":              obj{"steward": versionOr(rep.Version)},
		"scorers": []obj{{"name": scorer, "options": obj{}, "metadata": obj{},
			"metrics": []obj{{"name": "inspect_ai/accuracy", "options": obj{}}, {"name": "inspect_ai/stderr", "options": obj{}}}}},
		"metadata": obj{"steward": stewardMeta},
	}
	if ti.File != "" {
		eval["task_file"] = ti.File
	}
	if opts.ModelBaseURL != "" {
		eval["model_base_url"] = opts.ModelBaseURL
	}
	l.eval = eval
	agent := obj{}
	if ti.Agent != "" {
		agent["command"] = ti.Agent
	}
	l.plan = obj{"name": "plan", "steps": []obj{{"solver": "steward/agent", "params": agent}}, "config": obj{}}

	// Samples, their summaries and the run's usage.
	usage := map[string]obj{}
	completed := 0
	for _, a := range rows {
		s, sum := inspectSample(rep, a, model, scorer, opts.Samples[InspectKey(a.Task, a.Sample)], ti.Limits)
		l.samples = append(l.samples, s)
		l.summaries = append(l.summaries, sum)
		if a.Status != status.Skipped && a.Status != status.Interrupted {
			completed++
		}
		if !a.Carried { // a carried result was paid for by the run that produced it
			for k, u := range s["model_usage"].(map[string]obj) {
				usage[k] = addUsage(usage[k], u)
			}
		}
	}

	// Reductions: each judged sample's score under the task's reducer.
	red := rep.reducerOf(task)
	type tally struct{ pass, n int }
	tallies := map[string]*tally{}
	var order []string
	for _, a := range rows {
		pass, judged := judgedOutcome(a.Status)
		if !judged {
			continue
		}
		t := tallies[a.Sample]
		if t == nil {
			t = &tally{}
			tallies[a.Sample] = t
			order = append(order, a.Sample)
		}
		t.n++
		if pass {
			t.pass++
		}
	}
	var reduced []obj
	var values []float64
	for _, id := range order {
		t := tallies[id]
		v := red.Score(t.pass, t.n)
		values = append(values, v)
		reduced = append(reduced, obj{"value": v, "sample_id": id, "history": []any{},
			"metadata": obj{"passed": t.pass, "judged": t.n}})
	}
	l.reduction = []obj{{"scorer": scorer, "reducer": inspectReducer(tr.Reducer), "samples": reduced}}

	accuracy := obj{"name": "accuracy", "value": 0.0, "params": obj{}}
	if tr.Score != nil {
		accuracy["value"] = tr.Score.Mean
		accuracy["metadata"] = obj{"interval": []float64{tr.Score.Interval.Lo, tr.Score.Interval.Hi},
			"confidence": RateConfidence, "n_eff": tr.Score.NEff, "attempts": tr.Score.Attempts}
	} else if len(values) > 0 {
		accuracy["value"] = mean(values)
	}
	l.results = obj{
		"total_samples":     len(rows),
		"completed_samples": completed,
		"scores": []obj{{
			"name": scorer, "scorer": scorer, "reducer": inspectReducer(tr.Reducer), "params": obj{},
			"scored_samples": len(values), "unscored_samples": len(sampleIDs) - len(values),
			"metrics": obj{
				"accuracy": accuracy,
				"stderr":   obj{"name": "stderr", "value": stderrOf(values), "params": obj{}},
			},
		}},
	}

	finished := rep.Finished
	if finished.IsZero() {
		finished = created
	}
	var ramp []obj
	for _, p := range rep.Ramp {
		if p.Task != task {
			continue
		}
		ramp = append(ramp, obj{"at": isoMicro(p.At), "setpoint": p.Setpoint, "ceiling": p.Ceiling,
			"connection_limit": p.Limit, "decision": p.Decision, "reason": p.Reason, "pushback": p.Pushback,
			"retries": p.Retries, "errored": p.Errored, "saturated": p.Saturated})
	}
	if ramp == nil {
		ramp = []obj{}
	}
	l.stats = obj{
		"started_at":   isoTime(created),
		"completed_at": isoTime(finished),
		"model_usage":  usage,
		// Inspect's stats have no place for these; readers ignore them.
		"steward": obj{"ramp": ramp, "hold": rep.Hold, "spend_usd": tr.CostUSD},
	}

	l.status = "success"
	switch {
	case rep.Crashed != "":
		l.status = "error"
		l.err = obj{"message": "the run crashed: " + rep.Crashed, "traceback": "", "traceback_ansi": ""}
	case rep.Partial:
		l.status = "cancelled"
	}
	return l
}

func versionOr(v string) string {
	if v == "" {
		return "dev"
	}
	return v
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// stderrOf is Inspect's stderr metric: the sample standard deviation of the
// sample scores over √n (0 below two samples).
func stderrOf(v []float64) float64 {
	n := len(v)
	if n < 2 {
		return 0
	}
	m := mean(v)
	var ss float64
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
}

func addUsage(a, b obj) obj {
	if a == nil {
		a = obj{"input_tokens": int64(0), "output_tokens": int64(0), "total_tokens": int64(0)}
	}
	for _, k := range []string{"input_tokens", "output_tokens", "total_tokens"} {
		a[k] = a[k].(int64) + b[k].(int64)
	}
	if c, ok := b["total_cost"].(float64); ok {
		prev, _ := a["total_cost"].(float64)
		a["total_cost"] = prev + c
	}
	return a
}

// commonModel is the "provider/model" the task's transcripts used most.
func commonModel(rows []AttemptRow) string {
	count := map[string]int{}
	for _, a := range rows {
		if a.Details == nil || a.Details.Transcript == nil {
			continue
		}
		for _, c := range agentCalls(a.Details.Transcript.Calls) {
			count[modelKey(c.Route, c.Model)]++
		}
	}
	best, n := "none/none", 0
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if count[k] > n {
			best, n = k, count[k]
		}
	}
	return best
}

// agentCalls are the agent's calls: a model judge's graders' (By scorer)
// are the scorer's, not the solver's model events.
func agentCalls(cs []transcript.Call) []transcript.Call {
	out := make([]transcript.Call, 0, len(cs))
	for _, c := range cs {
		if c.By != transcript.ByScorer {
			out = append(out, c)
		}
	}
	return out
}

// ---- one sample epoch ----

var timeoutRE = regexp.MustCompile(`timed out \(task timeout ([^)]+)\)`)

// inspectLimit is the Inspect sample limit (EvalSampleLimit: type and
// value) of an attempt that reached one of Steward's (nil: none): tokens
// is Inspect's token limit, model_calls its message limit (Inspect counts
// messages, Steward model calls: each call is one assistant message),
// cost_usd its cost limit, agent_time (and a deadline) its time limit
// (wall clock, as agent_time is; Inspect's working limit leaves out
// waiting, which Steward does not measure). The value is the task's limit;
// without the eval set, what the attempt had used when it stopped.
func inspectLimit(a AttemptRow, lim InspectLimits, calls int) obj {
	name := a.Limit
	if a.TimedOut {
		name = "agent_time"
	}
	pick := func(limit, used float64) float64 {
		if limit > 0 {
			return limit
		}
		return used
	}
	switch name {
	case "":
		return nil
	case "tokens":
		return obj{"type": "token", "limit": pick(float64(lim.Tokens), float64(a.InputTokens+a.OutputTokens))}
	case "model_calls":
		return obj{"type": "message", "limit": pick(float64(lim.Calls), float64(calls))}
	case "cost_usd":
		return obj{"type": "cost", "limit": pick(lim.CostUSD, a.CostUSD)}
	case "agent_time":
		return obj{"type": "time", "limit": pick(lim.AgentTime.Seconds(), round3(a.Duration.Seconds()))}
	}
	return obj{"type": "custom", "limit": 0.0}
}

func inspectSample(rep *Report, a AttemptRow, model, scorer string, ds InspectSample, lim InspectLimits) (sample, summary obj) {
	var calls []modelCall
	if a.Details != nil && a.Details.Transcript != nil {
		calls = translateCalls(agentCalls(a.Details.Transcript.Calls))
	}
	// A call to the eval's model is named as the eval names it (the mock
	// upstream speaks OpenAI's API but is mockllm/NAME).
	if _, name, ok := strings.Cut(model, "/"); ok {
		for i := range calls {
			if _, m, _ := strings.Cut(calls[i].key, "/"); m == name {
				calls[i].key = model
				calls[i].event["model"] = model
			}
		}
	}
	input := inspectInput(ds.Input, calls)
	target := ds.Target
	switch t := target.(type) {
	case nil:
		target = ""
	case []any:
		var ss []string
		for _, x := range t {
			ss = append(ss, fmt.Sprint(x))
		}
		target = ss
	}
	uuid := inspectID("sample", a.Run, a.Task, a.Sample, strconv.Itoa(a.Attempt))

	steward := obj{"status": string(a.Status), "attempt": a.Attempt}
	if a.Score != nil {
		steward["score"] = *a.Score
	}
	for k, v := range map[string]string{"reason": a.Reason, "run_id": a.Run, "carried_from": a.CarriedFrom,
		"fingerprint": a.Fingerprint, "source": a.Source, "answer": a.Answer, "agent_output": a.AgentOutput} {
		if v != "" {
			steward[k] = v
		}
	}
	if a.Carried {
		steward["carried"] = true
	}
	if a.Duration > 0 {
		steward["duration_ns"] = int64(a.Duration)
	}
	if a.CostUSD > 0 {
		steward["cost_usd"] = a.CostUSD
	}
	if a.Tries > 1 {
		steward["tries"] = a.Tries
		steward["retry_reasons"] = a.RetryReasons
	}
	if a.AgentExit != 0 {
		steward["agent_exit"] = a.AgentExit
	}
	if a.Limit != "" {
		steward["limit"] = a.Limit
	}
	if a.TimedOut {
		steward["timed_out"] = true
	}
	if a.Details != nil && a.Details.Transcript != nil && a.Details.Transcript.Truncated != "" {
		steward["transcript_truncated"] = a.Details.Transcript.Truncated
	}
	metadata := obj{}
	for k, v := range ds.Metadata {
		metadata[k] = v
	}
	metadata["steward"] = steward

	// Usage per model: the transcript's calls, else the row's own counts.
	usage := map[string]obj{}
	for _, c := range calls {
		usage[c.key] = addUsage(usage[c.key], usageObj(c.in, c.out, c.cost))
	}
	if len(calls) == 0 && (a.InputTokens > 0 || a.OutputTokens > 0) {
		usage[model] = usageObj(a.InputTokens, a.OutputTokens, a.CostUSD)
	}

	// Events: init, the carry note, the model calls, the error or the score.
	var started time.Time
	if len(calls) > 0 {
		started = calls[0].start
	}
	at := func(t time.Time) (string, float64) {
		if t.IsZero() || started.IsZero() {
			if started.IsZero() {
				return isoMicro(rep.Started), 0
			}
			t = started
		}
		return isoMicro(t), t.Sub(started).Seconds()
	}
	var events []obj
	span := func(t time.Time, id, parent, typ, name string) {
		ts, ws := at(t)
		e := obj{"uuid": inspectID("ev", uuid, "b", id), "span_id": id, "timestamp": ts, "working_start": ws,
			"event": "span_begin", "id": id, "type": typ, "name": name}
		if parent != "" {
			e["parent_id"] = parent
		}
		events = append(events, e)
	}
	end := func(t time.Time, id string) {
		ts, ws := at(t)
		events = append(events, obj{"uuid": inspectID("ev", uuid, "e", id), "span_id": id, "timestamp": ts,
			"working_start": ws, "event": "span_end", "id": id})
	}
	initID, solversID, agentID := inspectID(uuid, "init"), inspectID(uuid, "solvers"), inspectID(uuid, "agent")
	scorersID, scorerID := inspectID(uuid, "scorers"), inspectID(uuid, "scorer")
	sampleObj := obj{"id": a.Sample, "input": input, "target": target, "metadata": ds.Metadata}
	if len(ds.Choices) > 0 {
		sampleObj["choices"] = ds.Choices
	}
	if ds.Metadata == nil {
		sampleObj["metadata"] = obj{}
	}
	span(started, initID, "", "init", "init")
	ts, ws := at(started)
	events = append(events, obj{"uuid": inspectID("ev", uuid, "init"), "span_id": initID, "timestamp": ts,
		"working_start": ws, "event": "sample_init", "sample": sampleObj,
		"state": obj{"messages": inputMessages(input), "tools": []any{}, "tool_choice": nil, "store": obj{},
			"output": obj{"model": model, "choices": []any{}}, "completed": false, "metadata": obj{}}})
	end(started, initID)
	if a.Carried {
		ts, ws := at(started)
		events = append(events, obj{"uuid": inspectID("ev", uuid, "carried"), "timestamp": ts, "working_start": ws,
			"event": "info", "source": "steward",
			"data": obj{"carried_from": a.CarriedFrom, "fingerprint": a.Fingerprint,
				"note": "this result was carried from run " + a.CarriedFrom + ": its fingerprint is unchanged, so it was not run again"}})
	}
	span(started, solversID, "", "solvers", "solvers")
	span(started, agentID, solversID, "solver", "steward/agent")
	last := started
	for i, c := range calls {
		ts, ws := at(c.start)
		e := c.event
		e["uuid"] = inspectID("ev", uuid, "call", strconv.Itoa(i))
		e["span_id"] = agentID
		e["timestamp"] = ts
		e["working_start"] = ws
		e["completed"] = isoMicro(c.start.Add(c.latency))
		events = append(events, e)
		last = c.start.Add(c.latency)
	}
	end(last, agentID)
	end(last, solversID)

	var errObj obj
	limit := inspectLimit(a, lim, len(calls))
	switch a.Status {
	case status.Errored, status.Infra, status.Interrupted:
		msg := string(a.Status)
		if a.Reason != "" {
			msg += ": " + a.Reason
		}
		errObj = obj{"message": msg, "traceback": a.Log, "traceback_ansi": a.Log}
		if m := timeoutRE.FindStringSubmatch(a.Reason); m != nil && limit == nil {
			if d, err := time.ParseDuration(m[1]); err == nil {
				limit = obj{"type": "time", "limit": d.Seconds()}
			}
		}
		ts, ws := at(last)
		events = append(events, obj{"uuid": inspectID("ev", uuid, "error"), "timestamp": ts, "working_start": ws,
			"event": "error", "error": errObj})
	case status.Skipped:
		ts, ws := at(last)
		events = append(events, obj{"uuid": inspectID("ev", uuid, "skipped"), "timestamp": ts, "working_start": ws,
			"event": "info", "source": "steward", "data": obj{"status": "skipped", "reason": a.Reason}})
	}
	var scores obj
	pass, judged := judgedOutcome(a.Status)
	if judged {
		value := "I"
		if pass {
			value = "C"
		}
		sc := obj{"value": value, "history": []any{}, "metadata": obj{"status": string(a.Status)}}
		if a.Score != nil {
			sc["metadata"].(obj)["score"] = *a.Score
		}
		if a.Answer != "" {
			sc["answer"] = a.Answer
		}
		if expl := a.Explanation; expl != "" {
			sc["explanation"] = expl
		} else if a.Status == status.Errored && a.Reason != "" {
			sc["explanation"] = a.Reason
		}
		scores = obj{scorer: sc}
		span(last, scorersID, "", "scorers", "scorers")
		span(last, scorerID, scorersID, "scorer", scorer)
		ts, ws := at(last)
		events = append(events, obj{"uuid": inspectID("ev", uuid, "score"), "span_id": scorerID, "timestamp": ts,
			"working_start": ws, "event": "score", "score": sc, "target": target, "intermediate": false})
		end(last, scorerID)
		end(last, scorersID)
	}

	// The conversation: the last call's input and its answer; without a
	// transcript the input and the agent's answer.
	messages := inputMessages(input)
	output := obj{"model": model, "choices": []any{}}
	if n := len(calls); n > 0 {
		lc := calls[n-1]
		messages = append(append([]obj(nil), lc.input...), lc.choiceMessages()...)
		output = obj{}
		for k, v := range lc.output { // a copy: the model event keeps the call's own completion
			output[k] = v
		}
	} else if a.Answer != "" {
		msg := obj{"role": "assistant", "content": a.Answer, "source": "generate"}
		messages = append(messages, msg)
		output = obj{"model": model, "choices": []obj{{"message": msg, "stop_reason": "stop"}}, "completion": a.Answer}
	}
	if a.Answer != "" {
		output["completion"] = a.Answer
	}
	sample = obj{
		"id": a.Sample, "epoch": a.Attempt, "input": input, "target": target,
		"messages": messages, "output": output, "metadata": metadata, "store": obj{},
		"events": events, "model_usage": usage, "uuid": uuid, "attachments": obj{},
		"error_retries": []obj{},
	}
	if scores != nil {
		sample["scores"] = scores
	}
	if len(ds.Choices) > 0 {
		sample["choices"] = ds.Choices
	}
	if a.Duration > 0 {
		sample["total_time"] = round3(a.Duration.Seconds())
		sample["working_time"] = round3(a.Duration.Seconds())
	}
	if !started.IsZero() {
		sample["started_at"] = isoMicro(started)
		sample["completed_at"] = isoMicro(started.Add(max(a.Duration, last.Sub(started))))
	}
	if errObj != nil {
		sample["error"] = errObj
	}
	if limit != nil {
		sample["limit"] = limit
	}
	for _, r := range a.RetryReasons {
		sample["error_retries"] = append(sample["error_retries"].([]obj), obj{"message": r, "traceback": "", "traceback_ansi": ""})
	}

	summary = obj{
		"id": a.Sample, "epoch": a.Attempt, "input": summaryInput(input), "target": target,
		"metadata": metadata, "model_usage": usage, "uuid": uuid,
		"retries":       max(a.Tries-1, 0),
		"completed":     true, // the log is finished: an interrupted attempt has its error
		"message_count": len(messages),
	}
	if scores != nil {
		summary["scores"] = scores
	}
	if len(ds.Choices) > 0 {
		summary["choices"] = ds.Choices
	}
	for _, k := range []string{"total_time", "working_time", "started_at", "completed_at"} {
		if v, ok := sample[k]; ok {
			summary[k] = v
		}
	}
	if errObj != nil {
		summary["error"] = errObj["message"]
	}
	if limit != nil {
		summary["limit"] = limit["type"]
	}
	return sample, summary
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func usageObj(in, out int64, cost float64) obj {
	u := obj{"input_tokens": in, "output_tokens": out, "total_tokens": in + out}
	if cost > 0 {
		u["total_cost"] = cost
	}
	return u
}

// inspectInput is the sample's input as Inspect has it: the eval set's
// string or messages, else the first model call's first user message.
func inspectInput(in any, calls []modelCall) any {
	switch v := in.(type) {
	case string:
		return v
	case []any:
		var msgs []obj
		for _, m := range v {
			mm, ok := m.(map[string]any)
			if !ok {
				continue
			}
			role, _ := mm["role"].(string)
			if role == "" {
				role = "user"
			}
			msgs = append(msgs, obj{"role": role, "content": contentOf(mm["content"]), "source": "input"})
		}
		if len(msgs) > 0 {
			return msgs
		}
	}
	for _, c := range calls {
		for _, m := range c.input {
			if m["role"] == "user" {
				if s, ok := m["content"].(string); ok {
					return s
				}
				return textOf(m["content"])
			}
		}
	}
	return ""
}

// inputMessages is the input as the conversation's first messages.
func inputMessages(input any) []obj {
	switch v := input.(type) {
	case []obj:
		return append([]obj(nil), v...)
	case string:
		if v != "" {
			return []obj{{"role": "user", "content": v, "source": "input"}}
		}
	}
	return []obj{}
}

// summaryInput is the input in summaries: text only (as Inspect's
// text_inputs), images replaced by "(Image)".
func summaryInput(input any) any {
	msgs, ok := input.([]obj)
	if !ok {
		return input
	}
	out := make([]obj, 0, len(msgs))
	for _, m := range msgs {
		parts, ok := m["content"].([]obj)
		if !ok {
			out = append(out, m)
			continue
		}
		var kept []obj
		for _, p := range parts {
			if p["type"] != "image" {
				kept = append(kept, p)
			}
		}
		if len(kept) == 0 {
			kept = []obj{{"type": "text", "text": "(Image)"}}
		}
		c := obj{}
		for k, v := range m {
			c[k] = v
		}
		c["content"] = kept
		out = append(out, c)
	}
	return out
}

// ---- encodings ----

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// header is the EvalLog without samples (header.json, and the top of the
// .json document); orderedLog keeps Inspect's key order.
type orderedLog struct {
	Version    int    `json:"version"`
	Status     string `json:"status"`
	Eval       obj    `json:"eval"`
	Plan       obj    `json:"plan"`
	Results    obj    `json:"results,omitempty"`
	Stats      obj    `json:"stats"`
	Error      obj    `json:"error,omitempty"`
	Samples    []obj  `json:"samples,omitempty"`
	Reductions []obj  `json:"reductions,omitempty"`
}

func (l *inspectLog) header() orderedLog {
	return orderedLog{Version: InspectSchemaVersion, Status: l.status, Eval: l.eval, Plan: l.plan,
		Results: l.results, Stats: l.stats, Error: l.err}
}

func (l *inspectLog) jsonDocument() ([]byte, error) {
	h := l.header()
	h.Samples, h.Reductions = l.samples, l.reduction
	if h.Samples == nil {
		h.Samples = []obj{}
	}
	return marshal(h)
}

// InspectSampleFile is the archive member of one sample epoch (Inspect's
// _sample_filename).
func InspectSampleFile(id string, epoch int) string {
	return "samples/" + id + "_epoch_" + strconv.Itoa(epoch) + ".json"
}

func (l *inspectLog) evalArchive() ([]byte, error) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	write := func(name string, v any) error {
		data, err := marshal(v)
		if err != nil {
			return err
		}
		// Deflated at Inspect's level (5), with the sizes and CRC in the
		// local header (no data descriptor), as Python's zipfile writes it:
		// readers that seek to a member by its local header find it whole.
		var z bytes.Buffer
		fw, err := flate.NewWriter(&z, 5)
		if err != nil {
			return err
		}
		if _, err := fw.Write(data); err != nil {
			return err
		}
		if err := fw.Close(); err != nil {
			return err
		}
		fh := &zip.FileHeader{Name: name, Method: zip.Deflate,
			CRC32: crc32.ChecksumIEEE(data), CompressedSize64: uint64(z.Len()), UncompressedSize64: uint64(len(data))}
		// CreateRaw writes only the MS-DOS fields (Modified is read by
		// CreateHeader alone, which would also add an extended-time field
		// Python's zipfile never writes).
		//lint:ignore SA1019 the raw header's only time fields
		fh.ModifiedDate, fh.ModifiedTime = dosTime(l.created.UTC())
		w, err := zw.CreateRaw(fh)
		if err != nil {
			return err
		}
		_, err = w.Write(z.Bytes())
		return err
	}
	// The order Inspect's EvalRecorder writes them in.
	if err := write("_journal/start.json", struct {
		Version int `json:"version"`
		Eval    obj `json:"eval"`
		Plan    obj `json:"plan"`
	}{InspectSchemaVersion, l.eval, l.plan}); err != nil {
		return nil, err
	}
	for _, s := range l.samples {
		if err := write(InspectSampleFile(s["id"].(string), s["epoch"].(int)), s); err != nil {
			return nil, err
		}
	}
	summaries := l.summaries
	if summaries == nil {
		summaries = []obj{}
	}
	if len(l.summaries) > 0 {
		if err := write("_journal/summaries/1.json", summaries); err != nil {
			return nil, err
		}
	}
	if err := write("summaries.json", summaries); err != nil {
		return nil, err
	}
	if err := write("reductions.json", l.reduction); err != nil {
		return nil, err
	}
	if err := write("header.json", l.header()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// dosTime is t as an MS-DOS date and time (two-second resolution), the
// only times Python's zipfile writes in a member's header.
func dosTime(t time.Time) (date, clock uint16) {
	date = uint16(t.Day() + int(t.Month())<<5 + (t.Year()-1980)<<9)
	clock = uint16(t.Second()/2 + t.Minute()<<5 + t.Hour()<<11)
	return date, clock
}
