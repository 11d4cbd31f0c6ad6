package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/restart-controller/restart-controller/internal/cli"
)

func noEnv(string) (string, bool) { return "", false }

const badConfig = "../restart-controller/testdata/bad.yaml"

func TestDispatch(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"check", []string{"check", "--offline", "--config", "../../examples/config.yaml"}, 0, "Config file: ../../examples/config.yaml (valid)", ""},
		{"check of a bad file", []string{"check", "--offline", "--config", badConfig}, 2, "", "references[1].nmae: unknown field"},
		{"explain without an object", []string{"explain"}, 2, "", "kubectl restart-controller explain KIND/NAME"},
		{"explain --help", []string{"explain", "--help"}, 0, "", "--key string"},
		{"status --help", []string{"status", "--help"}, 0, "", "--all-namespaces"},
		{"status takes no object", []string{"status", "deploy/x"}, 2, "", "kubectl restart-controller status: takes no arguments"},
		{"status names the plugin", []string{"status", "-o", "xml"}, 2, "", "kubectl restart-controller status: unknown output format"},
		{"explain names the plugin", []string{"explain", "-o", "xml", "deploy/x"}, 2, "", "kubectl restart-controller explain: unknown output format"},
		{"no subcommand", nil, 2, "", "kubectl restart-controller explain KIND/NAME"},
		{"help", []string{"--help"}, 0, "kubectl restart-controller check --config FILE", ""},
		{"version", []string{"--version"}, 0, "restart-controller dev", ""},
		{"never runs the controller", []string{"--config", "x"}, 2, "", "Usage:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), c.args, noEnv, &stdout, &stderr)
			if code != c.wantCode {
				t.Fatalf("code %d, want %d\nstdout: %s\nstderr: %s", code, c.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), c.wantStdout) || !strings.Contains(stderr.String(), c.wantStderr) {
				t.Fatalf("stdout %q / stderr %q: want %q / %q", stdout.String(), stderr.String(), c.wantStdout, c.wantStderr)
			}
		})
	}
}

// check prints an invalid config file word for word as the controller does:
// the controller's message is "restart-controller: invalid configuration:"
// and the loader's error (test/e2e's TestCheck compares the two binaries).
func TestCheckInvalidConfigLikeController(t *testing.T) {
	var checkOut, checkErr bytes.Buffer
	code := run(context.Background(), []string{"check", "--config", badConfig}, noEnv, &checkOut, &checkErr)
	fs := pflag.NewFlagSet("restart-controller", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cli.Flags(fs)
	_, loadErr := cli.Load(fs, []string{"--config", badConfig}, noEnv)
	if loadErr == nil {
		t.Fatal("the controller's loader accepts testdata/bad.yaml")
	}
	want := fmt.Sprintf("restart-controller: invalid configuration:\n%v\n", loadErr)
	if code != 2 || checkErr.String() != want || checkOut.Len() != 0 {
		t.Fatalf("check: %d %q\nwant 2 %q", code, checkErr.String(), want)
	}
}
