package ghaction_test

import (
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The fork-safe reporter judges the fork's pull request as pr-eval.yml
// judges a same-repository one: against a baseline with fail-on: regression
// (not red on any failed sample), and that baseline is main's record from
// this repository's cache, restored before the fork's artifact is
// downloaded, never a path inside the artifact (issue 23 item 10).
func TestForkSafeReporterJudgesLikePREval(t *testing.T) {
	type step struct {
		Name string            `yaml:"name"`
		Uses string            `yaml:"uses"`
		Run  string            `yaml:"run"`
		With map[string]string `yaml:"with"`
	}
	read := func(file string) []step {
		b, err := os.ReadFile("../../.github/workflows/" + file)
		if err != nil {
			t.Fatal(err)
		}
		var wf struct {
			Jobs map[string]struct {
				Steps []step `yaml:"steps"`
			} `yaml:"jobs"`
		}
		if err := yaml.Unmarshal(b, &wf); err != nil {
			t.Fatal(err)
		}
		var out []step
		for _, j := range wf.Jobs {
			out = append(out, j.Steps...)
		}
		return out
	}
	action := func(steps []step) (step, int) {
		for i, s := range steps {
			if strings.HasPrefix(s.Uses, "./") {
				return s, i
			}
		}
		t.Fatal("no step runs the action")
		return step{}, 0
	}
	pr, _ := action(read("pr-eval.yml"))
	steps := read("fork-safe.yml")
	rep, _ := action(steps)
	if rep.With["fail-on"] != pr.With["fail-on"] || rep.With["fail-on"] != "regression" {
		t.Errorf("fork-safe's fail-on %q, pr-eval's %q: want regression in both", rep.With["fail-on"], pr.With["fail-on"])
	}
	base := rep.With["baseline"]
	if base == "" || strings.HasPrefix(base, rep.With["records"]) || strings.HasPrefix(base, "steward-pr") {
		t.Fatalf("fork-safe's baseline %q: want main's record from the cache, not the fork's artifact (%q)", base, rep.With["records"])
	}
	restored, downloaded := -1, -1
	for i, s := range steps {
		switch {
		case strings.HasPrefix(s.Uses, "actions/cache/restore@") && strings.HasPrefix(s.With["restore-keys"], "steward-record-main-"):
			restored = i
		case strings.HasPrefix(s.Uses, "actions/download-artifact@"):
			downloaded = i
		}
	}
	if restored < 0 || downloaded < 0 || restored > downloaded {
		t.Errorf("main's record restored at step %d, the artifact downloaded at %d: want the cache first", restored, downloaded)
	}
}
