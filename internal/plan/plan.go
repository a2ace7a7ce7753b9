// Package plan expands an eval set into attempts in discovery order (C8),
// with group lanes (D3), fingerprints (S2) and carry decisions. It is pure
// apart from reading the files that feed fingerprints; the runner only walks it.
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/history"
)

// Actions.
const (
	ActionRun   = "run"
	ActionCarry = "carry"
	// ActionSkip: not run because the sample's pass is carried and early
	// exit is on (S4).
	ActionSkip = "skip"
)

// Attempt is one planned attempt.
type Attempt struct {
	Seq    int // discovery index
	Task   int // task index in Plan.Tasks
	Sample *evalset.Sample
	Number int // 1-based attempt number
	// Lane is "task/group" for grouped samples (one attempt at a time per lane).
	Lane        string
	Fingerprint string
	// Parts are the fingerprint's component hashes, named for carry reasons.
	Parts map[string]string

	// Action is ActionRun or ActionCarry; Reason says why it runs
	// ("new", "sample changed", …) or what it carries.
	Action string
	Reason string
	// CarriedFrom names the run that produced a carried result (or the
	// early-exit skip an ActionSkip refers to); From is the record's row.
	CarriedFrom string
	From        history.Source
}

// ID is "task/sample#n".
func (a *Attempt) ID(p *Plan) string {
	return fmt.Sprintf("%s/%s#%d", p.Tasks[a.Task].Task.Name, a.Sample.ID, a.Number)
}

// Task is one task of the plan.
type Task struct {
	Index int
	Task  *evalset.Task
	// Attempts are the task's attempt seqs in dispatch order (group lanes
	// reordered by normalised sample id, a member's attempts consecutive).
	Order []int
}

// Plan is the whole plan.
type Plan struct {
	EvalSet  *evalset.EvalSet
	Tasks    []*Task
	Attempts []*Attempt
}

// Options select and shape the plan.
type Options struct {
	// TaskGlobs and SampleGlobs filter (path.Match patterns; any match keeps).
	TaskGlobs, SampleGlobs []string
}

// Build expands es into a plan.
func Build(es *evalset.EvalSet, opts Options) (*Plan, error) {
	for _, g := range append(append([]string{}, opts.TaskGlobs...), opts.SampleGlobs...) {
		if _, err := path.Match(g, ""); err != nil {
			return nil, fmt.Errorf("bad filter glob %q: %w", g, err)
		}
	}
	p := &Plan{EvalSet: es}
	model := hashJSON(map[string]any{"upstream": es.Model.Upstream, "name": es.Model.Name, "base_url": es.Model.BaseURL, "settings": es.Model.Settings})
	for _, t := range es.Tasks {
		if !matchAny(opts.TaskGlobs, t.Name) {
			continue
		}
		pt := &Task{Index: len(p.Tasks), Task: t}
		taskHash, err := taskFingerprint(es, t)
		if err != nil {
			return nil, err
		}
		imageHash, err := imageFingerprint(t)
		if err != nil {
			return nil, err
		}
		inputsHash, err := inputsFingerprint(es, t)
		if err != nil {
			return nil, err
		}
		lanes := map[string]string{} // normalised sample id -> lane
		for _, g := range t.Groups {
			for _, m := range g.Samples {
				lanes[evalset.NormalizeID(m)] = t.Name + "/" + g.Name
			}
		}
		attempts := t.Attempts
		if attempts < 1 {
			attempts = 1
		}
		for _, s := range t.Samples {
			if !matchAny(opts.SampleGlobs, s.ID) {
				continue
			}
			sampleHash, err := sampleFingerprint(es, t, s)
			if err != nil {
				return nil, err
			}
			img := imageHash
			if own, ok, err := sampleImageFingerprint(s); err != nil {
				return nil, err
			} else if ok {
				img = own
			}
			for n := 1; n <= attempts; n++ {
				parts := map[string]string{"task": taskHash, "sample": sampleHash, "image": img, "inputs": inputsHash, "model": model}
				a := &Attempt{
					Seq: len(p.Attempts), Task: pt.Index, Sample: s, Number: n,
					Lane:   lanes[evalset.NormalizeID(s.ID)],
					Parts:  parts,
					Action: ActionRun, Reason: "new",
				}
				a.Fingerprint = attemptFingerprint(parts, n, t.Name, s.ID)
				p.Attempts = append(p.Attempts, a)
				pt.Order = append(pt.Order, a.Seq)
			}
		}
		orderLanes(p, pt)
		p.Tasks = append(p.Tasks, pt)
	}
	return p, nil
}

// orderLanes sorts each lane's attempts by normalised sample id (then
// attempt number) in the positions the lane occupies, so members run in a
// stable order and a member's attempts stay consecutive (D3).
func orderLanes(p *Plan, t *Task) {
	byLane := map[string][]int{} // lane -> positions in t.Order
	for i, seq := range t.Order {
		if l := p.Attempts[seq].Lane; l != "" {
			byLane[l] = append(byLane[l], i)
		}
	}
	for _, pos := range byLane {
		seqs := make([]int, len(pos))
		for i, at := range pos {
			seqs[i] = t.Order[at]
		}
		sort.SliceStable(seqs, func(i, j int) bool {
			a, b := p.Attempts[seqs[i]], p.Attempts[seqs[j]]
			if c := evalset.CompareIDs(a.Sample.ID, b.Sample.ID); c != 0 {
				return c < 0
			}
			return a.Number < b.Number
		})
		for i, at := range pos {
			t.Order[at] = seqs[i]
		}
	}
}

func matchAny(globs []string, s string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok {
			return true
		}
	}
	return false
}

func hashJSON(v any) string {
	b, err := json.Marshal(v) // map keys are sorted: canonical enough
	if err != nil {
		panic(fmt.Sprintf("fingerprint: %v", err))
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16])
}

func hashFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("fingerprint %s: %w", p, err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16]), nil
}

func volatileSet(t *evalset.Task) map[string]bool {
	v := map[string]bool{}
	for _, k := range t.Volatile {
		v[k] = true
	}
	return v
}

func taskFingerprint(es *evalset.EvalSet, t *evalset.Task) (string, error) {
	vol := volatileSet(t)
	env := map[string]string{}
	for k, v := range t.Env {
		if !vol[k] {
			env[k] = v
		}
	}
	files := map[string]string{}
	for dst, src := range t.Files {
		h, err := hashSource(es, src)
		if err != nil {
			return "", err
		}
		files[dst] = h
	}
	sb := t.Sandbox
	parts := map[string]any{
		"provider": sb.Provider, "cpus": sb.CPUs, "memory": sb.Memory, "pids": sb.PIDs, "network": sb.Network,
		"cap_add": sb.CapAdd, "workdir": sb.Workdir, "setup": t.Setup, "agent": t.Agent, "scorer": t.Scorer,
		"timeout": t.Timeout, "env": env, "files": files, "host": t.Host, "sandbox_reuse": t.SandboxReuse,
	}
	// Limits, the split timeouts and the grace decide outcomes: only when
	// set, so fingerprints of tasks without them stay as they were.
	if !t.Limits.IsZero() {
		parts["limits"] = t.Limits
	}
	if t.AgentTimeout > 0 {
		parts["agent_timeout"] = t.AgentTimeout
	}
	if t.ScorerTimeout > 0 {
		parts["scorer_timeout"] = t.ScorerTimeout
	}
	if t.AgentGrace != nil {
		parts["agent_grace"] = *t.AgentGrace
	}
	if t.JudgeFailedAgents != nil && !*t.JudgeFailedAgents {
		// Only when set apart from the default: fingerprints stay as they were.
		parts["judge_failed_agents"] = false
	}
	if len(t.Scorer.Files) > 0 {
		sf := map[string]string{}
		for dst, src := range t.Scorer.Files {
			h, err := hashSource(es, src)
			if err != nil {
				return "", err
			}
			sf[dst] = h
		}
		parts["scorer_files"] = sf
	}
	return hashJSON(parts), nil
}

// hashSource hashes a files: source as it was read at load.
func hashSource(es *evalset.EvalSet, src string) (string, error) {
	b, _, err := es.FileData(src)
	if err != nil {
		return "", fmt.Errorf("fingerprint %s: %w", src, err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16]), nil
}

func attemptFingerprint(parts map[string]string, n int, task, sample string) string {
	return hashJSON(map[string]any{"parts": parts, "attempt": n, "task": task, "sample": sample})
}

func imageFingerprint(t *evalset.Task) (string, error) {
	if t.Sandbox.Build != "" {
		h, err := DirHash(t.Sandbox.Build)
		if err != nil {
			return "", fmt.Errorf("fingerprint build context of task %s: %w", t.Name, err)
		}
		return "build:" + h, nil
	}
	return "image:" + t.Sandbox.Image, nil
}

// SetImageIDs puts the image IDs that image references (tags) resolve to
// into the fingerprints of the tasks that use them, so a retagged image
// never carries results of the image the tag named before. ids maps an
// image reference to its ID (sha256:…), as the sandbox provider resolved it
// before the plan is carried; the plan itself never asks Docker.
func (p *Plan) SetImageIDs(ids map[string]string) {
	for _, a := range p.Attempts {
		t := p.Tasks[a.Task].Task
		ref := imageRef(t, a.Sample)
		id, ok := ids[ref]
		if ref == "" || !ok || id == "" {
			continue
		}
		a.Parts["image"] = "image:" + ref + "@" + id
		a.Fingerprint = attemptFingerprint(a.Parts, a.Number, t.Name, a.Sample.ID)
	}
}

func inputsFingerprint(es *evalset.EvalSet, t *evalset.Task) (string, error) {
	files, err := es.InputFiles(t)
	if err != nil {
		return "", err
	}
	m := map[string]string{}
	for _, f := range files {
		h, err := hashFile(filepath.Join(es.Dir, f))
		if err != nil {
			return "", err
		}
		m[f] = h
	}
	return hashJSON(m), nil
}

func sampleFingerprint(es *evalset.EvalSet, t *evalset.Task, s *evalset.Sample) (string, error) {
	vol := volatileSet(t)
	meta := map[string]any{}
	for k, v := range s.Metadata {
		if !vol[k] {
			meta[k] = v
		}
	}
	files := map[string]string{}
	for dst, src := range s.Files {
		if strings.HasPrefix(src, "data:") {
			files[dst] = hashJSON(src)
			continue
		}
		h, err := hashSource(es, src)
		if err != nil {
			return "", err
		}
		files[dst] = h
	}
	parts := map[string]any{"id": s.ID, "input": s.Input, "target": s.Target, "metadata": meta, "files": files, "setup": s.Setup}
	if env := sampleEnvParts(s); env != nil {
		parts["environment"] = env
	}
	return hashJSON(parts), nil
}

// DirHash hashes a directory tree's paths, modes and contents.
func DirHash(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", filepath.ToSlash(rel), info.Mode())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%d\x00", len(b))
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// BySeq is the attempt with discovery index seq, or nil (a shard's plan
// holds only its own). Attempts are kept in Seq order.
func (p *Plan) BySeq(seq int) *Attempt {
	i := sort.Search(len(p.Attempts), func(i int) bool { return p.Attempts[i].Seq >= seq })
	if i < len(p.Attempts) && p.Attempts[i].Seq == seq {
		return p.Attempts[i]
	}
	return nil
}

// Keep keeps the attempts keep says (a shard's), and each task's Order
// with them. Seq stays each attempt's index in the whole eval set's
// discovery order, so merged shard records sort back into one run's (C8).
func (p *Plan) Keep(keep func(seq int) bool) {
	var kept []*Attempt
	for _, a := range p.Attempts {
		if keep(a.Seq) {
			kept = append(kept, a)
		}
	}
	p.Attempts = kept
	for _, t := range p.Tasks {
		var order []int
		for _, seq := range t.Order {
			if keep(seq) {
				order = append(order, seq)
			}
		}
		t.Order = order
	}
}
