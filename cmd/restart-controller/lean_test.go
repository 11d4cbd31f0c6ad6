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
// test/budgets/budgets.yaml forbids (the operator CLI's libraries) is
// linked. It runs in `make unit`, so every change is checked.
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
				"`go mod why -m` show what imports it; the operator CLI belongs in cmd/kubectl-restart_controller",
				bad, len(linked), strings.Join(linked[:min(3, len(linked))], ", "))
		}
	}
}

// The release build of the controller (the image's binary) stays within
// its size budget.
func TestControllerBinarySize(t *testing.T) {
	b, err := budgets.Load()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "restart-controller")
	// The flags of `make build` and the image (hack/image BuildBinary).
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=budget", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the controller: %v\n%s", err, msg)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release build: %d bytes (budget %d)", fi.Size(), b.Binary.MaxStrippedBytes)
	if fi.Size() > b.Binary.MaxStrippedBytes {
		t.Errorf("the controller's release build is %d bytes, over its budget of %d (test/budgets/budgets.yaml); "+
			"`go tool nm -size -sort size` on an unstripped build shows what grew", fi.Size(), b.Binary.MaxStrippedBytes)
	}
}

func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}
