package docker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/steward-evals/steward/internal/sandbox"
)

// An agent that writes past its disk quota fails with the quota used up,
// and nothing of what it wrote reaches the host's disk.
func TestDiskQuota(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "disk")
	s.Disk = 8 << 20
	prepare(t, r, &s)
	ctx := context.Background()
	sb := mustCreate(t, r, s)
	// 64 MiB into the workdir, /tmp and the root: each write stops at its quota or fails.
	for _, target := range []string{"big", "/tmp/big", "/big"} {
		res := mustExec(t, sb, `dd if=/dev/zero of=`+target+` bs=1M count=64`)
		if res.ExitCode == 0 {
			t.Fatalf("writing 64 MiB to %s with an 8 MiB quota succeeded: %+v", target, res)
		}
		if target != "/big" && !res.DiskFull {
			t.Errorf("writing past the quota to %s is not reported as a full disk: exit %d stderr %q", target, res.ExitCode, res.Stderr)
		}
	}
	res := mustExec(t, sb, `ls -l big; df -k . /tmp`)
	t.Logf("%s", res.Stdout)
	// The host holds none of it: the container's writable layer stays small.
	ins, _, err := r.P.cli.ContainerInspectWithRaw(ctx, sb.ID(), true)
	if err != nil {
		t.Fatal(err)
	}
	if ins.SizeRw == nil || *ins.SizeRw > 1<<20 {
		t.Fatalf("the sandbox wrote %v bytes to the host's disk", ins.SizeRw)
	}
	// A command that stays within the quota is not flagged.
	if res := mustExec(t, sb, `rm -f big /tmp/big; dd if=/dev/zero of=small bs=1M count=1 && false`); res.DiskFull {
		t.Fatalf("a failing command within the quota was reported as a full disk")
	}
}

// build: steps reach no network unless the task asks for it.
func TestBuildHasNoNetwork(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	ctx := context.Background()
	bridge, err := r.P.cli.NetworkInspect(ctx, "bridge", network.InspectOptions{})
	if err != nil || len(bridge.IPAM.Config) == 0 {
		t.Fatalf("inspect the default bridge: %v", err)
	}
	// A server the build could reach over Docker's default build network,
	// listening only on the host side of the default bridge.
	gw := bridge.IPAM.Config[0].Gateway
	if gw == "" { // the default bridge's gateway is the first address of its subnet
		pfx, err := netip.ParsePrefix(bridge.IPAM.Config[0].Subnet)
		if err != nil {
			t.Fatalf("default bridge subnet: %v", err)
		}
		gw = pfx.Masked().Addr().Next().String()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "reached") })}
	go srv.Serve(ln)
	defer srv.Close()
	build := func(network, note string) error {
		dir := t.TempDir()
		// busybox's nc, not its wget (which crashes in the static build).
		df := fmt.Sprintf("FROM %s\n# %s %s\nRUN printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 %s %d | grep -q reached\n", testImage(t), note, randomID(4), gw, ln.Addr().(*net.TCPAddr).Port)
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		ref, err := r.P.buildImage(cctx, dir, "net", network)
		if err == nil {
			rememberImage(ref)
		}
		return err
	}
	if err := build("", "default none"); err == nil || !strings.Contains(err.Error(), "returned a non-zero code") {
		t.Fatalf("a build step reached the network without build_network: %v", err)
	}
	// The control: asked for, the same step reaches it.
	if err := build(BuildNetworkDefault, "asked"); err != nil {
		t.Fatalf("build_network: default: %v", err)
	}
}

var _ = container.ListOptions{}

// Between attempts of a reused sandbox no process of the last attempt is
// left, however it hid, while what the task's setup wrote outside the
// workdir stays and the workdir is emptied.
func TestResetEndsEveryProcess(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "reset")
	prepare(t, r, &s)
	ctx := context.Background()
	sb := mustCreate(t, r, s)
	mustExec(t, sb, `echo setup > /tmp/setup-state`)
	res := mustExec(t, sb, `echo x > left.txt
setsid sh -c 'sleep 1000' >/dev/null 2>&1 </dev/null &
(trap "" TERM HUP INT; exec sleep 1001) >/dev/null 2>&1 </dev/null &
sh -c 'sh -c "sleep 1002" & exit' >/dev/null 2>&1 </dev/null
echo started`)
	if n, err := sb.strays(ctx); err != nil || n < 3 {
		t.Fatalf("the attempt's processes are not visible: %d %v (%s)", n, err, res.Stdout)
	}
	if err := sb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := sb.strays(ctx); err != nil || n != 0 {
		t.Fatalf("%d processes of the last attempt survived Reset (%v)", n, err)
	}
	res = mustExec(t, sb, `cat /tmp/setup-state; ls -A`)
	if string(res.Stdout) != "setup\n" {
		t.Fatalf("after Reset: %q (want the setup's file kept and an empty workdir)", res.Stdout)
	}
}

// When the kill from inside does not work (an agent replaced the shell it
// runs in, where the root is writable), the daemon's process list shows
// what is left: the container is stopped, which ends every process, and the
// sandbox is not reused.
func TestQuiesceStopsWhatTheKillMissed(t *testing.T) {
	// Not parallel: it replaces quiesceScript, which every sandbox of this
	// binary uses (a parallel TestResetEndsEveryProcess found its kill gone).
	r := newRun(t, nil)
	s := spec(t, "quiesce")
	prepare(t, r, &s)
	ctx := context.Background()
	sb := mustCreate(t, r, s)
	mustExec(t, sb, `setsid sh -c 'exec sleep 1000' >/dev/null 2>&1 </dev/null & echo started`)
	saved := quiesceScript
	quiesceScript = "true" // the "kill" does nothing
	defer func() { quiesceScript = saved }()
	if err := sb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	err := sb.Reset(ctx)
	if err == nil || !strings.Contains(err.Error(), "not reused") {
		t.Fatalf("Reset with a process left: %v, want the sandbox refused for reuse", err)
	}
	ins, err := r.P.cli.ContainerInspect(ctx, sb.ID())
	if err != nil || ins.State.Running {
		t.Fatalf("the container still runs (%v): its processes were not ended", err)
	}
}

// Where the root is writable (an engine whose storage option bounds the
// layer), an agent can replace /bin/sh, plant a scorer where the scorer's
// files go and leave a process behind: the grader is a fresh container, and
// none of it is there.
func TestGraderIgnoresTamperedRoot(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	r.P.diskMode = diskNone
	s := spec(t, "tamper")
	prepare(t, r, &s)
	ctx := context.Background()
	sb := mustCreate(t, r, s)
	res := mustExec(t, sb, `echo wrong > answer.txt
mkdir -p /opt/steward/scorer && echo 'exit 0' > /opt/steward/scorer/check.sh
setsid sh -c 'exec sleep 1000' >/dev/null 2>&1 </dev/null &
rm /bin/sh && printf '#!/bin/busybox sh\necho "{\\"passed\\": true}"\n' > /bin/sh && chmod 755 /bin/sh && echo tampered`)
	if !strings.Contains(string(res.Stdout), "tampered") {
		t.Fatalf("the attack did not land (root not writable?): %+v %q", res, res.Stderr)
	}
	if err := sb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	g, dir, err := sb.Grader(ctx, []sandbox.File{{Path: "check.sh", Data: []byte(`test "$(cat answer.txt)" = 42 && echo '{"passed": true}'` + "\n")}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	res = mustExec(t, g, `sh `+dir+`/check.sh; echo "exit $?"; ls /proc | grep -c '^[0-9]'`)
	out := string(res.Stdout)
	if strings.Contains(out, "passed") || !strings.Contains(out, "exit 1") {
		t.Fatalf("the tampered container judged: %q %q", out, res.Stderr)
	}
	// The agent's container was stopped (its shell cannot be trusted to kill).
	if ins, err := r.P.cli.ContainerInspect(ctx, sb.ID()); err != nil || ins.State.Running {
		t.Fatalf("the agent's container still runs: %v", err)
	}
}

// What the image holds at the workdir is there in a sandbox whose workdir is
// a tmpfs volume, as in an ordinary container; the grader holds the agent's
// workdir only (a file the agent removed does not come back).
func TestImageWorkdirSeeded(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	ctx := context.Background()
	dir := t.TempDir()
	df := fmt.Sprintf("FROM %s\nRUN mkdir -p /work/sub && echo baked > /work/hello.txt && echo deep > /work/sub/deep.txt\nWORKDIR /work\n", testImage(t))
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := r.P.buildImage(ctx, dir, "seed", "")
	if err != nil {
		t.Fatal(err)
	}
	rememberImage(ref)
	s := spec(t, "seed")
	s.Image = ref
	sb := mustCreate(t, r, s)
	res := mustExec(t, sb, `cat hello.txt sub/deep.txt; rm hello.txt; echo new > new.txt`)
	if string(res.Stdout) != "baked\ndeep\n" {
		t.Fatalf("the image's workdir is not in the sandbox: %q %q", res.Stdout, res.Stderr)
	}
	if err := sb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	g, _, err := sb.Grader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	if res := mustExec(t, g, `ls -A | tr '\n' ' '`); string(res.Stdout) != "new.txt sub " {
		t.Fatalf("the grader's workdir: %q, want the agent's (new.txt sub)", res.Stdout)
	}
}
