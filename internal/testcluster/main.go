package testcluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

// Main is the TestMain of a package whose tests share one control plane,
// named name in messages: skipped in -short mode; otherwise the cluster
// starts, setup takes from it what the tests need (clients), the tests run
// and the cluster stops. It returns the exit code for os.Exit.
func Main(m *testing.M, name string, setup func(c *Cluster) error) int {
	flag.Parse()
	if testing.Short() {
		fmt.Printf("%s: skipped in -short mode (needs a control plane)\n", name)
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", name+"-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	c, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer func() { _ = c.Stop() }()
	if err := setup(c); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the tests:", err)
		return 1
	}
	return m.Run()
}
