package score

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The Harbor verifier's contract (docs/harbor.md, "The verifier"): the
// verdict is the reward file tests/test.sh left, never its exit status.
// /logs/verifier/reward.txt (one number) is read first, else
// /logs/verifier/reward.json (a flat object of numbers: every metric is
// kept in the explanation; the reward is its "reward" key, else its first
// key by name). The attempt passes when the reward is above HarborPassAbove;
// the reward is its score. A missing, empty or unparseable reward file, a
// verifier that timed out or ran out of memory, is no verdict: errored,
// never failed.

// HarborPassAbove is the reward an attempt must exceed to pass (the rule
// of the converters that run Harbor tasks elsewhere; Harbor itself reports
// the mean reward with no threshold).
const HarborPassAbove = 0.0

// HarborRun is what a Harbor verifier did and left.
type HarborRun struct {
	Run
	// RewardTxt and RewardJSON are the reward files' bytes, nil when the
	// verifier did not write the file.
	RewardTxt  []byte
	RewardJSON []byte
}

// Harbor judges a Harbor verifier's run, or returns a *NoVerdict. timeout
// names the verifier's bound (for a timed-out verifier's reason).
func Harbor(r HarborRun, timeout string) (Verdict, error) {
	out := OutputTail(r.Stdout, r.Stderr, TailBytes)
	exit := ""
	if r.Exit != 0 {
		exit = fmt.Sprintf("; tests/test.sh exited %d", r.Exit)
	}
	switch {
	case r.TimedOut:
		return Verdict{}, &NoVerdict{"verifier timed out (" + timeout + "): no reward" + sep(out)}
	case r.OOMKilled:
		return Verdict{}, &NoVerdict{"verifier ran out of memory: no reward" + sep(out)}
	}
	var reward float64
	var expl string
	switch {
	case r.RewardTxt != nil:
		s := strings.TrimSpace(string(r.RewardTxt))
		if s == "" {
			return Verdict{}, &NoVerdict{"verifier wrote an empty /logs/verifier/reward.txt: no reward" + exit + sep(out)}
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return Verdict{}, &NoVerdict{fmt.Sprintf("verifier's /logs/verifier/reward.txt is not a number (%q): no reward%s%s", trunc(s, 80), exit, sep(out))}
		}
		reward, expl = v, "reward.txt: "+strconv.FormatFloat(v, 'g', -1, 64)
	case r.RewardJSON != nil:
		m, err := rewardMetrics(r.RewardJSON)
		if err != nil {
			return Verdict{}, &NoVerdict{"verifier's /logs/verifier/reward.json " + err.Error() + ": no reward" + exit + sep(out)}
		}
		key := "reward"
		if _, ok := m[key]; !ok {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			key = keys[0]
		}
		reward = m[key]
		b, _ := json.Marshal(m) // keys in order: stable, diffable
		expl = fmt.Sprintf("reward.json (reward: %s): %s", key, b)
	default:
		return Verdict{}, &NoVerdict{"verifier wrote neither /logs/verifier/reward.txt nor /logs/verifier/reward.json: no reward" + exit + sep(out)}
	}
	return Verdict{Passed: reward > HarborPassAbove, Score: reward, Explanation: expl + exit}, nil
}

// rewardMetrics reads reward.json: a non-empty flat object of finite numbers.
func rewardMetrics(b []byte) (map[string]float64, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("is not a JSON object of numbers (%q)", trunc(string(bytes.TrimSpace(b)), 80))
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("holds no metric")
	}
	m := make(map[string]float64, len(raw))
	for k, v := range raw {
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return nil, fmt.Errorf("metric %q is not a number (%s)", k, trunc(string(v), 40))
		}
		m[k] = f
	}
	return m, nil
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
