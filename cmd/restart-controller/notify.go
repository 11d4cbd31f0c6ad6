package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/metrics"
	"github.com/restart-controller/restart-controller/internal/notify"
)

// startNotifier runs the senders of the configured notification sinks (none
// configured: a notifier that sends nothing). The returned stop, deferred
// by the run before it stops the controller's own goroutines, runs once the
// controller has stopped deciding: the senders then deliver what is queued
// for a bounded time (notify.Options.Drain) and end.
func startNotifier(ctx context.Context, cfg *config.Config, core corev1client.SecretsGetter, m *metrics.Metrics,
	log hclog.Logger) (n *notify.Notifier, stop func()) {
	ns := cfg.Settings.LeaseNamespace
	n = notify.New(cfg.Sinks, notify.Options{
		Instance: cfg.Settings.LeaderIdentity,
		// One get by name: the Role grants nothing more (access.Needs).
		ReadURL: func(ctx context.Context, secret, key string) (string, error) {
			s, err := core.Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
			if err != nil {
				return "", err // the sender says what it was reading
			}
			v, ok := s.Data[key]
			if !ok {
				return "", fmt.Errorf("secret %s/%s has no key %s", ns, secret, key)
			}
			return strings.TrimSpace(string(v)), nil
		},
		Counters: m.Notifications,
		Log:      log,
	})
	if len(cfg.Sinks) == 0 {
		return n, func() {}
	}
	// Not cancelled with ctx: the controller's last decisions, made while
	// it drains after ctx ended, are still delivered.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Run(runCtx)
	}()
	log.Info("notification sinks", "sinks", len(cfg.Sinks))
	return n, func() {
		cancel()
		<-done
	}
}
