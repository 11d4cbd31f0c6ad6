package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/metrics"
	"github.com/restart-controller/restart-controller/internal/server"
	"github.com/restart-controller/restart-controller/internal/watch"
)

// configPollInterval is how often the config file is read for changes. A
// mounted ConfigMap changes by a symlink swap that file notifications report
// unreliably; reading a small file every few seconds always sees it.
const configPollInterval = 2 * time.Second

// countsMaxAge is how old the counts of cached objects that the metrics
// report may be. Counting lists every key of every cache (client-go's
// stores have no length): at 50,000 workloads and 150,000 sources that
// is 200,000 keys and 3 MB of garbage, which a scrape asked for twice
// (one gauge each) and the bench every 200 ms.
const countsMaxAge = 5 * time.Second

// live is what the long-lived metrics and server read of the controller run
// in force, which a reload replaces.
type live struct {
	// watcher is the running watcher; its Catalog is the running catalog.
	watcher atomic.Pointer[watch.Watcher]

	mu      sync.Mutex
	counted struct {
		catalog            *catalog.Catalog
		at                 time.Time
		sources, workloads int
	}
}

// counts returns the running catalog's counts, at most countsMaxAge old.
func (l *live) counts() (sources, workloads int) {
	w := l.watcher.Load()
	if w == nil {
		return 0, 0
	}
	c := w.Catalog
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := &l.counted; n.catalog != c || time.Since(n.at) > countsMaxAge {
		n.sources, n.workloads = c.Counts()
		n.catalog, n.at = c, time.Now()
	}
	return l.counted.sources, l.counted.workloads
}

// readiness is what /readyz answers: the running watcher's, which names
// degraded kinds (a replica with some is still ready: every other kind
// works and it may lead).
func (l *live) readiness() (string, error) {
	if w := l.watcher.Load(); w != nil {
		return w.Readiness()
	}
	return "", errors.New("starting")
}

// supervise serves metrics and health, and runs the controller with cfg until
// ctx ends. When the config file changes, load builds the new config (the
// same flags and environment layered over the new file): a valid one
// replaces the running controller, which drains and stops first, so nothing
// is decided twice; an invalid one is logged with its path-named errors and
// the running one carries on.
//
// A reload restarts the watches, not the process: the new run compares every
// workload with current data at start, as after any restart, so the reload
// itself restarts no workload.
func supervise(ctx context.Context, cfg *config.Config, load func() (*config.Config, error), log hclog.Logger,
	lookupEnv func(string) (string, bool), onSynced func()) error {
	l := &live{}
	m := metrics.New(l.counts)
	if cfg.Settings.ReloaderMetrics {
		m.ExportReloaderNames(cfg.Settings.ReloaderMetricsByNamespace)
	}
	srv, err := server.Listen(cfg.Settings.MetricsAddress, m.Registry, l.readiness, cfg.Settings.EnableProfiling)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Run(ctx); err != nil {
			cancel(err)
		}
	}()
	defer func() { cancel(nil); <-served }()

	content, _ := os.ReadFile(cfg.Settings.ConfigFile) // read moments ago by load
	m.SetConfigLoaded(fileHash(content), true, time.Now())
	changes := pollFile(ctx, cfg.Settings.ConfigFile, content, configPollInterval, log)
	for {
		runCtx, stopRun := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func(cfg *config.Config) { done <- runController(runCtx, cfg, log, m, l, lookupEnv, onSynced) }(cfg)
		next, hash, err := awaitReload(ctx, cfg, changes, done, load, log, m)
		stopRun()
		if next == nil {
			if cause := context.Cause(ctx); err == nil && cause != nil && !errors.Is(cause, context.Canceled) {
				return cause // the server failed
			}
			return err
		}
		if err := <-done; err != nil {
			return err
		}
		log.Info("config reloaded; watching with it", "hash", hash)
		cfg = next
	}
}

// awaitReload waits for the run to end (returning its result and no config)
// or for a valid new config (returned with the hash of the content it was
// loaded on; the caller stops the run).
func awaitReload(ctx context.Context, cfg *config.Config, changes <-chan []byte, done <-chan error,
	load func() (*config.Config, error), log hclog.Logger, m *metrics.Metrics) (*config.Config, string, error) {
	for {
		select {
		case err := <-done:
			return nil, "", err
		case content := <-changes:
			next, err := load()
			if err == nil {
				err = sameProcessSettings(cfg.Settings, next.Settings)
			}
			if err != nil {
				log.Error("config file changed but cannot be used; the running config stays in force", "error", err)
				m.SetConfigLoaded("", false, time.Now())
				continue
			}
			hash := fileHash(content)
			m.SetConfigLoaded(hash, true, time.Now())
			return next, hash, nil
		case <-ctx.Done():
			return nil, "", <-done
		}
	}
}

// sameProcessSettings refuses a reload that changes what only a new process
// can change: the address served, the logger, leader election, the cluster.
func sameProcessSettings(old, next config.Settings) error {
	for _, s := range []struct {
		key       string
		old, next interface{}
	}{
		{"metricsAddress", old.MetricsAddress, next.MetricsAddress},
		{"enableProfiling", old.EnableProfiling, next.EnableProfiling},
		{"logFormat", old.LogFormat, next.LogFormat},
		{"verbose", old.Verbose, next.Verbose},
		{"metrics", []bool{old.ReloaderMetrics, old.ReloaderMetricsByNamespace}, []bool{next.ReloaderMetrics, next.ReloaderMetricsByNamespace}},
		{"leaderElection", []interface{}{old.LeaderElect, old.LeaseNamespace, old.LeaseName, old.LeaseDuration, old.LeaseRenewDeadline, old.LeaseRetryPeriod},
			[]interface{}{next.LeaderElect, next.LeaseNamespace, next.LeaseName, next.LeaseDuration, next.LeaseRenewDeadline, next.LeaseRetryPeriod}},
	} {
		if !reflect.DeepEqual(s.old, s.next) {
			return fmt.Errorf("%s: changing it needs a restart of the process", s.key)
		}
	}
	return nil
}

// pollFile sends the file's content each time it differs from the last
// content sent, once two reads in a row agree: a file being written in place
// reads empty or cut short for a moment, and an empty file is a valid config
// (every default), so a change is acted on only when it has settled. A file
// that cannot be read is logged once per failure streak and sent nothing.
// It stops when ctx ends.
func pollFile(ctx context.Context, path string, last []byte, every time.Duration, log hclog.Logger) <-chan []byte {
	out := make(chan []byte)
	go func() {
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		var (
			failing bool
			seen    []byte // the content of the previous read, when it was a change
		)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			content, err := os.ReadFile(path)
			if err != nil {
				if !failing {
					log.Warn("cannot read the config file; the running config stays in force", "error", err)
				}
				failing, seen = true, nil
				continue
			}
			failing = false
			switch {
			case bytes.Equal(content, last):
				seen = nil
				continue
			case seen == nil || !bytes.Equal(content, seen):
				seen = content // a change: send it if the next read agrees
				continue
			}
			last, seen = content, nil
			select {
			case out <- content:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func fileHash(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:6])
}
