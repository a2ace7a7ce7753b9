// Package providers links every sandbox provider into the binary: each
// provider package registers itself (sandbox.Register) from its init
// function. Adding a provider is one new package and one line here.
package providers

import (
	_ "github.com/steward-evals/steward/internal/sandbox/docker"     // a container per attempt
	_ "github.com/steward-evals/steward/internal/sandbox/kubernetes" // a pod per attempt
	_ "github.com/steward-evals/steward/internal/sandbox/local"      // host processes
)
