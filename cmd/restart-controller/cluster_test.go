package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// sharedCluster is the control plane the tests of this package that need an
// API server share: started by the first of them, stopped by TestMain.
var sharedCluster struct {
	once sync.Once
	dir  string
	c    *testcluster.Cluster
	err  error
}

// apiServer returns the shared control plane, starting it on first use; in
// -short mode (make unit) the test is skipped.
func apiServer(t *testing.T) *testcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane; skipped in -short mode")
	}
	sharedCluster.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if sharedCluster.dir, sharedCluster.err = os.MkdirTemp("", "restart-controller-cmd-test-"); sharedCluster.err != nil {
			return
		}
		sharedCluster.c, sharedCluster.err = testcluster.Start(ctx, testcluster.Options{Dir: sharedCluster.dir})
	})
	if sharedCluster.err != nil {
		t.Fatalf("starting the control plane: %v", sharedCluster.err)
	}
	return sharedCluster.c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedCluster.c != nil {
		if err := sharedCluster.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}
	if sharedCluster.dir != "" {
		if err := os.RemoveAll(sharedCluster.dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}
