package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/restart-controller/restart-controller/internal/notify"
)

// sinkServer is a local HTTP server standing for a notification sink; it
// keeps every body it is sent.
type sinkServer struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   []string
	inFlight int
}

// newSinkServer answers with code; code 0 hangs until the test ends.
func newSinkServer(t *testing.T, code int) *sinkServer {
	s := &sinkServer{}
	release := make(chan struct{})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(body))
		s.inFlight++
		s.mu.Unlock()
		defer func() { s.mu.Lock(); s.inFlight--; s.mu.Unlock() }()
		if code == 0 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(func() { close(release); s.Close() })
	return s
}

func (s *sinkServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// sinkCount reads one sink's notification counter from the controller.
func sinkCount(p *controllerProcess, metric, sink string) (float64, error) {
	families, err := p.scrape()
	if err != nil {
		return 0, err
	}
	v, found, err := metricSum(families, "restart_controller_notifications_"+metric+"_total", `sink="`+sink+`"`)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%s{sink=%q} not exposed", metric, sink)
	}
	return v, nil
}

// restartsOf decodes the webhook bodies and returns the restart
// notifications about the named workload.
func restartsOf(t *testing.T, bodies []string, name string) []notify.Webhook {
	t.Helper()
	var out []notify.Webhook
	for _, b := range bodies {
		var w notify.Webhook
		if err := json.Unmarshal([]byte(b), &w); err != nil {
			t.Fatalf("webhook body is not JSON: %v\n%s", err, b)
		}
		if w.Kind == notify.Restart && w.Workload.Name == name {
			out = append(out, w)
		}
	}
	return out
}

// A change restarts a workload, and the webhook sink is sent exactly one
// notification naming the workload, the Secret and the key that changed,
// and no value of it. A sink that hangs and one that answers 500 delay no
// restart: another workload is restarted while the hanging sink's sender is
// still stuck on the first notification; their failures are counted, and
// no sink URL is logged.
func TestNotifications(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	keys := keysFor("notify")
	webhook, hanging, failing := newSinkServer(t, 200), newSinkServer(t, 0), newSinkServer(t, 500)
	const urlToken = "hooks-T0KEN-e2e"
	createSecret(t, ns, "notify-urls", map[string]string{
		"webhook": webhook.URL + "/" + urlToken, "hang": hanging.URL + "/" + urlToken, "fail": failing.URL + "/" + urlToken,
	})
	oldValue, newValue := "s3cr3t-old-"+ns, "s3cr3t-new-"+ns
	createSecret(t, ns, "creds", map[string]string{"password": oldValue, "user": "app"})
	createConfigMap(t, ns, "other", map[string]string{"level": "info"})
	createKeyedDeployment(t, ns, "reader", podSpec(t,
		`containers: [{name: app, image: example/app:1, env: [{name: P, valueFrom: {secretKeyRef: {name: creds, key: password}}}]}]`), keys)
	createKeyedDeployment(t, ns, "second", podSpec(t,
		`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: other}}]}]`), keys)

	configFile := isolatedConfig(t, "notify-"+ns, ns, keys, func(cfg map[string]interface{}) {
		// The controller's namespace, where it reads the sinks' Secret.
		cfg["leaderElection"] = map[string]interface{}{"namespace": ns}
		sink := func(name, typ, key string) map[string]interface{} {
			return map[string]interface{}{"name": name, "type": typ, "urlSecret": map[string]interface{}{"name": "notify-urls", "key": key}}
		}
		cfg["notifications"] = map[string]interface{}{"sinks": []interface{}{
			sink("audit", "webhook", "webhook"), sink("stuck", "slack", "hang"), sink("broken", "googleChat", "fail"),
		}}
	})
	// One worker: a Notify that waited for a sink would hold every restart
	// after it, not only the one it is about.
	p, err := env.startController(ctxFor(t), "notify-"+ns, configFile,
		"--restart-grace-period", graceForTests, "--restart-check-period", "100", "--workers", "1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	logTailOnFailure(t, "notify", &p)
	for _, name := range []string{"reader", "second"} {
		waitFor(t, name+" recorded", func() (bool, error) {
			s, err := readKeyed(t, ns, name, keys)
			return err == nil && s.applied != nil, err
		})
	}

	setSecretKey(t, ns, "creds", "password", newValue)
	waitKeyedRestarts(t, ns, "reader", keys, 1)
	waitFor(t, "the webhook sink notified of reader's restart", func() (bool, error) {
		return len(restartsOf(t, webhook.received(), "reader")) > 0, nil
	})
	waitFor(t, "the hanging sink holding a request", func() (bool, error) {
		hanging.mu.Lock()
		defer hanging.mu.Unlock()
		return hanging.inFlight > 0, nil
	})

	// The hanging sink's sender is stuck on reader's notification (five
	// attempts of 10 s each, with backoff); second restarts meanwhile.
	setConfigMapKey(t, ns, "other", "level", "debug")
	waitKeyedRestarts(t, ns, "second", keys, 1)
	sent, err := sinkCount(p, "sent", "stuck")
	if err != nil {
		t.Fatal(err)
	}
	failed, err := sinkCount(p, "failed", "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if sent != 0 || failed != 0 {
		t.Fatalf("second was restarted only after the hanging sink was done with its first notification (sent %v, failed %v): a sink delayed a restart", sent, failed)
	}
	waitFor(t, "the webhook sink notified of second's restart", func() (bool, error) {
		return len(restartsOf(t, webhook.received(), "second")) > 0, nil
	})
	for _, sink := range []string{"broken", "stuck"} {
		waitFor(t, "the failures of sink "+sink+" counted", func() (bool, error) {
			n, err := sinkCount(p, "failed", sink)
			return n >= 1, err
		})
	}
	if n, err := sinkCount(p, "sent", "audit"); err != nil || n != 2 {
		t.Errorf("audit sink: sent %v (%v), want 2", n, err)
	}

	got := restartsOf(t, webhook.received(), "reader")
	if len(got) != 1 {
		t.Fatalf("%d restart notifications of reader, want exactly 1: %+v", len(got), got)
	}
	w := got[0]
	wantSources := []notify.Source{{ID: "secret/" + ns + "/creds", Keys: []string{"password"}, KeysAre: notify.KeysChanged}}
	if w.Version != notify.WebhookVersion || w.Workload != (notify.Workload{Group: "apps", Resource: "deployments", Namespace: ns, Name: "reader"}) ||
		w.Outcome != "restarted" || w.Controller == "" || fmt.Sprint(w.Sources) != fmt.Sprint(wantSources) {
		t.Errorf("reader's notification %+v, want sources %+v", w, wantSources)
	}
	if n := len(webhook.received()); n != 2 {
		t.Errorf("the webhook sink got %d notifications, want 2 (one restart each)", n)
	}
	for _, s := range []*sinkServer{webhook, hanging, failing} {
		for _, body := range s.received() {
			if strings.Contains(body, oldValue) || strings.Contains(body, newValue) {
				t.Errorf("a notification carries a Secret value: %s", body)
			}
		}
	}
	if log, err := os.ReadFile(p.logPath); err != nil || strings.Contains(string(log), urlToken) {
		t.Errorf("the controller's log shows a sink URL (read error %v)", err)
	}
}
