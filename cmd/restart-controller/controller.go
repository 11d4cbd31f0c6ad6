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
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/events"
	"github.com/restart-controller/restart-controller/internal/keyread"
	"github.com/restart-controller/restart-controller/internal/kube"
	"github.com/restart-controller/restart-controller/internal/metrics"
	"github.com/restart-controller/restart-controller/internal/pacing"
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
//
// Everything is built once, in order: the kinds are looked up first (a
// configuration error the cluster reveals exits 2 before anything is
// written), then the checksum key is loaded (created on first start), and
// only then the caches, the decision's rules, the controller and the
// watcher that feeds it, each given everything it uses.
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
	if cfg.Settings.DryRun {
		m.DryRun.Set(1)
		log.Warn("dry run: decisions are logged and reported as Events, nothing is patched")
	}
	kinds, err := watch.Resolve(cfg, cl.kube)
	if err != nil {
		return fmt.Errorf("looking up the configured kinds: %w", err) // a *watch.ConfigError is a configuration error: exit 2
	}
	sums, err := loadChecksumKey(ctx, cfg.Settings, cl, log)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	// One deferred step, in this order: whatever ends this function (an error
	// during start-up included) must stop the goroutines before waiting on them.
	defer func() {
		cancel(nil)
		wg.Wait()
	}()
	hostname, err := os.Hostname() // the reporting instance, as client-go's tools/events names it
	if err != nil {
		hostname = cfg.Settings.LeaderIdentity
	}
	eventLog := events.New(cl.kube, kube.Scheme, "restart-controller", "restart-controller-"+hostname, events.QueueSize,
		m.EventsDropped, log.Named("events"))
	wg.Add(1)
	go func() {
		defer wg.Done()
		eventLog.Run(ctx)
	}()
	recorder := restart.NewLimitedRecorder(eventLog, eventsPerSecond, eventBurst, m.EventsDropped)
	notifier, stopNotifier := startNotifier(ctx, cfg, cl.kube, m, log.Named("notify"))
	defer stopNotifier() // after the controller has stopped (defers run last first)
	lease := newLeaseLock(cfg.Settings, cl.kube)

	cat := catalog.New(catalog.BoundSources(sums))
	rules := decision.NewRules(cfg, sums)
	ctrl, err := restart.New(restart.Deps{
		Config: cfg, Rules: rules, Catalog: cat,
		Pacing: pacing.New(pacing.Deps{Catalog: cat, Rules: rules, Started: time.Now()}),
		Client: cl.dynamic, Patch: restart.MetadataPatch(cl.meta), Fresh: lease.fresh,
		Exists: restart.APIExists(cl.meta, cfg.Sources, cfg.SourceSelector.String()),
		Keys:   keyread.New(cfg.Sources, restart.APIFetch(cl.kube.ProtobufCore(), cl.dynamic), keyread.Capacity),
		Events: recorder, Notify: notifier, Metrics: m, Log: log.Named("restart"), Clock: time.Now,
	})
	if err != nil {
		return err
	}
	watcher := watch.New(watch.Deps{
		Config: cfg, Rest: cl.rest, Dynamic: cl.dynamic, Meta: cl.meta, Discovery: cl.kube, Catalog: cat, Handler: ctrl,
		Metrics: m, Log: log.Named("watch"), Access: accessReviewer(cl.kube),
		Health:            healthEvents(recorder, selfReference(cfg.Settings, lookupEnv), log.Named("watch")),
		DiscoveryInterval: discoveryInterval,
	})
	live.set(cat, watcher)

	if err := watcher.Start(ctx, kinds); err != nil {
		return fmt.Errorf("starting watches: %w", err)
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
	} else if err := runAsLeader(ctx, cfg.Settings, lease, log.Named("leader"), m, func(runCtx, writeCtx context.Context) {
		ctrl.Run(runCtx, writeCtx, cfg.Settings.Workers, drainTimeout)
	}); err != nil {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// loadChecksumKey loads the checksum key from its Secret, creating it on
// first start. It comes before any informer: a source with too many keys
// to cache a digest each keeps its whole-data checksums, keyed.
func loadChecksumKey(ctx context.Context, s config.Settings, cl *clients, log hclog.Logger) (checksum.Hasher, error) {
	key, err := checksumkey.Ensure(ctx, cl.kube.Secrets(s.LeaseNamespace), s.LeaseNamespace, s.ChecksumKeySecret)
	if err != nil {
		return checksum.Hasher{}, fmt.Errorf("loading the checksum key: %w", err)
	}
	sums, err := checksum.NewHasher(key)
	if err != nil {
		return checksum.Hasher{}, fmt.Errorf("loading the checksum key: %w", err)
	}
	log.Info("checksum key loaded", "secret", s.LeaseNamespace+"/"+s.ChecksumKeySecret, "key_id", sums.KeyID())
	return sums, nil
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
