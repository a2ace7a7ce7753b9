package score

import (
	"errors"
	"strings"
	"testing"
)

// The verdict of a Harbor verifier is its reward file, never its exit
// status; anything that is not a reward is no verdict (errored).
func TestHarborReward(t *testing.T) {
	b := func(s string) []byte { return []byte(s) }
	cases := []struct {
		name   string
		run    HarborRun
		passed bool
		score  float64
		expl   string // substring of the explanation, or of the NoVerdict's reason
		none   bool
	}{
		{name: "txt one", run: HarborRun{RewardTxt: b("1\n")}, passed: true, score: 1, expl: "reward.txt: 1"},
		{name: "txt zero", run: HarborRun{RewardTxt: b("0")}, score: 0, expl: "reward.txt: 0"},
		{name: "txt fraction", run: HarborRun{RewardTxt: b(" 0.25 ")}, passed: true, score: 0.25},
		{name: "txt negative", run: HarborRun{RewardTxt: b("-1")}, score: -1},
		{name: "the exit status is not the verdict: exit 1 with reward 1", run: HarborRun{Run: Run{Exit: 1}, RewardTxt: b("1")}, passed: true, score: 1, expl: "tests/test.sh exited 1"},
		{name: "nor exit 0 with reward 0", run: HarborRun{RewardTxt: b("0")}, score: 0},
		{name: "txt read before json", run: HarborRun{RewardTxt: b("0"), RewardJSON: b(`{"reward": 1}`)}, score: 0},
		{name: "json reward key, every metric kept", run: HarborRun{RewardJSON: b(`{"lines_found": 3, "reward": 1, "lines_wanted": 3}`)}, passed: true, score: 1,
			expl: `reward.json (reward: reward): {"lines_found":3,"lines_wanted":3,"reward":1}`},
		{name: "json without reward: first key by name", run: HarborRun{RewardJSON: b(`{"z": 1, "accuracy": 0}`)}, score: 0, expl: "(reward: accuracy)"},
		{name: "json reward zero", run: HarborRun{RewardJSON: b(`{"reward": 0, "partial": 0.5}`)}, score: 0},
		{name: "missing", run: HarborRun{Run: Run{Exit: 0, Stdout: b("all good")}}, none: true, expl: "neither /logs/verifier/reward.txt nor"},
		{name: "missing, failed test.sh", run: HarborRun{Run: Run{Exit: 2}}, none: true, expl: "exited 2"},
		{name: "empty txt", run: HarborRun{RewardTxt: b("\n")}, none: true, expl: "empty"},
		{name: "garbled txt", run: HarborRun{RewardTxt: b("passed")}, none: true, expl: "not a number"},
		{name: "NaN txt", run: HarborRun{RewardTxt: b("NaN")}, none: true, expl: "not a number"},
		{name: "two numbers", run: HarborRun{RewardTxt: b("1 1")}, none: true, expl: "not a number"},
		{name: "json not an object", run: HarborRun{RewardJSON: b(`[1]`)}, none: true, expl: "not a JSON object"},
		{name: "json null", run: HarborRun{RewardJSON: b(`null`)}, none: true, expl: "not a JSON object"},
		{name: "json empty object", run: HarborRun{RewardJSON: b(`{}`)}, none: true, expl: "no metric"},
		{name: "json non-numeric metric", run: HarborRun{RewardJSON: b(`{"reward": "1"}`)}, none: true, expl: `metric "reward" is not a number`},
		{name: "json nested", run: HarborRun{RewardJSON: b(`{"reward": 1, "detail": {"a": 1}}`)}, none: true, expl: `"detail"`},
		{name: "timed out, even with a reward", run: HarborRun{Run: Run{TimedOut: true}, RewardTxt: b("1")}, none: true, expl: "verifier timed out (verifier timeout 30s)"},
		{name: "out of memory", run: HarborRun{Run: Run{OOMKilled: true, Exit: 137}}, none: true, expl: "out of memory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := Harbor(c.run, "verifier timeout 30s")
			var nv *NoVerdict
			if c.none {
				if !errors.As(err, &nv) {
					t.Fatalf("got verdict %+v, err %v; want no verdict", v, err)
				}
				if !strings.Contains(nv.Reason, c.expl) {
					t.Fatalf("reason %q, want it to hold %q", nv.Reason, c.expl)
				}
				return
			}
			if err != nil {
				t.Fatalf("no verdict: %v", err)
			}
			if v.Passed != c.passed || v.Score != c.score {
				t.Fatalf("got passed %v score %v, want %v %v (%s)", v.Passed, v.Score, c.passed, c.score, v.Explanation)
			}
			if !strings.Contains(v.Explanation, c.expl) {
				t.Fatalf("explanation %q, want it to hold %q", v.Explanation, c.expl)
			}
		})
	}
}
