package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/restart-controller/restart-controller/internal/access"
	"github.com/restart-controller/restart-controller/internal/cli"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/explain"
)

const (
	defaultServiceAccount = "restart-controller/restart-controller"
	// requestTimeout bounds each request unless --request-timeout is given,
	// so that an unreachable address does not hang a CI job.
	requestTimeout = 15 * time.Second
)

const checkUsage = `Check a restart-controller configuration before deploying it.

Usage:
  %[1]s check --config FILE [flags]

Validates the config file exactly as the controller loads it, layered with
the environment and the controller flags given here (so the Deployment's own
arguments can be passed): exit status 2 with every problem named by its
place when invalid. Then, unless --offline or when no cluster is reachable
(then a note says only the file was checked), it checks with your
credentials (read-only) that each configured kind is served (a missing CRD is
a warning, a missing built-in kind an error) and, with SubjectAccessReviews,
that the controller's ServiceAccount may do all the controller does: list and
watch sources; list, watch and patch workloads; create and patch Events; get
and create its checksum key Secret; and get, create and update its Lease when
leader election is on. Exit status 1
when a cluster check fails.

The cluster is found as kubectl finds it: --kubeconfig, else $KUBECONFIG,
else ~/.kube/config, else in-cluster.

Flags (the controller's flags are accepted too; see restart-controller --help):
`

// Main runs "check" with args (after the subcommand name) and returns the
// exit status: 0 ok, 1 a cluster check failed, 2 invalid configuration.
func Main(ctx context.Context, args []string, env explain.Env) int {
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	offline := fs.Bool("offline", false, "check the config file only; do not contact a cluster")
	subject := fs.String("as-service-account", defaultServiceAccount, "NAMESPACE/NAME of the controller's ServiceAccount whose permissions are checked")
	output := fs.StringP("output", "o", "", "output format: json or yaml (default: tables)")
	kube := genericclioptions.NewConfigFlags(false)
	// --kubeconfig is the controller's flag (cli.Flags); the namespace does
	// not apply: the namespaces are the config's.
	kube.KubeConfig, kube.Namespace, kube.CacheDir = nil, nil, nil
	kube.AddFlags(fs)
	ours := pflag.NewFlagSet("ours", pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) { ours.AddFlag(f) })
	cli.Flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, checkUsage, env.Name)
		ours.PrintDefaults()
		fmt.Fprintln(env.Stderr, "\nThe controller's flags:")
		controller := pflag.NewFlagSet("controller", pflag.ContinueOnError)
		cli.Flags(controller)
		controller.SetOutput(env.Stderr)
		controller.PrintDefaults()
	}

	cfg, err := cli.Load(fs, args, env.LookupEnv)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return explain.ExitOK
	case errors.Is(err, cli.ErrVersion):
		fmt.Fprintln(env.Stdout, "restart-controller", env.Version)
		return explain.ExitOK
	case err != nil:
		// Word for word what the controller prints.
		fmt.Fprintf(env.Stderr, "restart-controller: invalid configuration:\n%v\n", err)
		return explain.ExitInvalid
	}
	if err := explain.CheckFormat(*output); err != nil {
		fmt.Fprintf(env.Stderr, "%s check: %v\n", env.Name, err)
		return explain.ExitInvalid
	}
	saNamespace, saName, ok := strings.Cut(*subject, "/")
	if !ok || saNamespace == "" || saName == "" || strings.Contains(saName, "/") {
		fmt.Fprintf(env.Stderr, "%s check: --as-service-account wants NAMESPACE/NAME, got %q\n", env.Name, *subject)
		return explain.ExitInvalid
	}

	report := &Report{Config: cfg.Settings.ConfigFile, Watches: Describe(cfg), Results: []Result{}}
	if *offline {
		report.Note = "not checked (--offline): only the config file was checked"
	} else {
		// Otherwise kubectl's loading rules: $KUBECONFIG, ~/.kube/config, in-cluster.
		if fs.Changed("kubeconfig") {
			kube.KubeConfig = &cfg.Settings.Kubeconfig
		}
		checkCluster(ctx, kube, cfg, saNamespace, saName, report)
	}

	if err := writeReport(env.Stdout, report, *output); err != nil {
		fmt.Fprintf(env.Stderr, "%s check: %v\n", env.Name, err)
		return explain.ExitFailed
	}
	if report.Note != "" && *output != "" {
		fmt.Fprintf(env.Stderr, "note: cluster %s\n", report.Note)
	}
	if report.Failed() {
		return explain.ExitFailed
	}
	return explain.ExitOK
}

// checkCluster runs the cluster checks, or leaves a note when no cluster is
// configured or reachable.
func checkCluster(ctx context.Context, kube *genericclioptions.ConfigFlags, cfg *config.Config, saNamespace, saName string, report *Report) {
	loader := kube.ToRawKubeConfigLoader()
	raw, err := loader.RawConfig()
	if err != nil {
		report.Results = append(report.Results, Result{LevelError, "kubeconfig", err.Error()})
		return
	}
	inCluster := os.Getenv("KUBERNETES_SERVICE_HOST") != ""
	if len(raw.Clusters) == 0 && *kube.APIServer == "" && !inCluster {
		report.Note = "not checked: no kubeconfig found (--kubeconfig, $KUBECONFIG, ~/.kube/config); only the config file was checked"
		return
	}
	rc, err := loader.ClientConfig()
	if err != nil {
		report.Results = append(report.Results, Result{LevelError, "kubeconfig", err.Error()})
		return
	}
	if rc.Timeout == 0 {
		rc.Timeout = requestTimeout
	}
	rc.UserAgent = "restart-controller-check"
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		report.Results = append(report.Results, Result{LevelError, "cluster", err.Error()})
		return
	}
	disc := kc.Discovery()
	if _, err := disc.ServerVersion(); err != nil {
		if unreachable(err) {
			report.Note = fmt.Sprintf("not checked: %s is not reachable (%v); only the config file was checked", rc.Host, err)
			return
		}
		report.Cluster = rc.Host
		report.Results = append(report.Results, Result{LevelError, "cluster", err.Error()})
		return
	}
	report.Cluster = rc.Host
	report.Results = append(report.Results, Served(disc, cfg)...)

	user, groups := ServiceAccountUser(saNamespace, saName)
	report.Subject = user
	report.Results = append(report.Results, RBAC(ctx, kc.AuthorizationV1().SubjectAccessReviews(), user, groups, access.Needs(cfg))...)

	// Other controllers' annotations on the workloads that this config
	// would not read, read with the caller's credentials.
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		report.Results = append(report.Results, Result{LevelError, "cluster", err.Error()})
		return
	}
	kinds, workloads, problems := listWorkloads(ctx, dc, cfg)
	report.Results = append(append(report.Results, problems...), PeerAnnotations(cfg, kinds, workloads)...)
}

// unreachable tells "no API server there" from an API server's answer.
func unreachable(err error) bool {
	var netErr net.Error
	var dnsErr *net.DNSError
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || errors.As(err, &dnsErr) ||
		errors.As(err, &netErr) && netErr.Timeout()
}

func writeReport(w io.Writer, r *Report, format string) error {
	if format != explain.FormatTable {
		return explain.WriteStructured(w, r, format)
	}
	// Rendered whole first, as explain and status do: the one write that
	// can fail is the last, and its error is returned.
	var b strings.Builder
	render(&b, r)
	_, err := io.WriteString(w, b.String())
	return err
}

func render(w io.Writer, r *Report) {
	fmt.Fprintf(w, "Config file: %s (valid)\n\nThe controller would watch:\n", r.Config)
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	list := func(label string, items []string) {
		for i, item := range items {
			if i > 0 {
				label = ""
			}
			fmt.Fprintf(t, "  %s\t%s\n", label, item)
		}
	}
	wt := r.Watches
	list("sources", wt.Sources)
	list("workloads", wt.Workloads)
	namespaces := []string{"all"}
	if len(wt.Namespaces) > 0 {
		namespaces = wt.Namespaces
	}
	list("namespaces", namespaces)
	selector := wt.WorkloadSelector
	if selector == "" {
		selector = "(none: every workload that opts in)"
	}
	list("workload selector", []string{selector})
	list("opt-in (workload annotations)", wt.OptIn)
	list("writes", wt.Writes)
	list("grace period", []string{wt.GracePeriod})
	list("leader election", []string{wt.LeaderElection})
	list("reference forms", []string{fmt.Sprint(wt.ReferenceForms)})
	_ = t.Flush() // into writeReport's strings.Builder: cannot fail

	fmt.Fprintln(w)
	switch {
	case r.Note != "":
		fmt.Fprintf(w, "Cluster: %s\n", r.Note)
	case r.Cluster == "":
		fmt.Fprintln(w, "Cluster: could not connect")
	default:
		fmt.Fprintf(w, "Cluster: %s\n", r.Cluster)
		if r.Subject != "" {
			fmt.Fprintf(w, "Permissions checked for: %s\n", r.Subject)
		}
	}
	if len(r.Results) > 0 {
		fmt.Fprintln(w)
		results := explain.NewTable(w, "RESULT", "CHECK", "DETAIL")
		errs, warnings := 0, 0
		for _, x := range r.Results {
			results.Row(x.Level, x.Check, x.Detail)
			switch x.Level {
			case LevelError:
				errs++
			case LevelWarning:
				warnings++
			}
		}
		results.Flush()
		fmt.Fprintf(w, "\n%s, %s\n", plural(errs, "error"), plural(warnings, "warning"))
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
