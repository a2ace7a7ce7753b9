package cli

// The sandbox providers the binary offers register themselves; this import
// links them in (adding a provider: a package and one line there).
import _ "github.com/steward-evals/steward/internal/sandbox/providers"
