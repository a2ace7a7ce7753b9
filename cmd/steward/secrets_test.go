package main

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/ghaction/fakegithub"
)

// surfaceEvalSet has a task for every process Steward runs whose output
// it keeps or prints: a failing host setup, a failing host teardown, a
// failing sandbox setup, an agent and a scorer. Each prints all three
// secrets: the model key (in the variable api_key_env names), a secret_env
// value and a value _steward.yaml's secrets name. Host hooks read them from
// their environment (they run on the host, with Steward's environment);
// sandboxed processes, which never get them, from a file on the host (a
// local sandbox can reach it, as a careless agent could). The second host
// setup prints the key then 390 bytes, so the 400-byte tail Steward keeps
// cuts the key in two.
const surfaceEvalSet = `
name: surfaces
model:
  upstream: openai
  name: gpt-test
  base_url: BASE/v1
  api_key_env: MY_MODEL_KEY
secret_env: [MY_HOOK_TOKEN]
tasks:
  - name: hostsetup
    sandbox: {provider: local}
    exclusive: false
    host:
      setup: 'echo "> Authorization: Bearer $MY_MODEL_KEY"; echo "< hook $MY_HOOK_TOKEN fleet $MY_FLEET_TOKEN"; exit 7'
    agent: 'echo 1'
    scorer: {match: exact}
    samples:
      - {id: s1, input: "x", target: "1"}
  - name: hostcut
    sandbox: {provider: local}
    exclusive: false
    host:
      setup: 'echo "> Authorization: Bearer $MY_MODEL_KEY"; printf "%s" "$MY_MODEL_KEY"; printf "x%.0s" $(seq 1 390); exit 7'
    agent: 'echo 1'
    scorer: {match: exact}
    samples:
      - {id: s2, input: "x", target: "1"}
  - name: hostteardown
    sandbox: {provider: local}
    exclusive: false
    host:
      teardown: 'echo "teardown saw $MY_MODEL_KEY $MY_HOOK_TOKEN $MY_FLEET_TOKEN" >&2; exit 3'
    agent: 'echo 1'
    scorer: {match: exact}
    samples:
      - {id: t1, input: "x", target: "1"}
  - name: sandboxsetup
    sandbox: {provider: local}
    exclusive: false
    setup: 'echo "setup: $(cat LEAK)"; echo "setup err: $(cat LEAK)" >&2; exit 5'
    agent: 'echo 1'
    scorer: {match: exact}
    samples:
      - {id: u1, input: "x", target: "1"}
  - name: agent
    sandbox: {provider: local}
    exclusive: false
    agent: 'echo "agent stderr $(cat LEAK)" >&2; echo "answer $(cat LEAK)"'
    scorer: {match: exact}
    samples:
      - {id: a1, input: "x", target: "1"}
  - name: agenterr
    sandbox: {provider: local}
    exclusive: false
    agent: 'echo "agent died $(cat LEAK)" >&2; exit 9'
    scorer: {match: exact}
    samples:
      - {id: e1, input: "x", target: "1"}
  - name: scorer
    sandbox: {provider: local}
    exclusive: false
    agent: 'echo 1'
    scorer: {command: 'echo "scorer saw $(cat LEAK)" >&2; echo "{\"passed\": false, \"explanation\": \"explained $(cat LEAK)\"}"'}
    samples:
      - {id: c1, input: "x", target: "1"}
`

// TestSecretsNeverReachAnySurface walks every output surface (stderr, the
// record's every table, report.json/md/html, junit.xml, every `steward
// report --format`, the --events file, and through the action the PR
// comment, the job summary, its report files and its log outside its own
// add-mask commands) for every secret source (model key via api_key_env,
// secret_env, _steward.yaml secrets) printed by every process Steward runs
// (failing host setup and teardown, failing sandbox setup, agent, scorer).
// No surface holds any 8 bytes of a secret, even where Steward cut a tail
// in the middle of one.
func TestSecretsNeverReachAnySurface(t *testing.T) {
	t.Parallel()
	const key = "sk-modelKey-2b7e9d41c0a8f3e6"
	const hook = "hook-secret-77c1e0b9d2"
	const fleet = "fleet-secret-4f0a9e3c15"
	secrets := []string{key, hook, fleet}
	fp := fakeprovider.New(fakeprovider.Config{APIKey: key})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	setup := func(dir string) {
		leak := filepath.Join(dir, "leaked.txt")
		writeFile(t, leak, "Authorization: Bearer "+key+" hook="+hook+" fleet="+fleet+"\n")
		writeFile(t, filepath.Join(dir, "_steward.yaml"), "secrets: [MY_FLEET_TOKEN]\n")
		writeFile(t, filepath.Join(dir, "steward.yaml"), strings.ReplaceAll(strings.Replace(surfaceEvalSet, "BASE", base, 1), "LEAK", leak))
	}
	texts := map[string]string{}

	// A plain launch: stderr, the reports, the events file, the record.
	dir := t.TempDir()
	setup(dir)
	env := []string{"MY_MODEL_KEY=" + key, "MY_HOOK_TOKEN=" + hook, "MY_FLEET_TOKEN=" + fleet}
	out, code := faultLaunch(t, dir, env, 2*time.Minute, "launch", "--report-dir", filepath.Join(dir, "reports"), "--events", filepath.Join(dir, "events.jsonl"))
	if code == 0 {
		t.Fatalf("exit 0: every task here fails:\n%s", out)
	}
	texts["launch output (stdout and stderr)"] = out
	for _, f := range []string{"report.md", "report.json", "junit.xml", "report.html"} {
		texts[f] = string(mustRead(t, filepath.Join(dir, "reports", f)))
	}
	for _, format := range []string{"terminal", "markdown", "json", "junit", "comment", "html"} {
		o, _ := faultLaunch(t, dir, env, time.Minute, "report", "--format", format)
		texts["report --format "+format] = o
	}
	texts["--events"] = string(mustRead(t, filepath.Join(dir, "events.jsonl")))
	texts["record"] = recordText(t, filepath.Join(dir, ".steward", "record.sqlite"))
	// The outputs are there, masked: the test is not vacuous.
	for surface, want := range map[string][]string{
		"record":                            {"task setup failed", "setup err: ", "agent stderr ", "agent died ", "explained "},
		"report.json":                       {"task setup failed", "answer Authorization: Bearer [redacted]"},
		"launch output (stdout and stderr)": {"host teardown failed", "teardown saw [redacted] [redacted] [redacted]"},
		"--events":                          {"task setup failed", "agent died "},
	} {
		for _, w := range want {
			if !strings.Contains(texts[surface], w) {
				t.Errorf("the %s lacks %q", surface, w)
			}
		}
	}

	// The action: the PR comment, the job summary, its reports and its log.
	const tok = "ghs_surfaceToken8d2c61"
	secrets = append(secrets, tok)
	gh := fakegithub.New(t)
	gh.AddToken(tok, "github-actions[bot]", true)
	gh.AddPullRequest("octo", "evals", 23)
	adir := t.TempDir()
	setup(adir)
	g := newGHEnv(t, adir, gh.URL, 23)
	g.vars["INPUT_GITHUB-TOKEN"] = tok
	g.vars["MY_MODEL_KEY"] = key
	g.vars["MY_HOOK_TOKEN"] = hook
	g.vars["MY_FLEET_TOKEN"] = fleet
	aout, _ := g.run(t)
	var log []string
	for _, line := range strings.Split(aout, "\n") {
		if !strings.HasPrefix(line, "::add-mask::") {
			log = append(log, line)
		}
	}
	texts["action log (outside add-mask)"] = strings.Join(log, "\n")
	cs := gh.Comments("octo", "evals", 23)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "hostsetup") {
		t.Fatalf("the action left %d comments:\n%s", len(cs), aout)
	}
	texts["PR comment"] = cs[0].Body
	texts["job summary"] = string(mustRead(t, g.summary))
	entries, err := os.ReadDir(filepath.Join(adir, "out", "report"))
	if err != nil || len(entries) == 0 {
		t.Fatalf("the action wrote no reports (%v):\n%s", err, aout)
	}
	// Every file, in subdirectories too (inspect/), and every member of
	// the Inspect logs (.eval is a ZIP whose members are deflated).
	root := filepath.Join(adir, "out", "report")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		data := mustRead(t, p)
		texts["action "+rel] = string(data)
		if strings.HasSuffix(p, ".eval") {
			zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			for _, f := range zr.File {
				rc, err := f.Open()
				if err != nil {
					return err
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					return err
				}
				texts["action "+rel+"!"+f.Name] = string(b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	for surface, s := range texts {
		for _, sec := range secrets {
			if part := secretPart(s, sec); part != "" {
				t.Errorf("the %s holds %q of a secret", surface, part)
			}
		}
	}
}

// secretPart is the first 8-byte piece of sec that s holds ("" if none).
func secretPart(s, sec string) string {
	for i := 0; i+8 <= len(sec); i++ {
		if strings.Contains(s, sec[i:i+8]) {
			return sec[i : i+8]
		}
	}
	return ""
}
