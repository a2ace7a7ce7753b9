//go:build race

package sched

// raceDetector: the tests run under -race (make test's race step). The
// randomized state test is single-goroutine, so there it checks fewer seeds.
const raceDetector = true
