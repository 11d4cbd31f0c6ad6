package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/restart-controller/restart-controller"

// rule says which packages of the module a package may import, its tests
// included. Paths are relative to the module; "dir/..." is dir and every
// package below it, and the most specific rule of a package is its own.
type rule struct {
	pkg string
	may []string
	// tests lists what its tests may import besides (the parity test of
	// internal/restart drives the controller, explain and status).
	tests []string
}

// importRules is the one table of the import rules; docs/design.md
// shows the same (TestDocumentedRules). Lower rooms never import higher ones: the leaves import
// nothing of the module, the caches do not know the controller, and only
// the binaries (cmd) and test harnesses see everything.
func importRules() []rule {
	policy := []string{"internal/config", "internal/record", "internal/refs", "internal/rollout"}
	return []rule{
		// Leaves: pure data and computation, no other room.
		{pkg: "internal/rollout"},
		{pkg: "internal/refs"},
		{pkg: "internal/optin"},
		{pkg: "internal/checksum"},
		{pkg: "internal/sourcecodec"},
		{pkg: "internal/objmeta"},
		{pkg: "internal/metrics"},
		{pkg: "internal/logging"},
		{pkg: "internal/memlimit"},
		{pkg: "internal/server"},
		{pkg: "internal/testcluster"},
		{pkg: "internal/explain/explaintest"},
		{pkg: "internal/archtest"},
		// Configuration, and the records the controller writes on workloads.
		{pkg: "internal/record", may: []string{"internal/rollout"}},
		{pkg: "internal/config", may: []string{"internal/optin", "internal/refs", "internal/rollout"}},
		{pkg: "internal/cli", may: []string{"internal/config"}},
		{pkg: "internal/access", may: []string{"internal/config"}},
		{pkg: "internal/checksumkey", may: []string{"internal/checksum"}},
		{pkg: "internal/testfixture", may: []string{"internal/config"}},
		// Notifications to chat and webhook sinks, for the controller.
		{pkg: "internal/notify", may: []string{"internal/config", "internal/metrics"}},
		// The caches, and what fills and reads them.
		{pkg: "internal/catalog", may: append([]string{"internal/checksum", "internal/objmeta", "internal/sourcecodec"}, policy...),
			tests: []string{"internal/testfixture"}},
		{pkg: "internal/members", may: []string{"internal/catalog", "internal/checksum", "internal/objmeta", "internal/refs"}},
		{pkg: "internal/templaterv", may: []string{"internal/catalog", "internal/config"}, tests: []string{"internal/testfixture"}},
		{pkg: "internal/keyread", may: []string{"internal/catalog", "internal/checksum", "internal/config"}},
		{pkg: "internal/watch", may: []string{"internal/access", "internal/catalog", "internal/checksum", "internal/config", "internal/members", "internal/metrics", "internal/templaterv"},
			tests: []string{"internal/testfixture"}},
		// The one decision, pure, for the controller and explain alike.
		{pkg: "internal/decision", may: []string{"internal/catalog", "internal/checksum", "internal/config", "internal/record", "internal/rollout"},
			tests: []string{"internal/decision/decisiontest", "internal/members", "internal/refs"}},
		{pkg: "internal/decision/decisiontest", may: []string{"internal/catalog", "internal/checksum"}},
		// The pacing state in memory: the facts a due restart is paced by.
		{pkg: "internal/pacing", may: []string{"internal/catalog", "internal/config", "internal/decision", "internal/record"},
			tests: []string{"internal/rollout", "internal/decision/decisiontest"}},
		{pkg: "internal/strategy", may: []string{"internal/catalog", "internal/decision", "internal/config", "internal/record", "internal/refs", "internal/rollout"}},
		{pkg: "internal/restart", may: append([]string{"internal/catalog", "internal/checksum", "internal/sourcecodec", "internal/metrics", "internal/decision", "internal/pacing", "internal/keyread", "internal/notify", "internal/strategy"}, policy...),
			tests: []string{"internal/decision/decisiontest", "internal/explain", "internal/status", "internal/testfixture"}},
		{pkg: "internal/explain", may: append([]string{"internal/decision", "internal/pacing", "internal/catalog", "internal/checksum", "internal/checksumkey", "internal/explain/explaintest", "internal/members"}, policy...),
			tests: []string{"internal/testfixture"}},
		{pkg: "internal/status", may: []string{"internal/explain", "internal/decision", "internal/catalog", "internal/members", "internal/config", "internal/record"},
			tests: []string{"internal/checksum", "internal/explain/explaintest", "internal/rollout"}},
		{pkg: "internal/check", may: []string{"internal/access", "internal/cli", "internal/config", "internal/explain", "internal/explain/explaintest", "internal/watch"},
			tests: []string{"internal/testfixture"}},
		{pkg: "internal/migrate", may: []string{"internal/config", "examples"}, tests: []string{"internal/testfixture"}},
		// Binaries, tools and whole-system tests put the rooms together.
		{pkg: "cmd/...", may: []string{"internal/..."}, tests: []string{"test/budgets"}},
		{pkg: "hack/...", may: []string{"internal/..."}},
		{pkg: "test/...", may: []string{"internal/...", "charts", "test/budgets"}},
		{pkg: "charts", may: []string{"internal/config", "internal/testcluster"}, tests: []string{"internal/access"}},
		{pkg: "manifests", tests: []string{"internal/access", "internal/config"}},
		{pkg: "examples"},
	}
}

// goPackage is what go list tells of a package.
type goPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// imports is what a package imports of the module: in its code, and in
// its tests only.
type imports struct{ code, tests []string }

// modulePackages lists the module's packages and what they import of it.
func modulePackages(t *testing.T) map[string]imports {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to read the import graph: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-e", "-json", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]imports{}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		of := func(paths ...[]string) []string {
			var out []string
			for _, imp := range slices.Concat(paths...) {
				if rel, ok := relative(imp); ok && imp != p.ImportPath {
					out = append(out, rel)
				}
			}
			slices.Sort(out)
			return slices.Compact(out)
		}
		rel, _ := relative(p.ImportPath)
		pkgs[rel] = imports{code: of(p.Imports), tests: of(p.TestImports, p.XTestImports)}
	}
	return pkgs
}

// relative returns a path of the module relative to it.
func relative(importPath string) (string, bool) {
	if importPath == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(importPath, module+"/")
	return rel, ok
}

// matches reports whether pattern ("dir" or "dir/...") covers pkg.
func matches(pattern, pkg string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == dir || strings.HasPrefix(pkg, dir+"/")
	}
	return pattern == pkg
}

// ruleOf returns the most specific rule covering pkg.
func ruleOf(rules []rule, pkg string) (rule, bool) {
	var best rule
	found := false
	for _, r := range rules {
		if matches(r.pkg, pkg) && (!found || len(strings.TrimSuffix(r.pkg, "/...")) > len(strings.TrimSuffix(best.pkg, "/..."))) {
			best, found = r, true
		}
	}
	return best, found
}

// violations checks the import graph against the rules: every package has
// a rule, imports only what its rule allows, and every rule covers a
// package (a stale rule would describe a room that is not there).
func violations(rules []rule, pkgs map[string]imports) []string {
	var out []string
	for pkg, imp := range pkgs {
		r, ok := ruleOf(rules, pkg)
		if !ok {
			out = append(out, fmt.Sprintf("%s has no import rule: add one to importRules and docs/design.md", pkg))
			continue
		}
		allowed := func(list []string, path string) bool {
			return slices.ContainsFunc(list, func(a string) bool { return matches(a, path) })
		}
		for _, path := range imp.code {
			if !allowed(r.may, path) {
				out = append(out, fmt.Sprintf("%s imports %s, which its rule (%s) does not allow", pkg, path, r.pkg))
			}
		}
		for _, path := range imp.tests {
			if !allowed(r.may, path) && !allowed(r.tests, path) {
				out = append(out, fmt.Sprintf("%s's tests import %s, which its rule (%s) does not allow", pkg, path, r.pkg))
			}
		}
	}
	for _, r := range rules {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(pkgs)), func(pkg string) bool { return matches(r.pkg, pkg) }) {
			out = append(out, fmt.Sprintf("the rule of %s covers no package", r.pkg))
		}
	}
	slices.Sort(out)
	return out
}

// docRules reads the table of docs/design.md: a row per package or
// packages, and in its last column what they may import ("—" for nothing,
// "any `internal/`", a `path` of the module, or a bare name in internal/).
func docRules(t *testing.T) map[string][]string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string][]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) != 3 {
			continue
		}
		var may []string
		for _, item := range strings.Split(cells[2], ", ") {
			prefix := ""
			if name, ok := strings.CutSuffix(item, " (tests)"); ok {
				item, prefix = name, "tests:"
			}
			switch {
			case item == "—":
			case item == "any `internal/`":
				may = append(may, prefix+"internal/...")
			case strings.HasPrefix(item, "`"):
				may = append(may, prefix+strings.Trim(item, "`"))
			default:
				may = append(may, prefix+"internal/"+item)
			}
		}
		slices.Sort(may)
		for _, pkg := range strings.Split(cells[0], ", ") {
			rules[strings.Trim(pkg, "`")] = may
		}
	}
	return rules
}

// The table in docs/design.md is this one.
func TestDocumentedRules(t *testing.T) {
	doc := docRules(t)
	code := map[string][]string{}
	for _, r := range importRules() {
		may := slices.Clone(r.may)
		for _, t := range r.tests {
			may = append(may, "tests:"+t)
		}
		slices.Sort(may)
		code[r.pkg] = may
	}
	if len(doc) < len(code)/2 {
		t.Fatalf("read %d rules from docs/design.md: the table's form changed", len(doc))
	}
	for pkg, may := range code {
		if got, ok := doc[pkg]; !ok || !slices.Equal(got, may) {
			t.Errorf("docs/design.md: %s may import %v, want %v as importRules says", pkg, got, may)
		}
	}
	for pkg := range doc {
		if _, ok := code[pkg]; !ok {
			t.Errorf("docs/design.md has a rule for %s, importRules none", pkg)
		}
	}
}

func TestImportRules(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 10 || pkgs["internal/catalog"].code == nil {
		t.Fatalf("go list found %d packages, not the module's: %v", len(pkgs), pkgs)
	}
	for _, v := range violations(importRules(), pkgs) {
		t.Error(v)
	}
}

// The checker itself: a forbidden import, a package without a rule and a
// stale rule are each reported; the most specific rule wins.
func TestViolations(t *testing.T) {
	rules := []rule{
		{pkg: "internal/leaf"},
		{pkg: "internal/room", may: []string{"internal/leaf"}},
		{pkg: "cmd/...", may: []string{"internal/..."}, tests: []string{"test/budgets"}},
		{pkg: "cmd/special", may: []string{"internal/leaf"}},
		{pkg: "internal/gone"},
		{pkg: "internal/tested", tests: []string{"internal/leaf"}},
	}
	got := violations(rules, map[string]imports{
		"internal/leaf":   {code: []string{"internal/room"}},
		"internal/room":   {code: []string{"internal/leaf"}},
		"internal/new":    {},
		"cmd/tool":        {code: []string{"internal/room", "internal/leaf"}},
		"cmd/special":     {code: []string{"internal/room"}},
		"cmd/tool/inner":  {code: []string{"internal/leaf"}},
		"internal/tested": {tests: []string{"internal/leaf", "internal/room"}},
	})
	want := []string{
		"cmd/special imports internal/room, which its rule (cmd/special) does not allow",
		"internal/leaf imports internal/room, which its rule (internal/leaf) does not allow",
		"internal/new has no import rule: add one to importRules and docs/design.md",
		"internal/tested's tests import internal/room, which its rule (internal/tested) does not allow",
		"the rule of internal/gone covers no package",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
