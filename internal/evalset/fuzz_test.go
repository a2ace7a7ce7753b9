package evalset

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the eval set parser (and the fleet
// file parser) in a directory holding a few files the inputs may name. It
// must never panic or hang, and its results must be coherent.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(okTask))
	f.Add([]byte(fullSet))
	dir := writeTree(f, map[string]string{
		"s.jsonl":        "{\"id\":\"a\",\"input\":\"x\",\"target\":\"x\"}\n{\"input\":\"y\",\"target\":\"y\"}\n",
		"img/Dockerfile": "FROM scratch\n",
		"lib/helper.py":  "print(1)\n",
		"data/in.txt":    "in\n",
	})
	abs := filepath.Join(dir, "steward.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		errs := &Errors{}
		es := parseEvalSet("steward.yaml", abs, data, errs)
		if es == nil {
			t.Fatal("parseEvalSet returned nil")
		}
		checkErrors(t, errs)
		if errs.Len() == 0 {
			if len(es.Tasks) == 0 {
				t.Fatal("valid eval set without tasks")
			}
			for _, tk := range es.Tasks {
				if tk == nil || tk.Name == "" || tk.Attempts < 1 || tk.Timeout <= 0 || len(tk.Samples) == 0 {
					t.Fatalf("incoherent valid task %+v", tk)
				}
				seen := map[string]bool{}
				for _, s := range tk.Samples {
					if s == nil || s.ID == "" || seen[NormalizeID(s.ID)] {
						t.Fatalf("bad sample id in valid set: %+v", s)
					}
					seen[NormalizeID(s.ID)] = true
				}
			}
		}
		ferrs := &Errors{}
		fl := DefaultFleet(dir)
		decodeFleetFile(FleetFileName, dir, data, &fl, ferrs, nil)
		checkErrors(t, ferrs)
		if ferrs.Len() == 0 && fl.SamplesRamp.Enabled && (fl.SamplesRamp.Lo < 1 || fl.SamplesRamp.Lo > fl.SamplesRamp.Hi) {
			t.Fatalf("bad ramp accepted: %+v", fl.SamplesRamp)
		}
	})
}

// FuzzJSONL feeds arbitrary bytes to the JSONL samples reader.
func FuzzJSONL(f *testing.F) {
	f.Add([]byte("{\"id\":1,\"input\":\"a\",\"target\":\"a\"}\n\n{\"input\":[{\"role\":\"user\",\"content\":\"hi\"}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		ss, err := ParseJSONL("s.jsonl", data)
		if err != nil {
			es, ok := err.(*Errors)
			if !ok || es.Len() == 0 {
				t.Fatalf("error %T %v", err, err)
			}
			checkErrors(t, es)
			for _, e := range es.List {
				if e.Line < 1 || e.Line > lines {
					t.Fatalf("line %d outside 1..%d: %v", e.Line, lines, e)
				}
			}
			return
		}
		for _, s := range ss {
			if s.ID == "" || !strings.HasPrefix(s.Source, "s.jsonl:") {
				t.Fatalf("sample %+v", s)
			}
		}
	})
}

func checkErrors(t *testing.T, errs *Errors) {
	t.Helper()
	if len(errs.List) > MaxErrors {
		t.Fatalf("%d problems listed", len(errs.List))
	}
	for _, e := range errs.List {
		if e.File == "" || e.Msg == "" || e.Line < 0 {
			t.Fatalf("incomplete problem %#v", e)
		}
		_ = e.Error()
	}
	_ = errs.Error()
}
