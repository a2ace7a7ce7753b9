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
// the sample's input, the answer and the targets ("" = unset).
func scorerValueEnv(input any, answer string, targets []string) map[string]string {
	text, js := inputStrings(input)
	v := map[string]string{"STEWARD_ANSWER": answer, "STEWARD_INPUT": text, "STEWARD_INPUT_JSON": js}
	if len(targets) > 0 {
		v["STEWARD_TARGET"] = targets[0]
	}
	tj, _ := json.Marshal(targets)
	v["STEWARD_TARGETS"] = string(tj)
	return v
}

// valueFiles are scorerValues' files, for the scorer's directory.
func valueFiles(input any, answer string, targets []string) []sandbox.File {
	vals := scorerValueEnv(input, answer, targets)
	var files []sandbox.File
	for _, sv := range scorerValues {
		files = append(files, sandbox.File{Path: sv.file, Data: []byte(vals[sv.env]), Mode: 0o644})
	}
	return files
}

// setValues puts scorerValues in the scorer's environment senv: the _FILE
// variables always (dir is the scorer's directory in the grader), each
// value itself when it is small enough to exec with.
func setValues(senv map[string]string, dir string, input any, answer string, targets []string) {
	vals := scorerValueEnv(input, answer, targets)
	for _, sv := range scorerValues {
		senv[sv.env+"_FILE"] = path.Join(dir, sv.file)
		delete(senv, sv.env)
		if v := vals[sv.env]; len(v) <= maxEnvValue && (v != "" || sv.env != "STEWARD_TARGET") {
			senv[sv.env] = v
		}
	}
}

// agentValues are the agent's values that can be large: each is in a file
// in the sandbox's StewardDir, named by the variable with _FILE, written
// before the sample's setup and the agent run, and in the variable itself
// only when it is at most maxEnvValue bytes (docs/evalset.md).
var agentValues = []struct{ env, file string }{
	{"STEWARD_INPUT", "input.txt"},
	{"STEWARD_INPUT_JSON", "input.json"},
}

// agentFiles copies agentValues into the sandbox's StewardDir and sets
// their _FILE variables in the attempt's environment, dropping a value too
// large to exec with from the environment itself.
func (r *attemptRun) agentFiles() error {
	dir := r.sb.StewardDir()
	files := make([]sandbox.File, 0, len(agentValues))
	for _, av := range agentValues {
		p := path.Join(dir, av.file)
		files = append(files, sandbox.File{Path: p, Data: []byte(r.env[av.env]), Mode: 0o644})
		r.env[av.env+"_FILE"] = p
		if len(r.env[av.env]) > maxEnvValue {
			delete(r.env, av.env)
		}
	}
	return r.sb.CopyIn(r.ctx, files)
}

// withoutAgentFiles is env without agentValues' _FILE variables (the
// verifier's: its sandbox may not hold them).
func withoutAgentFiles(env map[string]string) {
	for _, av := range agentValues {
		delete(env, av.env+"_FILE")
	}
}
