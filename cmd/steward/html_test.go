package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/steward-evals/steward/internal/browsertest"
	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/transcript"
)

const e2eKey = "sk-e2e-REAL-key-0123456789"

// openaiCompatible copies examples/openai-compatible into a temporary
// directory, pointed at the fake provider, and launches it with
// --report-dir. It returns the directory and the provider.
func openaiCompatible(t *testing.T, launches ...[]string) (string, *fakeprovider.Server) {
	t.Helper()
	fp := fakeprovider.New(fakeprovider.Config{APIKey: e2eKey})
	if _, err := fp.Start(context.Background(), "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fp.Close() })
	dir := t.TempDir()
	for _, name := range []string{"steward.yaml", "_steward.yaml", "capitals.jsonl"} {
		b, err := os.ReadFile(filepath.Join("../../examples/openai-compatible", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "steward.yaml" {
			s := regexp.MustCompile(`(?m)^  # base_url: .*$`).ReplaceAllString(string(b), "  base_url: "+fp.URL()+"/v1")
			if !strings.Contains(s, "base_url: "+fp.URL()) {
				t.Fatal("the example has no base_url line to point at the fake provider")
			}
			b = []byte(s)
		}
		writeFile(t, filepath.Join(dir, name), string(b))
	}
	if len(launches) == 0 {
		launches = [][]string{{"--report-dir", "out"}}
	}
	for _, args := range launches {
		cmd := exec.Command(exe, append(append([]string{"launch"}, args...), "steward.yaml")...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+e2eKey, "STEWARD_IN_CONTAINER=0", "GITHUB_TOKEN=ghs_e2eGitHubTOKEN")
		// The fake provider's answers are not capitals: the run fails (exit 1), judged.
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); (err != nil && !ok) || (ok && ee.ExitCode() != 1) || !strings.Contains(string(out), " total") {
			t.Fatalf("launch %v: %v\n%s", args, err, out)
		}
	}
	return dir, fp
}

// The "done when": a run of examples/openai-compatible against the
// fake provider yields an HTML report whose transcripts show every call the
// agent made, checked in headless chromium.
func TestOpenAICompatibleHTMLReportInChromium(t *testing.T) {
	t.Parallel()
	dir, fp := openaiCompatible(t)
	st := fp.Stats()
	if st.Succeeded != 10 || st.Requests != 10 {
		t.Fatalf("the provider answered %d of %d requests, want 10 (5 samples × 2 attempts)", st.Succeeded, st.Requests)
	}

	// The record holds a transcript per attempt: every call, no secret.
	ctx := context.Background()
	db, err := record.Open(ctx, filepath.Join(dir, ".steward"))
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := db.Runs(ctx)
	as, _ := db.Attempts(ctx, runs[0].ID)
	calls := 0
	answers := map[string]string{}
	for _, a := range as {
		blob, err := db.Transcript(ctx, a.RunID, a.Seq)
		if err != nil || blob == nil {
			t.Fatalf("%s#%d: no transcript (%v)", a.Sample, a.Attempt, err)
		}
		raw := string(blob)
		tr, err := transcript.Decode(blob)
		if err != nil {
			t.Fatal(err)
		}
		calls += len(tr.Calls)
		js, _ := json.Marshal(tr)
		for _, secret := range []string{e2eKey, "stw-", "ghs_e2eGitHubTOKEN"} {
			if strings.Contains(string(js), secret) || strings.Contains(raw, secret) {
				t.Errorf("%s#%d: the transcript keeps %q", a.Sample, a.Attempt, secret)
			}
		}
		if len(tr.Calls) != 1 || tr.Calls[0].Route != "/v1/chat/completions" || tr.Calls[0].Model != "gpt-4o-mini" || tr.Calls[0].Status != 200 {
			t.Errorf("%s#%d: transcript %s", a.Sample, a.Attempt, js)
		}
		answers[a.Sample] = strings.TrimSpace(a.Answer)
	}
	db.Close()
	if int64(calls) != st.Succeeded {
		t.Errorf("transcripts hold %d calls, the provider answered %d", calls, st.Succeeded)
	}

	// The page, from file://, in chromium.
	path := filepath.Join(dir, "out", "report.html")
	b := browsertest.Start(t)
	b.Run("open report.html", chromedp.Navigate(browsertest.FileURL(t, path)), chromedp.WaitVisible(`#arows tr.row`, chromedp.ByQuery))
	var shown []int
	b.Eval(`[...document.querySelectorAll('#arows tr.row')].map(r => +r.children[9].textContent)`, &shown)
	if len(shown) != 10 {
		t.Fatalf("the table shows %d attempts, want 10", len(shown))
	}
	total := 0
	for _, n := range shown {
		total += n
	}
	if int64(total) != st.Succeeded {
		t.Errorf("the calls column sums to %d, the provider answered %d", total, st.Succeeded)
	}
	// Open every attempt and its call: each shows the question and the answer.
	b.Run("open every attempt", chromedp.Evaluate(`document.querySelectorAll('#arows tr.row').forEach(r => r.click())`, nil),
		chromedp.Evaluate(`document.querySelectorAll('.transcript .call').forEach(d => d.open = true)`, nil),
		chromedp.Poll(`document.querySelectorAll('.transcript .call .msg.assistant').length === 10`, nil))
	var texts []string
	b.Eval(`[...document.querySelectorAll('.transcript')].map(t => t.textContent)`, &texts)
	if len(texts) != 10 {
		t.Fatalf("%d transcripts shown, want 10", len(texts))
	}
	questions := map[string]string{}
	jl, _ := os.ReadFile(filepath.Join(dir, "capitals.jsonl"))
	for _, line := range strings.Split(strings.TrimSpace(string(jl)), "\n") {
		var smp struct {
			ID    string
			Input json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &smp); err != nil {
			t.Fatal(err)
		}
		var q string
		if json.Unmarshal(smp.Input, &q) != nil {
			var msgs []struct{ Content string }
			if err := json.Unmarshal(smp.Input, &msgs); err != nil || len(msgs) == 0 {
				t.Fatalf("sample %s input %s", smp.ID, smp.Input)
			}
			q = msgs[len(msgs)-1].Content // a chat input: its last message
		}
		questions[smp.ID] = q
	}
	for sample, answer := range answers {
		n := 0
		for _, tx := range texts {
			if strings.Contains(tx, questions[sample]) && strings.Contains(tx, answer) && strings.Contains(tx, "1 model call") {
				n++
			}
		}
		if n != 2 {
			t.Errorf("sample %s: %d transcripts show its question and answer %q, want 2", sample, n, answer)
		}
	}
	b.Run("scroll to the top", chromedp.Evaluate(`document.querySelector('#arows tr.open').scrollIntoView()`, nil))
	b.Screenshot(browsertest.ShotPath(t, "openai-compatible.png"))
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// steward view serves the record on 127.0.0.1 and the page refreshes when
// the record changes (a live run publishing attempts).
func TestViewServesAndRefreshes(t *testing.T) {
	t.Parallel()
	dir, _ := openaiCompatible(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "view", filepath.Join(dir, ".steward"))
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`).FindString(line)
	if m == "" {
		t.Fatalf("view printed %q, want its URL on 127.0.0.1", line)
	}
	get := func(url, host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, page := get(m, "")
	if code != 200 || !strings.Contains(page, `name="steward-live"`) || strings.Count(page, `<script type="application/json" id="d-`) != 10 {
		t.Fatalf("view / answered %d:\n%.500s", code, page)
	}
	if code, _ := get(m, "evil.example:80"); code != http.StatusMisdirectedRequest {
		t.Errorf("a request for another host (DNS rebinding) got %d", code)
	}
	_, v1 := get(m+"version", "")

	// The page in chromium reloads when an attempt is published.
	b := browsertest.Start(t)
	b.Run("open view", chromedp.Navigate(m), chromedp.WaitVisible(`#arows tr.row`, chromedp.ByQuery))
	db, err := record.Open(ctx, filepath.Join(dir, ".steward"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, _ := db.Runs(ctx)
	if err := db.Publish(ctx, record.Attempt{RunID: runs[0].ID, Seq: 99, Task: "capitals", Sample: "late-sample", Attempt: 1, Status: "passed", Fingerprint: "f"}); err != nil {
		t.Fatal(err)
	}
	if _, v2 := get(m+"version", ""); v2 == v1 {
		t.Fatalf("the version did not change after a publish: %q", v2)
	}
	wctx, wcancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer wcancel()
	if err := chromedp.Run(wctx, chromedp.WaitVisible(`//td[contains(@class,"sample") and text()="late-sample"]`, chromedp.BySearch)); err != nil {
		t.Fatalf("the page did not show the newly published attempt: %v", err)
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// Merging shard records keeps every attempt's transcript.
func TestMergeKeepsTranscripts(t *testing.T) {
	t.Parallel()
	dir, fp := openaiCompatible(t, []string{"--record", "s1", "--shard", "1/2"}, []string{"--record", "s2", "--shard", "2/2"})
	out, code := steward(t, dir, "merge", "--out", "merged", "--format", "html", "s1", "s2")
	if code != 1 {
		t.Fatalf("merge exit %d:\n%.2000s", code, out)
	}
	if n := strings.Count(out, `"calls":[{`); n != 10 {
		t.Errorf("the merged HTML report holds %d transcripts, want 10", n)
	}
	if fp.Stats().Succeeded != 10 {
		t.Errorf("provider answered %d", fp.Stats().Succeeded)
	}
	html, code := steward(t, dir, "report", "--record", "merged", "--format", "html")
	if code != 0 || strings.Count(html, `"calls":[{`) != 10 {
		t.Errorf("report --format html of the merged record: exit %d, %d transcripts", code, strings.Count(html, `"calls":[{`))
	}
}

// A task's artifacts: the files the agent leaves are copied out after the
// attempt (whatever its outcome), shown beside its transcript; a symlink is
// refused (not followed to a host file), a file over the cap is listed but
// not kept, and a gateway token written into a file does not survive.
func TestArtifactsCopiedOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "host-secret.txt")
	writeFile(t, secret, "HOST SECRET")
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: files
    sandbox: {provider: local}
    exclusive: false
    agent: 'mkdir -p out; echo "notes of $STEWARD_SAMPLE_ID" > out/notes.md; echo "token $OPENAI_API_KEY" > out/token.txt; head -c 1100000 /dev/zero > out/big.bin; ln -s `+secret+` out/link.txt; echo ok; [ "$STEWARD_SAMPLE_ID" != bad ] || exit 3'
    scorer: {match: exact}
    artifacts: [out/*, missing/*.txt]
    samples: [{id: good, input: "", target: ok}, {id: bad, input: "", target: ok}]
`)
	out, code := steward(t, dir, "launch", "--report-dir", "rep")
	if code != 1 {
		t.Fatalf("launch exit %d:\n%s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "rep", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Attempts []struct {
			Sample, Status string
			Details        struct {
				Artifacts []struct {
					Path, Note, Text string
					Size             int64
				}
			}
		}
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Attempts) != 2 {
		t.Fatalf("%d attempts", len(rep.Attempts))
	}
	for _, a := range rep.Attempts {
		got := map[string]string{}
		for _, f := range a.Details.Artifacts {
			got[f.Path] = f.Note + "|" + f.Text
		}
		if got["out/notes.md"] != "|notes of "+a.Sample+"\n" {
			t.Errorf("%s (%s): notes.md = %q", a.Sample, a.Status, got["out/notes.md"])
		}
		if !strings.HasPrefix(got["out/big.bin"], "not kept: larger than") {
			t.Errorf("%s: big.bin = %q", a.Sample, got["out/big.bin"])
		}
		if got["out/link.txt"] != "a symlink: refused|" {
			t.Errorf("%s: link.txt = %q", a.Sample, got["out/link.txt"])
		}
		if tok := got["out/token.txt"]; !strings.Contains(tok, "[redacted]") || strings.Contains(tok, "stw-") {
			t.Errorf("%s: token.txt = %q: the gateway token survived", a.Sample, tok)
		}
		if len(got) != 4 {
			t.Errorf("%s: artifacts %v", a.Sample, got)
		}
	}
	if bytes.Contains(b, []byte("HOST SECRET")) {
		t.Error("a symlink was followed to a host file")
	}
	html, err := os.ReadFile(filepath.Join(dir, "rep", "report.html"))
	if err != nil || !bytes.Contains(html, []byte(`"path":"out/notes.md"`)) {
		t.Errorf("report.html does not carry the artifacts (%v)", err)
	}
}

// steward view refuses what it cannot serve before it listens: no record
// there (it never creates one), an unknown run.
func TestViewBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, code := steward(t, dir, "view", filepath.Join(dir, "nothing")); code != 2 {
		t.Errorf("view of a missing path: exit %d\n%s", code, out)
	}
	if out, code := steward(t, dir, "view", dir); code != 2 || !strings.Contains(out, "no record") {
		t.Errorf("view of a directory without a record: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".steward")); err == nil {
		t.Error("view created a record")
	}
	db, err := record.Open(context.Background(), filepath.Join(dir, ".steward"))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if out, code := steward(t, dir, "view", "--run", "nope", filepath.Join(dir, ".steward")); code != 2 || !strings.Contains(out, "no such run") {
		t.Errorf("view --run nope: exit %d\n%s", code, out)
	}
	if out, code := steward(t, dir, "view", "--port", "70000", filepath.Join(dir, ".steward")); code != 2 {
		t.Errorf("view --port 70000: exit %d\n%s", code, out)
	}
}
