package tend

import (
	"reflect"
	"testing"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/ramp"
)

func TestGatewayBoundAndTaskSignals(t *testing.T) {
	cases := []struct {
		name string
		w    gateway.Signals
		want bool
	}{
		{"saturated below ceiling", gateway.Signals{Saturated: true, Limit: 4, Ceiling: 8}, true},
		{"saturated at ceiling: the samples are the bound", gateway.Signals{Saturated: true, Limit: 8, Ceiling: 8}, false},
		{"not saturated", gateway.Signals{Limit: 4, Ceiling: 8}, false},
		{"no ceiling (no ramp)", gateway.Signals{Saturated: true, Limit: 4}, false},
	}
	for _, c := range cases {
		if got := gatewayBound(c.w); got != c.want {
			t.Errorf("%s: gatewayBound = %v, want %v", c.name, got, c.want)
		}
	}
	sat := []bool{true, true, false, false}
	bb := []bool{false, true, true, false}
	errs := []int{0, 2, 0, 1}
	free := taskSignals(sat, bb, errs, false)
	want := []ramp.TaskSignals{{Saturated: true}, {Saturated: true, Errored: 2}, {BudgetBound: true}, {Errored: 1}}
	if !reflect.DeepEqual(free, want) {
		t.Errorf("free gateway: %+v, want %+v", free, want)
	}
	bound := taskSignals(sat, bb, errs, true)
	want = []ramp.TaskSignals{{}, {Errored: 2}, {BudgetBound: true}, {Errored: 1}}
	if !reflect.DeepEqual(bound, want) {
		t.Errorf("gateway-bound: %+v, want %+v", bound, want)
	}
}
