package worker

import _ "github.com/steward-evals/steward/internal/sandbox/providers" // eval sets name the registered providers
