package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// wireLiteral matches what only a wire format's file may spell (issue 26
// item 4): a route of an upstream API ("/v1/chat/completions",
// "/v1beta/models/…"), a credential or rate-limit header, a usage field.
var wireLiteral = regexp.MustCompile(`^/v1[a-z0-9]*/[a-z]|(?i)^(authorization|x-api-key|x-goog-api-key|anthropic-[a-z-]+|openai-[a-z-]+|x-ratelimit-[a-z-]+)$|^(prompt_tokens|completion_tokens|input_tokens|output_tokens|usageMetadata|max_tokens|max_completion_tokens|stream_options|choices)$`)

// wireExempt are the literals a file may spell anyway, and why.
var wireExempt = map[string]string{
	// sandboxOnly: headers refused from a sandbox whatever its format, a
	// second wall behind the formats' allowlists (API.Forward).
	"Openai-Organization": "proxy.go",
	"Openai-Project":      "proxy.go",
}

// The gateway's wire formats live in their own files (gateway.API, one
// file per format, registered from its init): no other production file of
// internal/gateway spells a route, a credential or rate-limit header or a
// usage field of an upstream API. A format's file is one whose init calls
// Register.
func TestWireFormatsStayInTheirFiles(t *testing.T) {
	dir := filepath.Join("..", "..", "internal", "gateway")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	formats := 0
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if registersFormat(f) {
			formats++
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && wireLiteral.MatchString(s) && wireExempt[s] != name {
				t.Errorf("%s: %q belongs in a wire format's file (gateway.API)", fset.Position(lit.Pos()), s)
			}
			return true
		})
	}
	if formats < 2 {
		t.Fatalf("found %d wire format files in internal/gateway, want openai.go and anthropic.go at least", formats)
	}
}

// registersFormat reports whether f has an init function that calls
// Register.
func registersFormat(f *ast.File) bool {
	found := false
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != "init" || fd.Recv != nil || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "Register" {
					found = true
				}
			}
			return !found
		})
	}
	return found
}
