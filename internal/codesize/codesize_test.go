// Package codesize holds the code to the sizes a newcomer can read: no
// file over maxFileLines, no function over maxFuncLines or cyclomatic
// complexity maxComplexity, outside tests and the exceptions allow.txt
// names with their reasons. It is a test so that go test and CI run it.
package codesize

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	maxFileLines  = 600
	maxFuncLines  = 80
	maxComplexity = 20
)

// TestSizes checks every non-test Go file of the module.
func TestSizes(t *testing.T) {
	root := filepath.Join("..", "..")
	allowed := readAllow(t)
	used := map[string]bool{}
	var problems []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		check := func(key, msg string) {
			if allowed[key] != "" {
				used[key] = true
				return
			}
			problems = append(problems, key+": "+msg)
		}
		if n := lineCount(src); n > maxFileLines {
			check(rel, fmt.Sprintf("%d lines (limit %d)", n, maxFileLines))
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			key := rel + ":" + funcName(fn)
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines > maxFuncLines {
				check(key, fmt.Sprintf("%d lines (limit %d)", lines, maxFuncLines))
			}
			if c := Complexity(fn); c > maxComplexity {
				check(key+"#complexity", fmt.Sprintf("complexity %d (limit %d)", c, maxComplexity))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
	for key := range allowed {
		if !used[key] {
			t.Errorf("allow.txt names %s, which is within the limits now: remove it", key)
		}
	}
}

// lineCount is how many lines a file has, counted in its bytes: the
// comments and blank lines after its last declaration count too (the
// syntax tree's end is that declaration's).
func lineCount(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++ // a last line without its newline
	}
	return n
}

// TestLineCountCountsTheTail: a file whose lines past the limit are
// comments, or blank, or lack a final newline, is over the limit.
func TestLineCountCountsTheTail(t *testing.T) {
	var code strings.Builder
	code.WriteString("package p\n\n")
	for i := 3; i <= maxFileLines; i++ {
		fmt.Fprintf(&code, "var v%d = %d\n", i, i)
	}
	for _, c := range []struct {
		tail string
		want int
	}{
		{"", maxFileLines},
		{"// a comment past the last declaration\n", maxFileLines + 1},
		{"/*\nmore\n*/\n", maxFileLines + 3},
		{"\n\n", maxFileLines + 2},
		{"// no final newline", maxFileLines + 1},
	} {
		src := []byte(code.String() + c.tail)
		if _, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.ParseComments); err != nil {
			t.Fatal(err)
		}
		if n := lineCount(src); n != c.want {
			t.Errorf("tail %q: %d lines, want %d", c.tail, n, c.want)
		}
	}
}

// funcName is a function's name, with its receiver's type for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// Complexity is a function's cyclomatic complexity as gocyclo counts it:
// one, plus one per if, for, range, case and select clause (defaults
// excepted), && and ||. Function literals count toward their function.
func Complexity(fn *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

// readAllow reads allow.txt: "key  reason" per line, where key is a file
// (path), a function (path:Func or path:Type.Method) or a function's
// complexity (path:Func#complexity).
func readAllow(t *testing.T) map[string]string {
	f, err := os.Open("allow.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, reason, _ := strings.Cut(line, " ")
		if strings.TrimSpace(reason) == "" {
			t.Errorf("allow.txt: %s has no reason", key)
		}
		out[key] = strings.TrimSpace(reason)
	}
	return out
}
