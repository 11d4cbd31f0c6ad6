package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/checksumkey"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/keyread"
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
func runController(ctx context.Context, cfg *config.Config, log hclog.Logger, m *metrics.Metrics, live *live,
	lookupEnv func(string) (string, bool), onSynced func()) error {
	started := time.Now()
	cl, err := newClients(cfg.Settings)
	if err != nil {
		return err
	}
	resetRunMetrics(cfg.Settings, m, log)
	kinds, err := watch.Resolve(cfg, cl.discovery)
	if err != nil {
		return fmt.Errorf("looking up the configured kinds: %w", err) // a *watch.ConfigError is a configuration error: exit 2
	}
	sums, err := loadChecksumKey(ctx, cfg.Settings, cl, log)
	if err != nil {
		return err
	}
	// The restart writes, which the Events' writes yield to.
	restarts := &activity{}
	eventLog, stopEvents, err := startEvents(ctx, cl.kube, restarts, defaultEventsPacing, log.Named("events"))
	if err != nil {
		return fmt.Errorf("starting to record Events: %w", err)
	}
	// Deferred first, so it runs last: once the controller, the watches
	// and the notifier have stopped, nothing records any more.
	defer stopEvents()
	recorder := restart.NewLimitedRecorder(eventLog, eventsPerSecond, eventBurst, m.EventsDropped)
	notifier, stopNotifier := startNotifier(ctx, cfg, cl.kube.CoreV1(), m, log.Named("notify"))
	defer stopNotifier() // after the controller has stopped: watchAndRun returns only then
	lease := newLeaseLock(cfg.Settings, cl.leases)
	ctrl, watcher, err := assemble(cfg, cl, sums, recorder, notifier, restarts, lease, m, log, lookupEnv)
	if err != nil {
		return err
	}
	live.watcher.Store(watcher)
	synced := func() {
		onSynced()
		sources, workloads := watcher.Catalog.Counts()
		m.Ready.Set(1)
		log.Info("caches synced", "sources", sources, "workloads", workloads, "after", time.Since(started).Round(time.Millisecond),
			"degraded", len(watcher.Degraded()))
	}
	return watchAndRun(ctx, cfg.Settings, kinds, watcher, ctrl, lease, synced, m, log)
}

// resetRunMetrics sets the gauges a run owns to what they are before its
// caches sync.
func resetRunMetrics(s config.Settings, m *metrics.Metrics, log hclog.Logger) {
	m.Ready.Set(0)
	m.Leader.Set(0)
	m.WatchedWorkloads.Reset() // a reload may have removed kinds
	m.DryRun.Set(0)
	if s.DryRun {
		m.DryRun.Set(1)
		log.Warn("dry run: decisions are logged and reported as Events, nothing is patched")
	}
}

// watchAndRun starts the watches and the sweep, calls synced once the caches
// have synced, then runs the controller (as the leader, with leader
// election) until ctx ends. The watches and the sweep have stopped when it
// returns.
func watchAndRun(ctx context.Context, s config.Settings, kinds *watch.Kinds, watcher *watch.Watcher, ctrl *restart.Controller,
	lease *renewClock, synced func(), m *metrics.Metrics, log hclog.Logger) error {
	ctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	// One deferred step, in this order: whatever ends this function (an error
	// during start-up included) must stop the goroutines before waiting on them.
	defer func() {
		cancel(nil)
		wg.Wait()
	}()
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
	synced()

	if !s.LeaderElect {
		m.Leader.Set(1)
		ctrl.Run(ctx, context.WithoutCancel(ctx), s.Workers, drainTimeout)
	} else if err := runAsLeader(ctx, s, lease, log.Named("leader"), m, func(runCtx, writeCtx context.Context) {
		ctrl.Run(runCtx, writeCtx, s.Workers, drainTimeout)
	}); err != nil {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// assemble builds, in order, what the checksum key makes possible: the
// caches (a source with too many keys to cache a digest each keeps its
// whole-data checksums, keyed), the decision's rules, the controller with
// everything it uses, and the watcher that feeds it.
func assemble(cfg *config.Config, cl *clients, sums checksum.Hasher, recorder events.EventRecorder, notifier restart.Notifier,
	restarts *activity, lease *renewClock, m *metrics.Metrics, log hclog.Logger, lookupEnv func(string) (string, bool)) (*restart.Controller, *watch.Watcher, error) {
	cat := catalog.New(catalog.BoundSources(sums))
	rules := decision.NewRules(cfg, sums)
	ctrl, err := restart.New(restart.Deps{
		Config: cfg, Rules: rules, Catalog: cat,
		Pacing: pacing.New(pacing.Deps{Catalog: cat, Rules: rules, Started: time.Now()}),
		Client: cl.dynamic, Fresh: lease.fresh,
		Patch:  trackedPatch(cl.patch, restarts),
		Exists: restart.APIExists(cl.meta, cfg.Sources, cfg.SourceSelector.String()),
		Keys:   keyread.New(cfg.Sources, restart.APIFetch(cl.protobufCore, cl.dynamic), keyread.Capacity),
		Events: recorder, Notify: notifier, Metrics: m, Log: log.Named("restart"), Clock: time.Now,
	})
	if err != nil {
		return nil, nil, err
	}
	watcher := watch.New(watch.Deps{
		Config: cfg, Rest: cl.rest, Dynamic: cl.dynamic, Meta: cl.meta, Discovery: cl.discovery, Catalog: cat, Handler: ctrl,
		Metrics: m, Log: log.Named("watch"), Access: accessReviewer(cl.kube.AuthorizationV1().SelfSubjectAccessReviews()),
		Health:            healthEvents(recorder, selfReference(cfg.Settings, lookupEnv), log.Named("watch")),
		DiscoveryInterval: discoveryInterval,
	})
	return ctrl, watcher, nil
}

// loadChecksumKey loads the checksum key from its Secret, creating it on
// first start: only once the configuration has been checked against the
// cluster, so that a wrong one creates nothing.
func loadChecksumKey(ctx context.Context, s config.Settings, cl *clients, log hclog.Logger) (checksum.Hasher, error) {
	key, err := checksumkey.Ensure(ctx, cl.kube.CoreV1().Secrets(s.LeaseNamespace), s.LeaseNamespace, s.ChecksumKeySecret)
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
	// kube is client-go's typed clientset: Secrets, Events and access
	// reviews.
	kube kubernetes.Interface
	// leases is the leader election's client, made on its own as
	// controller-runtime makes it: with a rate limiter of its own, a
	// renewal never waits behind the clientset's other calls (a late
	// renewal ends the process).
	leases coordinationv1client.LeasesGetter
	// discovery is client-go's discovery client made on its own, not the
	// clientset's: alone it bounds each request (32 s), and the watches
	// look for missing CRDs with it every discoveryInterval.
	discovery discovery.DiscoveryInterface
	// protobufCore reads core/v1 in protobuf: the keyed reads of large
	// sources (restart.APIFetch), as the source informers do.
	protobufCore rest.Interface
	meta         metadata.Interface
	// patch sends every merge patch to a workload.
	patch restart.PatchFunc
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
	if c.kube, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("creating the typed clientset: %w", err)
	}
	if c.leases, err = coordinationv1client.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("creating the leader election client: %w", err)
	}
	if c.discovery, err = discovery.NewDiscoveryClientForConfig(rc); err != nil {
		return nil, fmt.Errorf("creating the discovery client: %w", err)
	}
	if c.protobufCore, err = rest.RESTClientFor(catalog.CoreProtobuf(rc)); err != nil {
		return nil, fmt.Errorf("creating the protobuf core/v1 client: %w", err)
	}
	if c.meta, err = metadata.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("creating metadata client: %w", err)
	}
	if c.patch, err = restart.APIPatch(rc); err != nil {
		return nil, err
	}
	return c, nil
}
