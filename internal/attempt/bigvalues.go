package attempt

import (
	"encoding/json"
	"path"

	"github.com/steward-evals/steward/internal/sandbox"
)

// maxEnvValue is the largest value a scorer gets in its environment. Linux
// refuses an exec whose single environment string exceeds 128 KiB
// (MAX_ARG_STRLEN: "argument list too long"), and all of them together
// share the argument space: a larger value is only in its file.
const maxEnvValue = 64 << 10

// scorerValues are the scorer's values that can be large (the answer, the
// targets, the sample's input): each is always in a file in the scorer's
// directory, named by the variable with _FILE, and in the variable itself
// only when it is at most maxEnvValue bytes (docs/evalset.md).
var scorerValues = []struct{ env, file string }{
	{"STEWARD_ANSWER", ".steward-answer"},
	{"STEWARD_TARGET", ".steward-target"},
	{"STEWARD_TARGETS", ".steward-targets.json"},
	{"STEWARD_INPUT", ".steward-input"},
	{"STEWARD_INPUT_JSON", ".steward-input.json"},
}

// scorerValueEnv is the scorer's environment values of scorerValues from
// the attempt's env, the answer and the targets ("" = unset).
func scorerValueEnv(env map[string]string, answer string, targets []string) map[string]string {
	v := map[string]string{"STEWARD_ANSWER": answer, "STEWARD_INPUT": env["STEWARD_INPUT"], "STEWARD_INPUT_JSON": env["STEWARD_INPUT_JSON"]}
	if len(targets) > 0 {
		v["STEWARD_TARGET"] = targets[0]
	}
	tj, _ := json.Marshal(targets)
	v["STEWARD_TARGETS"] = string(tj)
	return v
}

// valueFiles are scorerValues' files, for the scorer's directory.
func valueFiles(env map[string]string, answer string, targets []string) []sandbox.File {
	vals := scorerValueEnv(env, answer, targets)
	var files []sandbox.File
	for _, sv := range scorerValues {
		files = append(files, sandbox.File{Path: sv.file, Data: []byte(vals[sv.env]), Mode: 0o644})
	}
	return files
}

// setValues puts scorerValues in the scorer's environment senv: the _FILE
// variables always (dir is the scorer's directory in the grader), each
// value itself when it is small enough to exec with.
func setValues(senv map[string]string, dir string, answer string, targets []string) {
	vals := scorerValueEnv(senv, answer, targets)
	for _, sv := range scorerValues {
		senv[sv.env+"_FILE"] = path.Join(dir, sv.file)
		delete(senv, sv.env)
		if v := vals[sv.env]; len(v) <= maxEnvValue && (v != "" || sv.env != "STEWARD_TARGET") {
			senv[sv.env] = v
		}
	}
}
