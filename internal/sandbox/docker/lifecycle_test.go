package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
)

func TestLifecycle(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "life")
	s.Env = map[string]string{"TASK_ENV": "from-spec"}
	s.Workdir = "/work/attempt"
	prepare(t, r, &s)
	ctx := context.Background()
	sb := mustCreate(t, r, s)
	if sb.Workdir() != "/work/attempt" {
		t.Fatalf("workdir %q", sb.Workdir())
	}

	// Files in, through the archive API, nested and absolute, with modes.
	err := sb.CopyIn(ctx, []sandbox.File{
		{Path: "in.txt", Data: []byte("hello\n")},
		{Path: "deep/er/run.sh", Mode: 0o755, Data: []byte("#!/bin/sh\necho ran \"$@\"\n")},
		{Path: "/opt/steward/abs.txt", Data: []byte("abs")},
	})
	if err != nil {
		t.Fatal(err)
	}
	res := mustExec(t, sb, `cat in.txt; ./deep/er/run.sh a b; cat /opt/steward/abs.txt; echo; pwd; echo "$TASK_ENV $ATT_ENV$STEWARD_SHELL"`)
	want := "hello\nran a b\nabs\n/work/attempt\nfrom-spec \n"
	if string(res.Stdout) != want || res.ExitCode != 0 {
		t.Fatalf("stdout %q exit %d stderr %q", res.Stdout, res.ExitCode, res.Stderr)
	}

	// Exit codes, stderr, stdin and per-exec env.
	res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: `read line; echo "got $line $ATT_ENV"; echo oops >&2; exit 3`,
		Stdin: []byte("input-line\n"), Env: map[string]string{"ATT_ENV": "per-exec"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "got input-line per-exec\n" || string(res.Stderr) != "oops\n" || res.TimedOut || res.OOMKilled {
		t.Fatalf("got %+v stdout %q stderr %q", res, res.Stdout, res.Stderr)
	}

	// Files out.
	mustExec(t, sb, `echo result > out.txt; mkdir -p d`)
	data, err := sb.CopyOut(ctx, "out.txt")
	if err != nil || string(data) != "result\n" {
		t.Fatalf("copy out: %q %v", data, err)
	}
	if _, err := sb.CopyOut(ctx, "missing.txt"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("copy out of a missing file: %v", err)
	}
	if _, err := sb.CopyOut(ctx, "d"); err == nil {
		t.Fatal("copy out of a directory succeeded")
	}

	// Output capped.
	res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: `i=0; while [ $i -lt 2000 ]; do echo 0123456789; i=$((i+1)); done; echo tail >&2`, MaxOutput: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 100 || !res.Truncated || string(res.Stderr) != "tail\n" || res.ExitCode != 0 {
		t.Fatalf("capped: %d bytes truncated=%v stderr %q", len(res.Stdout), res.Truncated, res.Stderr)
	}

	// A hung command is killed at its timeout, with its children.
	res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: `echo started; sleep 1000 & sleep 1000; echo never`, Timeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode == 0 || string(res.Stdout) != "started\n" {
		t.Fatalf("timeout: %+v stdout %q", res, res.Stdout)
	}
	res = mustExec(t, sb, `n=0; for d in /proc/[0-9]*; do read -r c < $d/comm 2>/dev/null; [ "$c" = sleep ] && n=$((n+1)); done; echo $n`)
	if strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("sleep processes left after timeout: %s", res.Stdout)
	}

	// The parent context cancelled mid-command: the command is killed too.
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = sb.Exec(cctx, sandbox.ExecSpec{Shell: `sleep 1000`})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exec under a cancelled ctx: %v", err)
	}

	// Reset empties the workdir and kills what the last attempt left running.
	mustExec(t, sb, `(sleep 1000 &) ; touch .hidden; mkdir -p x/y`)
	if err := sb.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	res = mustExec(t, sb, `ls -A; n=0; for d in /proc/[0-9]*; do read -r c < $d/comm 2>/dev/null; [ "$c" = sleep ] && n=$((n+1)); done; echo sleeps=$n; pwd`)
	if string(res.Stdout) != "sleeps=0\n/work/attempt\n" {
		t.Fatalf("after reset: %q", res.Stdout)
	}
	mustExec(t, sb, `echo still alive`)

	// Close works with a cancelled context and removes the container.
	dead, cancel2 := context.WithCancel(ctx)
	cancel2()
	if err := sb.Close(dead); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(dead); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := r.P.cli.ContainerInspect(ctx, sb.ID()); !cerrdefs.IsNotFound(err) {
		t.Fatalf("container still there after Close: %v", err)
	}
}

func TestHardening(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "hard")
	s.CapAdd = []string{"CHOWN"}
	prepare(t, r, &s)
	sb := mustCreate(t, r, s)
	ins, err := r.P.cli.ContainerInspect(context.Background(), sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	hc := ins.HostConfig
	if hc.NanoCPUs != 5e8 || hc.Memory != 128<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 128 {
		t.Fatalf("limits: cpus %d mem %d pids %v", hc.NanoCPUs, hc.Memory, hc.PidsLimit)
	}
	// No host path is mounted: the only mounts are the disk quota's own
	// anonymous tmpfs volumes (disk.go), or none where the engine's storage
	// option bounds the writable layer.
	if len(hc.Binds) != 0 {
		t.Fatalf("sandbox has binds: %v", hc.Binds)
	}
	for _, m := range hc.Mounts {
		if m.Type != "volume" || m.Source != "" || m.VolumeOptions == nil || m.VolumeOptions.DriverConfig == nil || m.VolumeOptions.DriverConfig.Options["type"] != "tmpfs" {
			t.Fatalf("sandbox has a mount other than a tmpfs volume: %+v", m)
		}
	}
	if hc.StorageOpt["size"] == "" && (!hc.ReadonlyRootfs || len(hc.Mounts) == 0) {
		t.Fatalf("no disk quota: storage opt %v, read-only root %v, mounts %v", hc.StorageOpt, hc.ReadonlyRootfs, hc.Mounts)
	}
	if hc.Init == nil || !*hc.Init || hc.LogConfig.Type != "none" {
		t.Fatalf("init %v, log driver %q: want Docker's init and no container log", hc.Init, hc.LogConfig.Type)
	}
	if strings.Join(hc.CapDrop, ",") != "ALL" || strings.TrimPrefix(strings.Join(hc.CapAdd, ","), "CAP_") != "CHOWN" || strings.Join(hc.SecurityOpt, ",") != "no-new-privileges" {
		t.Fatalf("caps/secopts: %v %v %v", hc.CapDrop, hc.CapAdd, hc.SecurityOpt)
	}
	for _, k := range []string{"dev.steward.managed", "dev.steward.run", "dev.steward.task", LabelLock, "dev.steward.test"} {
		if ins.Config.Labels[k] == "" {
			t.Errorf("label %s missing: %v", k, ins.Config.Labels)
		}
	}
	if ins.Config.Labels[LabelLock] != r.Lock.Path() {
		t.Errorf("lock label %q, want %q", ins.Config.Labels[LabelLock], r.Lock.Path())
	}
	// Effective capabilities inside: only CHOWN (bit 0) remains.
	res := mustExec(t, sb, `while read -r k v; do [ "$k" = CapEff: ] && echo $v; done < /proc/self/status`)
	if strings.TrimSpace(string(res.Stdout)) != "0000000000000001" {
		t.Fatalf("CapEff %q", res.Stdout)
	}
}

func TestImageMissing(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := &sandbox.Spec{Task: "nope", Image: "steward-test-absent:" + randomID(4)}
	err := r.P.Prepare(context.Background(), []*sandbox.Spec{s})
	if err == nil {
		t.Fatal("Prepare accepted a missing image")
	}
	for _, want := range []string{s.Image, "docker build -t " + s.Image, "docker pull " + s.Image} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestBuildCachedByContent(t *testing.T) {
	t.Parallel()
	ref := testImage(t) // built once
	dir := dockertest.BusyboxContext(t, testOwner)
	sum, err := ContextHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ref != BuildTagPrefix+sum[:20] {
		t.Fatalf("ref %s, hash %s", ref, sum)
	}
	// A new run finds the image by content hash and does not build again.
	r := newRun(t, nil)
	s := &sandbox.Spec{Task: "b", Build: dir}
	prepare(t, r, s)
	if s.Image != ref || !strings.Contains(r.Log.String(), "up to date") {
		t.Fatalf("image %s log %q", s.Image, r.Log.String())
	}
	// Changing any file changes the hash.
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum2, _ := ContextHash(dir)
	if sum2 == sum {
		t.Fatal("hash did not change with the content")
	}
	// A bad Dockerfile fails with the builder's message.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "Dockerfile"), []byte("FROM scratch\nCOPY missing-file /x\n"), 0o644)
	err = r.P.Prepare(context.Background(), []*sandbox.Spec{{Task: "bad", Build: bad}})
	if err == nil || !strings.Contains(err.Error(), "missing-file") {
		t.Fatalf("bad build: %v", err)
	}
	// The build labels carry the run's labels.
	ins, err := r.P.cli.ImageInspect(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if ins.Config.Labels[sandbox.LabelManaged] != "true" {
		t.Errorf("image labels %v", ins.Config.Labels)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "limits")
	s.Memory = 48 << 20
	s.PIDs = 64
	prepare(t, r, &s)
	ctx := context.Background()
	sb := mustCreate(t, r, s)

	// Memory: a string doubling until the limit kills it.
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: `x=a; while true; do x="$x$x"; done`, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OOMKilled || res.ExitCode != 137 || res.TimedOut {
		t.Fatalf("memory hog: %+v", res)
	}
	// The sandbox carries on; an ordinary kill afterwards is not mistaken for OOM.
	res = mustExec(t, sb, `echo fine`)
	if string(res.Stdout) != "fine\n" || res.OOMKilled {
		t.Fatalf("after OOM: %+v", res)
	}
	res = mustExec(t, sb, `kill -KILL $$`)
	if res.ExitCode != 137 || res.OOMKilled {
		t.Fatalf("self-kill reported as %+v", res)
	}

	// PIDs: a fork bomb stops at the limit; the sandbox carries on.
	// The bomb reads the limit's hit counter itself (shell builtins only), as
	// a command at the limit may not start.
	res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: `b() { b | b & }; b; sleep 3; while read -r k v; do [ "$k" = max ] && echo "hit=$v"; done < /sys/fs/cgroup/pids/pids.events; echo bombed`, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	bomb := res
	if err := sb.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	// The hit counter is the container's cgroup's, which Reset keeps: read
	// again here too, as the bomb's own shell may not live to print it (on
	// a busy CI machine it once printed nothing at all).
	res = mustExec(t, sb, `read -r max < /sys/fs/cgroup/pids/pids.max; read -r cur < /sys/fs/cgroup/pids/pids.current; echo "max=$max"; while read -r k v; do [ "$k" = max ] && echo "hit=$v"; done < /sys/fs/cgroup/pids/pids.events; [ $cur -lt 10 ] && echo calm`)
	out := string(res.Stdout)
	if !strings.Contains(out, "max=64\n") || !strings.Contains(out, "hit=") || strings.Contains(out, "hit=0\n") || !strings.Contains(out, "calm") {
		t.Fatalf("pids after fork bomb: %q (stderr %q; the bomb: %+v)", out, res.Stderr, bomb)
	}
	res = mustExec(t, sb, `echo carry on`)
	if string(res.Stdout) != "carry on\n" {
		t.Fatalf("after fork bomb: %+v", res)
	}
	ins, err := r.P.cli.ContainerInspect(ctx, sb.ID())
	if err != nil || !ins.State.Running {
		t.Fatalf("sandbox not running after limits: %v %+v", err, ins.State)
	}
}

var _ = container.ListOptions{}
var _ = bytes.NewReader

// A sandbox whose processes fill its PID limit cannot start a command; that is
// the task's failure (exit 126 with the reason), not an infrastructure error.
//
// Filling the limit does not stop every exec: runc moves the exec's process
// into the container's pids cgroup, and the kernel (cgroup v1 and v2 alike)
// charges such a move without checking pids.max. A command that needs no new
// process (`echo hi` from the shell Steward starts) then runs for real; the
// exec fails to start only when runc's init, already moved in, needs one more
// thread, which depends on scheduling (about 1 exec in 10 on a loaded 2-core
// machine). So the test probes until an exec fails to start, and asserts every
// probe is one of the two honest outcomes.
func TestExecAtPIDLimit(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "pidfull")
	s.PIDs = 12
	prepare(t, r, &s)
	ctx := context.Background()
	sb := mustCreate(t, r, s)
	// Each round needs a subshell and its sleep, so the loop stops with two
	// slots free (one is this shell's); the last sleep takes one of them.
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: `i=0; while [ $i -lt 30 ]; do (sleep 300 &) 2>/dev/null; i=$((i+1)); done; sleep 300 & echo filled`, Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "filled\n" {
		t.Fatalf("fill the PID limit: %v %+v stderr %q", err, res, res.Stderr)
	}
	// The kernel's count, read from outside: the sleeps are alive (the
	// sandbox's init reaps only the dead) and leave one slot at most.
	cur, lim := pidStats(t, r, sb)
	if lim != 12 || cur < lim-1 {
		t.Fatalf("after filling: %d of %d pids in use, want at least %d", cur, lim, lim-1)
	}
	// Whether runc's exec then fails to start depends on scheduling (the
	// kernel lets a process be moved into a full pids cgroup; only a thread
	// runc's init needs afterwards is refused), so each exec may run or be
	// refused: either way it is the task's result, never an infra error.
	for try := 0; try < 20; try++ {
		res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: `echo hi`, Timeout: time.Minute})
		if err != nil {
			t.Fatalf("exec at the PID limit (try %d): %v (errors.Is infra: %v)", try, err, errors.Is(err, sandbox.ErrInfra))
		}
		switch {
		case res.ExitCode == 0 && string(res.Stdout) == "hi\n" && len(res.Stderr) == 0:
		case res.ExitCode == 126 && len(res.Stdout) == 0 && strings.Contains(string(res.Stderr), "the sandbox is at its PID limit"):
			t.Logf("at the limit (try %d): exit %d stderr %q", try, res.ExitCode, res.Stderr)
		default:
			t.Fatalf("exec at the PID limit (try %d): %+v stderr %q", try, res, res.Stderr)
		}
	}
	// The judgement an exec that failed to start gets, asked directly: at
	// the limit (the engine's own count), the command failed with the reason.
	box := sb
	r2, ok := box.atPIDLimit(ctx, errors.New("OCI runtime exec failed: read init-p: connection reset by peer"), time.Now())
	if !ok || r2.ExitCode != 126 || !strings.Contains(string(r2.Stderr), "the sandbox is at its PID limit") {
		t.Fatalf("a start failure at the PID limit: ok=%v %+v stderr %q", ok, r2, r2.Stderr)
	}
	// Reset ends the sleeps; the sandbox carries on.
	if err := sb.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if cur, _ := pidStats(t, r, sb); cur > 3 {
		t.Fatalf("after reset: %d pids in use", cur)
	}
	if res = mustExec(t, sb, `echo hi`); res.ExitCode != 0 || string(res.Stdout) != "hi\n" {
		t.Fatalf("after reset: %+v", res)
	}
	// Below the limit, a start failure is not the task's: it stays an error.
	if _, ok := box.atPIDLimit(ctx, errors.New("OCI runtime exec failed"), time.Now()); ok {
		t.Fatal("a start failure below the PID limit was blamed on the limit")
	}
	// Closing still works.
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// pidStats reads a sandbox's pids cgroup (in use, limit) through the daemon.
func pidStats(t *testing.T, r *testRun, sb *Sandbox) (uint64, uint64) {
	t.Helper()
	st, err := r.P.cli.ContainerStatsOneShot(context.Background(), sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Body.Close()
	var stats container.StatsResponse
	if err := json.NewDecoder(st.Body).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	return stats.PidsStats.Current, stats.PidsStats.Limit
}
