package restart

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

// TestStartUpListEntersTheQueueAsItHasRoom: the workloads of the first list
// reach the queue a few at a time (10,000 queued at once left the
// queue's maps at that size for good), every one of them once, in order.
func TestStartUpListEntersTheQueueAsItHasRoom(t *testing.T) {
	h := newHarness(t, nil, nil, nil)
	c := h.c
	const n, room = 1000, 8
	for i := range n {
		c.WorkloadListed(catalog.WorkloadKey{Resource: deploymentsGVR, Namespace: "shop", Name: fmt.Sprintf("w-%04d", i)})
	}
	if c.queue.Len() != 0 {
		t.Fatalf("listed workloads queued before the workers run: %d", c.queue.Len())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.feed(ctx, room)
	}()
	for i := range n {
		if l := c.queue.Len(); l > room {
			t.Fatalf("queue length %d, want at most %d", l, room)
		}
		key, _ := c.queue.Get()
		if want := fmt.Sprintf("w-%04d", i); key.Name != want {
			t.Fatalf("item %d is %s, want %s", i, key.Name, want)
		}
		c.queue.Done(key)
	}
	if c.queue.Len() != 0 || c.backlog.len() != 0 || c.backlog.keys != nil {
		t.Errorf("left: queue %d, backlog %d (list kept: %v)", c.queue.Len(), c.backlog.len(), c.backlog.keys != nil)
	}
	// The first list of a kind whose CRD appears later comes after the
	// start-up one has drained: the feed is still there for it.
	late := catalog.WorkloadKey{Resource: deploymentsGVR, Namespace: "shop", Name: "late"}
	c.WorkloadListed(late)
	for deadline := time.Now().Add(5 * time.Second); c.queue.Len() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a workload listed after the start-up list drained never reached the queue")
		}
	}
	if key, _ := c.queue.Get(); key != late {
		t.Fatalf("got %v, want %v", key, late)
	}
	cancel()
	<-done
}
