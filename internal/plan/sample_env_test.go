package plan

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
)

// copyTree copies the Harbor fixtures into a temp dir the test may edit.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func harborPlan(t *testing.T, dir string) map[string]*Attempt {
	t.Helper()
	es, err := evalset.Load(filepath.Join(dir, "steward.yaml"), evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(es, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Attempt{}
	for _, a := range p.Attempts {
		out[a.Sample.ID] = a
	}
	return out
}

// TestSampleEnvironmentFingerprints: a Harbor sample's environment and
// verifier enter its fingerprint and no other sample's.
func TestSampleEnvironmentFingerprints(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, "../../testdata/harbor", filepath.Join(dir, "ds"))
	os.WriteFile(filepath.Join(dir, "steward.yaml"), []byte("tasks:\n  - name: d\n    agent: a\n    tasks_from: {harbor: ds}\n"), 0o644)
	before := harborPlan(t, dir)
	if len(before) != 5 {
		t.Fatalf("%d attempts", len(before))
	}
	edit := func(path, content string) {
		if err := os.WriteFile(filepath.Join(dir, "ds", path), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what, changed, part string) {
		t.Helper()
		after := harborPlan(t, dir)
		for id, a := range after {
			b := before[id]
			if (id == changed) != (a.Fingerprint != b.Fingerprint) {
				t.Errorf("%s: sample %s fingerprint changed %v", what, id, a.Fingerprint != b.Fingerprint)
			}
			if id == changed && a.Parts[part] == b.Parts[part] {
				t.Errorf("%s: part %s unchanged", what, part)
			}
		}
		before = after
	}
	edit("write-file/tests/test.sh", "#!/bin/sh\necho 0 > /logs/verifier/reward.txt\n")
	check("a test file", "write-file", "sample")
	edit("timeout/environment/Dockerfile", "FROM scratch\nCOPY busybox /bin/busybox\n")
	check("a build context", "timeout", "image")
	edit("reward-json/solution/solve.sh", "#!/bin/sh\ntrue\n")
	check("the solution", "reward-json", "sample")
	edit("system-state/task.toml", "[agent]\ntimeout_sec = 61\n[environment]\nmemory_mb = 256\nworkdir = \"/app\"\n")
	check("task.toml", "system-state", "sample")
	edit("system-state/task.toml", "[agent]\ntimeout_sec = 61\n[environment]\nmemory_mb = 256\nworkdir = \"/app\"\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n")
	check("an allowlist", "system-state", "sample")
	edit("system-state/task.toml", "[agent]\ntimeout_sec = 61\n[environment]\nmemory_mb = 256\nworkdir = \"/app\"\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\", \"*.pythonhosted.org\"]\n")
	check("the allowed hosts", "system-state", "sample")
	// keep_processes: false changes every shared-mode sample's
	// fingerprint (its verifier no longer sees the agent's processes) and
	// not the separate-mode one's (reward-json), whose verifier never did.
	os.WriteFile(filepath.Join(dir, "steward.yaml"), []byte("tasks:\n  - name: d\n    agent: a\n    tasks_from: {harbor: ds, keep_processes: false}\n"), 0o644)
	for id, a := range harborPlan(t, dir) {
		if changed := a.Fingerprint != before[id].Fingerprint; changed != (id != "reward-json") {
			t.Errorf("keep_processes: false: sample %s fingerprint changed %v", id, changed)
		}
	}
}

func TestSampleImageIDs(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "ds", "t", "tests"), 0o755)
	os.WriteFile(filepath.Join(dir, "ds", "t", "instruction.md"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "ds", "t", "tests", "test.sh"), []byte("true"), 0o644)
	os.WriteFile(filepath.Join(dir, "ds", "t", "task.toml"), []byte("[environment]\ndocker_image = \"busybox:steward\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "steward.yaml"), []byte("tasks:\n  - name: d\n    agent: a\n    tasks_from: {harbor: ds}\n"), 0o644)
	es, err := evalset.Load(filepath.Join(dir, "steward.yaml"), evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(es, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := p.Attempts[0]
	if a.Parts["image"] != "image:busybox:steward" {
		t.Fatalf("image part %q", a.Parts["image"])
	}
	fp := a.Fingerprint
	p.SetImageIDs(map[string]string{"busybox:steward": "sha256:abc"})
	if a.Parts["image"] != "image:busybox:steward@sha256:abc" || a.Fingerprint == fp {
		t.Errorf("image part %q, fingerprint changed %v", a.Parts["image"], a.Fingerprint != fp)
	}
}
