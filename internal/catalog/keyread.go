package catalog

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/sourcecodec"
)

// FetchFunc reads a source object from the API server, or returns nil, nil
// when it does not exist.
type FetchFunc func(ctx context.Context, kind config.SourceKind, namespace, name string) (runtime.Object, error)

// ErrStale is returned when the API server holds other data for a source
// than the cache: the cache is behind, and the read must wait for it.
var ErrStale = errors.New("the API server holds other data for the source than the cache")

// KeyReaderCapacity is how many key digests a KeyReader keeps: about 2 MiB
// at most, and only ever filled by the keys that workloads name in their pod
// specs, of sources too large to keep a digest per key.
const KeyReaderCapacity = 1 << 14

// maxFetches bounds the reads under way at once. Each holds a whole source
// (up to 1 MiB of data, more with its managedFields) while it is reduced:
// without a bound, every worker reading another large source at once would
// multiply that.
const maxFetches = 2

// KeyReader gives a large source's cached state the digests of the keys a
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
type KeyReader struct {
	fetch    FetchFunc
	kinds    map[string]config.SourceKind
	capacity int
	fetches  atomic.Int64
	fetching chan struct{} // one token per read under way

	mu      sync.Mutex
	entries map[readKey]*list.Element // of *keyDigests
	lru     *list.List                // most recently used first
	held    int                       // digests held by entries
	calls   map[readKey]*readCall
}

// readKey names what a read gives: the digests of keys (joined by NUL,
// which no key holds) of the source's data that Data digests.
type readKey struct {
	id   SourceID
	data checksum.Digest
	keys string
}

type keyDigests struct {
	key     readKey
	keys    []string // sorted
	digests map[string]checksum.Digest
	fields  map[string]string
}

type readCall struct {
	done chan struct{}
	res  *keyDigests
	err  error
}

// NewKeyReader returns a reader of the configured source kinds that fetches
// with fetch and keeps at most capacity key digests.
func NewKeyReader(kinds []config.SourceKind, fetch FetchFunc, capacity int) *KeyReader {
	byName := make(map[string]config.SourceKind, len(kinds))
	for _, k := range kinds {
		byName[k.Name] = k
	}
	return &KeyReader{
		fetch: fetch, kinds: byName, capacity: capacity, fetching: make(chan struct{}, maxFetches),
		entries: map[readKey]*list.Element{}, lru: list.New(), calls: map[readKey]*readCall{},
	}
}

// Read returns state itself when it answers a read of keys (Covers), and
// otherwise a copy of it that does. An error wrapping ErrStale means the
// API server holds other data than state: the caller decides again once the
// cache has caught up.
func (r *KeyReader) Read(ctx context.Context, id SourceID, state *SourceState, keys []string) (*SourceState, error) {
	if state.Covers(keys) {
		return state, nil
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(keys)))
	k := readKey{id: id, data: state.Whole.Data, keys: strings.Join(sorted, "\x00")}
	e, err := r.lookup(ctx, k, sorted)
	if err != nil {
		return nil, err
	}
	return state.withKeys(e.keys, e.digests, e.fields), nil
}

// Fetches is how many objects the reader has fetched.
func (r *KeyReader) Fetches() int64 { return r.fetches.Load() }

func (r *KeyReader) lookup(ctx context.Context, k readKey, keys []string) (*keyDigests, error) {
	r.mu.Lock()
	if el, ok := r.entries[k]; ok {
		r.lru.MoveToFront(el)
		r.mu.Unlock()
		return el.Value.(*keyDigests), nil
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
func (r *KeyReader) read(ctx context.Context, k readKey, keys []string) (*keyDigests, error) {
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
	r.fetches.Add(1)
	obj, err := r.fetch(ctx, kind, k.id.Namespace, k.id.Name)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, fmt.Errorf("%s is cached but no longer exists: %w", k.id, ErrStale)
	}
	e, whole, err := reduceKeys(obj, kind.DataFields, keys)
	if err != nil {
		return nil, err
	}
	if whole.Data != k.data {
		return nil, fmt.Errorf("%s: %w", k.id, ErrStale)
	}
	e.key = k
	return e, nil
}

// reduceKeys reduces a source object to the digests of keys (sorted), and
// the checksums of its whole data.
func reduceKeys(obj runtime.Object, dataFields, keys []string) (*keyDigests, *checksum.WholeSums, error) {
	if e, ok := obj.(*sourcecodec.Source); ok {
		whole, digests, inFields := encodedWholeSums(e, e.Fields(dataFields), checksum.Hasher{}, keys)
		return &keyDigests{keys: keys, digests: digests, fields: inFields}, whole, nil
	}
	fields, _, err := dataFieldsOf(obj, dataFields)
	if err != nil {
		return nil, nil, err
	}
	whole, digests, inFields := wholeSums(fields, checksum.Hasher{}, keys)
	return &keyDigests{keys: keys, digests: digests, fields: inFields}, whole, nil
}

// add keeps e, dropping the least recently used entries beyond capacity.
// One larger than the capacity alone is not kept.
func (r *KeyReader) add(e *keyDigests) {
	if len(e.keys) > r.capacity {
		return
	}
	if _, ok := r.entries[e.key]; ok {
		return
	}
	r.entries[e.key] = r.lru.PushFront(e)
	r.held += len(e.keys)
	for r.held > r.capacity {
		oldest := r.lru.Back()
		old := r.lru.Remove(oldest).(*keyDigests)
		delete(r.entries, old.key)
		r.held -= len(old.keys)
	}
}
