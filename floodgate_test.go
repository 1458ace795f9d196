package floodgate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// exported returns the exported top-level names declared in the non-test Go
// files of dir.
func exported(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: %v %v", dir, files, err)
	}
	var names []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// TestReexportsEveryName: package floodgate is the public name of what
// internal/core defines (core exists so that semaphore and shaper, which
// import only the standard library and internal packages, can implement the
// contract): every exported name of core must be re-exported here, and
// nothing else declared.
func TestReexportsEveryName(t *testing.T) {
	core, root := exported(t, "internal/core"), exported(t, ".")
	if !slices.Equal(core, root) {
		for _, n := range core {
			if !slices.Contains(root, n) {
				t.Errorf("internal/core.%s is not re-exported by package floodgate", n)
			}
		}
		for _, n := range root {
			if !slices.Contains(core, n) {
				t.Errorf("floodgate.%s is not declared in internal/core", n)
			}
		}
		t.Errorf("internal/core declares %v, package floodgate %v", core, root)
	}
}
