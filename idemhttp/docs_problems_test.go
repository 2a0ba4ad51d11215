package idemhttp_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestHTTPAPIDocListsEveryProblemType: docs/http-api.md lists every
// problem type the server's code holds (each string literal starting
// with "/problems/" in package idemhttp's source) with the statuses the
// code answers it with (the http.Status… constant of each newProblem
// call naming it), and no type the code lacks. A new problem type fails
// this test until the page lists it.
func TestHTTPAPIDocListsEveryProblemType(t *testing.T) {
	t.Parallel()
	code := problemTypesInCode(t)
	if len(code) < 10 {
		t.Fatalf("found %d problem types in the code: the scan is broken: %v", len(code), code)
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "http-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string][]int{} // type → statuses of its table row
	row := regexp.MustCompile("(?m)^\\| `(/problems/[a-z-]+)` \\| ([0-9, ]+) \\|")
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		for s := range strings.SplitSeq(m[2], ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				t.Fatalf("row of %s: status %q", m[1], s)
			}
			listed[m[1]] = append(listed[m[1]], n)
		}
	}
	for typ, statuses := range code {
		got, ok := listed[typ]
		if !ok {
			t.Errorf("docs/http-api.md does not list the problem type %s (status %v)", typ, statuses)
			continue
		}
		for _, s := range statuses {
			if !slices.Contains(got, s) {
				t.Errorf("docs/http-api.md lists %s with status %v; the server answers it with %d", typ, got, s)
			}
		}
	}
	for typ := range listed {
		if _, ok := code[typ]; !ok {
			t.Errorf("docs/http-api.md lists %s, which the server never answers", typ)
		}
	}
}

// problemTypesInCode returns the problem types of package idemhttp's
// source with the statuses of the newProblem calls that name them, by
// their constants (ProblemX = "/problems/x") or as literals.
func problemTypesInCode(t *testing.T) map[string][]int {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string][]int{}
	consts := map[string]string{} // constant name → type
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && i < len(vs.Names) {
						if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, "/problems/") {
							consts[vs.Names[i].Name] = s
						}
					}
				}
			}
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, "/problems/") {
					if _, seen := types[s]; !seen {
						types[s] = nil
					}
				}
			}
			return true
		})
	}
	statuses := map[string]int{}
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			statuses["Status"+strings.NewReplacer(" ", "", "-", "", "'", "").Replace(text)] = code
		}
	}
	statuses["StatusRequestEntityTooLarge"] = http.StatusRequestEntityTooLarge
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "newProblem" {
				return true
			}
			typ := ""
			switch a := call.Args[1].(type) {
			case *ast.Ident:
				typ = consts[a.Name]
			case *ast.BasicLit:
				typ, _ = strconv.Unquote(a.Value)
			}
			sel, ok := call.Args[0].(*ast.SelectorExpr)
			if typ == "" || !ok {
				return true // a status or type computed at run time
			}
			if code, ok := statuses[sel.Sel.Name]; ok && !slices.Contains(types[typ], code) {
				types[typ] = append(types[typ], code)
			} else if !ok {
				t.Errorf("newProblem with %s: unknown status constant", sel.Sel.Name)
			}
			return true
		})
	}
	return types
}
