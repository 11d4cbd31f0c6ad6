package restart

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/fake"

	"github.com/restart-controller/restart-controller/internal/notify"
)

// notes records notifications, as a notify.Notifier would queue them.
type notes struct {
	mu   sync.Mutex
	list []notify.Message
}

func (n *notes) Notify(m notify.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.list = append(n.list, m)
}

func (n *notes) of(kind notify.Kind) []notify.Message {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []notify.Message
	for _, m := range n.list {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// A restart notifies once, naming the workload, the source and the keys
// that changed among those it reads: what the Restarted Event says.
func TestRestartNotifies(t *testing.T) {
	w := fromYAML(t, webDeployment)
	h := newHarness(t, nil, nil, map[string]string{"a": "2", "b": "1"})
	settled := settle(h, w, map[string]string{"a": "1", "b": "1"})
	h.client = fake.NewSimpleDynamicClient(runtime.NewScheme(), settled.DeepCopy())
	h.c.Client, h.c.Patch = h.client, dynamicPatch(h.client)
	h.cache(settled)
	n := &notes{}
	h.c.Notify = n
	h.c.grace.Observe(cmApp, reconcileNow.Add(-time.Minute), false, []string{"a"}) // over: due
	key := keyOf(deploymentsGVR, w)
	if err := h.c.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	want := []notify.Message{{
		Kind:     notify.Restart,
		Workload: notify.Workload{Group: "apps", Resource: "deployments", Namespace: "shop", Name: w.GetName()},
		Sources:  []notify.Source{{ID: "configmap/shop/app", Keys: []string{"a"}, KeysAre: notify.KeysChanged}},
		Outcome:  "restarted",
		Time:     reconcileNow.UTC(),
	}}
	if !reflect.DeepEqual(n.list, want) {
		t.Fatalf("notifications\n%+v\nwant\n%+v", n.list, want)
	}
	// Decided again: nothing new to say.
	if err := h.c.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if len(n.list) != 1 {
		t.Fatalf("%d notifications after deciding again, want 1", len(n.list))
	}
}

// A failed rollout notifies once, each reader it holds once (as their
// RestartHeld Events), and its recovery once; a dry run notifies nothing.
func TestRolloutAndHoldNotify(t *testing.T) {
	f := newFleetHarness(t, 10)
	n := &notes{}
	f.c.Notify = n
	f.reconcileAll()
	f.sync()
	f.c.Clock = func() time.Time { return reconcileNow.Add(11 * time.Minute) } // past the 10m deadline
	f.reconcileAll()
	f.step()
	f.step() // decided again: no new holds
	failed := n.of(notify.RolloutFailed)
	if len(failed) != 1 || failed[0].Workload.Name != "w00" || !strings.HasPrefix(failed[0].Reason, "DeadlineExceeded") ||
		!reflect.DeepEqual(failed[0].Sources, []notify.Source{{ID: cmApp.String()}}) {
		t.Fatalf("rollout failed notifications %+v", failed)
	}
	held := n.of(notify.Hold)
	if len(held) != 9 {
		t.Fatalf("%d hold notifications, want 9", len(held))
	}
	for _, m := range held {
		if m.Outcome != "held" || !reflect.DeepEqual(m.Sources, []notify.Source{{ID: cmApp.String()}}) ||
			!strings.Contains(m.Reason, "deployments.apps/shop/w00: DeadlineExceeded") {
			t.Fatalf("hold notification %+v", m)
		}
	}
	f.rollOut("w00")
	f.step()
	if rec := n.of(notify.RolloutRecovered); len(rec) != 1 || rec[0].Workload.Name != "w00" || rec[0].Outcome != "recovered" {
		t.Fatalf("recovered notifications %+v", rec)
	}
	if got := f.step(); len(n.of(notify.Restart)) != 1+len(got) {
		t.Fatalf("%d restart notifications, want one for w00 and each of %v", len(n.of(notify.Restart)), got)
	}
}

// A dry run restarts nothing, and says so to no sink.
func TestDryRunNotifiesNothing(t *testing.T) {
	w := fromYAML(t, webDeployment)
	h := newHarness(t, nil, nil, map[string]string{"a": "2"})
	settled := settle(h, w, map[string]string{"a": "1"})
	h.client = fake.NewSimpleDynamicClient(runtime.NewScheme(), settled.DeepCopy())
	h.c.Client, h.c.Patch = h.client, dynamicPatch(h.client)
	h.cache(settled)
	h.c.Config.Settings.DryRun = true
	n := &notes{}
	h.c.Notify = n
	if err := h.c.Reconcile(context.Background(), keyOf(deploymentsGVR, w)); err != nil {
		t.Fatal(err)
	}
	if len(h.patches()) != 0 {
		t.Fatal("a dry run patched")
	}
	if len(n.list) != 0 {
		t.Fatalf("a dry run notified %+v", n.list)
	}
}
