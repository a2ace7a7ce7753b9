package report

import (
	"reflect"
	"testing"

	"github.com/steward-evals/steward/internal/status"
)

func TestRecountAgreesWithTheFixture(t *testing.T) {
	want := fixture()
	got := fixture()
	got.Counts = Counts{}
	for i := range got.Tasks {
		got.Tasks[i].Counts = Counts{}
		got.Tasks[i].PassRate = 0
	}
	got.Recount()
	if got.Counts != want.Counts {
		t.Errorf("counts %+v, want %+v", got.Counts, want.Counts)
	}
	if !reflect.DeepEqual(got.Tasks, want.Tasks) {
		t.Errorf("tasks %+v, want %+v", got.Tasks, want.Tasks)
	}
}

func TestRecountAddsTasksInDiscoveryOrder(t *testing.T) {
	r := &Report{Attempts: []AttemptRow{
		{Task: "b", Status: status.Passed},
		{Task: "a", Status: status.Interrupted},
		{Task: "b", Status: status.Failed, Carried: true},
	}}
	r.Recount()
	if len(r.Tasks) != 2 || r.Tasks[0].Name != "b" || r.Tasks[1].Name != "a" {
		t.Fatalf("tasks %+v", r.Tasks)
	}
	if c := r.Tasks[0].Counts; c.Total != 2 || c.Passed != 1 || c.Failed != 1 || c.Reused != 1 || r.Tasks[0].PassRate != 0.5 {
		t.Errorf("b: %+v", r.Tasks[0])
	}
	if c := r.Counts; c.Total != 3 || c.Interrupted != 1 {
		t.Errorf("counts %+v", c)
	}
}
