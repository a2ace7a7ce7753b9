package docker

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/sandbox"
)

// A writable-root sandbox (Harbor's tasks write /etc, /usr, /tests, /logs)
// on a daemon without storage quotas: commands and CopyIn write outside the
// workdir, while the workdir and /tmp keep their disk bound. Without
// WritableRoot the same writes are refused (the control).
func TestWritableRoot(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	atomic.StoreInt32(&r.P.diskMode, diskTmpfs) // the mode of a daemon without quotas, whatever this one has
	ctx := context.Background()
	for _, writable := range []bool{false, true} {
		s := spec(t, "writable")
		s.Disk, s.WritableRoot = 8<<20, writable
		prepare(t, r, &s)
		sb := mustCreate(t, r, s)
		res := mustExec(t, sb, `mkdir -p /etc/fixture /usr/local/bin && echo enabled > /etc/fixture/mode && echo ok`)
		if got := strings.TrimSpace(string(res.Stdout)); (got == "ok") != writable {
			t.Fatalf("writable root %v: writing /etc printed %q (exit %d, %s)", writable, got, res.ExitCode, res.Stderr)
		}
		err := sb.CopyIn(ctx, []sandbox.File{{Path: "/tests/test.sh", Data: []byte("echo 1\n"), Mode: 0o755}, {Path: "in-workdir.txt", Data: []byte("w")}})
		if (err == nil) != writable {
			t.Fatalf("writable root %v: CopyIn to /tests: %v", writable, err)
		}
		if !writable {
			continue
		}
		if res := mustExec(t, sb, `cat /etc/fixture/mode /tests/test.sh in-workdir.txt`); string(res.Stdout) != "enabled\necho 1\nw" {
			t.Fatalf("files read back %q (%s)", res.Stdout, res.Stderr)
		}
		// The bounded paths stay bounded.
		for _, target := range []string{"big", "/tmp/big"} {
			res := mustExec(t, sb, `dd if=/dev/zero of=`+target+` bs=1M count=64`)
			if res.ExitCode == 0 || !res.DiskFull {
				t.Fatalf("64 MiB into %s with an 8 MiB disk: exit %d, disk full %v", target, res.ExitCode, res.DiskFull)
			}
		}
		// A tmpfs path the archive API cannot reach is refused, not written under the mount.
		if err := sb.CopyIn(ctx, []sandbox.File{{Path: "/tmp/x", Data: []byte("x")}}); err == nil {
			t.Fatal("CopyIn under /tmp (a tmpfs mount) succeeded")
		}
	}
}

// Resume (Harbor's shared verifier) ends whatever the agent left running
// in its settled sandbox and runs commands there again with its files kept.
func TestResumeAfterSettle(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "resume")
	s.WritableRoot = true
	prepare(t, r, &s)
	ctx := context.Background()
	sb := mustCreate(t, r, s)
	// The agent leaves a writer behind in a session of its own, and a file outside the workdir.
	mustExec(t, sb, `echo state > /etc/left; setsid sh -c 'while :; do echo x >> /work/ticks; done' >/dev/null 2>&1 & echo started`)
	if err := sb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := sb.strays(ctx)
	if err != nil || n != 0 {
		t.Fatalf("after Resume %d processes of the agent are left (%v)", n, err)
	}
	// Nothing writes the file any more: two reads with a command between agree.
	first := mustExec(t, sb, `wc -c < /work/ticks`)
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: `cat /etc/left; wc -c < /work/ticks`, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if want := "state\n" + string(first.Stdout); string(res.Stdout) != want {
		t.Fatalf("after Resume: %q, want %q", res.Stdout, want)
	}
}

// Prepare says when writable-root specs will write unbounded by disk: on a
// daemon without storage quotas, not on one with them.
func TestWritableRootWarning(t *testing.T) {
	t.Parallel()
	for _, mode := range []int32{diskTmpfs, diskStorageOpt} {
		r := newRun(t, nil)
		atomic.StoreInt32(&r.P.diskMode, mode)
		plain, writable := spec(t, "plain"), spec(t, "writable")
		writable.WritableRoot = true
		prepare(t, r, &plain, &writable)
		warned := strings.Contains(r.Log.String(), "1 sandbox spec(s) with a writable root")
		if warned != (mode == diskTmpfs) {
			t.Errorf("disk mode %d: warned %v\n%s", mode, warned, r.Log.String())
		}
	}
}
