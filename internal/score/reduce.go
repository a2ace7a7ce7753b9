package score

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/steward-evals/steward/internal/stats"
)

// Reducer kinds: how a sample's attempts become its score (the reducer:
// key of a task). Every report, the comparison and the fail policy use the
// score the task's reducer gives.
const (
	// ReduceMean: the fraction of judged attempts that passed (the default:
	// it uses every attempt, estimates the agent's per-attempt pass
	// probability without bias, and gives the paired test the most power;
	// Inspect's default reducer is the mean too).
	ReduceMean = "mean"
	// ReduceAll: 1 when every judged attempt passed (Steward's rule before
	// reducers existed).
	ReduceAll = "all"
	// ReduceAny: 1 when some judged attempt passed.
	ReduceAny = "any"
	// ReduceMajority: 1 when more than half the judged attempts passed.
	ReduceMajority = "majority"
	// ReduceAtLeast: 1 when at least K judged attempts passed.
	ReduceAtLeast = "at_least"
	// ReducePassAt: the unbiased pass@K estimate from n ≥ K attempts
	// (Chen et al. 2021), not "one of the first K passed".
	ReducePassAt = "pass_at"
)

// Reducers lists the kinds, for messages and the schema.
var Reducers = []string{ReduceMean, ReduceAll, ReduceAny, ReduceMajority, ReduceAtLeast, ReducePassAt}

// Reducer is a task's reducer: a kind and, for at_least and pass_at, K.
// The zero value is the default (mean).
type Reducer struct {
	Kind string `json:"kind,omitempty"`
	K    int    `json:"k,omitempty"`
}

// Default is the reducer of a task that names none.
var Default = Reducer{Kind: ReduceMean}

// Norm fills the default kind.
func (r Reducer) Norm() Reducer {
	if r.Kind == "" {
		return Default
	}
	return r
}

// String is how reports and the PLAN show the reducer: "mean",
// "at_least: 2", "pass_at: 3".
func (r Reducer) String() string {
	r = r.Norm()
	if r.Kind == ReduceAtLeast || r.Kind == ReducePassAt {
		return r.Kind + ": " + strconv.Itoa(r.K)
	}
	return r.Kind
}

// Parse reads a reducer from its string form ("mean", "at_least: 2",
// "pass_at:3").
func Parse(s string) (Reducer, error) {
	s = strings.TrimSpace(s)
	kind, arg, hasArg := strings.Cut(s, ":")
	kind = strings.TrimSpace(kind)
	r := Reducer{Kind: kind}
	switch kind {
	case "":
		return Default, nil
	case ReduceMean, ReduceAll, ReduceAny, ReduceMajority:
		if hasArg {
			return r, fmt.Errorf("reducer %q takes no argument", kind)
		}
		return r, nil
	case ReduceAtLeast, ReducePassAt:
		k, err := strconv.Atoi(strings.TrimSpace(arg))
		if !hasArg || err != nil || k < 1 {
			return r, fmt.Errorf("reducer %s needs a whole number of attempts ≥ 1 (%s: 2)", kind, kind)
		}
		r.K = k
		return r, nil
	}
	return r, fmt.Errorf("unknown reducer %q (one of %s)", s, strings.Join(Reducers, ", "))
}

// Check says whether the reducer can work with a task's attempts.
func (r Reducer) Check(attempts int) error {
	r = r.Norm()
	if (r.Kind == ReduceAtLeast || r.Kind == ReducePassAt) && r.K > attempts {
		return fmt.Errorf("reducer %s needs at least %d attempts per sample; the task has %d", r, r.K, attempts)
	}
	return nil
}

// Score is the sample's score in [0, 1] from pass passes out of n judged
// attempts; n = 0 scores 0 (callers leave unjudged samples out).
func (r Reducer) Score(pass, n int) float64 {
	if n <= 0 {
		return 0
	}
	b := func(ok bool) float64 {
		if ok {
			return 1
		}
		return 0
	}
	switch r.Norm().Kind {
	case ReduceAll:
		return b(pass == n)
	case ReduceAny:
		return b(pass > 0)
	case ReduceMajority:
		return b(2*pass > n)
	case ReduceAtLeast:
		return b(pass >= r.K)
	case ReducePassAt:
		return stats.PassAtK(n, pass, r.K)
	}
	return float64(pass) / float64(n)
}

// Func is Score as a stats.Reducer.
func (r Reducer) Func() stats.Reducer { return r.Score }

// MarshalText writes the string form, so a reducer round-trips through
// JSON and YAML as "mean" or "at_least: 2".
func (r Reducer) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads the string form.
func (r *Reducer) UnmarshalText(b []byte) error {
	x, err := Parse(string(b))
	if err != nil {
		return err
	}
	*r = x
	return nil
}
