package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestSubcommandDispatch(t *testing.T) {
	cases := []struct {
		name       string
		argv0      string
		args       []string
		wantRun    bool
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"controller flags are the controller's", "/bin/restart-controller", []string{"--config", "x"}, false, 0, "", ""},
		{"no arguments is the controller", "restart-controller", nil, false, 0, "", ""},
		{"check", "restart-controller", []string{"check", "--offline", "--config", "../../examples/config.yaml"}, true, 0, "Cluster: not checked (--offline)", ""},
		{"check of a bad file", "restart-controller", []string{"check", "--offline", "--config", "testdata/bad.yaml"}, true, 2, "", "references[1].nmae: unknown field"},
		{"explain without an object", "restart-controller", []string{"explain"}, true, 2, "", "restart-controller explain KIND/NAME"},
		{"explain --help", "restart-controller", []string{"explain", "--help"}, true, 0, "", "--key string"},
		{"plugin without a subcommand", "/usr/local/bin/kubectl-restart_controller", nil, true, 2, "", "kubectl restart-controller explain KIND/NAME"},
		{"plugin help", "kubectl-restart_controller", []string{"--help"}, true, 0, "kubectl restart-controller check --config FILE", ""},
		{"plugin never runs the controller", "kubectl-restart_controller", []string{"--config", "x"}, true, 2, "", "Usage:"},
		{"plugin check", "kubectl-restart_controller", []string{"check", "--offline", "--config", "../../examples/config.yaml"}, true, 0, "Config file: ../../examples/config.yaml (valid)", ""},
		{"plugin explain names itself", "kubectl-restart_controller", []string{"explain", "-o", "xml", "deploy/x"}, true, 2, "", "kubectl restart-controller explain: unknown output format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code, ran := runSubcommand(context.Background(), c.argv0, c.args, noEnv, &stdout, &stderr)
			if ran != c.wantRun || code != c.wantCode {
				t.Fatalf("ran %v code %d, want %v %d\nstdout: %s\nstderr: %s", ran, code, c.wantRun, c.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), c.wantStdout) || !strings.Contains(stderr.String(), c.wantStderr) {
				t.Fatalf("stdout %q / stderr %q: want %q / %q", stdout.String(), stderr.String(), c.wantStdout, c.wantStderr)
			}
		})
	}
}

// check prints an invalid config file word for word as the controller does.
func TestCheckInvalidConfigLikeController(t *testing.T) {
	var checkOut, checkErr, ctrlOut, ctrlErr bytes.Buffer
	code, _ := runSubcommand(context.Background(), "restart-controller", []string{"check", "--config", "testdata/bad.yaml"}, noEnv, &checkOut, &checkErr)
	ctrlCode := run(context.Background(), []string{"--config", "testdata/bad.yaml"}, noEnv, &ctrlOut, &ctrlErr, func() {})
	if code != 2 || ctrlCode != 2 || checkErr.String() != ctrlErr.String() || checkOut.Len() != 0 {
		t.Fatalf("check: %d %q\ncontroller: %d %q", code, checkErr.String(), ctrlCode, ctrlErr.String())
	}
}
