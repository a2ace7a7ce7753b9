package evalset

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"gopkg.in/yaml.v3"
)

// SampleFormats are the formats samples_file reads (samples_format).
var SampleFormats = []string{"jsonl", "json", "csv", "tsv", "parquet"}

// sampleKeys are the keys a record may hold when no fields map is given.
var sampleKeys = infoOf(reflect.TypeOf(Sample{})).names

// formatOf is samples_file's format: samples_format, else the extension,
// else what the content looks like ("" when it cannot tell).
func formatOf(t *Task, path string, data []byte) string {
	if oneOf(t.SamplesFormat, SampleFormats) {
		return t.SamplesFormat
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		return "jsonl"
	case ".json":
		return "json"
	case ".csv":
		return "csv"
	case ".tsv", ".tab":
		return "tsv"
	case ".parquet", ".pq":
		return "parquet"
	}
	switch t := bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))); {
	case bytes.HasPrefix(data, []byte("PAR1")):
		return "parquet"
	case len(t) > 0 && (t[0] == '{' || t[0] == '['):
		return "jsonl"
	}
	return ""
}

// readSamples decodes the samples file of task i (data, named display in
// messages) in its format, applying the task's fields map.
func (v *validator) readSamples(i int, t *Task, rel, display string, data []byte) []*Sample {
	tp := index("tasks", i)
	sd := &decoder{file: display, errs: v.d.errs, at: v.d.at, written: v.d.written, bad: v.d.bad}
	prefix := tp + ".samples"
	switch f := formatOf(t, rel, data); f {
	case "jsonl", "json":
		if b := bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))); len(b) > 0 && b[0] == '[' {
			return sd.decodeJSONArray(data, prefix, t.Fields)
		}
		return sd.decodeJSONLWith(data, prefix, t.Fields)
	case "csv":
		return sd.decodeCSV(data, prefix, t.Fields, ',')
	case "tsv":
		return sd.decodeCSV(data, prefix, t.Fields, '\t')
	case "parquet":
		return sd.decodeParquet(data, prefix, t.Fields)
	default:
		if t.SamplesFormat != "" {
			v.samplesOK[i] = false // reported as a bad samples_format
			return nil
		}
		v.errf(tp+".samples_file", "cannot tell the format of %s from its name: set samples_format (one of %s)", rel, strings.Join(SampleFormats, ", "))
		return nil
	}
}

// record decodes one record (a mapping node) into a sample, through the
// fields map when there is one. text says the record's values are all
// text (CSV), so list and mapping fields are read as JSON.
func (d *decoder) record(rec *yaml.Node, path string, fm *FieldMap, text bool) *Sample {
	d.nodes, d.limit = 0, maxAliasNodes+countNodes(rec)
	n := rec
	if fm != nil || text {
		n = d.mapFields(rec, path, fm, text)
	}
	s := &Sample{}
	d.decodeValue(n, n, reflect.ValueOf(s).Elem(), path)
	return s
}

// mapFields builds the sample mapping of a record: each field from the
// column the fields map names (or its own name), metadata from the listed
// columns. Columns the map does not name are left out.
func (d *decoder) mapFields(rec *yaml.Node, path string, fm *FieldMap, text bool) *yaml.Node {
	if fm == nil {
		fm = &FieldMap{}
	}
	cols := map[string]*yaml.Node{}
	for i := 0; i+1 < len(rec.Content); i += 2 {
		cols[rec.Content[i].Value] = rec.Content[i+1]
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: rec.Line, Column: rec.Column}
	add := func(key string, val *yaml.Node) {
		out.Content = append(out.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Line: val.Line, Column: val.Column}, val)
	}
	// cell is a column's value, nil when absent or (text) empty.
	cell := func(name string) *yaml.Node {
		val, ok := cols[name]
		if !ok || isNull(val) || (text && val.Value == "") {
			return nil
		}
		return val
	}
	one := func(field, col string, structured bool) {
		name := col
		if name == "" {
			name = field
		}
		val := cell(name)
		if val == nil {
			if col != "" && field == "input" {
				if _, ok := cols[name]; !ok {
					d.errNode(rec, join(path, field), "the record has no %q (fields.input names it)", name)
				}
			}
			return
		}
		if structured && text {
			val = d.jsonCell(val, join(path, field))
			if val == nil {
				return
			}
		}
		add(field, val)
	}
	one("id", fm.ID, false)
	one("input", fm.Input, false)
	one("target", fm.Target, false)
	one("setup", fm.Setup, false)
	one("files", fm.Files, true)
	switch len(fm.Choices) {
	case 0:
		one("choices", "", true)
	case 1:
		one("choices", fm.Choices[0], true)
	default:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: rec.Line, Column: rec.Column}
		for _, c := range fm.Choices {
			if val := cell(c); val != nil {
				seq.Content = append(seq.Content, val)
			}
		}
		if len(seq.Content) > 0 {
			seq.Line, seq.Column = seq.Content[0].Line, seq.Content[0].Column
			add("choices", seq)
		}
	}
	if len(fm.Metadata) > 0 {
		m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: rec.Line, Column: rec.Column}
		for _, c := range fm.Metadata {
			val, ok := cols[c]
			if !ok {
				continue
			}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: c, Line: val.Line, Column: val.Column}, val)
		}
		add("metadata", m)
	} else {
		one("metadata", "", true)
	}
	return out
}

// jsonCell reads a text cell that holds a JSON list or object (choices,
// files, metadata in a CSV file).
func (d *decoder) jsonCell(val *yaml.Node, field string) *yaml.Node {
	if val.Kind != yaml.ScalarNode {
		return val
	}
	var x any
	dec := json.NewDecoder(strings.NewReader(val.Value))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil || dec.More() {
		d.errNode(val, field, "expected a JSON list or object in the cell, got %s", describe(val))
		return nil
	}
	switch x.(type) {
	case []any, map[string]any:
	default:
		d.errNode(val, field, "expected a JSON list or object in the cell, got %s", describe(val))
		return nil
	}
	n := jsonToNode(x, val.Line)
	setPos(n, val.Line, val.Column)
	return n
}

func setPos(n *yaml.Node, line, col int) {
	n.Line, n.Column = line, col
	for _, c := range n.Content {
		setPos(c, line, col)
	}
}

// checkColumns reports, once for a whole file, the columns a fields map
// names that the file does not have, and (without a map) the columns that
// are not sample fields. at is where the header is.
func (d *decoder) checkColumns(columns []string, fm *FieldMap, line, col int) bool {
	have := map[string]bool{}
	for _, c := range columns {
		have[c] = true
	}
	ok := true
	bad := func(field, format string, args ...any) {
		ok = false
		d.errs.add(Error{File: d.file, Line: line, Column: col, ShowColumn: d.cols, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if fm == nil {
		for _, c := range columns {
			if !oneOf(c, sampleKeys) {
				msg := fmt.Sprintf("column %q is not a sample field (%s): map the file's columns with fields, e.g. fields: {input: %s}", c, strings.Join(sampleKeys, ", "), c)
				if s := suggest(c, sampleKeys); s != "" {
					msg = fmt.Sprintf("column %q is not a sample field (did you mean %q? or map it with fields, e.g. fields: {input: %s})", c, s, c)
				}
				bad("", "%s", msg)
			}
		}
		if !have["input"] {
			bad("", "no input column: name one input, or map another with fields: {input: COLUMN}")
		}
		return ok
	}
	named := func(field, c string) {
		if c != "" && !have[c] {
			msg := fmt.Sprintf("no column %q (columns: %s)", c, strings.Join(columns, ", "))
			if s := suggest(c, columns); s != "" {
				msg = fmt.Sprintf("no column %q (did you mean %q?)", c, s)
			}
			bad("fields."+field, "%s", msg)
		}
	}
	named("id", fm.ID)
	named("input", fm.Input)
	named("target", fm.Target)
	named("setup", fm.Setup)
	named("files", fm.Files)
	for _, c := range fm.Choices {
		named("choices", c)
	}
	for _, c := range fm.Metadata {
		named("metadata", c)
	}
	if fm.Input == "" && !have["input"] {
		bad("fields.input", "no input column: name the column that holds the input, e.g. fields: {input: question}")
	}
	return ok
}

// decodeJSONArray reads a JSON array of sample objects, naming each
// element's line in messages.
func (d *decoder) decodeJSONArray(data []byte, prefix string, fm *FieldMap) []*Sample {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if e, bad := invalidUTF8(d.file, data); bad {
		d.errs.add(e)
		return nil
	}
	lines := lineStarts(data)
	lineAt := func(off int64) int {
		for off < int64(len(data)) && (data[off] == ' ' || data[off] == '\t' || data[off] == '\r' || data[off] == '\n' || data[off] == ',') {
			off++
		}
		return sort.Search(len(lines), func(i int) bool { return lines[i] > int(off) })
	}
	syntax := func(err error) {
		var se *json.SyntaxError
		line, col := 0, 0
		if errors.As(err, &se) {
			line = lineAt(se.Offset - 1)
			col = int(se.Offset) - lines[line-1]
		}
		d.errs.add(Error{File: d.file, Line: line, Column: col, Msg: "invalid JSON: " + err.Error()})
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		syntax(err)
		return nil
	}
	var out []*Sample
	for dec.More() {
		line := lineAt(dec.InputOffset())
		var v any
		if err := dec.Decode(&v); err != nil {
			syntax(err)
			return out
		}
		path := index(prefix, len(out))
		m, ok := v.(map[string]any)
		if !ok {
			d.errs.add(Error{File: d.file, Line: line, Field: path, Msg: "expected a JSON object per element, got " + jsonKind(v)})
			continue
		}
		s := d.record(jsonToNode(m, line), path, fm, false)
		if d.blown {
			return out
		}
		out = append(out, s)
	}
	if _, err := dec.Token(); err != nil {
		syntax(err)
	} else if _, err := dec.Token(); err != io.EOF {
		d.errs.add(Error{File: d.file, Line: lineAt(dec.InputOffset()), Msg: "unexpected text after the JSON array"})
	}
	return out
}

// lineStarts are the offsets at which each line of data starts.
func lineStarts(data []byte) []int {
	out := []int{0}
	for i, b := range data {
		if b == '\n' {
			out = append(out, i+1)
		}
	}
	return out
}

// decodeCSV reads CSV (or, with comma '\t', TSV) with a header row.
// Messages name the line and column of the cell.
func (d *decoder) decodeCSV(data []byte, prefix string, fm *FieldMap, comma rune) []*Sample {
	d.cols = true
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if e, bad := invalidUTF8(d.file, data); bad {
		e.ShowColumn = true
		d.errs.add(e)
		return nil
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.Comma = comma
	r.ReuseRecord = false
	parseErr := func(err error) {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			d.errs.add(Error{File: d.file, Line: pe.Line, Column: pe.Column, ShowColumn: true, Msg: "invalid " + csvName(comma) + ": " + pe.Err.Error()})
			return
		}
		d.errs.add(Error{File: d.file, Msg: "invalid " + csvName(comma) + ": " + err.Error()})
	}
	header, err := r.Read()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		parseErr(err)
		return nil
	}
	seen := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		header[i] = h
		line, col := r.FieldPos(i)
		if h == "" {
			d.errs.add(Error{File: d.file, Line: line, Column: col, ShowColumn: true, Msg: fmt.Sprintf("column %d of the header row has no name", i+1)})
			return nil
		}
		if first, ok := seen[h]; ok {
			d.errs.add(Error{File: d.file, Line: line, Column: col, ShowColumn: true, Msg: fmt.Sprintf("duplicate column %q (also column %d)", h, first+1)})
			return nil
		}
		seen[h] = i
	}
	hl, hc := r.FieldPos(0)
	if !d.checkColumns(header, fm, hl, hc) {
		return nil
	}
	var out []*Sample
	for {
		row, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			parseErr(err)
			if d.errs.Len() >= MaxErrors {
				return out
			}
			continue
		}
		if len(row) == 1 && strings.TrimSpace(row[0]) == "" {
			continue // a blank line
		}
		line, _ := r.FieldPos(0)
		rec := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line, Column: 1}
		for i, c := range row {
			l, col := r.FieldPos(i)
			rec.Content = append(rec.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: header[i], Line: l, Column: col},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: c, Line: l, Column: col, Style: yaml.DoubleQuotedStyle})
		}
		s := d.record(rec, index(prefix, len(out)), fm, true)
		if d.blown {
			return out
		}
		out = append(out, s)
	}
	return out
}

func csvName(comma rune) string {
	if comma == '\t' {
		return "TSV"
	}
	return "CSV"
}

// decodeParquet reads a Parquet file's rows (Hugging Face's storage
// format). Messages name the row (1-based) and the column's position.
func (d *decoder) decodeParquet(data []byte, prefix string, fm *FieldMap) (out []*Sample) {
	d.cols = true
	row := 0
	defer func() {
		// A malformed file must be a located error, never a crash.
		if r := recover(); r != nil {
			d.errs.add(Error{File: d.file, Line: row + 1, ShowColumn: true, Msg: fmt.Sprintf("malformed Parquet file: %v", r)})
		}
	}()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		d.errs.add(Error{File: d.file, Msg: "not a readable Parquet file: " + err.Error()})
		return nil
	}
	var columns []string
	colIndex := map[string]int{}
	for i, fl := range f.Schema().Fields() {
		columns = append(columns, fl.Name())
		colIndex[fl.Name()] = i + 1
	}
	if !d.checkColumns(columns, fm, 0, 0) {
		return nil
	}
	r := parquet.NewReader(f)
	defer r.Close()
	for ; ; row++ {
		m := map[string]any{}
		if err := r.Read(&m); err != nil {
			if !errors.Is(err, io.EOF) {
				d.errs.add(Error{File: d.file, Line: row + 1, ShowColumn: true, Msg: "cannot read the row: " + err.Error()})
			}
			return out
		}
		line := row + 1
		rec := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line, Column: 1}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		bad := false
		for _, k := range keys {
			val, err := valueNode(m[k], line, colIndex[k], 0)
			if err != nil {
				d.errs.add(Error{File: d.file, Line: line, Column: colIndex[k], ShowColumn: true, Field: index(prefix, len(out)), Msg: fmt.Sprintf("column %q: %v", k, err)})
				bad = true
				continue
			}
			rec.Content = append(rec.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k, Line: line, Column: colIndex[k]}, val)
		}
		if bad {
			continue
		}
		s := d.record(rec, index(prefix, len(out)), fm, false)
		if d.blown {
			return out
		}
		out = append(out, s)
	}
}

// valueNode turns a value read from Parquet into a node at line:col.
func valueNode(v any, line, col, depth int) (*yaml.Node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested more than %d levels deep", maxDepth)
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Line: line, Column: col}
	switch x := v.(type) {
	case nil:
		n.Tag, n.Value = "!!null", "null"
	case string:
		n.Tag, n.Value, n.Style = "!!str", x, yaml.DoubleQuotedStyle
	case []byte:
		if !utf8.Valid(x) {
			return nil, errors.New("binary value is not UTF-8 text")
		}
		n.Tag, n.Value, n.Style = "!!str", string(x), yaml.DoubleQuotedStyle
	case bool:
		n.Tag, n.Value = "!!bool", strconv.FormatBool(x)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		n.Tag, n.Value = "!!int", fmt.Sprint(x)
	case float32:
		return valueNode(float64(x), line, col, depth)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%v is not a finite number", x)
		}
		n.Tag, n.Value = "!!float", strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		n.Tag, n.Value = "!!str", x.UTC().Format(time.RFC3339Nano)
	case []any:
		n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
		for _, e := range x {
			c, err := valueNode(e, line, col, depth+1)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, c)
		}
	case map[string]any:
		n.Kind, n.Tag = yaml.MappingNode, "!!map"
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c, err := valueNode(x[k], line, col, depth+1)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k, Line: line, Column: col}, c)
		}
	default:
		n.Tag, n.Value = "!!str", fmt.Sprint(x)
	}
	return n, nil
}
