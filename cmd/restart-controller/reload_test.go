package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/objmeta"
	"github.com/restart-controller/restart-controller/internal/watch"
)

func TestSameProcessSettings(t *testing.T) {
	base, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		change  func(*config.Settings)
		wantErr string
	}{
		{"grace period may change", func(s *config.Settings) { s.GracePeriod = time.Minute }, ""},
		{"workers may change", func(s *config.Settings) { s.Workers = 3 }, ""},
		{"metrics address needs a restart", func(s *config.Settings) { s.MetricsAddress = "127.0.0.1:1" }, "metricsAddress"},
		{"leader election needs a restart", func(s *config.Settings) { s.LeaseName = "other" }, "leaderElection"},
		{"log format needs a restart", func(s *config.Settings) { s.LogFormat = "json" }, "logFormat"},
		{"Reloader's metric names need a restart", func(s *config.Settings) { s.ReloaderMetrics = true }, "metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := base.Settings
			tc.change(&next)
			err := sameProcessSettings(base.Settings, next)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
}

func TestPollFileSendsOnlyChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	// Written by renaming a complete file into place, as a mounted ConfigMap
	// changes: a reader never sees it half written.
	write := func(s string) {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := pollFile(ctx, path, []byte("a"), 5*time.Millisecond, hclog.NewNullLogger())
	write("b")
	if got := receive(t, changes); got != "b" {
		t.Fatalf("got %q, want b", got)
	}
	write("b") // rewritten, same bytes: no change
	write("c")
	if got := receive(t, changes); got != "c" {
		t.Fatalf("got %q, want c (b was not a change)", got)
	}
}

func receive(t *testing.T, c <-chan []byte) string {
	t.Helper()
	select {
	case b := <-c:
		return string(b)
	case <-time.After(30 * time.Second):
		t.Fatal("no change sent")
		return ""
	}
}

// TestCountsAreReusedForAWhile: the gauges of cached objects count every
// key of every cache, so a scrape reuses a recent count instead of listing
// them again; a new catalog (a reload) is counted afresh.
func TestCountsAreReusedForAWhile(t *testing.T) {
	store := func(keys ...string) cache.Indexer {
		s := cache.NewIndexer(func(obj interface{}) (string, error) {
			src := obj.(*catalog.SourceState)
			return src.Namespace + "/" + src.Name, nil
		}, cache.Indexers{})
		for _, k := range keys {
			if err := s.Add(&catalog.SourceState{Meta: objmeta.Meta{Namespace: "ns", Name: k}}); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	first := catalog.New()
	configMaps := store("a")
	first.AddSourceStore("configmap", configMaps)
	l := &live{}
	l.watcher.Store(watch.New(watch.Deps{Catalog: first}))
	if s, _ := l.counts(); s != 1 {
		t.Fatalf("counts() = %d sources; want 1", s)
	}
	if err := configMaps.Add(&catalog.SourceState{Meta: objmeta.Meta{Namespace: "ns", Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	if s, _ := l.counts(); s != 1 {
		t.Errorf("counts() right after = %d sources; want the count of a moment ago, 1", s)
	}
	second := catalog.New()
	second.AddSourceStore("configmap", store("a", "b", "c"))
	l.watcher.Store(watch.New(watch.Deps{Catalog: second}))
	if s, _ := l.counts(); s != 3 {
		t.Errorf("counts() of a new catalog = %d sources; want 3", s)
	}
}
