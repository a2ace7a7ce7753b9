package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/status"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// testdata is the package's testdata directory, resolved before any test
// changes the working directory (doctor reads ./_steward.yaml).
var testdata = func() string {
	p, err := filepath.Abs("testdata")
	if err != nil {
		panic(err)
	}
	return p
}()

// golden compares got with testdata/name, rewriting it under -update (the
// pattern of internal/report's goldens).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(testdata, name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("write golden: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run go test ./internal/cli -update to accept):\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

// normaliser rewrites what changes from run to run (ids, times, paths,
// versions) in a command's output; the product prints them as they are.
type normaliser []struct {
	re   *regexp.Regexp
	with string
}

func (n normaliser) apply(s string) string {
	for _, r := range n {
		s = r.re.ReplaceAllString(s, r.with)
	}
	return s
}

func norm(pairs ...string) normaliser {
	var n normaliser
	for i := 0; i < len(pairs); i += 2 {
		n = append(n, struct {
			re   *regexp.Regexp
			with string
		}{regexp.MustCompile(pairs[i]), pairs[i+1]})
	}
	return n
}

// A run id (record.NewID: the start's date and time, six hex digits) keeps
// its width, so tables stay aligned.
var runIDs = norm(`\b\d{8}-\d{6}-[0-9a-f]{6}\b`, "YYYYMMDD-hhmmss-RUNID0")

const goldenSet = `
name: golden
tasks:
  - name: echo
    sandbox: {provider: local}
    exclusive: false
    agent: 'printf "%s" "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: right, input: "x", target: "x"}
      - {id: wrong, input: "y", target: "z"}
  - name: fixed
    sandbox: {provider: local}
    exclusive: false
    max_samples: 1
    attempts: 2
    agent: 'printf "%s" "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: one, input: "a", target: "a"}
`

// The PLAN line and `launch --dry` (terminal and --json), before any run
// and after one whose results carry but for the sample that changed. The
// forecast's times are the earlier run's measured ones: normalised.
func TestGoldenLaunchDry(t *testing.T) {
	dir := t.TempDir()
	set := writeFile(t, filepath.Join(dir, "steward.yaml"), goldenSet)
	rec := filepath.Join(dir, "rec")
	s := newStreams()
	times := append(norm(
		`~?\d+(\.\d+)?(µs|ms|s|m)\b`, "DURATION",
		`("seconds": \{\s*"point": )[^,]+(,\s*"lo": )[^,]+(,\s*"hi": )[^,]+`, "${1}SECONDS${2}SECONDS${3}SECONDS",
	), runIDs...)
	dry := func(name string, args ...string) {
		t.Helper()
		s.must(t, ExitOK, append([]string{"launch", "--dry", "--record", rec}, append(args, set)...)...)
		out := s.stdout.String()
		if s.stderr.Len() > 0 {
			out = "--- stderr ---\n" + s.stderr.String() + "--- stdout ---\n" + out
		}
		golden(t, name, []byte(times.apply(out)))
	}
	dry("dry_new.txt.golden")
	dry("dry_new.json.golden", "--json")

	s.must(t, ExitFailed, "launch", "--record", rec, set)
	writeFile(t, set, strings.Replace(goldenSet, `target: "z"`, `target: "y"`, 1))
	dry("dry_carry.txt.golden", "--max-concurrency", "3")
	dry("dry_carry.json.golden", "--max-concurrency", "3", "--json")
}

// `steward runs` and `runs --json` over a record of fixed runs (ids, hosts,
// pids and times chosen by the test; the times shown in UTC).
func TestGoldenRuns(t *testing.T) {
	ctx := context.Background()
	rec := t.TempDir()
	db, err := record.Open(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	runs := []struct {
		id     string
		st     status.Run
		took   time.Duration
		shard  string
		states []status.Attempt
	}{
		{"20261129-120000-aaaaaa", status.Finished, 83 * time.Second, "", []status.Attempt{status.Passed, status.Failed, status.Errored, status.Skipped}},
		{"20261129-130000-bbbbbb", status.Cancelled, 7 * time.Second, "1/2", []status.Attempt{status.Passed, status.Interrupted}},
		{"20261129-140000-cccccc", status.Crashed, 0, "", []status.Attempt{status.Infra}},
	}
	for i, r := range runs {
		start := t0.Add(time.Duration(i) * time.Hour)
		if err := db.StartRun(ctx, record.Run{ID: r.id, EvalSet: "steward.yaml", Shard: r.shard, Started: start, PID: 4242 + i, Host: "runner-" + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
		for seq, st := range r.states {
			if err := db.Publish(ctx, record.Attempt{RunID: r.id, Seq: seq, Task: "t", Sample: "s", Attempt: seq + 1, Status: st, Finished: start}); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.FinishRun(ctx, r.id, r.st, start.Add(r.took), nil); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	local := time.Local
	time.Local = time.UTC // `steward runs` shows start times in local time
	t.Cleanup(func() { time.Local = local })
	s := newStreams()
	s.must(t, ExitOK, "runs", "--record", rec)
	golden(t, "runs.txt.golden", s.stdout.Bytes())
	s.must(t, ExitOK, "runs", "--record", rec, "--json")
	golden(t, "runs.json.golden", s.stdout.Bytes())
	s.must(t, ExitOK, "runs", "--record", t.TempDir())
	golden(t, "runs_empty.txt.golden", s.stdout.Bytes())
}

// `steward doctor` where no Docker daemon answers and the kubeconfig named
// does not exist: what each provider says it cannot see.
func TestGoldenDoctorNothingAnswers(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-docker.sock"))
	s := newStreams()
	s.env["KUBECONFIG"] = filepath.Join(dir, "no-kubeconfig")
	s.must(t, ExitOK, "doctor")
	golden(t, "doctor_nothing.txt.golden", []byte(strings.ReplaceAll(s.stdout.String(), dir, "DIR")))
}

// `steward doctor` against this machine's Docker daemon: its lines, with
// what depends on the machine (versions, counts, networks, pools, images)
// normalised. Skipped where no daemon answers, except under CI=true.
func TestGoldenDoctorDocker(t *testing.T) {
	if !docker.Available(context.Background()) {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Docker daemon answers, and CI=true: Docker tests fail, never skip, in CI")
		}
		t.Skip("no Docker daemon answers")
	}
	t.Chdir(t.TempDir())
	s := newStreams()
	s.must(t, ExitOK, "doctor")
	var out []string
	section := ""
	for _, line := range strings.Split(strings.TrimSuffix(s.stdout.String(), "\n"), "\n") {
		indented := strings.HasPrefix(line, "  ")
		switch {
		case indented && section != "":
			if out[len(out)-1] != section {
				out = append(out, section)
			}
			continue
		case strings.HasPrefix(line, "networks "):
			section = "  NETWORK DRIVER SUBNETS (one line each)"
		case strings.HasPrefix(line, "docker address pools"):
			section = "  POOL LINES"
			line, _, _ = strings.Cut(line, " (") // the pools' source: daemon.json or Docker's built-in
			line += " (SOURCE): POOLS"
		default:
			section = ""
		}
		if strings.HasPrefix(line, "images ") {
			line, _, _ = strings.Cut(line, ":")
			line += ": TAGS"
		}
		out = append(out, line)
	}
	got := norm(
		`^docker daemon \S+ \(API \S+, client negotiated \S+\), \S+/\S+, storage \S+, cgroup \S+ v\S+`, "docker daemon VERSION (API V, client negotiated V), OS/ARCH, storage DRIVER, cgroup DRIVER vN",
		`^(default sandbox budget \d+) \(from .*, at `, "$1 (from SOURCE, at ",
		`\d+(\.\d+)? (GiB|MiB)`, "N $2",
		`\d+`, "N",
	)
	var lines []string
	for _, l := range out {
		lines = append(lines, got.apply(l))
	}
	golden(t, "doctor_docker.txt.golden", []byte(strings.Join(lines, "\n")+"\n"))
}
