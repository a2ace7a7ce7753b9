package cli

import (
	"archive/zip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readZipJSON(t *testing.T, path, member string) map[string]any {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer zr.Close()
	f, err := zr.Open(member)
	if err != nil {
		t.Fatalf("%s: %s: %v", path, member, err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %s: %v", path, member, err)
	}
	return v
}

// steward report --format inspect writes one Inspect log per task into
// --log-dir, with the eval set's inputs and targets; a carried attempt says
// where it came from.
func TestReportFormatInspect(t *testing.T) {
	dir := t.TempDir()
	set := writeFile(t, filepath.Join(dir, "steward.yaml"), mixedSet)
	rec := filepath.Join(dir, "rec")
	logs := filepath.Join(dir, "logs")
	s := newStreams()
	s.must(t, ExitFailed, "launch", "--record", rec, set)
	s.must(t, ExitOK, "report", "--record", rec, "--format", "inspect", "--log-dir", logs, set)
	files := strings.Fields(s.stdout.String())
	if len(files) != 1 || !strings.HasSuffix(files[0], ".eval") || !strings.Contains(files[0], "_echo_") {
		t.Fatalf("files %q", files)
	}
	h := readZipJSON(t, files[0], "header.json")
	if h["status"] != "success" || h["eval"].(map[string]any)["task"] != "echo" {
		t.Errorf("header %v", h)
	}
	right := readZipJSON(t, files[0], "samples/right_epoch_1.json")
	if right["input"] != "x" || right["target"] != "x" {
		t.Errorf("right: input %v target %v", right["input"], right["target"])
	}
	if sc := right["scores"].(map[string]any)["exact"].(map[string]any); sc["value"] != "C" || sc["answer"] != "x" {
		t.Errorf("right's score %v", sc)
	}
	// Without EVALSET (and no ./steward.yaml here) the run's own eval set is read.
	s.must(t, ExitOK, "report", "--record", rec, "--format", "inspect", "--log-dir", filepath.Join(dir, "logs2"))
	if again := strings.Fields(s.stdout.String()); len(again) != 1 {
		t.Fatalf("files %q", again)
	} else if r := readZipJSON(t, again[0], "samples/right_epoch_1.json"); r["input"] != "x" || strings.Contains(s.stderr.String(), "was not read") {
		t.Errorf("without EVALSET: input %v\n%s", r["input"], s.stderr.String())
	}
	wrong := readZipJSON(t, files[0], "samples/wrong_epoch_1.json")
	if sc := wrong["scores"].(map[string]any)["exact"].(map[string]any); sc["value"] != "I" {
		t.Errorf("wrong's score %v", sc)
	}

	// The same launch again carries both: their logs say from which run.
	s.must(t, ExitFailed, "launch", "--record", rec, set)
	s.must(t, ExitOK, "report", "--record", rec, "--format", "inspect", "--inspect-format", "json", "--log-dir", logs, set)
	files = strings.Fields(s.stdout.String())
	if len(files) != 1 || !strings.HasSuffix(files[0], ".json") {
		t.Fatalf("files %q", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Samples []struct {
			ID       string
			Metadata struct {
				Steward struct {
					Status      string
					CarriedFrom string `json:"carried_from"`
					Carried     bool
				}
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Samples) != 2 {
		t.Fatalf("%d samples", len(doc.Samples))
	}
	for _, smp := range doc.Samples {
		if !smp.Metadata.Steward.Carried || smp.Metadata.Steward.CarriedFrom == "" {
			t.Errorf("%s: carried %v from %q", smp.ID, smp.Metadata.Steward.Carried, smp.Metadata.Steward.CarriedFrom)
		}
	}
	entries, _ := os.ReadDir(logs)
	if len(entries) != 2 {
		t.Errorf("log dir holds %d files, want the two logs", len(entries))
	}

	s.must(t, ExitBadInput, "report", "--record", rec, "--format", "inspect", "--inspect-format", "yaml")
	if !strings.Contains(s.stderr.String(), `--inspect-format "yaml"`) {
		t.Errorf("stderr:\n%s", s.stderr.String())
	}
}
