package docker

import "context"

// Quiesce ends every process of a settled sandbox but Steward's own (its
// init and idle shell) and lets it run commands again, as Grader does once
// it has copied the workdir: the attempt's artifacts are listed there after
// a target match judged it, with nothing of the agent left running.
func (s *Sandbox) Quiesce(ctx context.Context) error { return s.quiesce(ctx) }
