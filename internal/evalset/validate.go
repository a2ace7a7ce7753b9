package evalset

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/score"
)

// Defaults filled in by Load.
const (
	DefaultAttempts = 1
	DefaultTimeout  = 10 * time.Minute
	DefaultMemory   = Bytes(512 << 20)
	DefaultDisk     = Bytes(1 << 30)
	DefaultCPUs     = 1.0
	DefaultPIDs     = 256
	DefaultNetwork  = "gateway"
	DefaultRetries  = 1
	DefaultUpstream = "mock"
	DefaultMatch    = score.DefaultMatch
	// ReservedEnvPrefix starts the names of the variables Steward sets
	// (STEWARD_SAMPLE_ID, STEWARD_INPUT, …); task env may not use it.
	ReservedEnvPrefix = "STEWARD_"
	// MaxRetries bounds retries; MinMemory is the smallest sandbox memory.
	MaxRetries = 10
	MinMemory  = Bytes(6 << 20)
	MinDisk    = Bytes(1 << 20)
)

// Allowed values of the enumerated settings.
var (
	Networks = []string{"gateway", "bridge", "isolated"}
	Matches  = score.MatchNames()
	// The upstreams (model.upstream), the api_key_env of each when none is
	// given, and the variables Steward sets in every sandbox (a task may not
	// set them, nor any other name starting with ReservedEnvPrefix) are the
	// gateway's registered wire formats': gateway.Upstreams,
	// gateway.DefaultKeyEnv and gateway.EnvNames.
)

var (
	taskNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	capRE      = regexp.MustCompile(`^(CAP_)?[A-Z][A-Z_]*$`)
	roles      = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true}
)

type validator struct {
	d       *decoder
	es      *EvalSet
	display string
	realDir string
	// samplesOK[i] is false when task i's samples could not be read.
	samplesOK map[int]bool
}

// errf reports a problem with the value at path, at the position of the
// nearest enclosing value that was written.
func (v *validator) errf(path, format string, args ...any) {
	if v.d.bad[path] {
		return
	}
	p, ok := v.d.at[path]
	for q := path; !ok && q != ""; {
		q = parent(q)
		p, ok = v.d.at[q]
	}
	if p.file == "" {
		p.file = v.display
	}
	shown := path
	if w, ok := v.d.written[path]; ok {
		shown = w
	}
	v.d.errs.add(Error{File: p.file, Line: p.line, Column: p.col, ShowColumn: p.cols, Field: shown, Msg: fmt.Sprintf(format, args...)})
}

func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func (v *validator) has(path string) bool { _, ok := v.d.at[path]; return ok }

func (v *validator) line(path string) int { return v.d.at[path].line }

func (v *validator) where(path string) string {
	p := v.d.at[path]
	return fmt.Sprintf("%s:%d", p.file, p.line)
}

func oneOf(s string, allowed []string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	return false
}

func badEnum(what, got string, allowed []string) string {
	msg := fmt.Sprintf("unknown %s %q: use one of %s", what, got, strings.Join(allowed, ", "))
	if s := suggest(got, allowed); s != "" {
		msg = fmt.Sprintf("unknown %s %q (did you mean %q?)", what, got, s)
	}
	return msg
}

// loadSampleFiles reads every task's samples_file.
func (v *validator) loadSampleFiles() {
	v.samplesOK = map[int]bool{}
	var err error
	if v.realDir, err = filepath.EvalSymlinks(v.es.Dir); err != nil {
		v.realDir = v.es.Dir
	}
	for i, t := range v.es.Tasks {
		tp := index("tasks", i)
		v.samplesOK[i] = true
		if t != nil && t.TasksFrom != nil {
			v.loadTasksFrom(i, t)
			continue
		}
		if t == nil || t.SamplesFile == "" {
			continue
		}
		fp := tp + ".samples_file"
		if v.has(tp + ".samples") {
			v.errf(fp, "set samples or samples_file, not both")
			v.samplesOK[i] = false
			continue
		}
		rel := t.SamplesFile
		abs := rel
		if !filepath.IsAbs(rel) {
			abs = filepath.Join(v.es.Dir, rel)
		}
		t.SamplesFile = filepath.Clean(abs)
		st, err := os.Stat(abs)
		if err != nil {
			v.errf(fp, "%s: %s", rel, pathErrMsg(err))
			v.samplesOK[i] = false
			continue
		}
		if !st.Mode().IsRegular() {
			v.errf(fp, "%s is not a regular file", rel)
			v.samplesOK[i] = false
			continue
		}
		display := rel
		if !filepath.IsAbs(rel) {
			display = filepath.Join(filepath.Dir(v.display), rel)
		}
		before := v.d.errs.Len()
		data, ok := readLimited(abs, display, v.d.errs)
		if !ok {
			v.samplesOK[i] = false
			continue
		}
		t.Samples = v.readSamples(i, t, rel, display, data)
		if v.d.errs.Len() > before {
			v.samplesOK[i] = false
		}
		if len(t.Samples) == 0 && v.samplesOK[i] {
			v.errf(fp, "%s holds no samples", rel)
			v.samplesOK[i] = false
		}
	}
}

func (v *validator) validate() {
	es := v.es
	if es.Name == "" {
		es.Name = filepath.Base(es.Dir)
	}
	v.model()
	if es.Decide != nil {
		v.decide(es.Decide)
	}
	for i, name := range es.SecretEnv {
		if !envNameRE.MatchString(name) {
			v.errf(fmt.Sprintf("secret_env[%d]", i), "%q is not an environment variable name (name the variable holding the secret, not the secret)", name)
		}
	}
	if len(es.Tasks) == 0 {
		if v.has("tasks") {
			v.errf("tasks", "the tasks list is empty: add at least one task")
		} else {
			v.errf("tasks", "missing: the eval set needs a tasks list")
		}
		return
	}
	names := map[string]int{}
	for i, t := range es.Tasks {
		if t == nil {
			continue
		}
		tp := index("tasks", i)
		if t.Name != "" {
			if first, ok := names[t.Name]; ok {
				v.errf(tp+".name", "duplicate task name %q (first on line %d)", t.Name, v.line(index("tasks", first)+".name"))
			} else {
				names[t.Name] = i
			}
		}
		v.task(i, t)
	}
}

func (v *validator) model() {
	m := &v.es.Model
	if m.Upstream == "" {
		m.Upstream = DefaultUpstream
	} else if ups := gateway.Upstreams(); !oneOf(m.Upstream, ups) && m.Sources["upstream"] == "" {
		v.errf("model.upstream", "%s", badEnum("upstream", m.Upstream, ups))
	}
	if m.BaseURL != "" && m.Sources["base_url"] == "" {
		if msg := checkBaseURL(m.BaseURL); msg != "" {
			v.errf("model.base_url", "%s", msg)
		}
	}
	if m.APIKeyEnv == "" {
		m.APIKeyEnv = gateway.DefaultKeyEnv(m.Upstream)
	} else if !envNameRE.MatchString(m.APIKeyEnv) {
		v.errf("model.api_key_env", "%q is not an environment variable name (it names the variable holding the key, not the key)", m.APIKeyEnv)
	}
	if m.MaxConnections < 0 {
		v.errf("model.max_connections", "must be 0 (adaptive) or more, got %d", m.MaxConnections)
	}
	if m.MaxConnectionsCeiling < 0 {
		v.errf("model.max_connections_ceiling", "must be 0 (the gateway's own, 100 000) or more, got %d", m.MaxConnectionsCeiling)
	}
	if m.BudgetMaxTokens < 0 || m.BudgetMaxTokens > MaxBudgetMaxTokens {
		v.errf("model.budget_max_tokens", "must be between 0 (the default, %d) and %d, got %d", DefaultBudgetMaxTokens, MaxBudgetMaxTokens, m.BudgetMaxTokens)
	}
	if m.Prices.InputPerMTok < 0 {
		v.errf("model.prices.input_per_mtok", "must not be negative")
	}
	if m.Prices.OutputPerMTok < 0 {
		v.errf("model.prices.output_per_mtok", "must not be negative")
	}
}

func (v *validator) task(i int, t *Task) {
	tp := index("tasks", i)
	switch {
	case t.Name == "":
		v.errf(tp+".name", "missing: every task needs a name")
	case !taskNameRE.MatchString(t.Name):
		v.errf(tp+".name", "%q: use letters, digits, '.', '_' and '-' (at most 64, starting with a letter or digit)", t.Name)
	}
	if strings.TrimSpace(t.Agent) == "" {
		v.errf(tp+".agent", "missing: the shell command that runs one attempt")
	}
	if t.SamplesFile == "" && len(t.Samples) == 0 && t.TasksFrom == nil {
		if v.has(tp + ".samples") {
			v.errf(tp+".samples", "the samples list is empty")
		} else {
			v.errf(tp, "no samples: give samples (inline) or samples_file (JSONL)")
		}
		v.samplesOK[i] = false
	}

	// Counts and durations.
	if v.has(tp + ".attempts") {
		if t.Attempts < 1 {
			v.errf(tp+".attempts", "must be at least 1, got %d", t.Attempts)
		}
	} else {
		t.Attempts = DefaultAttempts
	}
	t.Reducer = t.Reducer.Norm()
	if err := t.Reducer.Check(t.Attempts); err != nil && t.Attempts >= 1 {
		v.errf(tp+".reducer", "%v", err)
	}
	if v.has(tp + ".timeout") {
		if t.Timeout <= 0 {
			v.errf(tp+".timeout", "must be longer than 0")
		}
	} else {
		t.Timeout = Duration(DefaultTimeout)
	}
	v.limits(tp, t)
	if t.MaxSamples < 0 {
		v.errf(tp+".max_samples", "must be 0 (unset: ramp) or more, got %d", t.MaxSamples)
	}
	if t.Retries == nil {
		r := DefaultRetries
		t.Retries = &r
	} else if *t.Retries < 0 || *t.Retries > MaxRetries {
		v.errf(tp+".retries", "must be between 0 and %d, got %d", MaxRetries, *t.Retries)
	}

	if t.TasksFrom != nil {
		// The provider's checks of the sandbox as a whole (an image it
		// needs) apply to each sample's own: harborTask runs them.
		v.d.bad[tp+".sandbox"] = true
	}
	v.sandbox(tp+".sandbox", &t.Sandbox)
	v.files(tp+".files", t.Files)
	v.env(tp, t)
	for j, s := range t.Volatile {
		if strings.TrimSpace(s) == "" {
			v.errf(index(tp+".volatile", j), "empty name")
		}
	}
	for j, g := range t.Inputs {
		ip := index(tp+".inputs", j)
		if err := checkGlob(g); err != nil {
			v.errf(ip, "%v", err)
			continue
		}
		if files, err := expandGlob(v.es.Dir, g); err != nil {
			v.errf(ip, "%v", err)
		} else if len(files) == 0 {
			v.errf(ip, "%q matches no files", g)
		}
	}
	if len(t.Artifacts) > MaxArtifactGlobs {
		v.errf(tp+".artifacts", "%d globs is more than the %d allowed", len(t.Artifacts), MaxArtifactGlobs)
	}
	for j, g := range t.Artifacts {
		if err := CheckArtifactGlob(g); err != nil {
			v.errf(index(tp+".artifacts", j), "%v", err)
		}
	}
	// shared_state: {} is a mistake; key: "" (as written back by a YAML
	// encoder) means no lease.
	if v.has(tp+".shared_state") && !v.has(tp+".shared_state.key") {
		v.errf(tp+".shared_state.key", "missing: name the lease key")
	}
	t.SharedState.Key = strings.TrimSpace(t.SharedState.Key)

	if t.Fields != nil && t.SamplesFile == "" {
		v.errf(tp+".fields", "applies to samples_file only: inline samples use the sample keys")
	}
	if t.SamplesFormat != "" && !oneOf(t.SamplesFormat, SampleFormats) {
		v.errf(tp+".samples_format", "%s", badEnum("samples_format", t.SamplesFormat, SampleFormats))
	}
	ids := v.samples(i, t)
	v.choices(i, t)
	if t.TasksFrom != nil {
		v.harborTask(i, t)
	} else {
		v.scorer(i, t)
	}
	v.groups(i, t, ids)
	v.order(i, t)
}

func (v *validator) sandbox(sp string, s *Sandbox) {
	// The providers and what each refuses come from the registry
	// (sandbox.Register): no provider is spelled here.
	if s.Image != "" && s.Build != "" {
		v.errf(sp+".build", "set image or build, not both")
	}
	if s.Provider != "" {
		if d, ok := sandbox.Lookup(s.Provider); !ok {
			v.errf(sp+".provider", "%s", badEnum("provider", s.Provider, sandbox.Names()))
		} else if d.Check != nil {
			for _, p := range d.Check(sandbox.Settings{Image: s.Image, Build: s.Build, Network: s.Network}) {
				field := sp
				if p.Field != "" {
					field = sp + "." + p.Field
				}
				v.errf(field, "%s", p.Message)
			}
		}
	}
	if s.Build != "" {
		rel := s.Build
		abs := rel
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(v.es.Dir, rel)
		}
		s.Build = filepath.Clean(abs)
		if st, err := os.Stat(abs); err != nil {
			v.errf(sp+".build", "%s: %s", rel, pathErrMsg(err))
		} else if !st.IsDir() {
			v.errf(sp+".build", "%s is not a directory (build names a directory holding a Dockerfile)", rel)
		} else if st, err := os.Stat(filepath.Join(abs, "Dockerfile")); err != nil || !st.Mode().IsRegular() {
			v.errf(sp+".build", "%s has no Dockerfile", rel)
		}
	}
	if v.has(sp + ".cpus") {
		if s.CPUs <= 0 {
			v.errf(sp+".cpus", "must be more than 0, got %g", s.CPUs)
		}
	} else {
		s.CPUs = DefaultCPUs
	}
	if v.has(sp + ".memory") {
		if s.Memory < MinMemory {
			v.errf(sp+".memory", "%s is below the minimum %s", s.Memory, MinMemory)
		}
	} else {
		s.Memory = DefaultMemory
	}
	if v.has(sp + ".disk") {
		if s.Disk < MinDisk {
			v.errf(sp+".disk", "%s is below the minimum %s", s.Disk, MinDisk)
		}
	} else {
		s.Disk = DefaultDisk
	}
	switch s.BuildNetwork {
	case "", "none", "default":
		if s.BuildNetwork != "" && s.Build == "" {
			v.errf(sp+".build_network", "applies to build: only")
		}
	default:
		v.errf(sp+".build_network", "%s", badEnum("build_network", s.BuildNetwork, []string{"none", "default"}))
	}
	if v.has(sp + ".pids") {
		if s.PIDs < 1 {
			v.errf(sp+".pids", "must be at least 1, got %d", s.PIDs)
		}
	} else {
		s.PIDs = DefaultPIDs
	}
	if s.Network == "" {
		s.Network = DefaultNetwork
	} else if !oneOf(s.Network, Networks) {
		v.errf(sp+".network", "%s", badEnum("network", s.Network, Networks))
	}
	for j, c := range s.CapAdd {
		if !capRE.MatchString(strings.ToUpper(c)) {
			v.errf(index(sp+".cap_add", j), "%q is not a capability name (e.g. NET_ADMIN)", c)
		}
	}
	if s.Workdir != "" && !strings.HasPrefix(s.Workdir, "/") {
		v.errf(sp+".workdir", "%q must be an absolute path inside the sandbox", s.Workdir)
	}
}

func (v *validator) env(tp string, t *Task) {
	for k := range t.Env {
		kp := tp + ".env." + k
		switch {
		case !envNameRE.MatchString(k):
			v.errf(kp, "%q is not an environment variable name", k)
		case oneOf(k, gateway.EnvNames()):
			v.errf(kp, "%s is set by Steward in every sandbox and cannot be overridden", k)
		case strings.HasPrefix(k, ReservedEnvPrefix):
			v.errf(kp, "names starting with %s are reserved for the variables Steward sets", ReservedEnvPrefix)
		}
	}
}

// files checks a files mapping (destination in the workdir -> source) and
// makes path sources absolute. Sources must stay inside the eval set
// directory, also through symlinks.
func (v *validator) files(fp string, files map[string]string) {
	for dest, src := range files {
		kp := fp + "." + dest
		if msg := checkDest(dest); msg != "" {
			v.errf(kp, "%s", msg)
		}
		if strings.HasPrefix(src, "data:") {
			if _, err := parseDataURL(src); err != nil {
				v.errf(kp, "%v", err)
			}
			continue
		}
		abs, msg := v.inside(src)
		if msg != "" {
			v.errf(kp, "%s", msg)
			continue
		}
		if err := v.snapshot(abs); err != nil {
			v.errf(kp, "%s: %v", src, err)
			continue
		}
		files[dest] = abs
	}
}

func checkDest(dest string) string {
	d := filepath.ToSlash(dest)
	switch {
	case strings.TrimSpace(d) == "":
		return "empty destination"
	case strings.HasPrefix(d, "/") || filepath.IsAbs(dest):
		return fmt.Sprintf("destination %q must be relative to the workdir", dest)
	}
	for _, seg := range strings.Split(d, "/") {
		if seg == ".." {
			return fmt.Sprintf("destination %q leaves the workdir", dest)
		}
	}
	return ""
}

// inside resolves a source path against the eval set directory and refuses
// anything that is not a regular file inside it.
func (v *validator) inside(src string) (string, string) {
	if strings.TrimSpace(src) == "" {
		return "", "empty source path"
	}
	if filepath.IsAbs(src) || strings.HasPrefix(filepath.ToSlash(src), "/") {
		return "", fmt.Sprintf("%q: absolute paths are not allowed; give a path relative to the eval set directory", src)
	}
	clean := filepath.Clean(src)
	if clean == ".." || strings.HasPrefix(filepath.ToSlash(clean), "../") {
		return "", fmt.Sprintf("%q escapes the eval set directory", src)
	}
	abs := filepath.Join(v.es.Dir, clean)
	if _, err := os.Lstat(abs); err != nil {
		return "", fmt.Sprintf("%s: %s", src, pathErrMsg(err))
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Sprintf("%s: %s", src, pathErrMsg(err))
	}
	if rel, err := filepath.Rel(v.realDir, real); err != nil || rel == ".." || strings.HasPrefix(filepath.ToSlash(rel), "../") {
		return "", fmt.Sprintf("%q is a symlink that leads out of the eval set directory", src)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Sprintf("%s: %s", src, pathErrMsg(err))
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Sprintf("%s is not a regular file", src)
	}
	return abs, ""
}

// samples assigns ids, checks each sample and returns normalised id -> index.
func (v *validator) samples(i int, t *Task) map[string]int {
	tp := index("tasks", i)
	ids := map[string]int{}
	for j, s := range t.Samples {
		if s == nil {
			continue
		}
		sp := index(tp+".samples", j)
		if v.has(sp + ".id") {
			if msg := checkID(s.ID); msg != "" {
				v.errf(sp+".id", "%s", msg)
				continue
			}
		} else {
			s.ID = strconv.Itoa(j + 1)
		}
		n := NormalizeID(s.ID)
		if first, ok := ids[n]; ok {
			note := ""
			if !v.has(sp+".id") || !v.has(index(tp+".samples", first)+".id") {
				note = " (a sample without an id takes its position as id)"
			}
			v.errf(sp+".id", "duplicate sample id %q: also the id of the sample at %s%s", s.ID, v.where(index(tp+".samples", first)), note)
		} else {
			ids[n] = j
		}
		v.input(sp, s)
		switch tg := s.Target.(type) {
		case nil, string:
		case []string:
			if len(tg) == 0 {
				v.errf(sp+".target", "the target list is empty")
			}
		default:
			v.errf(sp+".target", "expected a string or a list of strings")
		}
		v.files(sp+".files", s.Files)
	}
	return ids
}

func (v *validator) input(sp string, s *Sample) {
	switch in := s.Input.(type) {
	case nil:
		v.errf(sp+".input", "missing: every sample needs an input")
	case string:
	case []any:
		if len(in) == 0 {
			v.errf(sp+".input", "the message list is empty")
		}
		for k, m := range in {
			mp := index(sp+".input", k)
			msg, ok := m.(map[string]any)
			if !ok {
				v.errf(mp, "expected a chat message {role, content}")
				continue
			}
			role, _ := msg["role"].(string)
			if !roles[role] {
				v.errf(mp+".role", "expected role system, user, assistant or tool, got %v", msg["role"])
			}
			switch msg["content"].(type) {
			case string, []any:
			default:
				v.errf(mp+".content", "expected a string or a list of content parts")
			}
		}
	default:
		v.errf(sp+".input", "expected a string or a list of chat messages ({role, content})")
	}
}

func (v *validator) scorer(i int, t *Task) {
	tp := index("tasks", i)
	sc := &t.Scorer
	cmd := strings.TrimSpace(sc.Command) != ""
	if cmd && sc.Match != "" {
		v.errf(tp+".scorer", "set command or match, not both")
		return
	}
	if sc.Match != "" && !sc.Match.Valid() {
		v.errf(tp+".scorer.match", "%s", badEnum("match", string(sc.Match), Matches))
		return
	}
	if !cmd && !t.HarborSamples() && t.JudgeFailedAgents != nil && *t.JudgeFailedAgents {
		v.errf(tp+".judge_failed_agents", "applies to scorer.command only: a match scorer has no answer to judge when the agent exits non-zero")
	}
	if sc.ModelGraded != nil {
		v.modelGraded(i, t)
		return
	}
	if cmd && sc.IgnoreCase {
		v.errf(tp+".scorer.ignore_case", "applies to scorer.match only; a scorer command decides for itself")
	}
	if len(sc.Files) > 0 && !cmd {
		v.errf(tp+".scorer.files", "applies to scorer.command only")
	}
	v.files(tp+".scorer.files", sc.Files)
	if cmd || len(t.Samples) == 0 {
		return
	}
	if sc.Match == "" {
		if !v.samplesOK[i] {
			return
		}
		any := false
		for _, s := range t.Samples {
			if s != nil && (s.HasTarget() || len(s.Choices) > 0) {
				any = true
				break
			}
		}
		if !any {
			v.errf(tp, "no scorer: set scorer.command, or give the samples a target (scorer.match then defaults to exact)")
			return
		}
		sc.Match = DefaultMatch
		for _, s := range t.Samples {
			if s != nil && len(s.Choices) > 0 {
				sc.Match = score.Choice // multiple-choice samples are judged by their letters
				break
			}
		}
	}
	for j, s := range t.Samples {
		if s == nil {
			continue
		}
		sp := index(tp+".samples", j)
		if v.d.bad[sp+".target"] {
			continue // already reported
		}
		if !s.HasTarget() {
			v.errf(sp, "no target, but the task's scorer matches targets (scorer.match %s)", sc.Match)
			continue
		}
		for _, tg := range s.Targets() {
			if err := score.CheckTarget(sc.Match, sc.IgnoreCase, tg); err != nil {
				v.errf(sp+".target", "%v", err)
			}
		}
	}
}

func (v *validator) groups(i int, t *Task, ids map[string]int) {
	tp := index("tasks", i)
	names := map[string]int{}
	member := map[string]int{} // normalised id -> group index
	for g, gr := range t.Groups {
		if gr == nil {
			continue
		}
		gp := index(tp+".groups", g)
		if strings.TrimSpace(gr.Name) == "" {
			v.errf(gp+".name", "missing: every group needs a name")
		} else if first, ok := names[gr.Name]; ok {
			v.errf(gp+".name", "duplicate group name %q (first on line %d)", gr.Name, v.line(index(tp+".groups", first)+".name"))
		} else {
			names[gr.Name] = g
		}
		if len(gr.Samples) == 0 {
			v.errf(gp+".samples", "missing: list the sample ids in the group")
		}
		for k, id := range gr.Samples {
			mp := index(gp+".samples", k)
			n := NormalizeID(id)
			if v.samplesOK[i] {
				if _, ok := ids[n]; !ok {
					msg := fmt.Sprintf("%q is not the id of a sample of this task", id)
					var all []string
					for _, s := range t.Samples {
						if s != nil {
							all = append(all, s.ID)
						}
					}
					if s := suggest(id, all); s != "" {
						msg += fmt.Sprintf(" (did you mean %q?)", s)
					}
					v.errf(mp, "%s", msg)
					continue
				}
			}
			if first, ok := member[n]; ok {
				other := t.Groups[first]
				if first == g {
					v.errf(mp, "sample %q is listed twice in this group", id)
				} else {
					v.errf(mp, "sample %q is already in group %q (line %d); a sample belongs to one group at most", id, other.Name, v.line(index(tp+".groups", first)))
				}
				continue
			}
			member[n] = g
		}
	}
}

// decide checks decide: and fills its defaults (3 rounds of 2 attempts, 200
// extra attempts) once any of it is written.
func (v *validator) decide(d *Decide) {
	for _, c := range []struct {
		key      string
		n        *int
		def, top int
	}{{"rounds", &d.Rounds, 3, 10}, {"per_round", &d.PerRound, 2, 1000}, {"attempts", &d.Attempts, 200, 1_000_000}} {
		switch {
		case !v.has("decide." + c.key):
			*c.n = c.def
		case *c.n < 1 || *c.n > c.top:
			v.errf("decide."+c.key, "must be from 1 to %d, got %d", c.top, *c.n)
		}
	}
	if d.USD < 0 {
		v.errf("decide.usd", "must be above 0 (or left out: no cap), got %v", d.USD)
	}
	if v.has("decide.time") && d.Time <= 0 || !v.has("decide.time") && d.Time < 0 {
		v.errf("decide.time", "must be longer than 0")
	}
}
