package restart

import (
	"fmt"
	"sync"
	"testing"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/record"
)

// Workers decide at once: whatever order their counts are published in, the
// gauge ends at the number of workloads held, as it must once they all are
// (nothing decides them again until their hold ends). Published after the
// lock, an earlier count could land last: a CI run saw 18 of 19 held.
func TestStandingPublishesInOrder(t *testing.T) {
	const workloads, rounds = 64, 200
	for round := range rounds {
		var (
			s     standing
			gauge float64 // as a Prometheus gauge: the last value set wins
			mu    sync.Mutex
			wg    sync.WaitGroup
		)
		publish := func(held, _ map[string]int) {
			mu.Lock()
			defer mu.Unlock()
			gauge = float64(held[string(record.HoldWave)])
		}
		start := make(chan struct{})
		for i := range workloads {
			wg.Go(func() {
				key := catalog.WorkloadKey{Resource: deploymentsGVR, Namespace: "fleet", Name: fmt.Sprintf("app-%02d", i)}
				<-start
				s.set(key, record.HoldWave, "", publish)
			})
		}
		close(start)
		wg.Wait()
		if gauge != workloads {
			t.Fatalf("round %d: gauge %v once %d workloads are held", round, gauge, workloads)
		}
	}
}
