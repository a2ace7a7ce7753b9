// Package archtest holds the house's rules about which package may import
// which, checked on the source tree (go/parser, no dependency): a forbidden
// edge fails the test. The same table is in docs/architecture.md.
package archtest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/steward-evals/steward/"

// forbidden lists the edges that must not exist in production code (test
// files are not counted): from → to, with the reason. A `to` ending in "/..."
// covers the package and everything below it.
var forbidden = []struct{ from, to, why string }{
	{"internal/plan", "internal/record", "the plan is pure: it reads earlier runs through plan.History (internal/history)"},
	{"internal/plan", "internal/sandbox/...", "the plan is pure"},
	{"internal/plan", "internal/run", "the plan is pure"},
	{"internal/sched", "internal/...", "the scheduler is pure and standalone"},
	{"internal/ramp", "internal/...", "the ramp is pure and standalone"},
	{"internal/shard", "internal/...", "shard assignment is pure and standalone"},
	{"internal/forecast", "internal/...", "the forecast is a pure function of plain values"},
	{"internal/panel", "internal/...", "the live panel draws the line it is given: it knows nothing of the run"},
	{"internal/status", "internal/...", "the status vocabulary is the lowest package"},
	{"internal/stats", "internal/...", "the verdict's statistics are pure functions checked against reference values"},
	{"internal/secret", "internal/...", "the secret names and the scrubber are the lowest package: the gateway, the supervisor, the CLI and the action share them"},
	{"internal/history", "internal/record", "the carry vocabulary sits below the record"},
	{"internal/record", "internal/sandbox/...", "the record knows statuses (internal/status), not providers"},
	{"internal/record", "internal/report", "reports are built from the record, not the reverse"},
	{"internal/record", "internal/run", "the record is storage"},
	{"internal/run", "internal/cli", "the supervisor does not know the CLI"},
	{"internal/attempt", "internal/run", "one attempt knows nothing of the supervisor: what it needs of it comes in attempt.Env (Bind, Deadline, Started)"},
	{"internal/attempt", "internal/cli", "one attempt knows nothing of the CLI"},
	{"internal/attempt", "internal/ghaction", "one attempt knows nothing of the GitHub Action"},
	{"internal/attempt", "internal/report", "one attempt returns its row; reports are built from the record"},
	{"internal/attempt", "internal/worker", "one attempt runs alike in a worker and in the supervisor: the process boundary is internal/worker's, which runs attempts through internal/attempt"},
	{"internal/worker", "internal/run", "the process boundary knows nothing of the supervisor's stages: what it needs of them comes in worker.Config (the attempt environment, Gateway, Lost); internal/run imports internal/worker, never the reverse"},
	{"internal/worker", "internal/cli", "the process boundary knows nothing of the CLI"},
	{"internal/worker", "internal/ghaction", "the process boundary knows nothing of the GitHub Action"},
	{"internal/worker", "internal/report", "a worker returns rows; reports are built from the record"},
	{"internal/worker", "internal/gateway", "the gateway is the supervisor's: a worker asks it (bind, deadline, gateway) over the protocol"},
	{"internal/worker", "internal/sched", "admission is the supervisor's: a worker runs what it is sent"},
	{"internal/account", "internal/run", "an attempt's account at the gateway knows nothing of the stages; internal/run imports internal/account, never the reverse"},
	{"internal/account", "internal/sched", "the scheduler's backoff hooks come in as gateway.AttemptHooks"},
	{"internal/tend", "internal/run", "the control loop reads and tells the run through tend.Run; internal/run imports internal/tend, never the reverse"},
	{"internal/tend", "internal/sandbox/...", "the control loop reads the scheduler, the ramp, the gateway and the record: providers are not its business"},
	{"internal/crashed", "internal/run", "which runs are dead is the record's and runlock's to say: the launch, steward runs and the reports ask"},
	{"internal/evalset", "internal/run", "validation reads the judging vocabulary from internal/score, not the supervisor"},
	{"internal/evalset", "internal/sandbox/kubernetes/...", "provider sections and flags are the providers' (sandbox.RegisterSection): the loader names no provider (issue 26 item 4)"},
	{"internal/evalset", "internal/sandbox/docker/...", "the loader names no provider (issue 26 item 4)"},
	{"internal/evalset", "internal/sandbox/local/...", "the loader names no provider (issue 26 item 4)"},
	{"internal/specs", "internal/run", "the sandbox specs of a plan are made from the eval set and the plan alone: internal/run imports internal/specs, never the reverse"},
	{"internal/specs", "internal/worker", "the specs cross to a worker in attempt.Env: the process boundary is not theirs"},
	{"internal/specs", "internal/record", "the specs know the eval set, the plan and the providers, not the record"},
	{"internal/specs", "internal/sched", "the specs know nothing of admission"},
	{"internal/specs", "internal/gateway", "the specs know nothing of the gateway"},
	{"internal/sandbox/...", "internal/runlock", "run liveness is injected into providers (sandbox/docker.Liveness, local.Judge)"},
	{"internal/sandbox/...", "internal/run", "providers know nothing of the supervisor"},
	{"internal/sandbox/...", "internal/sched", "providers know nothing of the scheduler"},
	{"internal/sandbox/...", "internal/record", "providers know nothing of the record"},
	{"internal/gateway", "internal/run", "the gateway knows attempts only as tokens"},
	{"internal/gateway", "internal/record", "the gateway knows attempts only as tokens"},
	{"internal/report", "internal/run", "reports are built from the record, never from live objects"},
	{"internal/report", "internal/sandbox/...", "reports are built from the record"},
	{"internal/merge", "internal/run", "a merge reads and writes records; it runs nothing"},
	{"internal/merge", "internal/sandbox/...", "a merge reads and writes records; it runs nothing"},
	{"internal/...", "internal/cli", "only cmd/ wires the CLI"},
	{"internal/...", "internal/archtest", "test-only"},
}

// onlyImports lists packages that may import nothing of Steward's but the
// packages named: the pure ones that sit below the supervisor.
var onlyImports = []struct {
	from string
	may  []string
	why  string
}{
	{"internal/score", []string{"internal/status", "internal/stats"}, "judging is pure: matching, verdicts and reducers run nothing (issue 26 item 1)"},
	{"internal/egress", nil, "the egress proxy runs alone in a container of its own per sandbox: it knows nothing of Steward (issue 24 item 7)"},
}

// allowedExceptions are edges a broad rule above would forbid but that are by design.
var allowedExceptions = map[[2]string]bool{
	{"internal/sandbox/local", "internal/runlock"}: true, // only runlock.Here().Encode() for its own owner file; its sweep's Judge is injected
}

func matches(pattern, pkg string) bool {
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == p || strings.HasPrefix(pkg, p+"/")
	}
	return pkg == pattern
}

// imports reads the production (non-test) imports of every package of the
// module under root, keyed by path relative to the module.
func imports(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	graph := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if graph[rel] == nil {
			graph[rel] = map[string]bool{}
		}
		for _, im := range f.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return err
			}
			if q, ok := strings.CutPrefix(p, module); ok {
				graph[rel][q] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read imports: %v", err)
	}
	return graph
}

func violations(graph map[string]map[string]bool) []string {
	var out []string
	for from, tos := range graph {
		for to := range tos {
			if allowedExceptions[[2]string{from, to}] {
				continue
			}
			for _, r := range forbidden {
				if from != to && matches(r.from, from) && matches(r.to, to) {
					out = append(out, from+" imports "+to+": "+r.why)
				}
			}
		}
	}
	for _, r := range onlyImports {
		for to := range graph[r.from] {
			ok := to == r.from
			for _, m := range r.may {
				ok = ok || to == m
			}
			if !ok {
				out = append(out, r.from+" imports "+to+": "+r.why)
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestImportRules(t *testing.T) {
	graph := imports(t, filepath.Join("..", ".."))
	if len(graph["internal/run"]) == 0 || len(graph["internal/cli"]) == 0 {
		t.Fatalf("the import graph was not read (internal/run: %v)", graph["internal/run"])
	}
	if !graph["internal/run"]["internal/attempt"] {
		t.Errorf("the import graph has no edge internal/run → internal/attempt (the supervisor runs attempts through it)")
	}
	for _, v := range violations(graph) {
		t.Error(v)
	}
}

// TestImportRulesCatch checks that the rules fail on the edges the house
// once had (the test is not vacuous).
func TestImportRulesCatch(t *testing.T) {
	old := map[string]map[string]bool{
		"internal/plan":           {"internal/record": true, "internal/evalset": true},
		"internal/record":         {"internal/sandbox": true},
		"internal/sandbox/docker": {"internal/runlock": true, "internal/sandbox": true},
		"internal/sandbox/local":  {"internal/runlock": true},
		"internal/sched":          {"internal/status": true},
		"internal/score":          {"internal/status": true, "internal/evalset": true},
		"internal/attempt":        {"internal/run": true, "internal/record": true},
		"internal/run":            {"internal/attempt": true},
	}
	got := violations(old)
	want := []string{
		"internal/attempt imports internal/run",
		"internal/plan imports internal/record",
		"internal/record imports internal/sandbox",
		"internal/sandbox/docker imports internal/runlock",
		"internal/sched imports internal/status",
		"internal/score imports internal/evalset",
	}
	if len(got) != len(want) {
		t.Fatalf("violations:\n%s\nwant %d: %v", strings.Join(got, "\n"), len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]+":") {
			t.Errorf("violation %d = %q, want %q", i, got[i], want[i])
		}
	}
}
