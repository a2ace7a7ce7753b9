package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
)

// What a sandbox's commands leave is untrusted: CopyOut reads regular files
// inside the sandbox and refuses a symlink, or a path through a symlinked
// directory, that would read a host file.
func TestCopyOutRefusesSymlinks(t *testing.T) {
	ctx := context.Background()
	b, err := New(Options{BaseDir: t.TempDir()}).Create(ctx, sandbox.Spec{Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("HOST SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := b.Exec(ctx, sandbox.ExecSpec{Shell: "echo ok > plain.txt; ln -s " + secret + " link.txt; ln -s " + filepath.Dir(secret) + " dir; ln -s plain.txt inner.txt; mkdir sub"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("setup: %v %s", err, res.Stderr)
	}
	if data, err := b.CopyOut(ctx, "plain.txt"); err != nil || string(data) != "ok\n" {
		t.Errorf("regular file: %q %v", data, err)
	}
	for _, p := range []string{"link.txt", "dir/host-secret", "inner.txt", "sub", "../../host-secret"} {
		data, err := b.CopyOut(ctx, p)
		if err == nil || strings.Contains(string(data), "HOST SECRET") {
			t.Errorf("CopyOut(%q) = %q, %v: want a refusal", p, data, err)
		}
	}
}
