package evalset

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/steward-evals/steward/internal/score"
)

// MaxChoices bounds a multiple-choice sample's choices (letters A to Z).
const MaxChoices = 26

// The built-in multiple-choice prompts (Inspect's multiple_choice solver's):
// the question, the choices lettered "A) …", and the answer's format.
const (
	ChoicesTemplate = "Answer the following multiple choice question. The entire content of your response should be of the following format: 'ANSWER: $LETTER' (without quotes) where LETTER is one of {letters}.\n\n{question}\n\n{choices}"
	// ChoicesTemplateMultiple is used for every sample of a task in which
	// some sample has several correct choices.
	ChoicesTemplateMultiple = "Answer the following multiple choice question where multiple answers may be correct. The entire content of your response should be of the following format: 'ANSWER: $LETTERS' (without quotes) where LETTERS is one or more of {letters}.\n\n{question}\n\n{choices}"
)

func letter(i int) string { return string(rune('A' + i)) }

// choices checks task i's multiple-choice samples, turns each target into
// the letters of the correct choices (a target may be written as letters,
// "A, C", or as the text of a choice), shuffles the choices when
// shuffle_choices is set (by seed and sample id; the target follows), and
// renders the input with the task's template.
func (v *validator) choices(i int, t *Task) {
	tp := index("tasks", i)
	if t.ChoicesTemplate != "" && !strings.Contains(t.ChoicesTemplate, "{question}") {
		v.errf(tp+".choices_template", "must contain {question} (and usually {choices} and {letters})")
		return
	}
	multiple := false
	var mc []int
	for j, s := range t.Samples {
		if s == nil || len(s.Choices) == 0 {
			continue // an empty list is no list, as everywhere
		}
		sp := index(tp+".samples", j)
		if len(s.Choices) < 2 || len(s.Choices) > MaxChoices {
			v.errf(sp+".choices", "a multiple-choice sample needs 2 to %d choices, got %d", MaxChoices, len(s.Choices))
			continue
		}
		if !s.HasTarget() {
			v.errf(sp+".target", "missing: a multiple-choice sample needs its correct choice (a letter such as B, or the choice's text)")
			v.d.bad[sp+".target"] = true
			continue
		}
		letters, msg := choiceTarget(s)
		if msg != "" {
			v.errf(sp+".target", "%s", msg)
			v.d.bad[sp+".target"] = true
			continue
		}
		if len(letters) > 1 {
			multiple = true
		}
		s.Target = letters
		mc = append(mc, j)
	}
	for _, j := range mc {
		s := t.Samples[j]
		sp := index(tp+".samples", j)
		if t.ShuffleChoices {
			shuffleChoices(s, t.Seed)
		}
		tmpl := t.ChoicesTemplate
		if tmpl == "" {
			tmpl = ChoicesTemplate
			if multiple {
				tmpl = ChoicesTemplateMultiple
			}
		}
		if msg := renderChoices(s, tmpl); msg != "" {
			v.errf(sp+".input", "%s", msg)
		}
	}
	if t.ShuffleChoices && len(mc) == 0 && v.samplesOK[i] {
		v.errf(tp+".shuffle_choices", "no sample of the task has choices")
	}
}

// choiceTarget is the letters of a multiple-choice sample's correct
// choices, or why its target names none.
func choiceTarget(s *Sample) ([]string, string) {
	seen := map[string]bool{}
	for _, tg := range s.Targets() {
		if ls, ok := score.ChoiceLetters(tg); ok {
			for _, l := range ls {
				if int(l[0]-'A') >= len(s.Choices) {
					return nil, fmt.Sprintf("target %q: there is no choice %s (the sample has %d: A to %s)", tg, l, len(s.Choices), letter(len(s.Choices)-1))
				}
				seen[l] = true
			}
			continue
		}
		found := false
		for k, c := range s.Choices {
			if strings.TrimSpace(c) == strings.TrimSpace(tg) {
				seen[letter(k)], found = true, true
				break
			}
		}
		if !found {
			return nil, fmt.Sprintf("target %q is neither a choice letter (A to %s) nor the text of one of the choices", tg, letter(len(s.Choices)-1))
		}
	}
	out := make([]string, 0, len(seen))
	for l := range seen {
		out = append(out, l)
	}
	sort.Strings(out)
	return out, ""
}

// seededKey is a deterministic pseudo-random key of seed and parts (the
// same on every machine and Go version, so a shuffle never changes a
// fingerprint by itself).
func seededKey(seed int64, parts ...string) uint64 {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// shuffleChoices orders s's choices by a key of the seed, the sample's id
// and each choice's original position, and remaps its target letters.
func shuffleChoices(s *Sample, seed int64) {
	n := len(s.Choices)
	perm := make([]int, n) // perm[new] = old
	keys := make([]uint64, n)
	for k := range perm {
		perm[k] = k
		keys[k] = seededKey(seed, "choices", NormalizeID(s.ID), strconv.Itoa(k))
	}
	sort.SliceStable(perm, func(a, b int) bool { return keys[perm[a]] < keys[perm[b]] })
	newOf := make([]int, n)
	choices := make([]string, n)
	for nw, old := range perm {
		newOf[old] = nw
		choices[nw] = s.Choices[old]
	}
	s.Choices = choices
	tg, _ := s.Target.([]string)
	out := make([]string, 0, len(tg))
	for _, l := range tg {
		out = append(out, letter(newOf[int(l[0]-'A')]))
	}
	sort.Strings(out)
	s.Target = out
}

// renderChoices puts the template, filled with the question and the
// lettered choices, in place of the sample's input text (the last user
// message's, for a message list).
func renderChoices(s *Sample, tmpl string) string {
	var lines, letters []string
	for k, c := range s.Choices {
		lines = append(lines, letter(k)+") "+c)
		letters = append(letters, letter(k))
	}
	fill := func(q string) string {
		return strings.NewReplacer("{question}", q, "{choices}", strings.Join(lines, "\n"), "{letters}", strings.Join(letters, ",")).Replace(tmpl)
	}
	switch in := s.Input.(type) {
	case string:
		s.Input = fill(in)
		return ""
	case []any:
		for k := len(in) - 1; k >= 0; k-- {
			m, ok := in[k].(map[string]any)
			if !ok || m["role"] != "user" {
				continue
			}
			if c, ok := m["content"].(string); ok {
				cp := map[string]any{}
				for key, val := range m {
					cp[key] = val
				}
				cp["content"] = fill(c)
				out := append([]any{}, in...)
				out[k] = cp
				s.Input = out
				return ""
			}
		}
		return "a multiple-choice sample's messages need a user message with text content to put the choices in"
	}
	return ""
}

// order shuffles task i's samples (shuffle: by a key of seed and id, so
// adding a sample moves no other) and keeps the first samples_limit.
func (v *validator) order(i int, t *Task) {
	tp := index("tasks", i)
	if t.SamplesLimit < 0 {
		v.errf(tp+".samples_limit", "must be 0 (all) or more, got %d", t.SamplesLimit)
		return
	}
	if t.Shuffle {
		keys := make(map[*Sample]uint64, len(t.Samples))
		for _, s := range t.Samples {
			if s != nil {
				keys[s] = seededKey(t.Seed, "samples", NormalizeID(s.ID))
			}
		}
		sort.SliceStable(t.Samples, func(a, b int) bool {
			sa, sb := t.Samples[a], t.Samples[b]
			if sa == nil || sb == nil {
				return sb == nil && sa != nil
			}
			return keys[sa] < keys[sb]
		})
	}
	if t.SamplesLimit == 0 || t.SamplesLimit >= len(t.Samples) {
		return
	}
	t.Samples = t.Samples[:t.SamplesLimit]
	kept := map[string]bool{}
	for _, s := range t.Samples {
		if s != nil {
			kept[NormalizeID(s.ID)] = true
		}
	}
	// Groups keep the members that are still samples of the task.
	var groups []*Group
	for _, g := range t.Groups {
		if g == nil {
			continue
		}
		var members []string
		for _, m := range g.Samples {
			if kept[NormalizeID(m)] {
				members = append(members, m)
			}
		}
		if len(members) > 0 {
			g.Samples = members
			groups = append(groups, g)
		}
	}
	t.Groups = groups
}
