package evalset

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// mcRow is a Hugging Face-shaped multiple-choice row (MMLU-like, with the
// answer as a letter column and choices as a list).
type mcRow struct {
	QID      string   `parquet:"qid"`
	Question string   `parquet:"question"`
	Options  []string `parquet:"options,list"`
	Answer   string   `parquet:"answer"`
	Subject  string   `parquet:"subject"`
	Level    int64    `parquet:"level"`
	Extra    *string  `parquet:"extra,optional"`
}

// writeParquet writes rows with parquet-go's own writer (the reader's
// library): what a Hugging Face export holds, one row group.
func writeParquet[T any](t testing.TB, rows []T) string {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

const mcFields = "    fields: {input: question, target: answer, id: qid, choices: options, metadata: [subject, level]}\n"

func mcTask(file string, extra string) string {
	return "tasks:\n  - name: mc\n    agent: x\n    samples_file: " + file + "\n" + mcFields + extra
}

type loadedSample struct {
	ID       string
	Input    any
	Target   any
	Choices  []string
	Metadata map[string]any
}

func brief(ss []*Sample) []loadedSample {
	var out []loadedSample
	for _, s := range ss {
		out = append(out, loadedSample{s.ID, s.Input, s.Target, s.Choices, s.Metadata})
	}
	return out
}

// One multiple-choice set in every format, with the same field map, loads
// to the same samples (metadata types aside: CSV holds only text).
func TestDatasetFormats(t *testing.T) {
	parq := writeParquet(t, []mcRow{
		{QID: "q1", Question: "What is 2+2?", Options: []string{"3", "4", "5"}, Answer: "B", Subject: "math", Level: 1},
		{QID: "q2", Question: "Capital of France?", Options: []string{"Rome", "Paris"}, Answer: "Paris", Subject: "geo", Level: 2},
	})
	q1 := "Answer the following multiple choice question. The entire content of your response should be of the following format: 'ANSWER: $LETTER' (without quotes) where LETTER is one of A,B,C.\n\nWhat is 2+2?\n\nA) 3\nB) 4\nC) 5"
	q2 := "Answer the following multiple choice question. The entire content of your response should be of the following format: 'ANSWER: $LETTER' (without quotes) where LETTER is one of A,B.\n\nCapital of France?\n\nA) Rome\nB) Paris"
	want := func(l1, l2 any) []loadedSample {
		return []loadedSample{
			{"q1", q1, []string{"B"}, []string{"3", "4", "5"}, map[string]any{"subject": "math", "level": l1}},
			{"q2", q2, []string{"B"}, []string{"Rome", "Paris"}, map[string]any{"subject": "geo", "level": l2}},
		}
	}
	for _, c := range []struct {
		name, file, data string
		fields           string
		want             []loadedSample
	}{
		{"jsonl", "d.jsonl", "{\"qid\":\"q1\",\"question\":\"What is 2+2?\",\"options\":[\"3\",4,\"5\"],\"answer\":\"B\",\"subject\":\"math\",\"level\":1,\"unused\":true}\n" +
			"{\"qid\":\"q2\",\"question\":\"Capital of France?\",\"options\":[\"Rome\",\"Paris\"],\"answer\":\"Paris\",\"subject\":\"geo\",\"level\":2}\n", mcFields, want(1, 2)},
		{"json array", "d.json", "[\n  {\"qid\": \"q1\", \"question\": \"What is 2+2?\", \"options\": [\"3\", \"4\", \"5\"], \"answer\": \"B\", \"subject\": \"math\", \"level\": 1},\n" +
			"  {\"qid\": \"q2\", \"question\": \"Capital of France?\", \"options\": [\"Rome\", \"Paris\"], \"answer\": \"Paris\", \"subject\": \"geo\", \"level\": 2}\n]\n", mcFields, want(1, 2)},
		{"csv with BOM, quoting and a list cell", "d.csv", "\ufeffqid,question,options,answer,subject,level,notes\r\n" +
			"q1,What is 2+2?,\"[\"\"3\"\", \"\"4\"\", \"\"5\"\"]\",B,math,1,\"a, b\"\r\n" +
			"q2,\"Capital of\nFrance?\",\"[\"\"Rome\"\",\"\"Paris\"\"]\",Paris,geo,2,\r\n", mcFields, nil},
		{"csv choices in columns", "d.csv", "qid,question,A,B,C,answer,subject,level\nq1,What is 2+2?,3,4,5,B,math,1\nq2,Capital of France?,Rome,Paris,,Paris,geo,2\n",
			"    fields: {input: question, target: answer, id: qid, choices: [A, B, C], metadata: [subject, level]}\n", want("1", "2")},
		{"tsv", "d.tsv", "qid\tquestion\tA\tB\tC\tanswer\tsubject\tlevel\nq1\tWhat is 2+2?\t3\t4\t5\tB\tmath\t1\nq2\tCapital of France?\tRome\tParis\t\tParis\tgeo\t2\n",
			"    fields: {input: question, target: answer, id: qid, choices: [A, B, C], metadata: [subject, level]}\n", want("1", "2")},
		{"parquet", "d.parquet", parq, mcFields, want(1, 2)},
		{"parquet named by samples_format", "d.bin", parq, mcFields + "    samples_format: parquet\n", want(1, 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := "tasks:\n  - name: mc\n    agent: x\n    samples_file: " + c.file + "\n" + c.fields
			dir := writeTree(t, map[string]string{"steward.yaml": y, c.file: c.data})
			es := mustLoad(t, dir, LoadOptions{})
			tk := es.Tasks[0]
			if tk.Scorer.Match != "choice" {
				t.Errorf("default match %q, want choice", tk.Scorer.Match)
			}
			w := c.want
			if w == nil { // the CSV's question spans two lines
				w = want("1", "2")
				w[1].Input = strings.Replace(q2, "Capital of France?", "Capital of\nFrance?", 1)
			}
			if got := brief(tk.Samples); !reflect.DeepEqual(got, w) {
				t.Errorf("samples\n got %#v\nwant %#v", got, w)
			}
			if !strings.Contains(tk.Samples[1].Source, string(filepath.Separator)+c.file+":") {
				t.Errorf("source %q", tk.Samples[1].Source)
			}
		})
	}
}

// Without a fields map, a CSV's columns are the sample's keys; ids default
// to the row's position; numbers stay as written.
func TestDatasetCSVOwnNames(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.csv\n",
		"d.csv":        "input,target\nWhat is 6*7?,42\n\"He said \"\"hi\"\"\",1.10\n",
	})
	got := brief(mustLoad(t, dir, LoadOptions{}).Tasks[0].Samples)
	want := []loadedSample{{"1", "What is 6*7?", "42", nil, nil}, {"2", `He said "hi"`, "1.10", nil, nil}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
}

// Shuffle and limit are deterministic under a seed: the same seed gives the
// same subset in the same order, another seed another; ids stay the
// file's positions.
func TestDatasetShuffleLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("input,target\n")
	for i := 1; i <= 20; i++ {
		b.WriteString("q" + strings.Repeat("x", i) + ",a\n")
	}
	ids := func(seed string, limit string) []string {
		dir := writeTree(t, map[string]string{
			"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.csv\n    shuffle: true\n    seed: " + seed + "\n    samples_limit: " + limit + "\n",
			"d.csv":        b.String(),
		})
		var out []string
		for _, s := range mustLoad(t, dir, LoadOptions{}).Tasks[0].Samples {
			out = append(out, s.ID)
		}
		return out
	}
	a, a2, other, all := ids("7", "5"), ids("7", "5"), ids("8", "5"), ids("7", "0")
	if len(a) != 5 || !reflect.DeepEqual(a, a2) {
		t.Fatalf("seed 7: %v then %v", a, a2)
	}
	if reflect.DeepEqual(a, other) {
		t.Errorf("seeds 7 and 8 chose the same: %v", a)
	}
	if len(all) != 20 || !reflect.DeepEqual(all[:5], a) {
		t.Errorf("the limit is not the shuffled order's head: %v vs %v", a, all)
	}
	// Pinned: the order is Steward's own (sha256 of seed and id), the same
	// on every machine and Go version, so carry never breaks by itself.
	if want := []string{"2", "19", "7", "5", "12"}; !reflect.DeepEqual(a, want) {
		t.Errorf("seed 7 order %v, want %v", a, want)
	}
}

func TestDatasetFormatFromContent(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: data\n",
		"data":         "[{\"input\": \"a\", \"target\": \"a\"}]",
	})
	if got := mustLoad(t, dir, LoadOptions{}).Tasks[0].Samples; len(got) != 1 {
		t.Fatalf("samples %v", got)
	}
	_ = os.Remove(filepath.Join(dir, "data"))
}

// hfRow is shaped as pyarrow (Hugging Face's datasets) writes a split:
// every column nullable, strings dictionary-encoded, pages snappy- or
// zstd-compressed, the answer an int64 class label beside a letter column.
type hfRow struct {
	Question *string  `parquet:"question,optional,dict,snappy"`
	Choices  []string `parquet:"choices,optional,list,zstd"`
	Answer   *string  `parquet:"answer_letter,optional,dict"`
	Label    *int64   `parquet:"answer,optional"`
	Subject  *string  `parquet:"subject,optional,dict,snappy"`
	Score    *float32 `parquet:"score,optional"`
}

func TestDatasetParquetLikeHuggingFace(t *testing.T) {
	s := func(v string) *string { return &v }
	i := func(v int64) *int64 { return &v }
	f := func(v float32) *float32 { return &v }
	data := writeParquet(t, []hfRow{
		{s("What is 2+2?"), []string{"3", "4"}, s("B"), i(1), s("math"), f(0.5)},
		{s("Capital of Italy?"), []string{"Rome", "Paris"}, s("A"), i(0), nil, nil},
	})
	y := "tasks:\n  - name: hf\n    agent: x\n    samples_file: train-00000-of-00001.parquet\n    fields: {input: question, target: answer_letter, choices: choices, metadata: [subject, answer, score]}\n"
	es := mustLoad(t, writeTree(t, map[string]string{"steward.yaml": y, "train-00000-of-00001.parquet": data}), LoadOptions{})
	got := brief(es.Tasks[0].Samples)
	if len(got) != 2 || got[0].ID != "1" || got[1].ID != "2" || strings.Join(got[1].Choices, ",") != "Rome,Paris" || strings.Join(got[1].Target.([]string), ",") != "A" {
		t.Fatalf("samples %#v", got)
	}
	if m := got[0].Metadata; m["subject"] != "math" || m["answer"] != 1 || m["score"] != 0.5 {
		t.Errorf("metadata %#v", m)
	}
	if m := got[1].Metadata; m["subject"] != nil || len(m) != 3 {
		t.Errorf("metadata of nulls %#v", m)
	}
}
