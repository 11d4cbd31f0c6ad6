package explain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/checksumkey"
	"github.com/restart-controller/restart-controller/internal/config"
)

// Exit statuses of the subcommands, the controller's: 2 is a usage or
// configuration error.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitInvalid = 2
)

// requestTimeout bounds each request unless --request-timeout is given.
const requestTimeout = 30 * time.Second

// Env is what a subcommand gets from the process.
type Env struct {
	// Name is how the user invoked the command, for usage lines, e.g.
	// "restart-controller" or "kubectl restart-controller".
	Name      string
	Version   string
	LookupEnv func(string) (string, bool)
	Stdout    io.Writer
	Stderr    io.Writer
}

const explainUsage = `Explain what restart-controller would do, from the cluster as it is.

Usage:
  %[1]s explain KIND/NAME [flags]

On a workload (deploy/web, sts/db, ds/agent, or any configured kind): each
source it reads, through which reference of its pod spec, which keys,
whether optional, the checksum its pods started with and the current one,
and what the controller would do now and why.

On a source (cm/NAME, secret/NAME): every opted-in workload of the
configured kinds in its namespace that reads it, which keys, and what a
change of each key would restart; --key K keeps the readers a change of K
would restart. Secret values are never shown, only checksums.

It reads with your credentials (get, list), never writes, and uses the
controller's config file (--config, else $RESTART_CONTROLLER_CONFIG, else
%[2]s, else the built-in defaults).

Flags:
`

// Main runs "explain" with args (after the subcommand name) and returns the
// exit status: 0 explained, 1 failed (not found, API error, incomplete), 2
// usage or configuration error.
func Main(ctx context.Context, args []string, env Env) int {
	fs := pflag.NewFlagSet("explain", pflag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	configFile := fs.String("config", "", "the controller's config file [$RESTART_CONTROLLER_CONFIG]")
	output := fs.StringP("output", "o", "", "output format: json or yaml (default: tables)")
	key := fs.String("key", "", "on a source: only the readers a change of this key would restart")
	kube := genericclioptions.NewConfigFlags(true)
	kube.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, explainUsage, env.Name, config.DefaultPath)
		fs.PrintDefaults()
	}
	fail := func(code int, format string, a ...interface{}) int {
		fmt.Fprintf(env.Stderr, env.Name+" explain: "+format+"\n", a...)
		return code
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return ExitOK
		}
		return fail(ExitInvalid, "%v", err)
	}
	if err := CheckFormat(*output); err != nil {
		return fail(ExitInvalid, "%v", err)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return ExitInvalid
	}

	cfg, err := LoadConfig(*configFile, env.LookupEnv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: invalid configuration:\n%v\n", env.Name, err)
		return ExitInvalid
	}
	if cfg.File == "" {
		fmt.Fprintf(env.Stderr, "note: no config file at %s; using the built-in defaults (pass --config)\n", config.DefaultPath)
	}
	cl, namespace, err := Connect(ctx, kube, cfg, env, "explain")
	if err != nil {
		return fail(ExitFailed, "%v", err)
	}
	mapper, err := kube.ToRESTMapper()
	if err != nil {
		return fail(ExitFailed, "%v", err)
	}
	target, err := cfg.Resolve(mapper, fs.Args())
	if err != nil {
		return fail(ExitInvalid, "%v", err)
	}
	if target.Workload != nil && *key != "" {
		return fail(ExitInvalid, "--key applies to a source (ConfigMap, Secret), not to a workload")
	}
	report, code, err := explainTarget(ctx, cl, cfg, target, namespace, *key)
	if err != nil {
		return fail(ExitFailed, "%v", err)
	}
	if err := Render(env.Stdout, report, *output); err != nil {
		return fail(ExitFailed, "%v", err)
	}
	return code
}

// Connect builds the clients from the kubeconfig flags, with the user
// agent restart-controller-COMMAND, and reads the checksum key if the
// caller may (without it, keyed checksums are reported as not comparable,
// not as changed). It returns the namespace of the flags or the context.
func Connect(ctx context.Context, kube *genericclioptions.ConfigFlags, cfg *Config, env Env, command string) (*Cluster, string, error) {
	rc, err := kube.ToRESTConfig()
	if err != nil {
		return nil, "", err
	}
	rc.UserAgent = "restart-controller-" + command + "/" + env.Version
	if rc.Timeout == 0 {
		// --request-timeout, if given, wins; an unreachable address fails
		// instead of hanging.
		rc.Timeout = requestTimeout
	}
	namespace, _, err := kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", err
	}
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, "", err
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, "", err
	}
	if key, err := checksumkey.Read(ctx, kc.CoreV1().Secrets(cfg.Settings.LeaseNamespace), cfg.Settings.LeaseNamespace, cfg.Settings.ChecksumKeySecret); err != nil {
		fmt.Fprintf(env.Stderr, "note: cannot read the checksum key (%v); keyed checksums are not compared\n", err)
	} else if cfg.Sums, err = checksum.NewHasher(key); err != nil {
		fmt.Fprintf(env.Stderr, "note: %v; keyed checksums are not compared\n", err)
	}
	return &Cluster{Dynamic: client, Kube: kc, REST: rc}, namespace, nil
}

// explainTarget explains a workload, or a source and its readers, and says
// with which exit code: a failure when a decision or a reader could not be
// read.
func explainTarget(ctx context.Context, cl *Cluster, cfg *Config, target Target, namespace, key string) (interface{}, int, error) {
	cfg.NamespaceLabels = cl.NamespaceLabels(ctx)
	if target.Workload != nil {
		gvr := target.Workload.GVR
		obj, err := cl.Get(ctx, gvr, namespace, target.Name)
		if err != nil {
			return nil, 0, err
		}
		if obj == nil {
			return nil, 0, fmt.Errorf("%s %q not found in namespace %s", gvr.GroupResource(), target.Name, namespace)
		}
		// The workloads of its namespace, listed only if a decision needs
		// the waves of a change (kinds the caller may not list are left out).
		fleet := func() []Workload {
			workloads, _ := cl.Workloads(ctx, cfg, namespace)
			return workloads
		}
		cfg.SourceNames = cl.SourceNames(ctx, cfg.SourceSelector)
		r := cfg.ExplainWorkload(*target.Workload, obj, cl.Fetcher(ctx, cfg.SourceAnnotations(), cfg.SourceSelector), fleet, time.Now())
		if r.Decision.Action == ActionUnknown {
			return r, ExitFailed, nil
		}
		return r, ExitOK, nil
	}
	kind := *target.Source
	obj, state, err := cl.readSource(ctx, kind, namespace, target.Name, cfg.SourceSelector)
	if err != nil {
		return nil, 0, err
	}
	workloads, skipped := cl.Workloads(ctx, cfg, namespace)
	r := cfg.ExplainSource(kind, namespace, target.Name, state, workloads, key)
	if obj != nil && !cfg.SourceSelector.Matches(labels.Set(obj.GetLabels())) {
		why := fmt.Sprintf("its labels do not match the config's sourceSelector %q: it is not in the controller's caches, and its changes restart nothing",
			cfg.SourceSelector.String())
		r.NotWatched = strings.TrimPrefix(r.NotWatched+"; "+why, "; ")
		r.Watched = false
	}
	r.Skipped = skipped
	if len(skipped) > 0 {
		return r, ExitFailed, nil
	}
	return r, ExitOK, nil
}
