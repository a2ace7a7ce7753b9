package evalset

import (
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/steward-evals/steward/internal/secret"
)

// expansion is one ${NAME} that Load expanded, kept so that a variable
// named as a secret is refused once every secret name is known.
type expansion struct {
	name  string
	at    pos
	field string
}

// shellFieldRE are the values that are shell commands: they keep ${…} (and
// $$, the shell's process id) for their shell, which sees the task's env.
var shellFieldRE = regexp.MustCompile(`^tasks\[\d+\]\.(agent|setup|scorer\.command|host\.setup|host\.teardown)$`)

// dataFieldRE are the samples: data, never expanded, inline as in a file
// (a question about shell or JavaScript may well hold ${x}).
var dataFieldRE = regexp.MustCompile(`^tasks\[\d+\]\.samples(\[|$)`)

// interpolates says whether the value at path has ${…} expanded.
func interpolates(path string) bool {
	return !shellFieldRE.MatchString(path) && !dataFieldRE.MatchString(path)
}

// expand returns n with ${NAME}, ${NAME:-default} and $$ expanded, when the
// decoder interpolates (the eval set and _steward.yaml, never samples
// files) and n is a string at a path that takes them. The expanded text is
// read as the plain scalar it would be if written in place (a number, a
// boolean) when n was plain, but never as YAML structure: "[a, b]" or
// "k: v" stay text. Quoted, it is always a string. Problems are reported
// at n's position, and nil returned.
func (d *decoder) expand(n *yaml.Node, path string) *yaml.Node {
	if d.getenv == nil || n == nil || n.Kind != yaml.ScalarNode || n.Tag != "!!str" || !strings.Contains(n.Value, "$") || !interpolates(path) {
		return n
	}
	val, names, err := ExpandVars(n.Value, d.getenv)
	if err != nil {
		d.errNode(n, path, "%v", err)
		return nil
	}
	for _, name := range names {
		d.expanded = append(d.expanded, expansion{name: name, at: d.posOf(n), field: path})
	}
	cp := *n
	cp.Value = val
	if n.Style == 0 {
		cp.Tag = plainTag(val)
	}
	return &cp
}

// plainTag is the tag YAML gives s written as a plain scalar: !!int,
// !!float, !!bool, !!null, or !!str for text and for anything that would
// be read as more than one scalar.
func plainTag(s string) string {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil || len(doc.Content) != 1 {
		return "!!str"
	}
	c := doc.Content[0]
	if c.Kind != yaml.ScalarNode || c.Style != 0 || c.Value != s {
		return "!!str"
	}
	return c.ShortTag()
}

// ExpandVars expands ${NAME} and ${NAME:-default} in s from getenv, and $$
// to $. A $ before anything else is kept ($HOME stays $HOME). A variable
// set to the empty string counts as unset. It returns the names it read.
func ExpandVars(s string, getenv func(string) string) (string, []string, error) {
	var b strings.Builder
	var names []string
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
			continue
		case '{':
		default:
			b.WriteByte(c)
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", nil, fmt.Errorf("%q: ${ without its closing } (write $$ for a literal $)", clip(s[i:]))
		}
		inner := s[i+2 : i+2+end]
		name, def, hasDef := strings.Cut(inner, ":-")
		if !envNameRE.MatchString(name) {
			return "", nil, fmt.Errorf("${%s}: %q is not a variable name (use ${NAME} or ${NAME:-default}; $$ for a literal $)", clip(inner), clip(name))
		}
		v := getenv(name)
		if v == "" {
			if !hasDef {
				return "", nil, fmt.Errorf("${%s}: %s is not set (give a default with ${%s:-value}, or write $${%s} for the text itself)", name, name, name, name)
			}
			v = def
		}
		names = append(names, name)
		b.WriteString(v)
		i += 2 + end + 1
	}
	return b.String(), names, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// refuseSecrets reports every expansion of a variable named as a secret:
// ${…} must never be a way to write the model key (or any secret) into a
// file, an environment or a fingerprint. skip are names already reported.
func refuseSecrets(errs *Errors, exps []expansion, names []string, skip map[string]bool) {
	secretSet := map[string]bool{}
	for _, n := range names {
		secretSet[n] = true
	}
	for _, e := range exps {
		if !secretSet[e.name] || skip[e.name] {
			continue
		}
		errs.add(Error{File: e.at.file, Line: e.at.line, Column: e.at.col, ShowColumn: e.at.cols, Field: e.field,
			Msg: fmt.Sprintf("${%s}: %s holds a secret (%s) and is never expanded: Steward reads a key itself from the variable model.api_key_env names, and a sandbox gets its own token", e.name, e.name, secretWhy(e.name))})
	}
}

func secretWhy(name string) string {
	for _, n := range secret.EnvNames {
		if n == name {
			return "always a secret"
		}
	}
	return "named by model.api_key_env, secret_env or secrets"
}
