// Package runnerlog reads a container action's output the way the GitHub
// Actions runner does, for tests: it honours workflow commands
// (`::name k=v,…::message`), registers `::add-mask::` values and masks them
// in every later line, stops reading commands at `::stop-commands::TOKEN`
// until `::TOKEN::`, and returns what the job log would display.
//
// It follows the runner's ActionCommandManager: a line is a command when,
// after leading white space, it starts with "::" and names a known command;
// while commands are stopped a line is only compared (trimmed) with the
// resume token; everything else is displayed, masked.
package runnerlog

import (
	"strings"
)

// Annotation is an error, warning or notice command.
type Annotation struct {
	Level      string // error, warning, notice
	Properties map[string]string
	Message    string
}

// Log is what the runner made of a step's output.
type Log struct {
	// Displayed are the lines the job log shows, masked.
	Displayed []string
	// Masks are the registered secret values, in order.
	Masks []string
	// MasksBeforeStop are the masks registered before the first
	// ::stop-commands:: (all of them when commands were never stopped).
	MasksBeforeStop []string
	Annotations     []Annotation
	// Stops counts ::stop-commands:: honoured; Unresumed is set when the
	// output ended with commands still stopped.
	Stops     int
	Unresumed bool
	// IgnoredCommands are command lines shown as text because commands were
	// stopped (what eval output printed).
	IgnoredCommands []string
}

var known = map[string]bool{
	"add-mask": true, "add-matcher": true, "remove-matcher": true, "debug": true, "notice": true,
	"warning": true, "error": true, "group": true, "endgroup": true, "echo": true,
	"stop-commands": true, "save-state": true, "set-output": true, "set-env": true, "add-path": true,
}

// unescapeData undoes the runner's escaping of a command's message.
func unescapeData(s string) string {
	return strings.NewReplacer("%0D", "\r", "%0A", "\n", "%25", "%").Replace(s)
}

// unescapeProperty undoes the escaping of a property value.
func unescapeProperty(s string) string {
	return strings.NewReplacer("%0D", "\r", "%0A", "\n", "%3A", ":", "%2C", ",", "%25", "%").Replace(s)
}

// Parse reads a step's combined output.
func Parse(output string) *Log {
	l := &Log{}
	stopToken := ""
	stoppedOnce := false
	mask := func(line string) string {
		for _, m := range l.Masks {
			line = strings.ReplaceAll(line, m, "***")
		}
		return line
	}
	lines := strings.Split(strings.TrimSuffix(output, "\n"), "\n")
	if output == "" {
		lines = nil
	}
	for _, raw := range lines {
		raw = strings.TrimSuffix(raw, "\r")
		if stopToken != "" {
			if strings.TrimSpace(raw) == "::"+stopToken+"::" {
				stopToken = ""
				continue
			}
			if strings.HasPrefix(strings.TrimLeft(raw, " \t"), "::") {
				l.IgnoredCommands = append(l.IgnoredCommands, mask(raw))
			}
			l.Displayed = append(l.Displayed, mask(raw))
			continue
		}
		name, props, msg, ok := parseCommand(raw)
		if !ok {
			l.Displayed = append(l.Displayed, mask(raw))
			continue
		}
		switch name {
		case "add-mask":
			if v := strings.TrimSpace(msg); v != "" {
				l.Masks = append(l.Masks, v)
				if !stoppedOnce {
					l.MasksBeforeStop = append(l.MasksBeforeStop, v)
				}
			}
		case "stop-commands":
			if msg == "" {
				l.Displayed = append(l.Displayed, mask(raw)) // the runner refuses an empty token
				continue
			}
			stopToken = msg
			stoppedOnce = true
			l.Stops++
		case "error", "warning", "notice":
			l.Annotations = append(l.Annotations, Annotation{Level: name, Properties: props, Message: mask(msg)})
			l.Displayed = append(l.Displayed, mask(name+": "+msg))
		case "group":
			l.Displayed = append(l.Displayed, mask("▶ "+msg))
		}
	}
	l.Unresumed = stopToken != ""
	return l
}

// parseCommand parses `::name k=v,k=v::message` (after leading white space).
func parseCommand(line string) (name string, props map[string]string, msg string, ok bool) {
	s := strings.TrimLeft(line, " \t")
	if !strings.HasPrefix(s, "::") {
		return "", nil, "", false
	}
	end := strings.Index(s[2:], "::")
	if end < 0 {
		return "", nil, "", false
	}
	info := s[2 : 2+end]
	msg = unescapeData(s[2+end+2:])
	name, rest, _ := strings.Cut(info, " ")
	if !known[name] {
		return "", nil, "", false
	}
	props = map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			props[strings.TrimSpace(k)] = unescapeProperty(v)
		}
	}
	return name, props, msg, true
}

// Text is the displayed log, one line per line.
func (l *Log) Text() string { return strings.Join(l.Displayed, "\n") }

// Leaks returns the secrets (of those given) that the displayed log shows.
func (l *Log) Leaks(secrets ...string) []string {
	text := l.Text()
	var out []string
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			out = append(out, s)
		}
	}
	return out
}
