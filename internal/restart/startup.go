package restart

import (
	"context"
	"sync"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

// Start-up compares every workload (level-triggered, docs/design.md). The
// workloads of the informers' first list used to enter the queue at once:
// at 10,000 workloads, the queue's sets (dirty, processing), its metrics'
// map of add times and its ring grew to 10,000 entries during the sync and
// kept that size for the life of the process, 5.5 MB of heap that Go maps
// never give back. They now wait in a plain list, which is freed
// once drained, and enter the queue as it has room: a few per worker.

// backlog holds the workloads of the start-up list that are not queued yet.
type backlog struct {
	mu   sync.Mutex
	keys []catalog.WorkloadKey
	next int
	// wake tells the feed that keys arrived (capacity 1, never blocks).
	wake chan struct{}
}

func newBacklog() backlog { return backlog{wake: make(chan struct{}, 1)} }

func (b *backlog) push(key catalog.WorkloadKey) {
	b.mu.Lock()
	b.keys = append(b.keys, key)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// take returns up to n keys, oldest first, and frees the list once drained.
func (b *backlog) take(n int) []catalog.WorkloadKey {
	b.mu.Lock()
	defer b.mu.Unlock()
	end := min(b.next+n, len(b.keys))
	out := append([]catalog.WorkloadKey(nil), b.keys[b.next:end]...)
	b.next = end
	if b.next == len(b.keys) {
		b.keys, b.next = nil, 0
	}
	return out
}

func (b *backlog) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.keys) - b.next
}

// backlogPerWorker is how many queued items per worker the feed keeps.
const backlogPerWorker = 4

// WorkloadListed is called by the watcher for each workload of an
// informer's first list: it is compared once the workers run, through the
// backlog, without growing the queue to the size of the cluster.
func (c *Controller) WorkloadListed(key catalog.WorkloadKey) { c.backlog.push(key) }

// feed moves the backlog into the queue, keeping at most room items queued,
// until ctx ends: the first list of a workload kind whose CRD appears later
// arrives after the start-up one has drained. While keys wait it polls the
// queue, which tells no one when it shrinks.
func (c *Controller) feed(ctx context.Context, room int) {
	for {
		if c.backlog.len() == 0 {
			select {
			case <-ctx.Done():
				return
			case <-c.backlog.wake:
			}
			continue
		}
		if free := room - c.queue.Len(); free > 0 {
			for _, key := range c.backlog.take(free) {
				c.queue.Add(key)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}
