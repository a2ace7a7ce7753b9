package record

import (
	"os"
	"path/filepath"
	"testing"
)

// A run ran an eval set when it recorded the same path, or, for a record
// that moved with its checkout, the same file name at a path that is gone;
// the same name at a path that is still there is another eval set.
func TestSameEvalSet(t *testing.T) {
	dir := t.TempDir()
	here := filepath.Join(dir, "here", "steward.yaml")
	other := filepath.Join(dir, "other", "steward.yaml")
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte("tasks: []"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		recorded string
		want     bool
	}{
		{here, true},
		{filepath.Join(dir, "gone", "steward.yaml"), true},
		{other, false},
		{filepath.Join(dir, "gone", "evals.yaml"), false},
	} {
		if got := SameEvalSet(c.recorded, here); got != c.want {
			t.Errorf("SameEvalSet(%s) = %v, want %v", c.recorded, got, c.want)
		}
	}
}
