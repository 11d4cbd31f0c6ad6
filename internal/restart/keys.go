package restart

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/keyread"
)

// KeyReader gives a large source's cached state, which keeps only the
// checksums of its whole data, the digests of the keys a workload reads
// (keyread.Reader reads them from the API server).
type KeyReader interface {
	Read(ctx context.Context, id catalog.SourceID, state *catalog.SourceState, keys []string) (*catalog.SourceState, error)
}

// ReadKeysWith sets how keyed reads of large sources are answered; without
// it, a workload reading keys of one fails to reconcile (and is retried).
func (c *Controller) ReadKeysWith(r KeyReader) { c.keys = r }

// sourcesFor returns what the decision looks sources up in for w: the catalog,
// except that each large source w reads keys of is given the digests of
// those keys first. The decision stays pure; this is where a reconcile reads what
// the caches do not hold. A source whose data on the API server is not the
// cached data yet makes the workload wait for the cache, as a lagging
// absence does.
func (c *Controller) sourcesFor(ctx context.Context, w *catalog.WorkloadState) (decision.SourceLookup, error) {
	var read withKeys
	for _, ref := range w.References {
		state, ok := c.catalog.Source(ref.ID)
		if !ok || state.Covers(ref.Keys) {
			continue
		}
		if c.keys == nil {
			return nil, fmt.Errorf("%s has too many keys to cache their digests, and no key reader is set", ref.ID)
		}
		filled, err := c.keys.Read(ctx, ref.ID, state, ref.Keys)
		if errors.Is(err, keyread.ErrStale) {
			return nil, fmt.Errorf("reading keys of %s: %w: %w", ref.ID, errCacheBehind, err)
		}
		if err != nil {
			return nil, fmt.Errorf("reading keys %s of %s: %w", strings.Join(ref.Keys, ", "), ref.ID, err)
		}
		if read.states == nil {
			read = withKeys{SourceLookup: c.catalog, states: map[catalog.SourceID]*catalog.SourceState{}}
		}
		read.states[ref.ID] = filled
	}
	if read.states == nil {
		return c.catalog, nil
	}
	return read, nil
}

// withKeys looks sources up in states first: there, the large sources of
// one workload with the keys it reads. The state found is fixed for the
// whole decision, even if the cache moves on meanwhile.
type withKeys struct {
	decision.SourceLookup
	states map[catalog.SourceID]*catalog.SourceState
}

func (l withKeys) Source(id catalog.SourceID) (*catalog.SourceState, bool) {
	if s, ok := l.states[id]; ok {
		return s, true
	}
	return l.SourceLookup.Source(id)
}
