package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// pkgSize is what TestSupervisorSize measures of one package's production
// (non-test) files: their lines, as wc -l counts them, and its functions'
// lengths (first to last line, doc comment excluded).
type pkgSize struct {
	lines   int
	funcs   []funcSize // longest first
	structs []funcSize // by fields, most first
}

type funcSize struct {
	name  string
	lines int
}

func measure(t *testing.T, dir string) pkgSize {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var s pkgSize
	fset := token.NewFileSet()
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		s.lines += strings.Count(string(src), "\n")
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					fields := 0
					for _, fl := range st.Fields.List {
						fields += max(1, len(fl.Names))
					}
					s.structs = append(s.structs, funcSize{name: name + ":" + ts.Name.Name, lines: fields})
				}
			}
			return true
		})
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) > 0 {
				n = recvName(fn.Recv.List[0].Type) + "." + n
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			s.funcs = append(s.funcs, funcSize{name: name + ":" + n, lines: lines})
		}
	}
	sort.Slice(s.funcs, func(i, j int) bool { return s.funcs[i].lines > s.funcs[j].lines })
	sort.Slice(s.structs, func(i, j int) bool { return s.structs[i].lines > s.structs[j].lines })
	return s
}

func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return fmt.Sprintf("%T", e)
}

// The supervisor stays small enough to read (issue 26): none of
// internal/run's functions over 60 lines, and the package under the 2 500
// lines the issue aimed at (2 786 when it was split into stages; 2 456 once
// the sandbox specs, the live panel's drawing, the gateway's listeners, the
// record's full-disk ending and the worker's environment moved to the
// packages they belong to). Growing past either is a reason to split along
// a seam, not to raise the bound. The figures of the packages around it are
// logged (go test -v -run TestSupervisorSize ./internal/archtest):
// docs/architecture.md quotes them.
func TestSupervisorSize(t *testing.T) {
	const maxLines, maxFunc = 2500, 60
	root := filepath.Join("..", "..")
	for _, pkg := range []string{"internal/run", "internal/worker", "internal/attempt", "internal/plan", "internal/tend", "internal/account", "internal/eventlog", "internal/crashed", "internal/specs", "internal/panel"} {
		dir := filepath.Join(root, filepath.FromSlash(pkg))
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		s := measure(t, dir)
		var top []string
		for i, f := range s.funcs {
			if i == 5 {
				break
			}
			top = append(top, fmt.Sprintf("%s %d", f.name, f.lines))
		}
		var wide []string
		for i, f := range s.structs {
			if i == 3 {
				break
			}
			wide = append(wide, fmt.Sprintf("%s %d", f.name, f.lines))
		}
		t.Logf("%s: %d lines, %d functions; longest: %s; widest structs (fields): %s", pkg, s.lines, len(s.funcs), strings.Join(top, ", "), strings.Join(wide, ", "))
		if pkg != "internal/run" {
			continue
		}
		if s.lines > maxLines {
			t.Errorf("%s has %d production lines, more than %d: split it along a seam", pkg, s.lines, maxLines)
		}
		for _, f := range s.funcs {
			if f.lines > maxFunc {
				t.Errorf("%s: %s is %d lines long, more than %d", pkg, f.name, f.lines, maxFunc)
			}
		}
	}
}
