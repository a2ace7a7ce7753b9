package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
)

// tb2Want is what one task of testdata/harbor-tb2 must plan as: its
// task.toml's timeouts and resources, as Terminal-Bench 2 writes them.
type tb2Want struct {
	agent, verifier, build time.Duration
	image                  string // docker_image; "" builds environment/
	cpus                   float64
	memoryMiB, storageMiB  int64
	difficulty, category   string
}

// TestHarborTB2DatasetDry loads testdata/harbor-tb2, twelve tasks written in
// Terminal-Bench 2's shape (schema 1.1 with [[task.authors]], [metadata]
// author_name/author_email/difficulty/category/tags and time estimates,
// float timeouts, docker_image beside environment/Dockerfile, gpus = 0,
// allow_internet = true, mcp_servers = [], artifacts = [], empty env tables;
// and two in the older shape: version = "1.0", memory = "2G", storage =
// "10G"), with `steward launch --dry`: exit 0, nothing on stderr (no
// warning, no surprise), one sample per task directory, each to run; and
// the same eval set as the launch loads it gives each sample its own
// timeouts, resources, image or build and network. Nothing is built.
func TestHarborTB2DatasetDry(t *testing.T) {
	t.Parallel()
	needDocker(t) // the plan asks the daemon for the provider's default concurrency
	dir := t.TempDir()
	ds, err := filepath.Abs("../../testdata/harbor-tb2")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), `name: tb2-dry
tasks:
  - name: tb2
    sandbox: {provider: docker}
    tasks_from: {harbor: `+ds+`}
    agent: 'true'
`)
	const mins = time.Minute
	want := map[string]tb2Want{
		"csv-region-totals":      {15 * mins, 15 * mins, 10 * mins, "tb2-fixtures/csv-region-totals:20260101", 1, 2048, 10240, "easy", "data-processing"},
		"extract-json-errors":    {10 * mins, 10 * mins, 10 * mins, "tb2-fixtures/extract-json-errors:20260101", 1, 2048, 10240, "easy", "file-operations"},
		"fix-broken-makefile":    {15 * mins, 10 * mins, 10 * mins, "tb2-fixtures/fix-broken-makefile:20260101", 1, 2048, 10240, "medium", "software-engineering"},
		"iso-date-normalize":     {15 * mins, 15 * mins, 10 * mins, "tb2-fixtures/iso-date-normalize:20260101", 1, 2048, 10240, "medium", "data-processing"},
		"logrotate-config":       {10 * mins, 10 * mins, 10 * mins, "tb2-fixtures/logrotate-config:20260101", 1, 2048, 10240, "easy", "system-administration"},
		"matmul-blocking":        {30 * mins, 30 * mins, 20 * mins, "tb2-fixtures/matmul-blocking:20260101", 2, 4096, 20480, "hard", "scientific-computing"},
		"nginx-reverse-proxy":    {15 * mins, 15 * mins, 10 * mins, "tb2-fixtures/nginx-reverse-proxy:20260101", 1, 2048, 10240, "medium", "system-administration"},
		"pin-python-deps":        {20 * mins, 15 * mins, 15 * mins, "tb2-fixtures/pin-python-deps:20260101", 1, 2048, 10240, "medium", "debugging"},
		"recover-deleted-commit": {15 * mins, 15 * mins, 10 * mins, "tb2-fixtures/recover-deleted-commit:20260101", 1, 2048, 10240, "medium", "software-engineering"},
		"repair-tar-archive":     {40 * mins, 5 * mins, 5 * mins, "", 1, 1024, 5120, "hard", "file-operations"},
		"sqlite-add-index":       {15 * mins, 15 * mins, 10 * mins, "tb2-fixtures/sqlite-add-index:20260101", 1, 2048, 10240, "medium", "data-science"},
		"ssh-hardening":          {15 * mins, 10 * mins, 15 * mins, "tb2-fixtures/ssh-hardening:20260101", 1, 1024, 10240, "medium", "security"},
	}
	entries, err := os.ReadDir(ds)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) != len(want) {
		t.Fatalf("testdata/harbor-tb2 holds %d task directories, the test knows %d: %v", len(dirs), len(want), dirs)
	}

	// The CLI: zero warnings, one sample per task, each to run.
	cmd := exec.Command(exe, "launch", "--dry", "--json", "--record", t.TempDir(), "steward.yaml")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("launch --dry: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("launch --dry printed warnings or surprises on stderr:\n%s", stderr.String())
	}
	var plan struct {
		Plan     string `json:"plan"`
		Attempts []struct {
			Task, Sample, Action string
			Attempt              int
		} `json:"attempts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &plan); err != nil {
		t.Fatalf("--dry --json: %v\n%s", err, stdout.String())
	}
	var planned []string
	for _, a := range plan.Attempts {
		if a.Task != "tb2" || a.Attempt != 1 || a.Action != "run" {
			t.Errorf("planned %+v, want task tb2, attempt 1, run", a)
		}
		planned = append(planned, a.Sample)
	}
	if !slices.Equal(planned, dirs) {
		t.Errorf("planned samples %v, want one per task directory, in name order: %v", planned, dirs)
	}

	// The eval set as the launch loads it: every sample its own sandbox.
	es, err := evalset.Load(filepath.Join(dir, "steward.yaml"), evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es.Warnings) != 0 {
		t.Errorf("warnings: %v", es.Warnings)
	}
	if len(es.Tasks) != 1 || len(es.Tasks[0].Samples) != len(want) {
		t.Fatalf("want one task of %d samples, got %d tasks", len(want), len(es.Tasks))
	}
	const mib = 1 << 20
	for _, s := range es.Tasks[0].Samples {
		w, ok := want[s.ID]
		if !ok {
			t.Errorf("unexpected sample %s", s.ID)
			continue
		}
		sb := s.Sandbox
		if sb == nil || s.Harbor == nil {
			t.Errorf("%s: no sandbox or Harbor contract of its own", s.ID)
			continue
		}
		got := tb2Want{
			agent: time.Duration(s.Timeout), verifier: time.Duration(s.ScorerTimeout), build: time.Duration(s.BuildTimeout),
			image: sb.Image, cpus: sb.CPUs, memoryMiB: int64(sb.Memory) / mib, storageMiB: int64(sb.Disk) / mib,
		}
		got.difficulty, _ = s.Metadata["difficulty"].(string)
		got.category, _ = s.Metadata["category"].(string)
		if got != w {
			t.Errorf("%s:\n got %+v\nwant %+v", s.ID, got, w)
		}
		if (sb.Build == "") != (w.image != "") {
			t.Errorf("%s: image %q, build %q: want exactly one (docker_image wins over environment/)", s.ID, sb.Image, sb.Build)
		}
		if sb.Network != "bridge" || sb.Provider != "docker" {
			t.Errorf("%s: network %q provider %q, want bridge (allow_internet, Harbor's default public) on docker", s.ID, sb.Network, sb.Provider)
		}
		if s.Harbor.VerifierMode != "shared" || s.Harbor.Tests["test.sh"].Data == nil || s.Harbor.Tests["test_outputs.py"].Data == nil ||
			s.Harbor.Solution["solve.sh"].Data == nil {
			t.Errorf("%s: verifier %q, tests %d files, solution %d files", s.ID, s.Harbor.VerifierMode, len(s.Harbor.Tests), len(s.Harbor.Solution))
		}
		if tags, _ := s.Metadata["tags"].([]any); len(tags) == 0 {
			t.Errorf("%s: metadata tags %v", s.ID, s.Metadata["tags"])
		}
		if _, ok := s.Metadata["author_name"].(string); !ok {
			t.Errorf("%s: metadata author_name missing: %v", s.ID, s.Metadata)
		}
	}
	ssh := es.Tasks[0].Samples[slices.IndexFunc(es.Tasks[0].Samples, func(s *evalset.Sample) bool { return s.ID == "ssh-hardening" })]
	if ssh.Harbor.VerifierEnv["SSHD_CONFIG"] != "/etc/ssh/sshd_config" {
		t.Errorf("ssh-hardening: verifier env %v", ssh.Harbor.VerifierEnv)
	}
}
