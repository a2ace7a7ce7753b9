package evalset

import "testing"

// The schema and the loader agree on the dataset, multiple-choice and
// interpolation keys of issue 27.
func TestSchemaAgreesOnDatasets(t *testing.T) {
	es := compileSchema(t, evalSchema)
	mc := "tasks:\n  - name: t\n    agent: x\n"
	csv := mc + "    samples_file: d.csv\n"
	for _, c := range []struct {
		name, yaml string
		ok         bool
	}{
		{"fields and format", csv + "    samples_format: csv\n    fields: {input: q, target: a, id: i, choices: [A, B], metadata: [s]}\n", true},
		{"fields choices one column", csv + "    fields: {input: q, target: a, choices: opts, metadata: s}\n", true},
		{"fields unknown key", csv + "    fields: {question: q}\n", false},
		{"unknown format", csv + "    samples_format: xlsx\n", false},
		{"shuffle limit seed", csv + "    fields: {input: q, target: a}\n    shuffle: true\n    samples_limit: 1\n    seed: 42\n", true},
		{"negative limit", csv + "    fields: {input: q, target: a}\n    samples_limit: -1\n", false},
		{"shuffle not a bool", csv + "    fields: {input: q, target: a}\n    shuffle: sometimes\n", false},
		{"choices", mc + "    shuffle_choices: true\n    scorer: {match: choice}\n    samples: [{input: q, choices: [x, y, z], target: B}]\n", true},
		{"choices_template", mc + "    choices_template: \"{question}\\n{choices}\"\n    samples: [{input: q, choices: [x, y], target: [A, B]}]\n", true},
		{"choices_template without question", mc + "    choices_template: \"{choices}\"\n    samples: [{input: q, choices: [x, y], target: A}]\n", false},
		{"one choice", mc + "    samples: [{input: q, choices: [x], target: A}]\n", false},
		{"choices not a list", mc + "    samples: [{input: q, choices: x, target: A}]\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			schemaErr := es.Validate(yamlToJSONValue(t, []byte(c.yaml)))
			dir := writeTree(t, map[string]string{"steward.yaml": c.yaml, "d.csv": "q,a,i,A,B,opts,s\nwhat?,A,1,x,y,\"[\"\"x\"\",\"\"y\"\"]\",m\n"})
			loadErr := problems(t, dir, LoadOptions{})
			if (schemaErr == nil) != c.ok {
				t.Errorf("schema: ok=%v, want %v (%v)", schemaErr == nil, c.ok, schemaErr)
			}
			if (len(loadErr) == 0) != c.ok {
				t.Errorf("loader: ok=%v, want %v (%v)", len(loadErr) == 0, c.ok, loadErr)
			}
		})
	}
}
