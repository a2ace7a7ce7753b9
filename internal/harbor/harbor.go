// Package harbor reads Harbor-format tasks (instruction.md, task.toml,
// environment/, tests/, solution/; docs/harbor.md) into plain values that
// internal/evalset turns into samples. Everything in a task directory is
// untrusted: files are read without following symlinks, bounded in size
// and count, and every problem is located (file, line, key).
//
// The TOML is read with github.com/pelletier/go-toml/v2: its decoder
// reports the line and column of syntax and type errors and, in strict
// mode, of every key the target does not know; its unstable parser gives
// the line of every key, so a refusal names where the key is written.
package harbor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/steward-evals/steward/internal/egress"
	"github.com/steward-evals/steward/internal/sandbox"
)

// Limits on what a task directory may hold.
const (
	MaxTasks           = 10000
	MaxTOMLSize        = 1 << 20
	MaxInstructionSize = 1 << 20
	// MaxFileSize bounds one file of tests/ or solution/; MaxDirSize all of
	// one directory; MaxDirFiles how many files it holds.
	MaxFileSize = 16 << 20
	MaxDirSize  = 64 << 20
	MaxDirFiles = 1000
	// MaxDatasetSize bounds the tests/ and solution/ of all of a dataset's
	// tasks together (they are held in memory, fingerprinted and copied).
	MaxDatasetSize = 1 << 30
)

// maxDatasetSize is MaxDatasetSize (tests lower it).
var maxDatasetSize int64 = MaxDatasetSize

// Defaults of task.toml (Harbor's).
const (
	DefaultTimeout      = 600 * time.Second
	DefaultBuildTimeout = 600 * time.Second
	DefaultCPUs         = 1
	DefaultMemoryMB     = 2048
	DefaultStorageMB    = 10240
)

// Network modes a Steward sandbox takes for Harbor's.
const (
	// NetworkPublic is Harbor's public: the outside world ("bridge").
	NetworkPublic = "bridge"
	// NetworkNone is Harbor's no-network: only the model gateway.
	NetworkNone = "gateway"
	// NetworkAllowlist is Harbor's allowlist: the model gateway, and
	// AllowedHosts through an egress proxy (docker only; docs/harbor.md).
	NetworkAllowlist = "allowlist"
)

// Verifier environment modes.
const (
	ModeShared   = "shared"
	ModeSeparate = "separate"
)

// Problem is one thing wrong with (or not honoured in) a task. File is as
// given to Load joined with the task's relative path.
type Problem struct {
	File    string
	Line    int
	Key     string
	Msg     string
	Warning bool
}

func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteString(":" + strconv.Itoa(p.Line))
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	if p.Warning {
		b.WriteString("warning: ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// File is one file read from tests/ or solution/.
type File struct {
	Data []byte
	Mode fs.FileMode
}

// Ref is one ${NAME} read from the host, where it was written.
type Ref struct {
	Name string
	File string
	Line int
	Key  string
}

// Task is one Harbor task, mapped onto Steward's terms.
type Task struct {
	// ID is the task directory's name: the sample's id.
	ID string
	// Dir is the task directory (absolute).
	Dir string
	// Instruction is instruction.md: the sample's input.
	Instruction string
	// Metadata is [metadata] plus the task's identity under "harbor".
	Metadata map[string]any

	// Image is [environment] docker_image; Build the absolute path of
	// environment/ when it holds a Dockerfile (and Image is empty).
	Image        string
	Build        string
	BuildTimeout time.Duration
	// Compose is the compose file (as displayed) of a compose environment
	// (environment/docker-compose.yaml): main's image or build is Image or
	// Build (Dockerfile relative to it, "" = Dockerfile), main's
	// environment and working_dir are under Env and Workdir (task.toml's
	// win), and Services are the other services.
	Compose      string
	Dockerfile   string
	Services     []sandbox.Service
	CPUs         float64
	MemoryBytes  int64
	StorageBytes int64
	// Network is NetworkPublic, NetworkNone or NetworkAllowlist;
	// AllowedHosts are an allowlist's hosts, normalized (egress.ParseHost).
	Network      string
	AllowedHosts []string
	Workdir      string
	Env          map[string]string

	AgentTimeout    time.Duration
	VerifierTimeout time.Duration
	// VerifierMode is ModeShared (Harbor's default) or ModeSeparate.
	VerifierMode string
	VerifierEnv  map[string]string
	// Tests are tests/'s files by path relative to tests/ (placed at
	// /tests); Solution solution/'s (placed at /solution), nil without one.
	Tests       map[string]File
	Solution    map[string]File
	SolutionEnv map[string]string
}

// Options are what Load needs from outside.
type Options struct {
	// Expand expands ${NAME} and ${NAME:-default} in a value from the
	// host, returning the names read; nil leaves values as written.
	Expand func(string) (string, []string, error)
}

// Result is a loaded dataset.
type Result struct {
	Tasks    []*Task
	Problems []Problem
	Refs     []Ref
}

// Errs are the problems that are not warnings.
func (r *Result) Errs() []Problem {
	var out []Problem
	for _, p := range r.Problems {
		if !p.Warning {
			out = append(out, p)
		}
	}
	return out
}

// Load reads the dataset at dir: a directory of task directories, or one
// task directory (it holds task.toml). display is how dir is named in
// problems. Task directories are read in name order.
func Load(dir, display string, opts Options) *Result {
	r := &Result{}
	st, err := os.Lstat(dir)
	if err != nil {
		r.add(Problem{File: display, Msg: "cannot read the Harbor dataset: " + errMsg(err)})
		return r
	}
	if !st.IsDir() {
		r.add(Problem{File: display, Msg: "is not a directory (a Harbor dataset is a directory of task directories)"})
		return r
	}
	if _, err := os.Lstat(filepath.Join(dir, "task.toml")); err == nil {
		if t := loadTask(r, dir, display, filepath.Base(dir), opts); t != nil {
			r.Tasks = append(r.Tasks, t)
		}
		return r
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		r.add(Problem{File: display, Msg: "cannot read the Harbor dataset: " + errMsg(err)})
		return r
	}
	var total int64
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(display, name)
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			r.add(Problem{File: p, Msg: "is a symbolic link: a dataset's tasks must be directories in it"})
			continue
		case !e.IsDir():
			if name == "metric.py" {
				r.add(Problem{File: p, Warning: true, Msg: "a dataset metric is not run: Steward scores each sample by its reward and reduces attempts with the task's reducer"})
			}
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, name, "task.toml")); err != nil {
			r.add(Problem{File: p, Warning: true, Msg: "holds no task.toml: not a Harbor task, skipped"})
			continue
		}
		if len(r.Tasks) >= MaxTasks {
			r.add(Problem{File: display, Msg: fmt.Sprintf("more than %d tasks", MaxTasks)})
			break
		}
		if t := loadTask(r, filepath.Join(dir, name), p, name, opts); t != nil {
			r.Tasks = append(r.Tasks, t)
			total += treeSize(t.Tests) + treeSize(t.Solution)
			if total > maxDatasetSize {
				r.add(Problem{File: display, Msg: fmt.Sprintf("the tasks' tests/ and solution/ hold more than %d bytes in all", maxDatasetSize)})
				break
			}
		}
	}
	if len(r.Tasks) == 0 && len(r.Errs()) == 0 {
		r.add(Problem{File: display, Msg: "holds no Harbor tasks (directories with a task.toml)"})
	}
	return r
}

func (r *Result) add(p Problem) { r.Problems = append(r.Problems, p) }

func treeSize(m map[string]File) int64 {
	var n int64
	for _, f := range m {
		n += int64(len(f.Data))
	}
	return n
}

func errMsg(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// readRegular reads a regular file (never through a symlink) of at most max bytes.
func readRegular(path string, max int64) ([]byte, fs.FileMode, string) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, 0, "cannot read: " + errMsg(err)
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return nil, 0, "is a symbolic link: Steward reads no links in a task directory"
	}
	if !st.Mode().IsRegular() {
		return nil, 0, "is not a regular file"
	}
	if st.Size() > max {
		return nil, 0, fmt.Sprintf("is %d bytes, more than the %d allowed", st.Size(), max)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return nil, 0, "cannot read: " + errMsg(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, 0, "cannot read: " + errMsg(err)
	}
	if int64(len(data)) > max {
		return nil, 0, fmt.Sprintf("is more than the %d bytes allowed", max)
	}
	return data, st.Mode().Perm(), ""
}

// loadTask reads one task directory; nil when it has errors.
func loadTask(r *Result, dir, display, id string, opts Options) *Task {
	before := len(r.Errs())
	t := &Task{ID: id, Dir: dir}
	if !validID(id) {
		r.add(Problem{File: display, Msg: fmt.Sprintf("%q is not a usable sample id: name task directories with letters, digits, '.', '_' and '-'", id)})
	}
	ins := filepath.Join(display, "instruction.md")
	if data, _, msg := readRegular(filepath.Join(dir, "instruction.md"), MaxInstructionSize); msg != "" {
		r.add(Problem{File: ins, Msg: msg})
	} else if !utf8.Valid(data) {
		r.add(Problem{File: ins, Msg: "is not valid UTF-8"})
	} else if strings.TrimSpace(string(data)) == "" {
		r.add(Problem{File: ins, Msg: "is empty: it is the agent's instruction"})
	} else {
		t.Instruction = string(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
	}
	tomlDisplay := filepath.Join(display, "task.toml")
	data, _, msg := readRegular(filepath.Join(dir, "task.toml"), MaxTOMLSize)
	if msg != "" {
		r.add(Problem{File: tomlDisplay, Msg: msg})
		return nil
	}
	cfg, lines, ok := decodeTOML(r, tomlDisplay, data)
	if ok {
		mapConfig(r, t, cfg, lines, tomlDisplay, display, opts)
	}
	// tests/ (required, with test.sh) and solution/ (optional).
	t.Tests = readTree(r, filepath.Join(dir, "tests"), filepath.Join(display, "tests"), true)
	if t.Tests != nil {
		if _, ok := t.Tests["test.sh"]; !ok {
			r.add(Problem{File: filepath.Join(display, "tests"), Msg: "has no test.sh: it is the verifier (run as bash /tests/test.sh)"})
		}
	}
	if st, err := os.Lstat(filepath.Join(dir, "solution")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		_ = st
		t.Solution = readTree(r, filepath.Join(dir, "solution"), filepath.Join(display, "solution"), true)
		if t.Solution != nil {
			if _, ok := t.Solution["solve.sh"]; !ok {
				r.add(Problem{File: filepath.Join(display, "solution"), Msg: "has no solve.sh: it is the oracle's reference solution"})
			}
		}
	}
	if len(r.Errs()) > before || !ok {
		return nil
	}
	return t
}

// validID: what a Steward sample id may be (a directory name seldom is not).
func validID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// readTree reads every regular file under root (relative slash paths),
// refusing links, devices, and what is over the bounds. nil when root is
// missing (reported when required) or bad.
func readTree(r *Result, root, display string, required bool) map[string]File {
	st, err := os.Lstat(root)
	if err != nil {
		if required {
			r.add(Problem{File: display, Msg: "missing: " + errMsg(err)})
		}
		return nil
	}
	if st.Mode()&fs.ModeSymlink != 0 || !st.IsDir() {
		r.add(Problem{File: display, Msg: "must be a directory (not a link)"})
		return nil
	}
	out := map[string]File{}
	var total int64
	bad := false
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, path)
		shown := filepath.Join(display, rel)
		if err != nil {
			r.add(Problem{File: shown, Msg: "cannot read: " + errMsg(err)})
			bad = true
			return nil
		}
		if path == root {
			return nil
		}
		if !safeName(rel) {
			r.add(Problem{File: shown, Msg: "has a name Steward does not copy into a sandbox (control characters or a leading '-')"})
			bad = true
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			r.add(Problem{File: shown, Msg: "is a symbolic link: Steward copies no links from a task directory"})
			bad = true
			return nil
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			r.add(Problem{File: shown, Msg: "is not a regular file"})
			bad = true
			return nil
		}
		if len(out) >= MaxDirFiles {
			r.add(Problem{File: display, Msg: fmt.Sprintf("holds more than %d files", MaxDirFiles)})
			bad = true
			return filepath.SkipAll
		}
		data, mode, msg := readRegular(path, MaxFileSize)
		if msg != "" {
			r.add(Problem{File: shown, Msg: msg})
			bad = true
			return nil
		}
		total += int64(len(data))
		if total > MaxDirSize {
			r.add(Problem{File: display, Msg: fmt.Sprintf("holds more than %d bytes", MaxDirSize)})
			bad = true
			return filepath.SkipAll
		}
		out[filepath.ToSlash(rel)] = File{Data: data, Mode: mode}
		return nil
	})
	if bad {
		return nil
	}
	return out
}

func safeName(rel string) bool {
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if part == "" || part == "." || part == ".." || strings.HasPrefix(part, "-") {
			return false
		}
		for _, c := range part {
			if c < 0x20 || c == 0x7f || c == '\\' {
				return false
			}
		}
	}
	return true
}

// lineIndex maps dotted key paths ("environment.gpus", "steps") to the
// line they are written on, from go-toml's parser.
type lineIndex map[string]int

func (li lineIndex) at(key string) int {
	for k := key; k != ""; {
		if l, ok := li[k]; ok {
			return l
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

func indexLines(data []byte) lineIndex {
	li := lineIndex{}
	p := unstable.Parser{}
	p.Reset(data)
	var prefix []string
	keyOf := func(it unstable.Iterator) ([]string, int) {
		var parts []string
		line := 0
		for it.Next() {
			n := it.Node()
			parts = append(parts, string(n.Data))
			if line == 0 && n.Raw.Length > 0 {
				line = p.Shape(n.Raw).Start.Line
			}
		}
		return parts, line
	}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			parts, line := keyOf(e.Key())
			prefix = parts
			k := strings.Join(parts, ".")
			if _, ok := li[k]; !ok && line > 0 {
				li[k] = line
			}
		case unstable.KeyValue:
			parts, line := keyOf(e.Key())
			k := strings.Join(append(append([]string{}, prefix...), parts...), ".")
			if _, ok := li[k]; !ok && line > 0 {
				li[k] = line
			}
		}
	}
	return li
}

func decodeTOML(r *Result, display string, data []byte) (*config, lineIndex, bool) {
	if !utf8.Valid(data) {
		r.add(Problem{File: display, Msg: "is not valid UTF-8"})
		return nil, nil, false
	}
	var cfg config
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	err := dec.Decode(&cfg)
	var sme *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case err == nil:
	case errors.As(err, &sme):
		// Decoding finished; these keys are not part of the format Steward knows.
		for _, e := range sme.Errors {
			line, _ := e.Position()
			r.add(Problem{File: display, Line: line, Key: strings.Join(e.Key(), "."), Warning: true,
				Msg: "not a task.toml key Steward knows (schema 1.0–1.4): ignored"})
		}
	case errors.As(err, &de):
		line, _ := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		r.add(Problem{File: display, Line: line, Key: strings.Join(de.Key(), "."), Msg: "invalid TOML: " + msg})
		return nil, nil, false
	default:
		r.add(Problem{File: display, Msg: "invalid TOML: " + strings.TrimPrefix(err.Error(), "toml: ")})
		return nil, nil, false
	}
	return &cfg, indexLines(data), true
}

// config is task.toml, schema 1.0 … 1.4 (legacy keys included).
type config struct {
	SchemaVersion string         `toml:"schema_version"`
	Version       string         `toml:"version"`
	Source        any            `toml:"source"`
	Task          taskInfo       `toml:"task"`
	Metadata      map[string]any `toml:"metadata"`
	Agent         phase          `toml:"agent"`
	Verifier      verifier       `toml:"verifier"`
	Solution      struct {
		Env map[string]string `toml:"env"`
	} `toml:"solution"`
	Environment environment      `toml:"environment"`
	Steps       []map[string]any `toml:"steps"`
	Artifacts   any              `toml:"artifacts"`
}

type taskInfo struct {
	Name        string   `toml:"name"`
	Version     string   `toml:"version"`
	Description string   `toml:"description"`
	Keywords    []string `toml:"keywords"`
	Authors     []struct {
		Name  string `toml:"name"`
		Email string `toml:"email"`
	} `toml:"authors"`
}

type phase struct {
	TimeoutSec   *float64 `toml:"timeout_sec"`
	User         any      `toml:"user"`
	NetworkMode  string   `toml:"network_mode"`
	AllowedHosts []string `toml:"allowed_hosts"`
}

type verifier struct {
	TimeoutSec      *float64          `toml:"timeout_sec"`
	User            any               `toml:"user"`
	NetworkMode     string            `toml:"network_mode"`
	AllowedHosts    []string          `toml:"allowed_hosts"`
	Env             map[string]string `toml:"env"`
	EnvironmentMode string            `toml:"environment_mode"`
	Environment     map[string]any    `toml:"environment"`
	Collect         []map[string]any  `toml:"collect"`
}

type environment struct {
	BuildTimeoutSec *float64          `toml:"build_timeout_sec"`
	DockerImage     string            `toml:"docker_image"`
	OS              string            `toml:"os"`
	CPUs            *float64          `toml:"cpus"`
	MemoryMB        *int64            `toml:"memory_mb"`
	StorageMB       *int64            `toml:"storage_mb"`
	Memory          string            `toml:"memory"`
	Storage         string            `toml:"storage"`
	GPUs            int64             `toml:"gpus"`
	GPUTypes        []string          `toml:"gpu_types"`
	TPU             any               `toml:"tpu"`
	NetworkMode     string            `toml:"network_mode"`
	AllowedHosts    []string          `toml:"allowed_hosts"`
	AllowInternet   *bool             `toml:"allow_internet"`
	Env             map[string]string `toml:"env"`
	Workdir         string            `toml:"workdir"`
	SkillsDir       string            `toml:"skills_dir"`
	Healthcheck     map[string]any    `toml:"healthcheck"`
	MCPServers      []map[string]any  `toml:"mcp_servers"`
}

// mapConfig maps a decoded task.toml onto t, reporting what Steward
// cannot honour at the key's line.
func mapConfig(r *Result, t *Task, c *config, li lineIndex, file, taskDisplay string, opts Options) {
	bad := func(key, format string, args ...any) {
		r.add(Problem{File: file, Line: li.at(key), Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	warn := func(key, format string, args ...any) {
		r.add(Problem{File: file, Line: li.at(key), Key: key, Warning: true, Msg: fmt.Sprintf(format, args...)})
	}
	sv := c.SchemaVersion
	if sv == "" {
		sv = c.Version
	}
	if sv != "" {
		if maj, min, ok := parseVersion(sv); !ok || maj != 1 || min > 4 {
			k := "schema_version"
			if c.SchemaVersion == "" {
				k = "version"
			}
			warn(k, "%q is newer than the schemas Steward reads (1.0–1.4): keys it does not know are reported", sv)
		}
	}

	// Refused: what would run differently from Harbor.
	if len(c.Steps) > 0 {
		bad("steps", "multi-step tasks are not supported: Steward runs one instruction and one verifier per sample")
	}
	if c.Environment.OS != "" && !strings.EqualFold(c.Environment.OS, "linux") {
		bad("environment.os", "%q: only linux sandboxes are supported", c.Environment.OS)
	}
	if c.Environment.GPUs > 0 {
		bad("environment.gpus", "GPUs are not supported: Steward's sandboxes have none (got %d)", c.Environment.GPUs)
	}
	if len(c.Environment.GPUTypes) > 0 {
		bad("environment.gpu_types", "GPUs are not supported: Steward's sandboxes have none")
	}
	if c.Environment.TPU != nil && !zeroish(c.Environment.TPU) {
		bad("environment.tpu", "TPUs are not supported")
	}
	if len(c.Environment.MCPServers) > 0 {
		bad("environment.mcp_servers", "MCP servers are not supported yet: Steward starts no servers beside the agent")
	}
	if len(c.Verifier.Collect) > 0 {
		bad("verifier.collect", "collect hooks are not supported yet (they run between the agent and the tests)")
	}
	if c.Verifier.Environment != nil {
		bad("verifier.environment", "a verifier environment of its own is not supported yet: drop it (environment_mode = \"separate\" runs the verifier in a fresh sandbox of the task's image)")
	}

	// Environment.
	env := c.Environment
	envDir := filepath.Join(t.Dir, "environment")
	composeName := ""
	for _, n := range []string{"docker-compose.yaml", "docker-compose.yml"} {
		if _, err := os.Lstat(filepath.Join(envDir, n)); err == nil {
			composeName = n
			break
		}
	}
	switch {
	case composeName != "":
		// Read once the rest of [environment] is (its env and workdir win over main's).
	case env.DockerImage != "":
		t.Image = env.DockerImage
	default:
		_, dfErr := os.Lstat(filepath.Join(envDir, "Dockerfile"))
		switch {
		case dfErr == nil:
			if st, err := os.Lstat(envDir); err != nil || st.Mode()&fs.ModeSymlink != 0 || !st.IsDir() {
				r.add(Problem{File: filepath.Join(taskDisplay, "environment"), Msg: "must be a directory (not a link)"})
			} else if st, err := os.Lstat(filepath.Join(envDir, "Dockerfile")); err != nil || !st.Mode().IsRegular() {
				r.add(Problem{File: filepath.Join(taskDisplay, "environment", "Dockerfile"), Msg: "must be a regular file (not a link)"})
			} else {
				t.Build = envDir
			}
		default:
			r.add(Problem{File: file, Key: "environment.docker_image", Msg: "the task has no environment: give environment/Dockerfile, environment/docker-compose.yaml or [environment] docker_image"})
		}
	}
	t.BuildTimeout = seconds(bad, "environment.build_timeout_sec", env.BuildTimeoutSec, DefaultBuildTimeout)
	t.CPUs = DefaultCPUs
	if env.CPUs != nil {
		if *env.CPUs <= 0 || math.IsNaN(*env.CPUs) || *env.CPUs > 1024 {
			bad("environment.cpus", "must be more than 0 (at most 1024), got %v", *env.CPUs)
		} else {
			t.CPUs = *env.CPUs
		}
	}
	t.MemoryBytes = sizeOf(bad, "environment", "memory", env.MemoryMB, env.Memory, DefaultMemoryMB)
	t.StorageBytes = sizeOf(bad, "environment", "storage", env.StorageMB, env.Storage, DefaultStorageMB)
	t.Network = NetworkPublic
	switch {
	case env.NetworkMode != "":
		t.Network = network(bad, "environment.network_mode", env.NetworkMode)
	case env.AllowInternet != nil && !*env.AllowInternet:
		t.Network = NetworkNone
	}
	hosts := allowedHosts(bad, "environment.allowed_hosts", env.AllowedHosts)
	switch {
	case t.Network == NetworkAllowlist && env.AllowedHosts == nil:
		bad("environment.network_mode", "allowlist without allowed_hosts: list the hosts the task may reach (or use no-network)")
	case t.Network == NetworkAllowlist && len(env.AllowedHosts) == 0:
		bad("environment.allowed_hosts", "empty: list the hosts the task may reach (or use network_mode = \"no-network\")")
	case t.Network == NetworkAllowlist:
		t.AllowedHosts = hosts
	case env.AllowedHosts != nil:
		bad("environment.allowed_hosts", "applies only with network_mode = \"allowlist\"")
	}
	for _, ph := range []struct {
		name string
		mode string
		ah   []string
		user any
	}{{"agent", c.Agent.NetworkMode, c.Agent.AllowedHosts, c.Agent.User}, {"verifier", c.Verifier.NetworkMode, c.Verifier.AllowedHosts, c.Verifier.User}} {
		if ph.mode != "" {
			if m := network(bad, ph.name+".network_mode", ph.mode); m != "" && m != t.Network {
				bad(ph.name+".network_mode", "a network for the %s phase alone is not supported yet: set [environment] network_mode", ph.name)
			} else if m == NetworkAllowlist && ph.ah == nil {
				bad(ph.name+".network_mode", "allowlist without the %s phase's allowed_hosts: repeat [environment]'s (a host list for one phase alone is not supported yet)", ph.name)
			}
		}
		if ph.ah != nil {
			key := ph.name + ".allowed_hosts"
			if h := allowedHosts(bad, key, ph.ah); t.Network != NetworkAllowlist || !slices.Equal(h, hosts) {
				bad(key, "a host list for the %s phase alone is not supported yet: set [environment] network_mode = \"allowlist\" and allowed_hosts (a phase may repeat them)", ph.name)
			}
		}
		if ph.user != nil && !isRoot(ph.user) {
			bad(ph.name+".user", "running the %s as another user is not supported yet (it runs as the image's user)", ph.name)
		}
	}
	t.Workdir = env.Workdir
	if t.Workdir != "" && !strings.HasPrefix(t.Workdir, "/") {
		bad("environment.workdir", "%q must be an absolute path", t.Workdir)
	}
	t.Env = checkEnv(bad, "environment.env", env.Env)
	if env.SkillsDir != "" {
		warn("environment.skills_dir", "skills are not given to agents: ignored")
	}
	if env.Healthcheck != nil {
		warn("environment.healthcheck", "not run: Steward starts the agent without waiting for a health check, and does not start the image's own command")
	}
	if !empty(c.Artifacts) {
		warn("artifacts", "not collected: list artifacts (globs under the workdir) in the Steward task's artifacts")
	}

	// Phases.
	t.AgentTimeout = seconds(bad, "agent.timeout_sec", c.Agent.TimeoutSec, DefaultTimeout)
	t.VerifierTimeout = seconds(bad, "verifier.timeout_sec", c.Verifier.TimeoutSec, DefaultTimeout)
	switch c.Verifier.EnvironmentMode {
	case "", ModeShared:
		t.VerifierMode = ModeShared
	case ModeSeparate:
		t.VerifierMode = ModeSeparate
	default:
		bad("verifier.environment_mode", "%q: use shared or separate", c.Verifier.EnvironmentMode)
	}
	t.VerifierEnv = checkEnv(bad, "verifier.env", c.Verifier.Env)
	t.SolutionEnv = checkEnv(bad, "solution.env", c.Solution.Env)
	if opts.Expand != nil {
		for _, e := range []struct {
			key string
			m   map[string]string
		}{{"environment.env", t.Env}, {"verifier.env", t.VerifierEnv}, {"solution.env", t.SolutionEnv}} {
			for _, k := range sortedKeys(e.m) {
				v, names, err := opts.Expand(e.m[k])
				key := e.key + "." + k
				if err != nil {
					bad(key, "%v", err)
					continue
				}
				for _, n := range names {
					r.Refs = append(r.Refs, Ref{Name: n, File: file, Line: li.at(key), Key: key})
				}
				e.m[k] = v
			}
		}
	}

	if composeName != "" {
		loadCompose(r, t, envDir, composeName, taskDisplay, env.DockerImage)
	}

	// Metadata: [metadata] as written, the identity under "harbor".
	t.Metadata = map[string]any{}
	for k, v := range c.Metadata {
		t.Metadata[k] = plain(v)
	}
	id := map[string]any{}
	put := func(k string, v any) {
		if v != nil && v != "" {
			id[k] = v
		}
	}
	put("name", c.Task.Name)
	put("version", c.Task.Version)
	put("description", c.Task.Description)
	put("schema_version", sv)
	if len(c.Task.Keywords) > 0 {
		kw := make([]any, len(c.Task.Keywords))
		for i, k := range c.Task.Keywords {
			kw[i] = k
		}
		id["keywords"] = kw
	}
	if len(c.Task.Authors) > 0 {
		var as []any
		for _, a := range c.Task.Authors {
			m := map[string]any{}
			if a.Name != "" {
				m["name"] = a.Name
			}
			if a.Email != "" {
				m["email"] = a.Email
			}
			as = append(as, m)
		}
		id["authors"] = as
	}
	if c.Source != nil {
		id["source"] = plain(c.Source)
	}
	if len(id) > 0 {
		if _, clash := t.Metadata["harbor"]; clash {
			warn("metadata.harbor", "replaced by the task's identity ([task], source)")
		}
		t.Metadata["harbor"] = id
	}
}

func parseVersion(s string) (int, int, bool) {
	a, b, ok := strings.Cut(s, ".")
	maj, err := strconv.Atoi(a)
	if err != nil {
		return 0, 0, false
	}
	if !ok {
		return maj, 0, true
	}
	b, _, _ = strings.Cut(b, ".")
	min, err := strconv.Atoi(b)
	return maj, min, err == nil
}

func isRoot(v any) bool {
	switch x := v.(type) {
	case string:
		return x == "root" || x == "0" || x == ""
	case int64:
		return x == 0
	}
	return false
}

// empty: unset, or an empty list or table (real task.toml files write "artifacts = []").
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func zeroish(v any) bool {
	switch x := v.(type) {
	case bool:
		return !x
	case int64:
		return x == 0
	case float64:
		return x == 0
	case string:
		return x == "" || x == "none"
	}
	return false
}

func network(bad func(string, string, ...any), key, mode string) string {
	switch mode {
	case "public":
		return NetworkPublic
	case "no-network":
		return NetworkNone
	case "allowlist":
		return NetworkAllowlist
	}
	bad(key, "%q: use public, no-network or allowlist", mode)
	return ""
}

// allowedHosts reads an allowed_hosts list (egress.ParseHost: host names,
// "*.domain" wildcards; no addresses, ports or schemes), normalized,
// sorted and without repeats; each bad entry is reported by its index.
func allowedHosts(bad func(string, string, ...any), key string, list []string) []string {
	var out []string
	for i, h := range list {
		p, err := egress.ParseHost(h)
		if err != nil {
			bad(key, "entry %d: %v", i+1, err)
			continue
		}
		out = append(out, p.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// seconds reads a timeout_sec (default def); at most a day.
func seconds(bad func(string, string, ...any), key string, v *float64, def time.Duration) time.Duration {
	if v == nil {
		return def
	}
	if *v <= 0 || math.IsNaN(*v) || *v > 86400 {
		bad(key, "must be more than 0 and at most 86400 seconds, got %v", *v)
		return def
	}
	return time.Duration(*v * float64(time.Second))
}

// sizeOf reads NAME_mb, or the legacy NAME = "2G", in bytes.
func sizeOf(bad func(string, string, ...any), table, name string, mb *int64, legacy string, def int64) int64 {
	const maxMB = 1 << 24 // 16 TiB
	switch {
	case mb != nil:
		if *mb <= 0 || *mb > maxMB {
			bad(table+"."+name+"_mb", "must be more than 0, got %d", *mb)
			return def << 20
		}
		if legacy != "" {
			bad(table+"."+name, "set %s_mb or %s, not both", name, name)
		}
		return *mb << 20
	case legacy != "":
		n, ok := parseSize(legacy)
		if !ok || n <= 0 || n > maxMB<<20 {
			bad(table+"."+name, "%q is not a size (e.g. \"2G\", \"512M\")", legacy)
			return def << 20
		}
		return n
	}
	return def << 20
}

func parseSize(s string) (int64, bool) {
	s = strings.TrimSpace(strings.ToUpper(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || f > float64(math.MaxInt64/mult) {
		return 0, false
	}
	return int64(f * float64(mult)), true
}

func checkEnv(bad func(string, string, ...any), key string, m map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range sortedKeys(m) {
		if !envName(k) {
			bad(key+"."+k, "%q is not an environment variable name", k)
			continue
		}
		if strings.HasPrefix(k, "STEWARD_") {
			bad(key+"."+k, "STEWARD_ variables are Steward's own")
			continue
		}
		if strings.ContainsRune(m[k], 0) {
			bad(key+"."+k, "holds a NUL byte")
			continue
		}
		out[k] = m[k]
	}
	return out
}

func envName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// plain turns TOML values into what JSON and YAML carry: dates and times
// become their TOML text, tables and arrays are copied.
func plain(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = plain(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	case toml.LocalDate, toml.LocalTime, toml.LocalDateTime:
		return fmt.Sprint(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return v
}
