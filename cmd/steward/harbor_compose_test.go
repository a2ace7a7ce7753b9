package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A Harbor task with a compose environment (testdata/harbor-compose:
// main built from a busybox Dockerfile, a second service web built from
// another Dockerfile of another name, serving a file with busybox httpd
// behind a health check) runs through the CLI on Docker: the oracle, which
// fetches http://web:8080/secret.txt by the service's name from main,
// passes; an agent that does nothing fails (the verifier, in main, fetches
// it again and compares); after each run no container or network labelled
// with the run is left.
func TestHarborComposeOracleAndDoNothing(t *testing.T) {
	t.Parallel()
	needDocker(t)
	dir := t.TempDir()
	ds := filepath.Join(dir, "dataset")
	if err := os.CopyFS(ds, os.DirFS("../../testdata/harbor-compose")); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(ds, "web-service", "environment")
	for _, c := range []struct{ ctx, dockerfile string }{{"main", ""}, {"web", "web.Dockerfile"}} {
		harborBusybox(t, filepath.Join(env, c.ctx), c.dockerfile, "cmd/steward harbor compose "+c.ctx)
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), `name: harbor-compose
tasks:
  - name: dataset
    sandbox: {provider: docker}
    tasks_from: {harbor: dataset}
    agent: 'true'
`)
	launch := func(wantCode int, args ...string) (string, []string) {
		t.Helper()
		cmd := exec.Command(exe, append([]string{"launch", "--json"}, append(args, "steward.yaml")...)...)
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			RunIDs   []string `json:"run_ids"`
			Attempts []struct {
				Sample, Status, Explanation string
			} `json:"attempts"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatalf("%v: exit %d, JSON report: %v\n%s\n%s", args, code, err, stdout.String(), stderr.String())
		}
		var st []string
		for _, a := range rep.Attempts {
			st = append(st, a.Sample+":"+a.Status+" "+a.Explanation)
		}
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d: %q\n%s", args, code, wantCode, st, stderr.String())
		}
		if len(rep.RunIDs) != 1 {
			t.Fatalf("run ids %v", rep.RunIDs)
		}
		if left := leftovers(t, rep.RunIDs[0]); left != "" {
			t.Errorf("%v: left behind:\n%s", args, left)
		}
		return stderr.String(), st
	}
	stderr, st := launch(0, "--agent", "oracle")
	if len(st) != 1 || !strings.HasPrefix(st[0], "web-service:passed") {
		t.Fatalf("oracle: %q\n%s", st, stderr)
	}
	stderr, st = launch(1)
	if len(st) != 1 || !strings.HasPrefix(st[0], "web-service:failed") {
		t.Fatalf("do-nothing: %q\n%s", st, stderr)
	}
}
