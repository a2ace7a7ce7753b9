package evalset

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats like time.Duration ("10m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// ParseDuration reads "90s", "1m30s", "5m" (Go duration syntax) or a plain
// number of seconds ("90", "2.5"). Negative durations are refused.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > float64(math.MaxInt64)/float64(time.Second) {
			return 0, fmt.Errorf("duration %q out of range", s)
		}
		return Duration(f * float64(time.Second)), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (use e.g. 90s, 5m, 1h30m or a number of seconds)", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return Duration(v), nil
}

// UnmarshalYAML reads a duration string or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("expected a duration such as 90s or 5m")
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML writes the Go duration string ("10m0s").
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON writes the Go duration string ("10m0s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	} else {
		s = string(b)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseBytes reads a size: a plain number of bytes ("1048576") or a number
// with a binary unit k, m, g or t (optionally followed by "b" or "ib", any
// case): "512m" = "512MiB" = "512mb" = 512×2^20 bytes. Docker's convention.
func ParseBytes(s string) (Bytes, error) {
	orig := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return 0, errors.New("empty size")
	}
	s = strings.TrimSuffix(s, "ib")
	s = strings.TrimSuffix(s, "b")
	mult := 1.0
	if s != "" {
		switch s[len(s)-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult != 1 {
			s = strings.TrimSpace(s[:len(s)-1])
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a size (use e.g. 512m, 2g or a number of bytes)", orig)
	}
	if f < 0 {
		return 0, fmt.Errorf("size %q is negative", orig)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", orig)
	}
	return Bytes(v), nil
}

// String formats with the largest exact binary unit ("512m", "2g", "1000").
func (b Bytes) String() string {
	v := int64(b)
	for _, u := range []struct {
		s string
		n int64
	}{{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if v != 0 && v%u.n == 0 {
			return strconv.FormatInt(v/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}

// UnmarshalYAML reads a size.
func (b *Bytes) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("expected a size such as 512m or 2g")
	}
	v, err := ParseBytes(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalYAML writes the size with a unit ("512m").
func (b Bytes) MarshalYAML() (any, error) { return b.String(), nil }

// MarshalJSON writes the number of bytes.
func (b Bytes) MarshalJSON() ([]byte, error) { return []byte(strconv.FormatInt(int64(b), 10)), nil }

// UnmarshalJSON reads a number of bytes or a size string.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	var s string
	if len(data) > 0 && data[0] == '"' {
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
	} else {
		s = string(data)
	}
	v, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MaxRamp bounds samples_ramp's top.
const MaxRamp = 100000

// ParseRamp reads a samples_ramp value as written in STEWARD_SAMPLES_RAMP or
// a flag: "40,300" (also "40-300", "[40, 300]"), "false"/"off" (never ramp)
// or "true"/"on" (the default range).
func ParseRamp(s string) (RampRange, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "false", "off", "no":
		return RampRange{}, nil
	case "true", "on", "yes":
		return DefaultRamp, nil
	case "":
		return RampRange{}, errors.New(`empty samples_ramp (use "LO,HI" such as "40,300", or "false")`)
	}
	t = strings.TrimSuffix(strings.TrimPrefix(t, "["), "]")
	sep := ","
	if !strings.Contains(t, ",") {
		sep = "-"
	}
	parts := strings.Split(t, sep)
	if len(parts) != 2 {
		return RampRange{}, fmt.Errorf(`samples_ramp %q: use "LO,HI" such as "40,300", or "false"`, s)
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(parts[0]))
	hi, err2 := strconv.Atoi(strings.TrimSpace(parts[1]))
	if err1 != nil || err2 != nil {
		return RampRange{}, fmt.Errorf(`samples_ramp %q: both ends must be whole numbers, as in "40,300"`, s)
	}
	return NewRampRange(lo, hi)
}

// NewRampRange checks 1 ≤ lo ≤ hi ≤ MaxRamp.
func NewRampRange(lo, hi int) (RampRange, error) {
	switch {
	case lo < 1:
		return RampRange{}, fmt.Errorf("samples_ramp low end %d must be at least 1", lo)
	case hi < lo:
		return RampRange{}, fmt.Errorf("samples_ramp low end %d is above its high end %d", lo, hi)
	case hi > MaxRamp:
		return RampRange{}, fmt.Errorf("samples_ramp high end %d is above the maximum %d", hi, MaxRamp)
	}
	return RampRange{Enabled: true, Lo: lo, Hi: hi}, nil
}

// String formats as "40,300" or "false" (what ParseRamp reads).
func (r RampRange) String() string {
	if !r.Enabled {
		return "false"
	}
	return fmt.Sprintf("%d,%d", r.Lo, r.Hi)
}

// UnmarshalYAML reads [lo, hi], false or true.
func (r *RampRange) UnmarshalYAML(n *yaml.Node) error {
	v, err := rampFromNode(n)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

func rampFromNode(n *yaml.Node) (RampRange, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!bool" {
			b, _ := strconv.ParseBool(n.Value)
			if b {
				return DefaultRamp, nil
			}
			return RampRange{}, nil
		}
		return RampRange{}, fmt.Errorf("expected [low, high] or false, got %s", describe(n))
	case yaml.SequenceNode:
		if len(n.Content) != 2 {
			return RampRange{}, fmt.Errorf("expected [low, high] (two numbers), got %d items", len(n.Content))
		}
		var ends [2]int
		for i, c := range n.Content {
			if c.Kind != yaml.ScalarNode || c.Tag != "!!int" {
				return RampRange{}, fmt.Errorf("expected [low, high] with whole numbers, got %s", describe(c))
			}
			v, err := strconv.Atoi(c.Value)
			if err != nil {
				return RampRange{}, fmt.Errorf("%q is out of range", c.Value)
			}
			ends[i] = v
		}
		return NewRampRange(ends[0], ends[1])
	}
	return RampRange{}, fmt.Errorf("expected [low, high] or false, got %s", describe(n))
}

// MarshalYAML writes false or [lo, hi].
func (r RampRange) MarshalYAML() (any, error) {
	if !r.Enabled {
		return false, nil
	}
	return []int{r.Lo, r.Hi}, nil
}

// MarshalJSON writes false or [lo, hi].
func (r RampRange) MarshalJSON() ([]byte, error) {
	if !r.Enabled {
		return []byte("false"), nil
	}
	return json.Marshal([]int{r.Lo, r.Hi})
}

// UnmarshalJSON reads false, true or [lo, hi].
func (r *RampRange) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case bool:
		if x {
			*r = DefaultRamp
		} else {
			*r = RampRange{}
		}
		return nil
	case []any:
		if len(x) == 2 {
			lo, ok1 := x[0].(float64)
			hi, ok2 := x[1].(float64)
			if ok1 && ok2 && lo == math.Trunc(lo) && hi == math.Trunc(hi) {
				rr, err := NewRampRange(int(lo), int(hi))
				if err != nil {
					return err
				}
				*r = rr
				return nil
			}
		}
	}
	return errors.New("samples_ramp: expected [low, high] or false")
}
