package evalset

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Error is one problem found in an eval set, a fleet file, a JSONL samples
// file, an environment variable or a flag.
type Error struct {
	// File is the file the problem is in. For environment variables it is
	// "env", for command-line flags "flag".
	File string
	// Line and Column are 1-based; 0 when unknown.
	Line, Column int
	// Field is the dotted path of the offending value, e.g.
	// tasks[1].scorer.match (list indexes are 0-based). Empty for YAML
	// syntax errors and for problems with a whole file.
	Field string
	Msg   string
	// ShowColumn prints the column too (file:line:column), for the cells
	// of CSV, TSV and Parquet samples files.
	ShowColumn bool
}

// Error formats the problem as "file:line: field: message". Parts that are
// unknown are left out ("file: message" for a whole-file problem).
func (e Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Line))
			if e.ShowColumn && e.Column > 0 {
				b.WriteByte(':')
				b.WriteString(strconv.Itoa(e.Column))
			}
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found, in file order then line order. Load and
// LoadFleet return a *Errors when the input is bad; the CLI maps it to the
// "bad input" exit code (2).
type Errors struct {
	List []Error
	// Omitted counts problems left out once MaxErrors was reached.
	Omitted int
}

// MaxErrors bounds how many problems one Errors value lists.
const MaxErrors = 200

// Error prints one problem per line.
func (es *Errors) Error() string {
	var b strings.Builder
	for i, e := range es.List {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	if es.Omitted > 0 {
		fmt.Fprintf(&b, "\n… and %d more problems", es.Omitted)
	}
	return b.String()
}

// Len is the number of problems, including omitted ones.
func (es *Errors) Len() int { return len(es.List) + es.Omitted }

func (es *Errors) add(e Error) {
	if len(es.List) >= MaxErrors {
		es.Omitted++
		return
	}
	es.List = append(es.List, e)
}

// merge appends other's problems.
func (es *Errors) merge(other *Errors) {
	if other == nil {
		return
	}
	for _, e := range other.List {
		es.add(e)
	}
	es.Omitted += other.Omitted
}

// sort orders problems by file (in order of first appearance), then line,
// then column; problems at the same place keep their order.
func (es *Errors) sort() {
	rank := map[string]int{}
	for _, e := range es.List {
		if _, ok := rank[e.File]; !ok {
			rank[e.File] = len(rank)
		}
	}
	sort.SliceStable(es.List, func(i, j int) bool {
		a, b := es.List[i], es.List[j]
		if rank[a.File] != rank[b.File] {
			return rank[a.File] < rank[b.File]
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// orNil returns nil when there is nothing to report, so callers can
// `return x, errs.orNil()` without the typed-nil-interface trap.
func (es *Errors) orNil() error {
	if es == nil || es.Len() == 0 {
		return nil
	}
	es.sort()
	return es
}
