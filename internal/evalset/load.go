package evalset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/secret"
)

// FleetFileName is the fleet settings file read beside an eval set.
const FleetFileName = "_steward.yaml"

// DefaultFileName is the eval set Load reads when given a directory.
const DefaultFileName = "steward.yaml"

// displayPath is how a file is named in messages: as given, or relative
// to the working directory when an absolute path lies below it.
func displayPath(path, abs string) string {
	if filepath.IsAbs(path) {
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return rel
			}
		}
	}
	return filepath.Clean(path)
}

// FleetOverrides carries the fleet settings given as command-line flags; a
// nil pointer means the flag was not given. Flags win over STEWARD_*
// environment variables, which win over _steward.yaml, which wins over the
// defaults.
type FleetOverrides struct {
	MaxSandboxes *int
	MaxWorkers   *int
	MaxTasks     *int
	// SamplesRamp is written as for STEWARD_SAMPLES_RAMP: "40,300" or "false".
	SamplesRamp  *string
	TendInterval *time.Duration
	// Record is the record directory; relative paths resolve against the
	// current working directory.
	Record *string
	// ProviderFlags are the launch flags providers declare over their
	// sections (sandbox.SectionFlag: --kubeconfig), by flag name, as given.
	ProviderFlags map[string]string `json:",omitempty"`

	// The eval set's model, from launch's flags (--model, --model-base-url,
	// --upstream, -M key=value): each replaces what the YAML says, exactly
	// as if written there, so fingerprints and carry are the same. They
	// travel with the other flags to the workers.
	Model        *string `json:",omitempty"`
	ModelBaseURL *string `json:",omitempty"`
	Upstream     *string `json:",omitempty"`
	// ModelSettings are "key=value" pairs set over model.settings; the
	// value is read as a YAML value (0.2 a number, true a boolean).
	ModelSettings []string `json:",omitempty"`
	// Agent (--agent) replaces every task's agent, as if written there
	// (fingerprints and carry alike): "oracle" runs a Harbor dataset's
	// reference solutions (docs/harbor.md).
	Agent *string `json:",omitempty"`
}

// LoadOptions are what Load needs from the outside world.
type LoadOptions struct {
	// Getenv reads STEWARD_* variables; nil means an empty environment.
	Getenv func(string) string
	Flags  FleetOverrides
}

// Load reads, resolves and validates the eval set at path (a directory
// means its steward.yaml) and the
// _steward.yaml beside it (optional), then applies environment variables
// and flags to the fleet settings. On bad input it returns a *Errors
// listing every problem found; the returned set is then nil.
//
// After Load: every path in the set is absolute (except Task.Inputs, which
// stay globs relative to Dir so fingerprints do not depend on where the
// checkout lives); every sample has an id; defaults are filled in.
func Load(path string, opts LoadOptions) (*EvalSet, error) {
	errs := &Errors{}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, DefaultFileName)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolve eval set path: %w", err)
	}
	display := displayPath(path, abs)
	data, ok := readLimited(abs, display, errs)
	var es *EvalSet
	if ok {
		es = parseEvalSetWith(display, abs, data, errs, opts)
	}
	fleet, ferr := LoadFleet(filepath.Join(filepath.Dir(path), FleetFileName), opts.Getenv, opts.Flags)
	if ferr != nil {
		var fe *Errors
		if errors.As(ferr, &fe) {
			errs.merge(fe)
		} else {
			return nil, ferr
		}
	}
	if es != nil {
		// Now that every secret name is known: the eval set's expansions
		// against all of them, _steward.yaml's against those LoadFleet
		// could not know.
		names := secret.Names([]string{es.Model.APIKeyEnv}, es.SecretEnv, fleet.Secrets)
		refuseSecrets(errs, es.expanded, names, nil)
		known := map[string]bool{}
		for _, n := range secret.Names(fleet.Secrets) {
			known[n] = true
		}
		refuseSecrets(errs, fleet.expanded, names, known)
	}
	if err := errs.orNil(); err != nil {
		return nil, err
	}
	es.Fleet = fleet
	for _, t := range es.Tasks {
		if t != nil {
			t.Limits = mergeLimits(t.Limits, fleet.Limits) // per field, the task's first
		}
	}
	return es, nil
}

// readLimited reads a file of at most MaxFileSize bytes.
func readLimited(abs, display string, errs *Errors) ([]byte, bool) {
	f, err := os.Open(abs)
	if err != nil {
		errs.add(Error{File: display, Msg: "cannot read: " + pathErrMsg(err)})
		return nil, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		errs.add(Error{File: display, Msg: "cannot read: " + pathErrMsg(err)})
		return nil, false
	}
	if !st.Mode().IsRegular() {
		errs.add(Error{File: display, Msg: "is not a regular file"})
		return nil, false
	}
	if st.Size() > MaxFileSize {
		errs.add(Error{File: display, Msg: fmt.Sprintf("file is larger than the %d MiB limit", MaxFileSize>>20)})
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		errs.add(Error{File: display, Msg: "cannot read: " + pathErrMsg(err)})
		return nil, false
	}
	if len(data) > MaxFileSize {
		errs.add(Error{File: display, Msg: fmt.Sprintf("file is larger than the %d MiB limit", MaxFileSize>>20)})
		return nil, false
	}
	return data, true
}

func pathErrMsg(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "no such file"
	case errors.Is(err, os.ErrPermission):
		return "permission denied"
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML parses one YAML document into a node tree, reporting syntax
// errors with the line yaml.v3 gives.
func parseYAML(display string, data []byte, errs *Errors) *yaml.Node {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if e, bad := invalidUTF8(display, data); bad && !utf16BOM(data) {
		// yaml.v3 says only "invalid leading UTF-8 octet", with no line.
		errs.add(e)
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		errs.add(yamlError(display, data, err))
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		errs.add(Error{File: display, Line: extra.Line, Msg: "more than one YAML document (---): an eval set is one document"})
	} else if !errors.Is(err, io.EOF) {
		errs.add(yamlError(display, data, err))
	}
	return &doc
}

// utf16BOM: a UTF-16 file with its byte-order mark, which yaml.v3 decodes.
func utf16BOM(data []byte) bool {
	return bytes.HasPrefix(data, []byte{0xfe, 0xff}) || bytes.HasPrefix(data, []byte{0xff, 0xfe})
}

// invalidUTF8 finds the first byte of data that is not valid UTF-8 and
// names its line and column (1-based, in bytes), or reports false.
func invalidUTF8(file string, data []byte) (Error, bool) {
	if utf8.Valid(data) {
		return Error{}, false
	}
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return Error{File: file, Line: line, Column: col, Msg: fmt.Sprintf(
				"not valid UTF-8 (byte 0x%02x at column %d): save the file as UTF-8 (in a string, write the character itself or a \\u escape)", data[i], col)}, true
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col += n
		}
		i += n
	}
	return Error{}, false
}

var anchorRE = regexp.MustCompile(`unknown anchor '(.*)' referenced`)

func yamlError(display string, data []byte, err error) Error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return Error{File: display, Line: line, Msg: "YAML syntax error: " + m[2]}
	}
	e := Error{File: display, Msg: "YAML syntax error: " + strings.TrimPrefix(msg, "yaml: ")}
	if m := anchorRE.FindStringSubmatch(msg); m != nil {
		// yaml.v3 gives no line for this one: find the first use.
		for i, l := range bytes.Split(data, []byte("\n")) {
			if bytes.Contains(l, []byte("*"+m[1])) {
				e.Line = i + 1
				break
			}
		}
	}
	return e
}

// parseEvalSet decodes and validates an eval set held in data. abs is the
// eval set's absolute path (its directory resolves relative paths).
func parseEvalSet(display, abs string, data []byte, errs *Errors) *EvalSet {
	return parseEvalSetWith(display, abs, data, errs, LoadOptions{})
}

// parseEvalSetWith is parseEvalSet with ${…} read through opts.Getenv and
// the model flags of opts.Flags applied.
func parseEvalSetWith(display, abs string, data []byte, errs *Errors, opts LoadOptions) *EvalSet {
	es := &EvalSet{File: abs, Dir: filepath.Dir(abs)}
	d := newDecoder(display, errs)
	d.getenv = envOrEmpty(opts.Getenv)
	defer func() { es.expanded = d.expanded }()
	doc := parseYAML(display, data, errs)
	d.limit = countNodes(doc) + maxAliasNodes
	d.byteLimit = decodedLimit(len(data))
	root := d.resolve(doc, "")
	switch {
	case doc == nil && errs.Len() == 0:
		errs.add(Error{File: display, Msg: "the eval set is empty: it needs at least a tasks list"})
		return es
	case root == nil:
		return es
	case root.Kind != yaml.MappingNode:
		if !isNull(root) {
			d.errNode(root, "", "the eval set must be a mapping with a tasks list, got %s", describe(root))
			return es
		}
		errs.add(Error{File: display, Msg: "the eval set is empty: it needs at least a tasks list"})
		return es
	}
	d.at[""] = pos{file: display, line: root.Line, col: root.Column}
	d.decodeStruct(root, reflect.ValueOf(es).Elem(), "")
	if d.blown {
		return es
	}
	applyModelFlags(&es.Model, opts.Flags, errs)
	if a := opts.Flags.Agent; a != nil {
		if strings.TrimSpace(*a) == "" {
			errs.add(Error{File: "flag", Field: "--agent", Msg: "must name an agent command"})
		}
		for _, t := range es.Tasks {
			if t != nil {
				t.Agent = *a
			}
		}
	}
	v := &validator{d: d, es: es, display: display}
	v.loadSampleFiles()
	v.validate()
	return es
}

// ParseJSONL reads JSON Lines samples (Inspect's dataset fields: id, input,
// target, metadata, files, setup); name is used in messages and in each
// sample's Source ("name:line"). Blank lines are skipped. Samples without
// an id get their 1-based position ("1", "2", …). Paths in files are left
// as written. On bad input it returns a *Errors with the JSONL line numbers.
func ParseJSONL(name string, data []byte) ([]*Sample, error) {
	errs := &Errors{}
	d := newDecoder(name, errs)
	samples := d.decodeJSONL(data, "samples")
	for i, s := range samples {
		if s.ID == "" {
			s.ID = strconv.Itoa(i + 1)
		}
	}
	if err := errs.orNil(); err != nil {
		return nil, err
	}
	return samples, nil
}

// decodeJSONL decodes every line of data into a sample, recording
// positions under prefix[i].
func (d *decoder) decodeJSONL(data []byte, prefix string) []*Sample {
	return d.decodeJSONLWith(data, prefix, nil)
}

// decodeJSONLWith is decodeJSONL through a fields map (nil: none).
func (d *decoder) decodeJSONLWith(data []byte, prefix string, fm *FieldMap) []*Sample {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		d.errs.add(Error{File: d.file, Line: 1, Msg: "samples_file must be JSON Lines (one JSON object per line), not a JSON array"})
		return nil
	}
	var out []*Sample
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if e, bad := invalidUTF8(d.file, line); bad {
			// encoding/json would replace the byte with U+FFFD and go on.
			e.Line = lineNo
			d.errs.add(e)
			continue
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var v any
		err := dec.Decode(&v)
		if err == nil && dec.More() {
			err = errors.New("more than one JSON value on the line (one sample per line)")
		} else if err == nil {
			if _, terr := dec.Token(); terr != io.EOF {
				err = errors.New("unexpected text after the JSON object")
			}
		}
		if err != nil {
			col := 0
			var se *json.SyntaxError
			if errors.As(err, &se) {
				col = int(se.Offset)
			}
			d.errs.add(Error{File: d.file, Line: lineNo, Column: col, Msg: "invalid JSON: " + err.Error()})
			continue
		}
		path := index(prefix, len(out))
		m, ok := v.(map[string]any)
		if !ok {
			d.errs.add(Error{File: d.file, Line: lineNo, Field: path, Msg: "expected a JSON object per line, got " + jsonKind(v)})
			continue
		}
		s := d.record(jsonToNode(m, lineNo), path, fm, false)
		if d.blown {
			return out
		}
		out = append(out, s)
	}
	return out
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a value"
}

// jsonToNode builds a yaml node tree from a decoded JSON value so samples
// from JSONL go through the same decoder as inline ones. Keys are sorted.
func jsonToNode(v any, line int) *yaml.Node {
	n := &yaml.Node{Line: line, Column: 1}
	switch x := v.(type) {
	case map[string]any:
		n.Kind, n.Tag = yaml.MappingNode, "!!map"
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n.Content = append(n.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k, Line: line, Column: 1, Style: yaml.DoubleQuotedStyle},
				jsonToNode(x[k], line))
		}
	case []any:
		n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
		for _, e := range x {
			n.Content = append(n.Content, jsonToNode(e, line))
		}
	case string:
		n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!str", x
	case json.Number:
		n.Kind, n.Value = yaml.ScalarNode, x.String()
		n.Tag = "!!float"
		if _, err := strconv.ParseInt(x.String(), 10, 64); err == nil {
			n.Tag = "!!int"
		}
	case bool:
		n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!bool", strconv.FormatBool(x)
	default:
		n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!null", "null"
	}
	return n
}

// envOrEmpty is getenv, or an empty environment for nil.
func envOrEmpty(getenv func(string) string) func(string) string {
	if getenv == nil {
		return func(string) string { return "" }
	}
	return getenv
}

// applyModelFlags puts launch's model flags over the eval set's model,
// checking each as the YAML value it replaces is checked (reported as
// "flag: --NAME: …"). Model.Sources says which came from a flag.
func applyModelFlags(m *Model, fl FleetOverrides, errs *Errors) {
	bad := func(name, format string, args ...any) {
		errs.add(Error{File: "flag", Field: name, Msg: fmt.Sprintf(format, args...)})
	}
	from := func(key string) {
		if m.Sources == nil {
			m.Sources = map[string]string{}
		}
		m.Sources[key] = SourceFlag
	}
	if fl.Upstream != nil {
		if u, ups := strings.TrimSpace(*fl.Upstream), gateway.Upstreams(); !oneOf(u, ups) {
			bad("--upstream", "%s", badEnum("upstream", u, ups))
		} else {
			m.Upstream = u
			from("upstream")
		}
	}
	if fl.Model != nil {
		if strings.TrimSpace(*fl.Model) == "" {
			bad("--model", "must name a model")
		} else {
			m.Name = *fl.Model
			from("name")
		}
	}
	if fl.ModelBaseURL != nil {
		if msg := checkBaseURL(*fl.ModelBaseURL); msg != "" {
			bad("--model-base-url", "%s", msg)
		} else {
			m.BaseURL = *fl.ModelBaseURL
			from("base_url")
		}
	}
	for _, kv := range fl.ModelSettings {
		k, val, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			bad("-M", "%q is not key=value (e.g. -M temperature=0.2)", kv)
			continue
		}
		var x any
		if err := yaml.Unmarshal([]byte(val), &x); err != nil {
			x = val // not YAML: the text itself
		}
		if x == nil && strings.TrimSpace(val) != "" && strings.TrimSpace(val) != "null" && strings.TrimSpace(val) != "~" {
			x = val // a comment-only value ("#x") is text, never nothing
		}
		if m.Settings == nil {
			m.Settings = map[string]any{}
		}
		m.Settings[k] = x
		from("settings." + k)
	}
}

// checkBaseURL says what is wrong with a model base URL ("" if nothing).
func checkBaseURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q is not an http(s) URL", s)
	}
	if u.User != nil {
		return "must not carry credentials: name the key's variable in api_key_env"
	}
	return ""
}
