package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restart-controller/restart-controller/test/budgets"
)

// The controller binary contains the controller: none of the packages
// test/budgets/budgets.yaml forbids (the operator CLI's libraries and its
// own packages) is linked. It runs in `make unit`, so every change is checked.
func TestControllerLinksNoForbiddenPackage(t *testing.T) {
	b, err := budgets.Load()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", ".")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderrOf(err))
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps named %d packages; want the controller's whole graph", len(deps))
	}
	for _, bad := range b.Binary.ForbiddenPackages {
		var linked []string
		for _, dep := range deps {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				linked = append(linked, dep)
			}
		}
		if len(linked) > 0 {
			t.Errorf("the controller links %s: %d package(s), e.g. %s; `go list -deps ./cmd/restart-controller` and "+
				"`go mod why -m` show what imports it; test/budgets/budgets.yaml says why it is forbidden",
				bad, len(linked), strings.Join(linked[:min(3, len(linked))], ", "))
		}
	}
}

// The controller's builds stay within their size budgets: the release
// build (the image's binary) and a plain `go build` (cgo on, symbols and
// DWARF kept: what an operator builds by hand).
func TestControllerBinarySize(t *testing.T) {
	b, err := budgets.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		args   []string
		env    []string
		budget int64
		key    string
	}{
		// The flags of `make build` and the image (hack/image BuildBinary).
		{"release", []string{"-trimpath", "-ldflags", "-s -w -X main.version=budget"}, []string{"CGO_ENABLED=0"},
			b.Binary.MaxStrippedBytes, "maxStrippedBytes"},
		{"default", nil, nil, b.Binary.MaxDefaultBytes, "maxDefaultBytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "restart-controller")
			cmd := exec.Command("go", append(append([]string{"build"}, c.args...), "-o", out, ".")...)
			cmd.Env = append(os.Environ(), c.env...)
			if msg, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("building the controller: %v\n%s", err, msg)
			}
			fi, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s build: %d bytes (budget %d)", c.name, fi.Size(), c.budget)
			if fi.Size() > c.budget {
				t.Errorf("the controller's %s build is %d bytes, over its budget of %d (%s in test/budgets/budgets.yaml); "+
					"`go tool nm -size -sort size` on an unstripped build shows what grew", c.name, fi.Size(), c.budget, c.key)
			}
		})
	}
}

func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}
