// Command kubectl-restart_controller is restart-controller's operator CLI, a
// kubectl plugin: "kubectl restart-controller explain|check|migrate ...".
//
// It is a binary of its own, not a mode of the controller's, because its
// libraries (k8s.io/cli-runtime, and through it kustomize, cobra and OpenAPI
// models) doubled the controller's binary and its resident memory: a
// process maps the pages of its binary it touches, so every replica paid for
// a CLI it never runs (BENCHMARKS.md, "Binary and idle memory"). The
// controller binary only points here when asked for a subcommand.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/restart-controller/restart-controller/internal/check"
	"github.com/restart-controller/restart-controller/internal/explain"
	"github.com/restart-controller/restart-controller/internal/migrate"
	"github.com/restart-controller/restart-controller/internal/status"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// name is how users invoke it, for usage lines: kubectl finds the binary
// kubectl-restart_controller on PATH and runs it for "kubectl restart-controller".
const name = "kubectl restart-controller"

const usage = `Usage:
  %[1]s explain KIND/NAME [flags]   what the controller would do with a workload, or whom a source's change restarts
  %[1]s status [-n NS | -A] [flags] what the controller is doing: changes in progress, held and waiting restarts, rollouts, leader and health
  %[1]s check --config FILE [flags] validate a config file, and the cluster and RBAC it needs
  %[1]s migrate [flags]             write the config that gives a Reloader installation's behaviour

Run "%[1]s explain --help", "%[1]s status --help", "%[1]s check --help" or "%[1]s migrate --help" for their flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to the subcommand named by the first argument and returns
// the exit status: explain.ExitInvalid (2) is a usage error, as in the
// controller.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	env := explain.Env{Name: name, Version: version, LookupEnv: lookupEnv, Stdout: stdout, Stderr: stderr}
	if len(args) > 0 {
		switch args[0] {
		case "explain":
			return explain.Main(ctx, args[1:], env)
		case "status":
			return status.Main(ctx, args[1:], env)
		case "check":
			return check.Main(ctx, args[1:], env)
		case "migrate":
			return migrate.Main(name, args[1:], stdout, stderr)
		case "-h", "--help", "help":
			fmt.Fprintf(stdout, usage, name)
			return explain.ExitOK
		case "--version", "version":
			fmt.Fprintln(stdout, "restart-controller", version)
			return explain.ExitOK
		}
	}
	fmt.Fprintf(stderr, usage, name)
	return explain.ExitInvalid
}
