package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// varName finds the GORUN_ variables a string literal names. One that
// ends in "_" is the prefix of names made at run time
// ("GORUN_COLL_" + name).
var varName = regexp.MustCompile(`GORUN_[A-Z0-9_]+`)

// TestEveryVariableListed: every GORUN_ variable that the repository's
// non-test Go source names in a string literal is listed by
// `gorun --help-params`, or is one that gorun sets for each rank: the
// values of launcher/boot's Env* constants (read from its source, so a new
// one joins them). A name that fits neither is a tunable that gorun's
// users cannot discover (declare it with internal/params in a package that
// gorun links), or a stale name in a message.
//
// Test-support packages (a directory named *test, such as btl/btltest)
// are left out: their variables pass a role to the processes they
// re-execute, like the _test.go files' GORUN_TEST_*.
func TestEveryVariableListed(t *testing.T) {
	var buf bytes.Buffer
	writeParams(&buf)
	listed := map[string]bool{}
	for _, line := range strings.Split(buf.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	if len(listed) == 0 {
		t.Fatal("--help-params lists nothing")
	}

	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	named := map[string][]string{} // variable -> where the source names it
	setByGorun := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || strings.HasSuffix(name, "test")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		bootEnv := filepath.Dir(rel) == filepath.Join("launcher", "boot")
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				// launcher/boot's const EnvRank = "GORUN_RANK" and its
				// kind: what gorun sets for every rank.
				for i, id := range n.Names {
					if bootEnv && strings.HasPrefix(id.Name, "Env") && id.IsExported() && i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if v, err := strconv.Unquote(lit.Value); err == nil {
								setByGorun[v] = true
							}
						}
					}
				}
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(n.Value)
				if err != nil {
					return true
				}
				for _, v := range varName.FindAllString(s, -1) {
					pos := fset.Position(n.Pos())
					named[v] = append(named[v], rel+":"+strconv.Itoa(pos.Line))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(setByGorun) == 0 || !setByGorun["GORUN_RANK"] {
		t.Fatalf("found %v as launcher/boot's Env* constants: the way they are declared changed", setByGorun)
	}
	t.Logf("set by gorun for each rank (launcher/boot's Env* constants): %v", sortedKeys(setByGorun))

	for _, v := range sortedKeys(named) {
		switch {
		case listed[v], setByGorun[v]:
		case strings.HasSuffix(v, "_") && hasPrefixed(listed, v):
			// A prefix of names made at run time, some of them listed.
		default:
			t.Errorf("%s (named at %s) is neither listed by --help-params nor set by gorun for ranks", v, strings.Join(named[v], ", "))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// hasPrefixed reports whether a name in set starts with prefix.
func hasPrefixed(set map[string]bool, prefix string) bool {
	for k := range set {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// TestTuningDocListsEveryParam: docs/tuning.md names every tunable that
// --help-params lists, so that the page users read is complete.
func TestTuningDocListsEveryParam(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "tuning.md"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	writeParams(&buf)
	for _, line := range strings.Split(buf.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.Contains(string(doc), "`"+f[0]+"`") {
			t.Errorf("docs/tuning.md does not list %s (gorun --help-params does)", f[0])
		}
	}
}
