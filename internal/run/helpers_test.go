package run

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
)

var (
	buildOnce sync.Once
	builtExe  string
	buildErr  error
)

// TestMain removes the binary buildSteward built (a 40 MB directory per run
// of the package's tests was left in the temporary directory).
func TestMain(m *testing.M) {
	code := m.Run()
	if builtExe != "" {
		os.RemoveAll(filepath.Dir(builtExe))
	}
	builtImages.Range(func(sum, _ any) bool {
		dockertest.RemoveBuilt(sum.(string))
		return true
	})
	os.Exit(code)
}

// builtImages are the context hashes of the images the package's launches
// build (busyboxImage), removed once no test runs: the tests share them.
var builtImages sync.Map

// buildSteward builds the real binary once (its built-in chat agent calls the gateway).
func buildSteward(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "steward-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtExe = filepath.Join(dir, "steward")
		cmd := exec.Command("go", "build", "-o", builtExe, "./cmd/steward")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build steward: %v", buildErr)
	}
	return builtExe
}

// holdLease takes shared-state key k in the record under dir as another
// invocation's task would (run "other-run" elsewhere) and returns the open
// record (closed when the test ends) and the lease's token.
func holdLease(t *testing.T, dir, k, task string) (*record.DB, string) {
	t.Helper()
	ctx := context.Background()
	db, err := record.Open(ctx, filepath.Join(dir, ".steward"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tok, err := db.TryAcquire(ctx, k, "other-run", task, 1, "elsewhere", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return db, tok
}
