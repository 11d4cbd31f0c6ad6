// Command restart-controller restarts pod-template workloads when the data
// they read from ConfigMaps and Secrets changes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/restart-controller/restart-controller/internal/cli"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/logging"
	"github.com/restart-controller/restart-controller/internal/memlimit"
	"github.com/restart-controller/restart-controller/internal/watch"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Memory: the live heap is small (digests, not data), and the peak is garbage
// from decoding source objects, which grows with their size. It peaks during
// the start-up sync, when every source is decoded at once: there a soft limit
// of twice the live heap (GC at 50% growth targets 1.5x) bounds the
// overshoot. Afterwards source events trickle in and GC time competes with
// reacting to them, so the limit relaxes to three times the live heap, and
// the heap may grow by 10 MiB over its live part, or 50% if that is less,
// but never by less than 15%. A small cluster keeps GC at 50% growth; at
// 10,000 workloads (a 40 MiB live heap) the first recording's garbage would
// otherwise take the peak RSS to 1.25x the floor program's, and at 50,000
// (a 180 MiB live heap) 25% growth still took it to 1.23x. A soft limit
// that close above the live heap thrashed instead: it counts the runtime's
// own memory, a GC percent does not (BENCHMARKS.md has both measurements).
// Both follow the live heap, so a larger cluster never thrashes against a
// limit meant for a smaller one. GOGC and GOMEMLIMIT, when set, are the
// operator's choice and win.
const defaultGCPercent = 50

var (
	syncMemoryPolicy   = memlimit.Policy{Floor: 32 << 20, Factor: 2}
	steadyMemoryPolicy = memlimit.Policy{Floor: 32 << 20, Factor: 3,
		Growth: memlimit.Growth{Headroom: 10 << 20, Min: 15, Max: defaultGCPercent}}
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	if code, ok := pointToPlugin(os.Args[1:], os.Stderr); ok {
		stop()
		os.Exit(code)
	}
	_, gogc := os.LookupEnv("GOGC")
	_, gomemlimit := os.LookupEnv("GOMEMLIMIT")
	if !gogc {
		debug.SetGCPercent(defaultGCPercent)
	}
	onSynced := func() {}
	if manage := (memlimit.Manage{Limit: !gomemlimit, Percent: !gogc}); manage != (memlimit.Manage{}) {
		limiter := memlimit.NewLimiter(syncMemoryPolicy, manage)
		go limiter.Run(ctx, time.Second)
		onSynced = func() { limiter.Set(steadyMemoryPolicy) }
	}
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr, onSynced)
	stop()
	os.Exit(code)
}

// run returns the process exit code: 0 on a clean stop, 1 when the controller
// failed, 2 when the configuration is invalid (nothing was touched), whether
// the config loader or the cluster's discovery found it.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer, onSynced func()) int {
	load := func(out io.Writer) (*config.Config, error) {
		fs := pflag.NewFlagSet("restart-controller", pflag.ContinueOnError)
		fs.SetOutput(out)
		cli.Flags(fs)
		return cli.Load(fs, args, lookupEnv)
	}
	cfg, err := load(stderr)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, cli.ErrVersion):
		fmt.Fprintln(stdout, "restart-controller", version)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "restart-controller: invalid configuration:\n%v\n", err)
		return 2
	}

	log := logging.New(stderr, cfg.Settings.LogFormat, cfg.Settings.Verbose)
	// klog is client-go's process-wide logger; routing it here is the one
	// global this program sets, and only main may set it.
	if err := logging.RouteKlog(log.Named("client-go"), cfg.Settings.Verbose); err != nil {
		fmt.Fprintf(stderr, "restart-controller: %v\n", err)
		return 1
	}
	log.Info("starting", "version", version, "config", cfg.Settings.ConfigFile,
		"grace_period", cfg.Settings.GracePeriod, "workers", cfg.Settings.Workers)

	reload := func() (*config.Config, error) { return load(io.Discard) }
	if err := supervise(ctx, cfg, reload, log, lookupEnv, onSynced); err != nil {
		// A mistake the cluster reveals (a misspelled built-in resource) is
		// a configuration error too: nothing was watched or written.
		var clusterConfig *watch.ConfigError
		if errors.As(err, &clusterConfig) {
			fmt.Fprintf(stderr, "restart-controller: invalid configuration (checked against the cluster):\n%v\n", clusterConfig)
			return 2
		}
		log.Error("stopped with error", "error", err)
		return 1
	}
	log.Info("stopped")
	return 0
}
