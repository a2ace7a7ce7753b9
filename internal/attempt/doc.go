// Package attempt runs one attempt in one sandbox: the sandbox (fresh, or
// its lane's or pool's), its gateway token bound to the sandbox's address,
// the task's and sample's files and setup, the agent under its deadline,
// the verdict (a scorer command in the sandbox's grader, a target match,
// the model judge, a Harbor verifier), the artifacts it left, and the
// sandbox back to its pool or removed.
//
// An Executor does this in whatever process the attempt runs in (a worker,
// or the supervisor, internal/run) from what an Env holds: the plan, the
// prepared specs and providers, the gateway's addresses, and the
// supervisor's hooks (Bind, Deadline, Started), since the supervisor holds
// the gateway. Run returns the attempt's record.Attempt row and writes
// nothing to the record: the supervisor charges usage, scrubs and
// publishes it.
package attempt
