package harbor

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzTaskTOML: whatever task.toml holds, Load neither panics nor loads a
// task without saying what is wrong, and every problem names its file.
func FuzzTaskTOML(f *testing.F) {
	f.Add(everyField)
	f.Add("[environment]\ngpus = 1\n[[steps]]\n")
	f.Add("a = [[[[[[[[1]]]]]]]]\n")
	f.Add("[verifier]\nenv = { A = \"${B:-c}\" }\n")
	f.Add("x = 1979-05-27T07:32:00Z\n[metadata]\nd = 1979-05-27\n")
	f.Fuzz(func(t *testing.T, data string) {
		dir := t.TempDir()
		td := filepath.Join(dir, "t")
		for p, c := range base(data) {
			full := filepath.Join(td, p)
			os.MkdirAll(filepath.Dir(full), 0o755)
			os.WriteFile(full, []byte(c), 0o644)
		}
		r := Load(dir, "ds", Options{Expand: expand(nil)})
		for _, p := range r.Problems {
			if p.File == "" || p.Msg == "" {
				t.Fatalf("problem without a file or message: %+v", p)
			}
		}
		if len(r.Errs()) > 0 && len(r.Tasks) > 0 {
			t.Fatalf("a task loaded despite errors: %v", r.Errs())
		}
	})
}
