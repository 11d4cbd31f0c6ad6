// Package keyread reads, for a decision, the digests of the keys a workload
// reads of a large source: the cache keeps only whole-object checksums of
// such a source, so the keys are read from the API server, checked against
// the cached data, and kept in a bounded LRU.
package keyread

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
)

// FetchFunc reads a source object from the API server, or returns nil, nil
// when it does not exist.
type FetchFunc func(ctx context.Context, kind config.SourceKind, namespace, name string) (runtime.Object, error)

// ErrStale is returned when the API server holds other data for a source
// than the cache: the cache is behind, and the read must wait for it.
var ErrStale = errors.New("the API server holds other data for the source than the cache")

// Capacity is how many key digests a Reader keeps: about 2 MiB
// at most, and only ever filled by the keys that workloads name in their pod
// specs, of sources too large to keep a digest per key.
const Capacity = 1 << 14

// maxFetches bounds the reads under way at once. Each holds a whole source
// (up to 1 MiB of data, more with its managedFields) while it is reduced:
// without a bound, every worker reading another large source at once would
// multiply that.
const maxFetches = 2

// Reader gives a large source's cached state the digests of the keys a
// workload reads of it (a large source keeps only whole-object checksums).
// It reads the object from the API server, reduces it on the spot to those
// keys' digests, and checks that the data it read is the data the cache
// holds (their Data digests agree): decisions then see one version of the
// source, the cached one, whose resourceVersion orders it.
//
// What it reads is kept by source, data digest and keys, the least recently
// used dropped beyond its capacity: workloads reading the same keys of the
// same data share one read, and a metadata-only update of the source (same
// data) reads nothing again. Concurrent reads of the same keys are made once.
type Reader struct {
	fetch    FetchFunc
	kinds    map[string]config.SourceKind
	capacity int
	fetching chan struct{} // one token per read under way

	mu      sync.Mutex
	entries map[readKey]*list.Element // of *entry
	lru     *list.List                // most recently used first
	held    int                       // digests held by entries
	calls   map[readKey]*readCall
}

// readKey names what a read gives: the digests of keys (joined by NUL,
// which no key holds) of the source's data that Data digests.
type readKey struct {
	id   catalog.SourceID
	data checksum.Digest
	keys string
}

// entry is a read kept, under its key.
type entry struct {
	key readKey
	*catalog.KeyDigests
}

type readCall struct {
	done chan struct{}
	res  *entry
	err  error
}

// New returns a reader of the configured source kinds that fetches
// with fetch and keeps at most capacity key digests.
func New(kinds []config.SourceKind, fetch FetchFunc, capacity int) *Reader {
	byName := make(map[string]config.SourceKind, len(kinds))
	for _, k := range kinds {
		byName[k.Name] = k
	}
	return &Reader{
		fetch: fetch, kinds: byName, capacity: capacity, fetching: make(chan struct{}, maxFetches),
		entries: map[readKey]*list.Element{}, lru: list.New(), calls: map[readKey]*readCall{},
	}
}

// Read returns state itself when it answers a read of keys (Covers), and
// otherwise a copy of it that does. An error wrapping ErrStale means the
// API server holds other data than state: the caller decides again once the
// cache has caught up.
func (r *Reader) Read(ctx context.Context, id catalog.SourceID, state *catalog.SourceState, keys []string) (*catalog.SourceState, error) {
	if state.Covers(keys) {
		return state, nil
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(keys)))
	k := readKey{id: id, data: state.Whole.Data, keys: strings.Join(sorted, "\x00")}
	e, err := r.lookup(ctx, k, sorted)
	if err != nil {
		return nil, err
	}
	return state.WithKeys(e.KeyDigests), nil
}

func (r *Reader) lookup(ctx context.Context, k readKey, keys []string) (*entry, error) {
	r.mu.Lock()
	if el, ok := r.entries[k]; ok {
		r.lru.MoveToFront(el)
		r.mu.Unlock()
		return el.Value.(*entry), nil
	}
	if c, ok := r.calls[k]; ok {
		r.mu.Unlock()
		select {
		case <-c.done:
			return c.res, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &readCall{done: make(chan struct{})}
	r.calls[k] = c
	r.mu.Unlock()

	c.res, c.err = r.read(ctx, k, keys)

	r.mu.Lock()
	delete(r.calls, k)
	if c.err == nil {
		r.add(c.res)
	}
	r.mu.Unlock()
	close(c.done)
	return c.res, c.err
}

// read fetches the source and reduces it to the digests of keys, checking
// that its data is that of the cached state.
func (r *Reader) read(ctx context.Context, k readKey, keys []string) (*entry, error) {
	kind, ok := r.kinds[k.id.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown source kind %q", k.id.Kind)
	}
	select {
	case r.fetching <- struct{}{}:
		defer func() { <-r.fetching }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	obj, err := r.fetch(ctx, kind, k.id.Namespace, k.id.Name)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, fmt.Errorf("%s is cached but no longer exists: %w", k.id, ErrStale)
	}
	d, err := catalog.ReduceKeys(obj, kind.DataFields, keys)
	if err != nil {
		return nil, err
	}
	if d.Data != k.data {
		return nil, fmt.Errorf("%s: %w", k.id, ErrStale)
	}
	return &entry{key: k, KeyDigests: d}, nil
}

// add keeps e, dropping the least recently used entries beyond capacity.
// One larger than the capacity alone is not kept.
func (r *Reader) add(e *entry) {
	if len(e.Keys) > r.capacity {
		return
	}
	if _, ok := r.entries[e.key]; ok {
		return
	}
	r.entries[e.key] = r.lru.PushFront(e)
	r.held += len(e.Keys)
	for r.held > r.capacity {
		oldest := r.lru.Back()
		old := r.lru.Remove(oldest).(*entry)
		delete(r.entries, old.key)
		r.held -= len(old.Keys)
	}
}
