package evalset

import (
	"strings"
	"testing"
)

func runBad(t *testing.T, cases []badCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeTree(t, c.files)
			env := func(k string) string { return c.env[k] }
			got := problems(t, dir, LoadOptions{Getenv: env})
			if len(got) != len(c.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(c.want), strings.Join(got, "\n"))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d:\n got  %s\n want %s", i, got[i], w)
				}
			}
		})
	}
}

// Malformed samples files: every problem at once, each naming its file and
// line (CSV: line and column of the cell; Parquet: row and column).
func TestBadDatasets(t *testing.T) {
	csvTask := "tasks:\n  - name: t\n    agent: x\n    samples_file: d.csv\n"
	parq := writeParquet(t, []mcRow{
		{QID: "q1", Question: "2+2?", Options: []string{"3", "4"}, Answer: "E", Subject: "m"},
		{QID: "q2", Question: "Cap?", Options: []string{"Rome"}, Answer: "A", Subject: "g"},
	})
	runBad(t, []badCase{
		{name: "csv unterminated quote", files: map[string]string{"steward.yaml": csvTask, "d.csv": "input,target\na,b\n\"c,d\n"},
			want: []string{`d.csv:3:6: invalid CSV: extraneous or missing " in quoted-field`}},
		{name: "csv wrong number of cells", files: map[string]string{"steward.yaml": csvTask, "d.csv": "input,target\na,b\nc\nd,e,f\n"},
			want: []string{`d.csv:3:1: invalid CSV: wrong number of fields`, `d.csv:4:1: invalid CSV: wrong number of fields`}},
		{name: "csv bare quote", files: map[string]string{"steward.yaml": csvTask, "d.csv": "input,target\na \"b\",c\n"},
			want: []string{`d.csv:2:3: invalid CSV: bare " in non-quoted-field`}},
		{name: "csv not UTF-8", files: map[string]string{"steward.yaml": csvTask, "d.csv": "input,target\nab\xff,c\n"},
			want: []string{`d.csv:2:3: not valid UTF-8`}},
		{name: "csv unknown column without fields", files: map[string]string{"steward.yaml": csvTask, "d.csv": "question,targte\na,b\n"},
			want: []string{`d.csv:1:1: column "question" is not a sample field`, `d.csv:1:1: column "targte" is not a sample field (did you mean "target"?`, `d.csv:1:1: no input column`}},
		{name: "csv fields name a missing column", files: map[string]string{"steward.yaml": csvTask + "    fields: {input: question, target: answr, metadata: [subject]}\n", "d.csv": "question,answer\na,b\n"},
			want: []string{`d.csv:1:1: fields.target: no column "answr" (did you mean "answer"?)`, `d.csv:1:1: fields.metadata: no column "subject" (columns: question, answer)`}},
		{name: "csv duplicate header", files: map[string]string{"steward.yaml": csvTask, "d.csv": "input,input\na,b\n"},
			want: []string{`d.csv:1:7: duplicate column "input" (also column 1)`}},
		{name: "csv cell errors name line and column", files: map[string]string{"steward.yaml": csvTask + "    fields: {input: q, target: t, choices: opts, id: id}\n",
			"d.csv": "id,q,t,opts\n1,a,A,not a list\n1,b,A,\"[\"\"x\"\",\"\"y\"\"]\"\n3,c,Z,\"[\"\"x\"\",\"\"y\"\"]\"\n4,,A,\n"},
			want: []string{`d.csv:2:7: tasks[0].samples[0].choices: expected a JSON list or object in the cell, got "not a list"`,
				`d.csv:3:1: tasks[0].samples[1].id: duplicate sample id "1": also the id of the sample at d.csv:2`,
				`d.csv:4:5: tasks[0].samples[2].target: target "Z": there is no choice Z (the sample has 2: A to B)`,
				`d.csv:5:1: tasks[0].samples[3].input: missing: every sample needs an input`}},
		{name: "tsv header only", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.tsv\n", "d.tsv": "input\ttarget\n"},
			want: []string{`steward.yaml:4: tasks[0].samples_file: d.tsv holds no samples`}},
		{name: "json array bad element", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.json\n",
			"d.json": "[\n {\"input\": \"a\", \"target\": \"a\"},\n 7,\n {\"input\": \"b\", \"targte\": \"b\"}\n]\n"},
			want: []string{`d.json:3: tasks[0].samples[1]: expected a JSON object per element, got a number`, `d.json:4: tasks[0].samples[1].targte: unknown key "targte" (did you mean "target"?)`}},
		{name: "json array syntax", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.json\n",
			"d.json": "[\n {\"input\": \"a\", \"target\": \"a\"},\n {\"input\": oops}\n]\n"},
			want: []string{`d.json:3: invalid JSON: invalid character 'o' looking for beginning of value`}},
		{name: "json fields input missing", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.jsonl\n    fields: {input: question}\n",
			"d.jsonl": "{\"question\": \"a\", \"target\": \"a\"}\n{\"prompt\": \"b\", \"target\": \"b\"}\n"},
			want: []string{`d.jsonl:2: tasks[0].samples[1].input: the record has no "question" (fields.input names it)`}},
		{name: "parquet not parquet", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.parquet\n", "d.parquet": "PAR1 but not really"},
			want: []string{`d.parquet: not a readable Parquet file`}},
		{name: "parquet truncated", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.parquet\n", "d.parquet": parq[:len(parq)/2]},
			want: []string{`d.parquet: not a readable Parquet file`}},
		{name: "parquet rows name row and column", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.parquet\n" + mcFields, "d.parquet": parq},
			want: []string{`d.parquet:1:4: tasks[0].samples[0].target: target "E": there is no choice E (the sample has 2: A to B)`,
				`d.parquet:2:3: tasks[0].samples[1].choices: a multiple-choice sample needs 2 to 26 choices, got 1`}},
		{name: "parquet without fields", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.parquet\n", "d.parquet": parq},
			want: []string{`column "qid" is not a sample field`, `column "question" is not a sample field`, `column "options" is not a sample field`, `column "answer" is not a sample field`,
				`column "subject" is not a sample field`, `column "level" is not a sample field`, `column "extra" is not a sample field`, `no input column`}},
		{name: "unknown format", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.xlsx\n", "d.xlsx": "PK\x03\x04"},
			want: []string{`steward.yaml:4: tasks[0].samples_file: cannot tell the format of d.xlsx from its name: set samples_format (one of jsonl, json, csv, tsv, parquet)`}},
		{name: "bad samples_format", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: d.csv\n    samples_format: xls\n", "d.csv": "input,target\na,a\n"},
			want: []string{`steward.yaml:5: tasks[0].samples_format: unknown samples_format "xls"`}},
		{name: "fields without samples_file", files: yamlOnly(okTask + "    fields: {input: q}\n"),
			want: []string{`steward.yaml:6: tasks[0].fields: applies to samples_file only`}},
		{name: "negative samples_limit", files: yamlOnly(okTask + "    samples_limit: -1\n"),
			want: []string{`steward.yaml:6: tasks[0].samples_limit: must be 0 (all) or more, got -1`}},
	})
}

// Multiple-choice samples: targets as letters or choice text, several
// correct, the template, and what is refused.
func TestChoices(t *testing.T) {
	y := "tasks:\n  - name: mc\n    agent: x\n    samples:\n" +
		"      - {id: a, input: 'Pick the even number', choices: ['3', '4', '7'], target: B}\n" +
		"      - {id: b, input: 'Pick the primes', choices: ['2', '4', '5'], target: ['A', '5']}\n" +
		"      - id: c\n        input: [{role: system, content: \"Be brief.\"}, {role: user, content: \"Colour of the sky?\"}]\n        choices: [green, blue]\n        target: blue\n"
	es := mustLoad(t, writeTree(t, yamlOnly(y)), LoadOptions{})
	tk := es.Tasks[0]
	if tk.Scorer.Match != "choice" {
		t.Errorf("match %q", tk.Scorer.Match)
	}
	// Sample b has two correct choices: the task uses the multiple-answer prompt.
	wantA := "Answer the following multiple choice question where multiple answers may be correct. The entire content of your response should be of the following format: 'ANSWER: $LETTERS' (without quotes) where LETTERS is one or more of A,B,C.\n\nPick the even number\n\nA) 3\nB) 4\nC) 7"
	if got := tk.Samples[0].Input; got != wantA {
		t.Errorf("input a:\n%s\nwant\n%s", got, wantA)
	}
	if got := tk.Samples[1].Targets(); strings.Join(got, ",") != "A,C" {
		t.Errorf("targets b %v", got)
	}
	msgs := tk.Samples[2].Input.([]any)
	if last := msgs[1].(map[string]any)["content"].(string); !strings.HasSuffix(last, "Colour of the sky?\n\nA) green\nB) blue") || msgs[0].(map[string]any)["content"] != "Be brief." {
		t.Errorf("messages %v", msgs)
	}
	if got := tk.Samples[2].Targets(); strings.Join(got, ",") != "B" {
		t.Errorf("targets c %v", got)
	}

	custom := "tasks:\n  - name: mc\n    agent: x\n    choices_template: \"Q: {question}\\n{choices}\\nOne of {letters}.\"\n    samples:\n      - {input: 'Pick', choices: [x, y], target: A}\n"
	if got := mustLoad(t, writeTree(t, yamlOnly(custom)), LoadOptions{}).Tasks[0].Samples[0].Input; got != "Q: Pick\nA) x\nB) y\nOne of A,B." {
		t.Errorf("custom template: %q", got)
	}

	runBad(t, []badCase{
		{name: "target not a choice", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - {input: q, choices: [x, y], target: Paris}\n"),
			want: []string{`steward.yaml:5: tasks[0].samples[0].target: target "Paris" is neither a choice letter (A to B) nor the text of one of the choices`}},
		{name: "no target", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - {input: q, choices: [x, y]}\n"),
			want: []string{`steward.yaml:5: tasks[0].samples[0].target: missing: a multiple-choice sample needs its correct choice`}},
		{name: "one choice", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - {input: q, choices: [x], target: A}\n"),
			want: []string{`steward.yaml:5: tasks[0].samples[0].choices: a multiple-choice sample needs 2 to 26 choices, got 1`}},
		{name: "template without question", files: yamlOnly(okTask + "    choices_template: 'Pick {letters}'\n"),
			want: []string{`steward.yaml:6: tasks[0].choices_template: must contain {question}`}},
		{name: "shuffle_choices without choices", files: yamlOnly(okTask + "    shuffle_choices: true\n"),
			want: []string{`steward.yaml:6: tasks[0].shuffle_choices: no sample of the task has choices`}},
		{name: "choice match on a target that is no letter", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    scorer: {match: choice}\n    samples:\n      - {input: 'A) x B) y', target: Paris}\n"),
			want: []string{`steward.yaml:6: tasks[0].samples[0].target: target "Paris" is not a choice letter`}},
	})
}

// shuffle_choices is deterministic under a seed, and the target follows
// its choice.
func TestShuffleChoices(t *testing.T) {
	load := func(seed string) []*Sample {
		y := "tasks:\n  - name: mc\n    agent: x\n    shuffle_choices: true\n    seed: " + seed + "\n    samples:\n"
		for _, id := range []string{"s1", "s2", "s3", "s4"} {
			y += "      - {id: " + id + ", input: q, choices: [right, w1, w2, w3, w4], target: A}\n"
		}
		return mustLoad(t, writeTree(t, yamlOnly(y)), LoadOptions{}).Tasks[0].Samples
	}
	a, again, other := load("1"), load("1"), load("2")
	moved := false
	for i, s := range a {
		tg := s.Targets()
		if len(tg) != 1 || s.Choices[tg[0][0]-'A'] != "right" {
			t.Errorf("%s: target %v does not follow its choice in %v", s.ID, tg, s.Choices)
		}
		if !strings.Contains(s.Input.(string), tg[0]+") right") {
			t.Errorf("%s: prompt does not letter the right choice %s:\n%s", s.ID, tg[0], s.Input)
		}
		if strings.Join(s.Choices, ",") != strings.Join(again[i].Choices, ",") {
			t.Errorf("%s: seed 1 gave %v then %v", s.ID, s.Choices, again[i].Choices)
		}
		if strings.Join(s.Choices, ",") != strings.Join(other[i].Choices, ",") {
			moved = true
		}
		if s.Choices[0] != "right" {
			moved = true
		}
	}
	if !moved {
		t.Errorf("shuffle_choices moved nothing")
	}
	// Pinned: Steward's own permutation, stable across machines and Go versions.
	if got := strings.Join(a[0].Choices, ","); got != "right,w1,w2,w4,w3" {
		t.Errorf("s1 under seed 1: %s", got)
	}
}
