package run

import (
	"github.com/steward-evals/steward/internal/ramp"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/tend"
)

// The scheduler's and the ramp's starting state, from what the choose
// stage decided: the PLAN line and the forecast show the starting
// setpoints, and the dispatch stage starts from them.

// newState builds the scheduler's state for the attempts to run, with the
// budget set and every task not ready yet (it becomes ready after its
// max_tasks slot, lease and host setup), and the items it was built from.
func (ch *chosen) newState() (*sched.State, schedPlan, error) {
	excl := make([]string, len(ch.exclusive))
	for i, e := range ch.exclusive {
		if e {
			excl[i] = ch.taskProv[i]
		}
	}
	sp := schedItems(ch.p, excl)
	st, err := sched.New(sp.items, len(ch.p.Tasks), sp.order)
	if err != nil {
		return nil, sp, err
	}
	st.SetBudget(ch.budget)
	// Every task starts pending: its share is kept for it until it is ready
	// or has to wait (taskLifecycle), so the first dispatch cannot hand the
	// budget to whichever task is ready first (C4, C7).
	for i := range ch.p.Tasks {
		st.SetPending(i, true)
	}
	return st, sp, nil
}

// newRamp is the ramp's controller for the run's tasks, in the range
// samples_ramp says.
func (ch *chosen) newRamp() (*ramp.Controller, error) {
	var tasks []ramp.TaskSpec
	for _, t := range ch.p.Tasks {
		tasks = append(tasks, ramp.TaskSpec{Name: t.Task.Name, MaxSamples: t.Task.MaxSamples})
	}
	c, err := ramp.New(ramp.Config{Range: tend.Range(ch.es.Fleet.SamplesRamp), Budget: ch.budget}, tasks)
	if err != nil {
		return nil, badInput("samples_ramp: %v", err)
	}
	return c, nil
}

// startSetpoints are the setpoints the run starts with when every task can
// run: the ramp's starting setpoints (or max_samples) shared within the
// budget (C4, C7), as the scheduler computes them. Nil when unknown.
func (ch *chosen) startSetpoints() []int {
	st, _, err := ch.newState()
	if err != nil {
		return nil
	}
	ctl, err := ch.newRamp()
	if err != nil {
		return nil
	}
	for i, sp := range ctl.Setpoints() {
		st.SetCap(i, sp)
		st.SetReady(i, true)
	}
	out := make([]int, len(ch.p.Tasks))
	for i := range out {
		out[i] = st.Setpoint(i)
	}
	return out
}
