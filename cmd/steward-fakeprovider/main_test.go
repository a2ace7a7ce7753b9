package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunPrintsURLAndServes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-api-key", "sk-proc", "-rpm", "1"}, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("read URL: %v (stderr %q)", err, stderr.String())
	}
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("printed %q, want a loopback URL", url)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()

	statuses := []int{}
	for _, k := range []string{"sk-proc", "sk-other", "sk-proc"} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
			strings.NewReader(`{"model":"mock","messages":[{"role":"user","content":"What is 6*7?"}]}`))
		req.Header.Set("Authorization", "Bearer "+k)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode == 200 && !strings.Contains(string(body), `"content":"42"`) {
			t.Errorf("answer %s", body)
		}
	}
	// The right key passes, a wrong one is refused, and -rpm 1 refuses the second good request.
	if statuses[0] != 200 || statuses[1] != 401 || statuses[2] != 429 {
		t.Fatalf("statuses %v, want [200 401 429]", statuses)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "3 requests, 1 ok, 1 rate-limited") {
		t.Errorf("summary %q", stderr.String())
	}
}

func TestRunBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-rpm", "lots"}, &out, &errb); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if code := run(context.Background(), []string{"extra"}, &out, &errb); code != 2 {
		t.Fatalf("exit code %d for a stray argument, want 2", code)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want nothing", out.String())
	}
}
