package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func noEnv(string) (string, bool) { return "", false }

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("workloads:\n- {version: v1, resource: deployments, podTemplatePath: \"spec.[template\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"version", []string{"--version"}, 0, "restart-controller dev", ""},
		{"help", []string{"-h"}, 0, "", "--restart-grace-period"},
		{"invalid config names its place", []string{"--config", bad}, 2, "", "workloads[0].podTemplatePath"},
		{"missing config file", []string{"--config", filepath.Join(dir, "none.yaml")}, 2, "", "none.yaml"},
		{"unknown flag", []string{"--no-such-flag"}, 2, "", "no-such-flag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), c.args, noEnv, &stdout, &stderr, func() {})
			if code != c.wantCode {
				t.Fatalf("exit code %d, want %d\nstderr: %s", code, c.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), c.wantStdout) || !strings.Contains(stderr.String(), c.wantStderr) {
				t.Fatalf("stdout %q / stderr %q: want %q / %q", stdout.String(), stderr.String(), c.wantStdout, c.wantStderr)
			}
		})
	}
}

// With a valid config but no reachable API server, the controller fails with
// status 1 and a message saying what it was doing; it touches nothing.
func TestRunFailsWithoutAPIServer(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--config", "../../examples/config.yaml", "--kubeconfig", kubeconfig,
		"--metrics-address", "127.0.0.1:0"}, noEnv, &stdout, &stderr, func() {})
	if code != 1 || !strings.Contains(stderr.String(), "looking up the configured kinds") || !strings.Contains(stderr.String(), "connection refused") {
		t.Fatalf("exit code %d, stderr:\n%s", code, stderr.String())
	}
}
