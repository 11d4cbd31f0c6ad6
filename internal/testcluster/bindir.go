package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const modulePath = "github.com/restart-controller/restart-controller"

// BinDir runs hack/build-cluster-bins.sh (found by walking up from the working
// directory to the go.mod of this module) and returns the folder of binaries.
// The first run builds them (minutes); later runs return at once from the cache.
// The script's progress goes to stderr.
func BinDir(ctx context.Context) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "hack", "build-cluster-bins.sh")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir = root
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", script, err, lastLines(stderr.String(), 30))
	}
	var dir string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			dir = l
		}
	}
	if dir == "" {
		return "", fmt.Errorf("%s printed no folder", script)
	}
	for _, b := range components {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s: binary missing: %w", script, err)
		}
	}
	return dir, nil
}

// RepoRoot walks up from the working directory to the folder whose go.mod
// declares this module (skipping nested modules such as hack/tools): the
// repository root, for tests and tools run from any package folder.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if isThisModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above %s", modulePath, wd)
		}
		dir = parent
	}
}

func isThisModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == modulePath
		}
	}
	return false
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var errAttached = errors.New("testcluster: not supported on a cluster reopened with Attach")
