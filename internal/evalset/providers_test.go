package evalset

// Eval sets name providers; the registered ones are what the binary links.
import _ "github.com/steward-evals/steward/internal/sandbox/providers"
