package evalset

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/steward-evals/steward/internal/score"
)

// Limits that stop huge or recursive input (issue 8: bad input).
const (
	// MaxFileSize bounds an eval set, a _steward.yaml or a JSONL samples file.
	MaxFileSize = 64 << 20
	// maxAliasNodes bounds how many more YAML nodes decoding may visit than
	// the document holds, i.e. the nodes reached again through aliases, so
	// an alias bomb ("billion laughs") is refused instead of expanded.
	maxAliasNodes = 500_000
	// maxDepth bounds nesting (and so recursion) while decoding.
	maxDepth = 64
	// minDecodedBytes and decodedPerFileByte bound the text a document may
	// decode to: the larger of 16 MiB and 10 bytes per byte of the file. A
	// few thousand aliases of one large string stay under maxAliasNodes but
	// would decode to gigabytes that every later step (fingerprints, sample
	// environments) pays for; they are refused while decoding.
	minDecodedBytes    = 16 << 20
	decodedPerFileByte = 10
)

// decodedLimit is the decoded-bytes budget of a file of n bytes.
func decodedLimit(n int) int64 {
	return max(int64(minDecodedBytes), int64(n)*decodedPerFileByte)
}

// pos is where a value was written.
type pos struct {
	file      string
	line, col int
	// cols: messages show the column (cells of CSV and Parquet files).
	cols bool
}

// decoder turns yaml.v3 node trees into the types of this package, keeping
// the position of every value it sets and collecting every problem.
type decoder struct {
	file string // the file being decoded, for messages
	errs *Errors
	// at maps a dotted path (tasks[0].scorer.match) to where its value was
	// written. Only values that were present and not null are recorded.
	at map[string]pos
	// written maps a canonical path to the path as written, when the user
	// used an alias (epochs for attempts).
	written map[string]string
	// bad holds paths whose value could not be decoded, so validation
	// does not report them a second time.
	bad   map[string]bool
	nodes int
	limit int // node budget; see maxAliasNodes
	// bytes counts the scalar text decoded so far (aliases counted each time
	// they are used); byteLimit bounds it (0 = no bound), see decodedLimit.
	bytes, byteLimit int64
	// via is the alias the node being visited was reached through (for the
	// position of a message), set by resolve and consumed by visit.
	via   *yaml.Node
	depth int
	blown bool
	// cols: the file's messages name columns too (CSV, TSV, Parquet).
	cols bool
	// getenv expands ${NAME} in string values (nil: no expansion, as in
	// samples files); expanded lists what was expanded, and where.
	getenv   func(string) string
	expanded []expansion
}

// posOf is where node n was written.
func (d *decoder) posOf(n *yaml.Node) pos { return pos{d.file, n.Line, n.Column, d.cols} }

func newDecoder(file string, errs *Errors) *decoder {
	return &decoder{file: file, errs: errs, at: map[string]pos{}, written: map[string]string{}, bad: map[string]bool{}}
}

func (d *decoder) errNode(n *yaml.Node, field, format string, args ...any) {
	d.bad[field] = true
	e := Error{File: d.file, Field: field, Msg: fmt.Sprintf(format, args...), ShowColumn: d.cols}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs.add(e)
}

// visit counts a node against the budgets; false means stop decoding.
func (d *decoder) visit(n *yaml.Node, field string) bool {
	if d.blown {
		return false
	}
	d.nodes++
	if d.limit == 0 {
		d.limit = maxAliasNodes
	}
	if d.nodes > d.limit {
		d.blown = true
		d.errNode(n, field, "aliases expand to more than %d extra values (an alias bomb?): write the values out or share less", maxAliasNodes)
		return false
	}
	at := n
	if d.via != nil {
		at, d.via = d.via, nil
	}
	if n != nil && n.Kind == yaml.ScalarNode {
		d.bytes += int64(len(n.Value))
		if d.byteLimit > 0 && d.bytes > d.byteLimit {
			d.blown = true
			d.errNode(at, field, "the document decodes to more than %d bytes of text (aliases of large values repeat them; an alias bomb?): write the values out or share less", d.byteLimit)
			return false
		}
	}
	return true
}

// resolve follows aliases.
func (d *decoder) resolve(n *yaml.Node, field string) *yaml.Node {
	var via *yaml.Node
	defer func() { d.via = via }()
	for hops := 0; n != nil && n.Kind == yaml.AliasNode; hops++ {
		if !d.visit(n, field) {
			return nil
		}
		if via == nil {
			via = n
		}
		if n.Alias == nil || hops > maxDepth {
			d.errNode(n, field, "alias *%s cannot be resolved", n.Value)
			return nil
		}
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		return d.resolve(n.Content[0], field)
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// describe names a node's type for messages.
func describe(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!bool":
			return n.Value
		case "!!int", "!!float":
			return "the number " + n.Value
		default:
			v := n.Value
			if len(v) > 40 {
				v = v[:37] + "..."
			}
			return strconv.Quote(v)
		}
	}
	return "an unexpected value"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

type pair struct{ key, val *yaml.Node }

// pairs lists a mapping's entries, expanding merge keys (<<: *base) and
// reporting duplicate and non-scalar keys.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var out []pair
	seen := map[string]*yaml.Node{}
	var merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !d.visit(k, path) {
			return nil
		}
		if k.Kind != yaml.ScalarNode {
			d.errNode(k, path, "keys must be plain names, got %s", describe(k))
			continue
		}
		if k.Tag == "!!merge" || (k.Value == "<<" && k.Style == 0) {
			merged = append(merged, d.mergePairs(v, path, 0)...)
			continue
		}
		if prev, ok := seen[k.Value]; ok {
			d.errNode(k, join(path, k.Value), "duplicate key %q (first on line %d)", k.Value, prev.Line)
			continue
		}
		seen[k.Value] = k
		out = append(out, pair{k, v})
	}
	for _, p := range merged {
		if _, ok := seen[p.key.Value]; ok {
			continue
		}
		seen[p.key.Value] = p.key
		out = append(out, p)
	}
	return out
}

func (d *decoder) mergePairs(v *yaml.Node, path string, depth int) []pair {
	if depth > maxDepth {
		d.errNode(v, path, "merge keys nested too deeply")
		return nil
	}
	r := d.resolve(v, path)
	if r == nil {
		return nil
	}
	switch r.Kind {
	case yaml.MappingNode:
		return d.pairs(r, path)
	case yaml.SequenceNode:
		var out []pair
		for _, c := range r.Content {
			out = append(out, d.mergePairs(c, path, depth+1)...)
		}
		return out
	}
	d.errNode(v, path, "<< must merge a mapping, got %s", describe(r))
	return nil
}

// structInfo maps yaml keys to struct fields.
type structInfo struct {
	fields map[string]int
	names  []string
}

var infoCache = map[reflect.Type]*structInfo{}

func infoOf(t reflect.Type) *structInfo {
	if si, ok := infoCache[t]; ok {
		return si
	}
	si := &structInfo{fields: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("yaml")
		name, _, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		si.fields[name] = i
		si.names = append(si.names, name)
	}
	return si
}

func init() {
	// Fill the cache up front so concurrent loads only read it.
	for _, v := range []any{EvalSet{}, Model{}, Prices{}, Task{}, Sandbox{}, Scorer{}, HostHooks{}, Group{}, SharedState{}, Sample{}, Fleet{}, FieldMap{}, TasksFrom{}, Limits{}, ModelGraded{}} {
		t := reflect.TypeOf(v)
		infoCache[t] = infoOf(t)
	}
}

// keyAliases are alternative spellings accepted for a canonical key.
var keyAliases = map[reflect.Type]map[string]string{
	reflect.TypeOf(Task{}): {"epochs": "attempts"},
}

var (
	typeDuration  = reflect.TypeOf(Duration(0))
	typeBytes     = reflect.TypeOf(Bytes(0))
	typeRamp      = reflect.TypeOf(RampRange{})
	typeReducer   = reflect.TypeOf(score.Reducer{})
	typeColumns   = reflect.TypeOf(Columns(nil))
	typeTask      = reflect.TypeOf(Task{})
	typeSample    = reflect.TypeOf(Sample{})
	typeStringMap = reflect.TypeOf(map[string]string{})
	typeAnyMap    = reflect.TypeOf(map[string]any{})
)

// decodeStruct fills the struct v from the mapping n.
func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	si := infoOf(t)
	aliases := keyAliases[t]
	seen := map[string]*yaml.Node{}
	for _, p := range d.pairs(n, path) {
		key := p.key.Value
		canon := key
		if a, ok := aliases[key]; ok {
			canon = a
		}
		fi, ok := si.fields[canon]
		if !ok {
			d.errNode(p.key, join(path, key), "%s", unknownKeyMsg(t, key, si, aliases))
			continue
		}
		if prev, ok := seen[canon]; ok {
			d.errNode(p.key, join(path, key), "%q and %q are the same setting (the other is on line %d); keep one", key, prev.Value, prev.Line)
			continue
		}
		seen[canon] = p.key
		if canon != key {
			d.written[join(path, canon)] = join(path, key)
		}
		d.decodeValue(p.key, p.val, v.Field(fi), join(path, canon))
	}
}

// decodeValue decodes n into v. at is the node whose position identifies
// the value (the key of a mapping entry, or the item itself).
func (d *decoder) decodeValue(at, n *yaml.Node, v reflect.Value, path string) {
	shown := path
	if w, ok := d.written[path]; ok {
		shown = w
	}
	n = d.resolve(n, shown)
	if n == nil || isNull(n) || !d.visit(n, shown) {
		return
	}
	if n = d.expand(n, shown); isNull(n) {
		return
	}
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > maxDepth {
		d.errNode(n, shown, "nested more than %d levels deep", maxDepth)
		d.blown = true
		return
	}
	d.at[path] = d.posOf(at)
	bad := func(want string) { d.errNode(n, shown, "expected %s, got %s", want, describe(n)) }

	switch v.Type() {
	case typeDuration:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!bool" {
			bad("a duration such as 90s or 5m")
			return
		}
		x, err := ParseDuration(n.Value)
		if err != nil {
			d.errNode(n, shown, "%v", err)
			return
		}
		v.Set(reflect.ValueOf(x))
		return
	case typeBytes:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!bool" {
			bad("a size such as 512m or 2g")
			return
		}
		x, err := ParseBytes(n.Value)
		if err != nil {
			d.errNode(n, shown, "%v", err)
			return
		}
		v.Set(reflect.ValueOf(x))
		return
	case typeRamp:
		x, err := rampFromNode(n)
		if err != nil {
			d.errNode(n, shown, "%v", err)
			return
		}
		v.Set(reflect.ValueOf(x))
		return
	case typeColumns:
		// One name or a list of names.
		if n.Kind == yaml.ScalarNode && n.Tag != "!!bool" {
			v.Set(reflect.ValueOf(Columns{n.Value}))
			return
		}
	case typeReducer:
		x, err := reducerFromNode(n)
		if err != nil {
			d.errNode(n, shown, "%v", err)
			return
		}
		v.Set(reflect.ValueOf(x))
		return
	}

	switch v.Kind() {
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!bool" {
			bad("a string")
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			bad("a whole number")
			return
		}
		x, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if err != nil || (v.Kind() == reflect.Int && int64(int(x)) != x) {
			d.errNode(n, shown, "number %s is out of range", n.Value)
			return
		}
		v.SetInt(x)
	case reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			bad("a number")
			return
		}
		x, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			d.errNode(n, shown, "number %s is not a finite number", n.Value)
			return
		}
		v.SetFloat(x)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			bad("true or false")
			return
		}
		b, _ := strconv.ParseBool(n.Value)
		v.SetBool(b)
	case reflect.Pointer:
		x := reflect.New(v.Type().Elem())
		d.decodeValue(at, n, x.Elem(), path)
		v.Set(x)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			bad("a mapping")
			return
		}
		d.decodeStruct(n, v, path)
		if v.Type() == typeTask {
			v.FieldByName("Line").SetInt(int64(n.Line))
		}
		if v.Type() == typeSample {
			v.FieldByName("Source").SetString(fmt.Sprintf("%s:%d", d.file, n.Line))
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			bad("a list")
			return
		}
		s := reflect.MakeSlice(v.Type(), 0, len(n.Content))
		for i, c := range n.Content {
			e := reflect.New(v.Type().Elem()).Elem()
			if v.Type().Elem().Kind() == reflect.Pointer {
				// Keep an entry even when it is null so indexes match the file.
				e.Set(reflect.New(v.Type().Elem().Elem()))
			}
			d.decodeValue(c, c, e, index(path, i))
			if d.blown {
				return
			}
			if rc := d.resolve(c, path); isNull(rc) && e.Kind() == reflect.Pointer {
				d.errNode(c, index(path, i), "empty entry")
			}
			s = reflect.Append(s, e)
		}
		if s.Len() > 0 { // an empty list stays nil, like an absent one
			v.Set(s)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			bad("a mapping")
			return
		}
		switch v.Type() {
		case typeStringMap:
			m := map[string]string{}
			for _, p := range d.pairs(n, path) {
				kp := join(path, p.key.Value)
				val := d.expand(d.resolve(p.val, kp), kp)
				if val == nil || isNull(val) {
					m[p.key.Value] = ""
					continue
				}
				if val.Kind != yaml.ScalarNode {
					d.errNode(val, kp, "expected a string, got %s", describe(val))
					continue
				}
				d.at[kp] = d.posOf(p.key)
				m[p.key.Value] = val.Value
			}
			if len(m) > 0 {
				v.Set(reflect.ValueOf(m))
			}
		case typeAnyMap:
			x := d.generic(n, path, false)
			if m, ok := x.(map[string]any); ok && len(m) > 0 {
				v.Set(reflect.ValueOf(m))
			}
		}
	case reflect.Interface:
		// Sample.Input and Sample.Target: scalars keep the text as written
		// (a target of 1.10 stays "1.10"); a target list is a []string.
		if n.Kind == yaml.ScalarNode && n.Tag != "!!bool" {
			v.Set(reflect.ValueOf(n.Value))
			return
		}
		if n.Kind == yaml.SequenceNode && strings.HasSuffix(path, ".target") {
			out := make([]string, 0, len(n.Content))
			for i, c := range n.Content {
				c = d.resolve(c, index(path, i))
				if c == nil || c.Kind != yaml.ScalarNode || c.Tag == "!!null" || c.Tag == "!!bool" || !d.visit(c, path) {
					d.errNode(c, index(path, i), "expected a string, got %s", describe(c))
					return
				}
				out = append(out, c.Value)
			}
			v.Set(reflect.ValueOf(out))
			return
		}
		x := d.generic(n, path, true)
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		bad("a supported value")
	}
}

// generic converts a node to plain Go values: string, int, float64, bool,
// nil, []any, map[string]any. Timestamps and other tags stay strings.
//
// With track set, the position of every value is recorded (for messages
// about chat messages); metadata and settings are not tracked.
func (d *decoder) generic(n *yaml.Node, path string, track bool) any {
	n = d.resolve(n, path)
	if n == nil || !d.visit(n, path) {
		return nil
	}
	if n = d.expand(n, path); n == nil {
		return nil
	}
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > maxDepth {
		d.errNode(n, path, "nested more than %d levels deep", maxDepth)
		d.blown = true
		return nil
	}
	if track {
		if _, ok := d.at[path]; !ok {
			d.at[path] = d.posOf(n)
		}
	}
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil
		case "!!bool":
			b, _ := strconv.ParseBool(n.Value)
			return b
		case "!!int":
			if x, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64); err == nil {
				return int(x)
			}
			return n.Value
		case "!!float":
			x, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				d.errNode(n, path, "number %s is not a finite number", n.Value)
				return nil
			}
			return x
		}
		return n.Value
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			p := path
			if track {
				p = index(path, i)
			}
			out = append(out, d.generic(c, p, track))
			if d.blown {
				return nil
			}
		}
		return out
	case yaml.MappingNode:
		out := map[string]any{}
		for _, p := range d.pairs(n, path) {
			kp := path
			if track {
				kp = join(path, p.key.Value)
			}
			out[p.key.Value] = d.generic(p.val, kp, track)
			if d.blown {
				return nil
			}
		}
		return out
	}
	return nil
}

// hints explain keys that are real settings in another place.
var hints = map[reflect.Type]map[string]string{
	reflect.TypeOf(EvalSet{}): {
		"max_sandboxes": "max_sandboxes is a fleet setting: put it in _steward.yaml beside the eval set (or STEWARD_MAX_SANDBOXES)",
		"max_workers":   "max_workers is a fleet setting: put it in _steward.yaml beside the eval set (or STEWARD_MAX_WORKERS)",
		"max_tasks":     "max_tasks is a fleet setting: put it in _steward.yaml beside the eval set (or STEWARD_MAX_TASKS)",
		"samples_ramp":  "samples_ramp is a fleet setting: put it in _steward.yaml beside the eval set (or STEWARD_SAMPLES_RAMP)",
		"tend_interval": "tend_interval is a fleet setting: put it in _steward.yaml beside the eval set (or STEWARD_TEND_INTERVAL)",
		"record":        "record is a fleet setting: put it in _steward.yaml beside the eval set (or STEWARD_RECORD)",
		"transcripts":   "transcripts is a fleet setting: put it in _steward.yaml beside the eval set (or STEWARD_TRANSCRIPTS)",
		"samples":       "samples belong to a task: put them under tasks[].samples",
		"agent":         "agent belongs to a task: put it under tasks[].agent",
		"upstream":      "did you mean model.upstream?",
	},
	reflect.TypeOf(Task{}): {
		"image":        "did you mean sandbox.image?",
		"build":        "did you mean sandbox.build?",
		"provider":     "did you mean sandbox.provider?",
		"memory":       "did you mean sandbox.memory?",
		"cpus":         "did you mean sandbox.cpus?",
		"pids":         "did you mean sandbox.pids?",
		"network":      "did you mean sandbox.network?",
		"workdir":      "did you mean sandbox.workdir?",
		"command":      "did you mean scorer.command?",
		"match":        "did you mean scorer.match?",
		"target":       "target belongs to a sample: put it under samples[]",
		"input":        "input belongs to a sample: put it under samples[]",
		"teardown":     "did you mean host.teardown? (task-level commands on the host)",
		"dataset":      "did you mean samples or samples_file?",
		"model":        "model is set once for the eval set, at the top level",
		"samples_ramp": "samples_ramp is a fleet setting: put it in _steward.yaml beside the eval set",
	},
	reflect.TypeOf(Model{}): {
		"api_key":  "never write the key itself: put it in an environment variable and name that variable in api_key_env",
		"provider": "did you mean upstream?",
	},
	reflect.TypeOf(Sample{}): {
		"sandbox": "sandbox is set per task, not per sample",
	},
}

func unknownKeyMsg(t reflect.Type, key string, si *structInfo, aliases map[string]string) string {
	if h, ok := hints[t][key]; ok && h != "" {
		return fmt.Sprintf("unknown key %q: %s", key, h)
	}
	cands := append([]string{}, si.names...)
	for a := range aliases {
		cands = append(cands, a)
	}
	if s := suggest(key, cands); s != "" {
		return fmt.Sprintf("unknown key %q (did you mean %q?)", key, s)
	}
	sort.Strings(cands)
	return fmt.Sprintf("unknown key %q (known keys: %s)", key, strings.Join(cands, ", "))
}

// suggest returns the candidate closest to key by edit distance, if close enough.
func suggest(key string, cands []string) string {
	best, bestD := "", 1<<30
	lk := strings.ToLower(key)
	for _, c := range cands {
		dist := editDistance(lk, c)
		if dist < bestD || (dist == bestD && c < best) {
			best, bestD = c, dist
		}
	}
	limit := 2
	if len(key) > 8 {
		limit = 3
	}
	if len(key) <= 3 {
		limit = 1
	}
	if bestD <= limit {
		return best
	}
	// A key that is a candidate with a different separator or plural: maxsamples, max-samples.
	norm := func(s string) string {
		return strings.TrimSuffix(strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(s)), "s")
	}
	for _, c := range cands {
		if norm(c) == norm(key) {
			return c
		}
	}
	return ""
}

// editDistance is the Levenshtein distance (with adjacent transpositions
// counted as one edit) between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		if a == b {
			return 0
		}
		return 1 << 20
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// countNodes counts a document's nodes without following aliases.
func countNodes(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

// reducerFromNode reads reducer: mean, reducer: "at_least: 2" or the
// mapping form reducer: {at_least: 2}.
func reducerFromNode(n *yaml.Node) (score.Reducer, error) {
	const want = "a reducer: mean, all, any, majority, at_least: K or pass_at: K"
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag != "!!str" {
			return score.Reducer{}, fmt.Errorf("expected %s, got %s", want, describe(n))
		}
		return score.Parse(n.Value)
	case yaml.MappingNode:
		if len(n.Content) != 2 || n.Content[1].Kind != yaml.ScalarNode {
			return score.Reducer{}, fmt.Errorf("expected %s, got a mapping of %d keys", want, len(n.Content)/2)
		}
		return score.Parse(n.Content[0].Value + ": " + n.Content[1].Value)
	}
	return score.Reducer{}, fmt.Errorf("expected %s, got %s", want, describe(n))
}
