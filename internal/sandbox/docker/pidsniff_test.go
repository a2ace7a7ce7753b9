package docker

import (
	"bytes"
	"testing"
)

// A command that starts its stderr like the wrapper's pid line (a replaced
// /bin/sh in a reused sandbox runs the wrapper itself) and never ends the
// line cannot make the worker hold more than its output cap.
func TestPidSnifferBounded(t *testing.T) {
	p := &pidSniffer{capped: capped{max: 1 << 10}, pid: make(chan int, 1)}
	if _, err := p.Write([]byte(pidMarker + "12")); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("7"), 64<<10)
	for i := 0; i < 64; i++ { // 4 MiB of digits, no newline
		if _, err := p.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if held := len(p.head) + p.buf.Len(); held > 2<<10 {
		t.Fatalf("the sniffer holds %d bytes of a line that never ends (cap 1 KiB)", held)
	}
	if !p.truncated {
		t.Fatal("the output was cut but not marked truncated")
	}
	select {
	case pid, ok := <-p.pid:
		if ok {
			t.Fatalf("a pid line that never ended gave pid %d", pid)
		}
	default:
		t.Fatal("the pid channel was left open: Exec would wait for it")
	}
	// The wrapper's real line still works.
	q := &pidSniffer{capped: capped{max: 1 << 10}, pid: make(chan int, 1)}
	_, _ = q.Write([]byte(pidMarker + "42\nerr\n"))
	if pid := <-q.pid; pid != 42 || q.buf.String() != "err\n" {
		t.Fatalf("pid %d, stderr %q", pid, q.buf.String())
	}
}
