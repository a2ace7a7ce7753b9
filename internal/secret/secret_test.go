package secret

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestScrubber(t *testing.T) {
	s := New("sk-secret-value-1", "short", "sk-secret-value-1-longer", "")
	if got := s.String("a sk-secret-value-1-longer b sk-secret-value-1 short"); got != "a [redacted] b [redacted] short" {
		t.Errorf("String = %q", got)
	}
	if !s.ContainsFold("X-SK-SECRET-VALUE-1") || s.Contains("X-SK-SECRET-VALUE-1") || s.ContainsFold("x-sk-secret") {
		t.Error("ContainsFold / Contains disagree with the case of the value")
	}
	var nilS *Scrubber
	if nilS.String("x") != "x" || !nilS.Empty() || nilS.ContainsFold("x") {
		t.Error("a nil Scrubber scrubs")
	}
	err := s.Error(fmt.Errorf("build: %w: curl said sk-secret-value-1", fs.ErrPermission))
	if strings.Contains(err.Error(), "sk-secret-value-1") || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Error = %v (Is ErrPermission %v)", err, errors.Is(err, fs.ErrPermission))
	}
}

// TestWriterEverySplit writes a text holding secrets in two pieces split at
// every byte: what comes out never holds one.
func TestWriterEverySplit(t *testing.T) {
	text := "line sk-secret-value-1 and ghs_tokentoken\nnext sk-secret-value-1\n"
	s := New("sk-secret-value-1", "ghs_tokentoken")
	want := s.String(text)
	for i := 0; i <= len(text); i++ {
		var out bytes.Buffer
		w := NewWriter(&out, s)
		w.Write([]byte(text[:i]))
		w.Write([]byte(text[i:]))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Fatalf("split at %d: %q, want %q", i, out.String(), want)
		}
	}
}

func TestNames(t *testing.T) {
	got := Names([]string{"MY_KEY", "GITHUB_TOKEN", ""}, []string{"HOOK"})
	if len(got) != len(EnvNames)+2 || got[len(got)-2] != "MY_KEY" || got[len(got)-1] != "HOOK" {
		t.Errorf("Names = %v", got)
	}
	env := map[string]string{"MY_KEY": "v1", "HOOK": ""}
	if v := Values(func(k string) string { return env[k] }, got); len(v) != 1 || v[0] != "v1" {
		t.Errorf("Values = %v", v)
	}
}

// TestClipped cuts a text holding a secret at every byte, as a tail ("…" and
// the end) and a truncation (the start and "…") do: no cut leaves 4 bytes
// or more of the secret.
func TestClipped(t *testing.T) {
	const sec = "sk-secret-value-1"
	s := New(sec)
	text := "curl: Authorization: Bearer " + sec + " done"
	for i := 0; i <= len(text); i++ {
		for _, cut := range []string{Ellipsis + text[i:], text[:i] + Ellipsis, "stdout: " + Ellipsis + text[i:] + "\nstderr: x"} {
			got := s.Clipped(cut)
			for k := 0; k+minPart <= len(sec); k++ {
				if strings.Contains(got, sec[k:k+minPart]) {
					t.Fatalf("cut %q: %q keeps %q", cut, got, sec[k:k+minPart])
				}
			}
		}
	}
	if got := s.Clipped("plain text, nothing secret…"); got != "plain text, nothing secret…" {
		t.Errorf("Clipped changed an innocent text: %q", got)
	}
}

// A name added at init joins EnvNames once, whatever the repeats.
func TestAddEnvNames(t *testing.T) {
	saved := slices.Clone(EnvNames)
	defer func() { EnvNames = saved }()
	AddEnvNames("NEW_KEY", "", "NEW_KEY", EnvNames[0])
	if len(EnvNames) != len(saved)+1 || EnvNames[len(EnvNames)-1] != "NEW_KEY" {
		t.Fatalf("EnvNames %v", EnvNames)
	}
}

// A worker's environment holds none of the named variables, whatever
// their values, and everything else as it was (a value may hold "=").
func TestWithout(t *testing.T) {
	env := []string{"PATH=/bin", "GITHUB_TOKEN=ghp_x", "MY_KEY=a=b", "HOME=/h", "MY_KEY_NOT=kept", "EMPTY="}
	got := Without(env, Names([]string{"MY_KEY", "EMPTY"}))
	want := []string{"PATH=/bin", "HOME=/h", "MY_KEY_NOT=kept"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Without = %q, want %q", got, want)
	}
}
