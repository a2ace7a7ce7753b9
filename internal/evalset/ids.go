package evalset

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"unicode"
)

// NormalizeID is the form sample ids are compared and ordered in: leading
// and trailing white space trimmed and letters lowered ("  Q-7 " → "q-7").
// Two samples of a task whose ids normalise alike are duplicates, and
// group members are matched and ordered by it (D3).
func NormalizeID(id string) string {
	return strings.ToLower(strings.TrimSpace(id))
}

// CompareIDs orders sample ids by their normalised form, with runs of
// digits compared as numbers ("2" < "10", "q2" < "q10"). Ties of equal
// normalised ids fall back to the raw ids, so the order is total.
func CompareIDs(a, b string) int {
	na, nb := NormalizeID(a), NormalizeID(b)
	for na != "" && nb != "" {
		da, db := digitPrefix(na), digitPrefix(nb)
		if da != "" && db != "" {
			ta, tb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if len(ta) != len(tb) {
				return cmpInt(len(ta), len(tb))
			}
			if c := strings.Compare(ta, tb); c != 0 {
				return c
			}
			if c := cmpInt(len(da), len(db)); c != 0 {
				return c
			}
			na, nb = na[len(da):], nb[len(db):]
			continue
		}
		ra, rb := []rune(na)[0], []rune(nb)[0]
		if ra != rb {
			return cmpInt(int(ra), int(rb))
		}
		na, nb = na[len(string(ra)):], nb[len(string(rb)):]
	}
	if c := cmpInt(len(na), len(nb)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func digitPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkID returns why id cannot be a sample id, or "".
func checkID(id string) string {
	switch {
	case strings.TrimSpace(id) == "":
		return "id is empty"
	case len(id) > 256:
		return "id is longer than 256 bytes"
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Sprintf("id %q contains a control character", id)
		}
	}
	return ""
}

// Targets returns the sample's target as a list: nil when it has none.
func (s *Sample) Targets() []string {
	switch t := s.Target.(type) {
	case string:
		return []string{t}
	case []string:
		return t
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

// HasTarget reports whether the sample has a non-empty target.
func (s *Sample) HasTarget() bool { return len(s.Targets()) > 0 }

// InputText is what an agent receives as STEWARD_INPUT: the input string,
// or for a list of chat messages the text of the last user message (the
// JSON of the whole list when there is none).
func (s *Sample) InputText() string {
	switch x := s.Input.(type) {
	case string:
		return x
	case nil:
		return ""
	case []any:
		for i := len(x) - 1; i >= 0; i-- {
			if m, ok := x[i].(map[string]any); ok && m["role"] == "user" {
				if c, ok := m["content"].(string); ok {
					return c
				}
			}
		}
	}
	return s.InputJSON()
}

// InputJSON is what an agent receives as STEWARD_INPUT_JSON: the input
// (string or message list) encoded as JSON.
func (s *Sample) InputJSON() string {
	b, err := json.Marshal(s.Input)
	if err != nil {
		return fmt.Sprint(s.Input)
	}
	return string(b)
}

// FileData returns the bytes of a files: source: inline content for a data
// URL, else the file as it was read at Load (see snapshot), with its
// permission bits. Sources that Load did not read are refused.
func (es *EvalSet) FileData(src string) ([]byte, int64, error) {
	if strings.HasPrefix(src, "data:") {
		b, err := parseDataURL(src)
		return b, 0o644, err
	}
	f, ok := es.snap[src]
	if !ok {
		return nil, 0, fmt.Errorf("%s was not read when the eval set was loaded", src)
	}
	return f.data, f.mode, nil
}

// FileData returns the bytes a files entry's source stands for: inline
// content for a data URL ("data:,text" or "data:text/plain;base64,SGk="),
// else the file at src (absolute after Load).
func FileData(src string) ([]byte, error) {
	if strings.HasPrefix(src, "data:") {
		return parseDataURL(src)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return nil, fmt.Errorf("read sample file: %w", err)
	}
	return b, nil
}

// parseDataURL decodes an RFC 2397 data URL.
func parseDataURL(s string) ([]byte, error) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(s, "data:"), ",")
	if !ok {
		return nil, errors.New(`data URL needs a comma: "data:,inline text" or "data:;base64,SGk="`)
	}
	if strings.HasSuffix(meta, ";base64") {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(data))
		if err != nil {
			b2, err2 := base64.RawStdEncoding.DecodeString(strings.TrimSpace(data))
			if err2 != nil {
				return nil, fmt.Errorf("data URL has invalid base64: %w", err)
			}
			b = b2
		}
		return b, nil
	}
	if u, err := url.PathUnescape(data); err == nil {
		return []byte(u), nil
	}
	return []byte(data), nil
}

// Task returns the task named name, or nil.
func (es *EvalSet) Task(name string) *Task {
	for _, t := range es.Tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}
