package main

import (
	"fmt"
	"io"
)

// pointToPlugin answers the subcommands of the operator CLI. explain, status
// and check live in the kubectl plugin kubectl-restart_controller, a binary
// of their own: their libraries (cli-runtime, kustomize, cobra) doubled this
// one's size and resident memory. This is a string compare, so asking the
// controller for them costs nothing and imports nothing. It reports whether
// it answered, with the exit status (2, a usage error).
func pointToPlugin(args []string, stderr io.Writer) (int, bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "explain", "status", "check":
		fmt.Fprintf(stderr, "restart-controller: %[1]s is in the kubectl plugin: kubectl restart-controller %[1]s ... "+
			"(binary kubectl-restart_controller: `make plugin`, or /kubectl-restart_controller in the image)\n", args[0])
		return 2, true
	}
	return 0, false
}
