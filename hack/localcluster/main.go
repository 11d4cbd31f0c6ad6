// Command localcluster starts, inspects and stops a detached local control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)
// for the demo:
//
//	go run ./hack/localcluster up     --dir DIR   # start; prints the kubeconfig
//	go run ./hack/localcluster status --dir DIR   # exit 0 only if all runs and /readyz is OK
//	go run ./hack/localcluster down   --dir DIR   # stop the processes; files stay
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/restart-controller/restart-controller/internal/testcluster"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage: localcluster up|status|down --dir DIR

  up      start a detached cluster in DIR and print how to use it
  status  show the component processes and API server readiness
  down    stop the processes started by up (files in DIR are kept)
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	fs.Usage = func() { usage(); fs.PrintDefaults() }
	dir := fs.String("dir", "", "run folder (data, certs, logs, kubeconfig, pids); required")
	_ = fs.Parse(os.Args[2:])
	if *dir == "" || fs.NArg() > 0 {
		fs.Usage()
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch cmd {
	case "up":
		err = up(ctx, *dir)
	case "down":
		err = down(*dir)
	case "status":
		err = status(ctx, *dir)
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func up(ctx context.Context, dir string) error {
	c, err := testcluster.Start(ctx, testcluster.Options{
		Dir:    dir,
		Detach: true,
		Log:    func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) },
	})
	if err != nil {
		return err
	}
	fmt.Printf(`Cluster is up (processes detached; logs in %s).
Kubeconfig: %s

  export KUBECONFIG=%s
  %s get nodes

Stop it with: go run ./hack/localcluster down --dir %s
`, filepath.Join(c.Dir, "logs"), c.Kubeconfig, c.Kubeconfig, filepath.Join(c.BinDir, "kubectl"), dir)
	return nil
}

func down(dir string) error {
	c, err := testcluster.Attach(dir)
	if err != nil {
		return err
	}
	running := 0
	for _, p := range c.Components() {
		if p.Running {
			running++
		}
	}
	if err := c.Stop(); err != nil {
		return err
	}
	if running == 0 {
		fmt.Println("cluster was already stopped")
	} else {
		fmt.Printf("stopped %d processes\n", running)
	}
	return nil
}

func status(ctx context.Context, dir string) error {
	c, err := testcluster.Attach(dir)
	if err != nil {
		return err
	}
	down := 0
	for _, p := range c.Components() {
		state := "running"
		if !p.Running {
			state = "stopped"
			down++
		}
		fmt.Printf("%-24s pid %-8d %s\n", p.Name, p.PID, state)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	readyErr := c.Ready(ctx)
	if readyErr == nil {
		fmt.Printf("%-24s %s/readyz ok\n", "api", c.RESTConfig.Host)
	} else {
		fmt.Printf("%-24s %v\n", "api", readyErr)
	}
	fmt.Printf("%-24s %s\n", "kubeconfig", c.Kubeconfig)
	if down > 0 || readyErr != nil {
		return errors.New("cluster is not fully running")
	}
	return nil
}
