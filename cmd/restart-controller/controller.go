package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/checksumkey"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/events"
	"github.com/restart-controller/restart-controller/internal/keyread"
	"github.com/restart-controller/restart-controller/internal/kube"
	"github.com/restart-controller/restart-controller/internal/metrics"
	"github.com/restart-controller/restart-controller/internal/restart"
	"github.com/restart-controller/restart-controller/internal/watch"
)

const (
	// discoveryInterval is how often workload kinds whose CRD is missing are looked for.
	discoveryInterval = 10 * time.Second
	// drainTimeout bounds how long shutdown waits for reconciles under way.
	drainTimeout = 10 * time.Second
	// Events on workloads: a burst covers an ordinary change of a shared
	// source at once; a fleet-wide change is reported at a pace the API
	// server absorbs, the rest dropped and counted (restarts are logged).
	eventsPerSecond = 20
	eventBurst      = 200
)

func restConfig(s config.Settings) (*rest.Config, error) {
	var (
		rc  *rest.Config
		err error
	)
	if s.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading Kubernetes client configuration: %w", err)
	}
	rc.QPS = s.KubeAPIQPS
	rc.Burst = s.KubeAPIBurst
	rc.UserAgent = "restart-controller/" + version
	return rc, nil
}

// runController runs the controller with one config until ctx ends; onSynced
// is called once the caches have synced. The metrics and the server outlive
// it (a reload runs it again with a new config), so it publishes what they
// read through live. lookupEnv reads POD_NAME, POD_NAMESPACE and POD_UID,
// which name the Pod that Events about degraded kinds are recorded on.
func runController(ctx context.Context, cfg *config.Config, log hclog.Logger, m *metrics.Metrics, live *live,
	lookupEnv func(string) (string, bool), onSynced func()) error {
	started := time.Now()
	cl, err := newClients(cfg.Settings)
	if err != nil {
		return err
	}
	m.Ready.Set(0)
	m.Leader.Set(0)
	m.WatchedWorkloads.Reset() // a reload may have removed kinds
	m.DryRun.Set(0)
	hostname, _ := os.Hostname() // the reporting instance, as client-go's tools/events names it
	eventLog := events.New(cl.kube, kube.Scheme, "restart-controller", "restart-controller-"+hostname, events.QueueSize,
		m.EventsDropped, log.Named("events"))
	recorder := restart.NewLimitedRecorder(eventLog, eventsPerSecond, eventBurst, m.EventsDropped)
	if cfg.Settings.DryRun {
		m.DryRun.Set(1)
		log.Warn("dry run: decisions are logged and reported as Events, nothing is patched")
	}
	cat := catalog.New()
	ctrl, watcher, err := assemble(cfg, cl, cat, m, recorder, log, lookupEnv)
	if err != nil {
		return err
	}
	live.set(cat, watcher)
	defer startNotifier(ctx, cfg, cl.kube, m, log.Named("notify"), ctrl)() // stops after the controller (defers run last first)

	ctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	// One deferred step, in this order: whatever ends this function (an error
	// during start-up included) must stop the goroutines before waiting on them.
	defer func() {
		cancel(nil)
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		eventLog.Run(ctx)
	}()
	if err := watcher.Start(ctx); err != nil {
		return fmt.Errorf("starting watches: %w", err) // a *watch.ConfigError is a configuration error: exit 2
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		watcher.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		ctrl.Sweep(ctx)
	}()
	if err := watcher.WaitForSync(ctx); err != nil {
		return err
	}
	onSynced()
	sources, workloads := cat.Counts()
	m.Ready.Set(1)
	log.Info("caches synced", "sources", sources, "workloads", workloads, "after", time.Since(started).Round(time.Millisecond),
		"degraded", len(watcher.Degraded()))

	if !cfg.Settings.LeaderElect {
		m.Leader.Set(1)
		ctrl.Run(ctx, context.WithoutCancel(ctx), cfg.Settings.Workers, drainTimeout)
	} else if err := runAsLeader(ctx, cfg.Settings, cl.kube, log.Named("leader"), m, func(runCtx, writeCtx context.Context, fresh func() bool) {
		ctrl.WriteOnlyWhile(fresh)
		ctrl.Run(runCtx, writeCtx, cfg.Settings.Workers, drainTimeout)
	}); err != nil {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// clients are the API clients of one run of the controller.
type clients struct {
	rest    *rest.Config
	dynamic dynamic.Interface
	// kube makes the typed calls (Secrets, Leases, Events, access reviews,
	// discovery) without client-go's typed clients, which link every API
	// group (internal/kube).
	kube *kube.Client
	meta metadata.Interface
}

func newClients(s config.Settings) (*clients, error) {
	rc, err := restConfig(s)
	if err != nil {
		return nil, err
	}
	c := &clients{rest: rc}
	if c.dynamic, err = dynamic.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("creating dynamic client: %w", err)
	}
	if c.kube, err = kube.New(rc); err != nil {
		return nil, fmt.Errorf("creating API clients: %w", err)
	}
	if c.meta, err = metadata.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("creating metadata client: %w", err)
	}
	return c, nil
}

// assemble builds the controller and the watcher that feeds it. The key
// Secret may be created only once the configuration has been checked
// against the cluster, and must be loaded before any informer starts: a
// source with too many keys to cache a digest each keeps its whole-data
// checksums, keyed.
func assemble(cfg *config.Config, cl *clients, cat *catalog.Catalog, m *metrics.Metrics, recorder restart.EventRecorder,
	log hclog.Logger, lookupEnv func(string) (string, bool)) (*restart.Controller, *watch.Watcher, error) {
	ctrl, err := restart.New(cfg, cat, cl.dynamic, restart.APIExists(cl.meta, cfg.Sources, cfg.SourceSelector.String()), m, recorder, log.Named("restart"))
	if err != nil {
		return nil, nil, err
	}
	ctrl.PatchWith(cl.meta)
	ctrl.ReadKeysWith(keyread.New(cfg.Sources, restart.APIFetch(cl.kube.ProtobufCore(), cl.dynamic), keyread.Capacity))
	watcher := watch.New(cfg, cl.rest, cl.dynamic, cl.kube, cat, ctrl, m, log.Named("watch"), discoveryInterval)
	watcher.ReadNamespacesWith(cl.meta)
	watcher.ReportHealth(accessReviewer(cl.kube), healthEvents(recorder, selfReference(cfg.Settings, lookupEnv), log.Named("watch")))
	watcher.BeforeWatching(func(ctx context.Context) error {
		key, err := checksumkey.Ensure(ctx, cl.kube.Secrets(cfg.Settings.LeaseNamespace), cfg.Settings.LeaseNamespace, cfg.Settings.ChecksumKeySecret)
		if err != nil {
			return fmt.Errorf("loading the checksum key: %w", err)
		}
		sums, err := checksum.NewHasher(key)
		if err != nil {
			return fmt.Errorf("loading the checksum key: %w", err)
		}
		cat.UseChecksums(sums)
		ctrl.UseChecksums(sums)
		log.Info("checksum key loaded", "secret", cfg.Settings.LeaseNamespace+"/"+cfg.Settings.ChecksumKeySecret, "key_id", sums.KeyID())
		return nil
	})
	return ctrl, watcher, nil
}
