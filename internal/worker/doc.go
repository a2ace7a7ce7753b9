// Package worker is the process boundary of a launch (W1): the protocol
// between the supervisor and its `steward __worker` processes (JSON lines,
// one typed message per operation, strict both ways: protocol.go), the
// supervisor's side (Pool: starting workers, handing each its slice of the
// plan, running attempts in them, the heartbeat, killing the unresponsive,
// a crash turned into errored or infra rows for its tasks: pool.go), the
// handover itself (handover.go), and the worker's side (Serve: the worker
// process, its attempts run through internal/attempt, its questions to the
// supervisor's gateway, its cleanup when the supervisor goes: serve.go).
//
// internal/run imports it; it knows nothing of the supervisor's stages,
// the scheduler or the gateway: what it needs of them comes in Config.
package worker
