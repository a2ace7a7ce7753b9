package evalset

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
)

// FuzzCSV feeds arbitrary bytes to the CSV samples reader: it never
// crashes, and every problem names the file and a line within it.
func FuzzCSV(f *testing.F) {
	f.Add([]byte("input,target\na,b\n\"c, d\",\"e\"\"f\"\n"))
	f.Add([]byte("\ufeffq,a\n\"x\ny\",1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		errs := &Errors{}
		d := newDecoder("d.csv", errs)
		ss := d.decodeCSV(data, "tasks[0].samples", &FieldMap{Input: "input"}, ',')
		checkErrors(t, errs)
		for _, e := range errs.List {
			if e.Line < 0 || e.Line > lines {
				t.Fatalf("line %d outside 0..%d: %v", e.Line, lines, e)
			}
		}
		_ = ss
	})
}

// A damaged Parquet file (any byte changed, or cut short) is a located
// error, never a crash nor samples read from garbage without a word.
func TestDamagedParquet(t *testing.T) {
	good := []byte(writeParquet(t, []mcRow{
		{QID: "q1", Question: "2+2?", Options: []string{"3", "4"}, Answer: "B", Subject: "m", Level: 1},
		{QID: "q2", Question: "Cap?", Options: []string{"Rome", "Paris"}, Answer: "A", Subject: "g", Level: 2},
	}))
	y := mcTask("d.parquet", "")
	step := len(good)/97 + 1
	for off := 0; off < len(good); off += step {
		bad := bytes.Clone(good)
		bad[off] ^= 0xff
		for _, data := range [][]byte{bad, good[:off]} {
			dir := writeTree(t, map[string]string{"steward.yaml": y, "d.parquet": string(data)})
			_, err := Load(filepath.Join(dir, "steward.yaml"), LoadOptions{})
			var es *Errors
			if err != nil && !errors.As(err, &es) {
				t.Fatalf("offset %d: %T %v", off, err, err)
			}
			if es != nil {
				checkErrors(t, es)
			}
		}
	}
}
