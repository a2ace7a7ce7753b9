package run

import (
	"os"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/secret"
)

// initSecrets reads, once, the values a launch keeps secret: the model's
// key (model.api_key_env), the variables secret_env and _steward.yaml's
// secrets name, and secret.EnvNames. Every string that leaves a process
// Steward ran (host hooks, sandbox setup, agents, scorers, image builds,
// workers) passes l.scrubber before it is stored or printed: each row as it
// is published, the run's notes, artifacts, the launch's error, and
// everything written to stderr (wrapped here; flushed by the returned func).
func (l *launch) initSecrets() (flush func()) {
	es := l.es
	l.secrets = secret.Values(l.opts.Getenv, secret.Names(es.SecretEnv, es.Fleet.Secrets))
	l.scrubber = secret.New(append(secret.Values(l.opts.Getenv, []string{es.Model.APIKeyEnv}), l.secrets...)...)
	if l.scrubber.Empty() {
		return func() {}
	}
	w := secret.NewWriter(l.opts.Stderr, l.scrubber)
	l.opts.Stderr = w
	return func() { _ = w.Flush() }
}

// scrub removes every secret (and what a cut left of one) from s.
func (l *launch) scrub(s string) string { return l.scrubber.Clipped(s) }

// scrubRow scrubs the text an attempt's processes produced.
func (l *launch) scrubRow(row *record.Attempt) {
	row.Reason, row.Log, row.Answer, row.Explanation = l.scrub(row.Reason), l.scrub(row.Log), l.scrub(row.Answer), l.scrub(row.Explanation)
}

// workerEnv is the supervisor's environment without a secret: the model's
// real key (and the variables that usually hold one), the variables the eval
// set (secret_env) and _steward.yaml (secrets) name, the GitHub token and
// the runner's own tokens. A worker never holds them (host hooks, which may
// use them, run in the supervisor).
func (l *launch) workerEnv() []string {
	return secret.Without(os.Environ(), secret.Names([]string{l.es.Model.APIKeyEnv}, l.es.SecretEnv, l.es.Fleet.Secrets))
}
