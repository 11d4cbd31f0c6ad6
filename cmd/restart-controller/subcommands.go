package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/restart-controller/restart-controller/internal/check"
	"github.com/restart-controller/restart-controller/internal/explain"
)

// pluginBinary is the name kubectl looks for on PATH to run
// "kubectl restart-controller ...".
const pluginBinary = "kubectl-restart_controller"

const subcommandsUsage = `Usage:
  %[1]s explain KIND/NAME [flags]   what the controller would do with a workload, or whom a source's change restarts
  %[1]s check --config FILE [flags] validate a config file, and the cluster and RBAC it needs

Run "%[1]s explain --help" or "%[1]s check --help" for their flags.
`

// runSubcommand runs the explain and check subcommands, named by the first
// argument, and reports whether it did; otherwise the process is the
// controller. Invoked as a kubectl plugin, it only has subcommands.
func runSubcommand(ctx context.Context, argv0 string, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) (int, bool) {
	plugin := strings.TrimSuffix(filepath.Base(argv0), ".exe") == pluginBinary
	env := explain.Env{Name: "restart-controller", Version: version, LookupEnv: lookupEnv, Stdout: stdout, Stderr: stderr}
	if plugin {
		env.Name = "kubectl restart-controller"
	}
	if len(args) > 0 {
		switch args[0] {
		case "explain":
			return explain.Main(ctx, args[1:], env), true
		case "check":
			return check.Main(ctx, args[1:], env), true
		}
	}
	if !plugin {
		return 0, false
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintf(stdout, subcommandsUsage, env.Name)
		return 0, true
	}
	if len(args) > 0 && args[0] == "--version" {
		fmt.Fprintln(stdout, "restart-controller", version)
		return 0, true
	}
	fmt.Fprintf(stderr, subcommandsUsage, env.Name)
	return 2, true
}
