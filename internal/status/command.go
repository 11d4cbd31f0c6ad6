package status

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/explain"
)

// defaultMetricsService is the metrics Service of the manifests
// (manifests/service.yaml); the chart's is RELEASE-restart-controller-metrics.
const defaultMetricsService = "restart-controller-metrics"

const statusUsage = `What restart-controller is doing across the cluster, from the objects alone.

Usage:
  %[1]s status [-n NAMESPACE | -A] [-o wide|json|yaml] [flags]

Each source change in progress with its waves; every restart held, waiting
or due, by reason, with what ends it; the rollouts in flight; and the
controller's leader (its Lease) and health (its metrics, through the API
server's proxy to the leader's pod or to the metrics Service, or from
--metrics-url). The decisions are explain's, which are the controller's,
paced over everything listed; what only the controller's memory holds (a
grace period under way, the breaker's quiet time) is said to be unknown.

It reads with your credentials (list, get), never writes, and works with
the controller down. A kind it may not list is named, and the rest is
answered (exit status 1). It uses the controller's config file (--config,
else $RESTART_CONTROLLER_CONFIG, else %[2]s, else the built-in defaults).

Flags:
`

// Main runs "status" with args (after the subcommand name) and returns the
// exit status: 0 answered, 1 answered but something could not be read or
// decided, 2 usage or configuration error.
func Main(ctx context.Context, args []string, env explain.Env) int {
	fs := pflag.NewFlagSet("status", pflag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	configFile := fs.String("config", "", "the controller's config file [$RESTART_CONTROLLER_CONFIG]")
	output := fs.StringP("output", "o", "", "output format: wide, json or yaml (default: tables)")
	all := fs.BoolP("all-namespaces", "A", false, "every namespace the controller watches (default: the namespace of -n or the context)")
	service := fs.String("metrics-service", defaultMetricsService, "the controller's metrics Service, in its namespace (leaderElection.namespace), read through the API server's proxy when its leader's pod cannot be")
	metricsURL := fs.String("metrics-url", "", "read the controller's metrics here instead (e.g. http://localhost:10254/metrics through kubectl port-forward)")
	kube := genericclioptions.NewConfigFlags(true)
	kube.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, statusUsage, env.Name, config.DefaultPath)
		fs.PrintDefaults()
	}
	fail := func(code int, format string, a ...interface{}) int {
		fmt.Fprintf(env.Stderr, env.Name+" status: "+format+"\n", a...)
		return code
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return explain.ExitOK
		}
		return fail(explain.ExitInvalid, "%v", err)
	}
	if err := CheckFormat(*output); err != nil {
		return fail(explain.ExitInvalid, "%v", err)
	}
	if fs.NArg() > 0 {
		return fail(explain.ExitInvalid, "takes no arguments, got %q", strings.Join(fs.Args(), " "))
	}
	cfg, err := explain.LoadConfig(*configFile, env.LookupEnv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: invalid configuration:\n%v\n", env.Name, err)
		return explain.ExitInvalid
	}
	if cfg.File == "" {
		fmt.Fprintf(env.Stderr, "note: no config file at %s; using the built-in defaults (pass --config)\n", config.DefaultPath)
	}
	cl, namespace, err := explain.Connect(ctx, kube, cfg, env, "status")
	if err != nil {
		return fail(explain.ExitFailed, "connecting to the cluster: %v", err)
	}
	scope, scopeText := Scope(cfg, *all, namespace)
	listing := Read(ctx, cl, cfg, scope)
	if cfg.Sums.KeyID() == "" {
		// Connect said why on stderr; the report must say what it costs.
		listing.NotRead(fmt.Sprintf("the checksum key (Secret %s/%s): the checksums recorded with it cannot be compared, "+
			"so a restart due for them is not seen (they show as records)", cfg.Settings.LeaseNamespace, cfg.Settings.ChecksumKeySecret))
	}
	controller := ReadController(ctx, cl, cfg, *service, *metricsURL, time.Now())
	report := Build(listing, scopeText, time.Now().UTC())
	report.Controller = controller
	if err := Render(env.Stdout, report, *output); err != nil {
		return fail(explain.ExitFailed, "writing the report: %v", err)
	}
	if len(report.NotRead) > 0 || report.Workloads.Actions[explain.ActionUnknown] > 0 {
		return explain.ExitFailed
	}
	return explain.ExitOK
}

// Scope is the namespaces to list and how to name them: with all, those the
// controller watches (the config's namespaces; none named: every one);
// else namespace alone.
func Scope(cfg *explain.Config, all bool, namespace string) ([]string, string) {
	switch {
	case !all:
		return []string{namespace}, "namespace " + namespace
	case len(cfg.Namespaces) > 0:
		return cfg.Namespaces, "the config's namespaces (" + strings.Join(cfg.Namespaces, ", ") + ")"
	}
	return []string{""}, "all namespaces"
}
