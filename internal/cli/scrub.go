package cli

import (
	"io"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/secret"
)

// scrubbed is w with every secret of this directory removed (secret.EnvNames
// and _steward.yaml's secrets): what `doctor` prints of the processes and
// daemons it asks. Flush it when done.
func scrubbed(w io.Writer, env Env) *secret.Writer {
	names := secret.EnvNames
	if fleet, err := evalset.LoadFleet(evalset.FleetFileName, env.Getenv, evalset.FleetOverrides{}); err == nil {
		names = secret.Names(fleet.Secrets)
	}
	return secret.NewWriter(w, secret.New(secret.Values(env.Getenv, names)...))
}
