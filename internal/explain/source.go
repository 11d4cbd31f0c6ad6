package explain

import (
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
)

// SourceReport explains one source: who reads it, and what a change of each
// of its keys would restart.
type SourceReport struct {
	Source    string `json:"source"` // "configmap/NS/NAME", as in the annotation
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Exists    bool   `json:"exists"`
	// Keys are the names of its keys; values are never read out.
	Keys []string `json:"keys"`
	// Watched is false when the controller does not watch its namespace.
	Watched    bool   `json:"watched"`
	NotWatched string `json:"notWatched,omitempty"`
	// Key is the --key filter: only readers a change of it would restart.
	Key string `json:"key,omitempty"`
	// Readers are the opted-in workloads that read it.
	Readers []Reader `json:"readers"`
	// ByKey says, for each key (its own and those readers name), which
	// readers a change of it would restart.
	ByKey []KeyReaders `json:"byKey"`
	// NotOptedIn are workloads that read it but are never restarted.
	NotOptedIn []string `json:"notOptedIn,omitempty"`
	// Skipped are workload kinds that could not be listed, and why.
	Skipped []string `json:"skipped,omitempty"`
}

// Reader is an opted-in workload reading the source.
type Reader struct {
	Workload string   `json:"workload"` // "deployment.apps/web"
	Keys     []string `json:"keys,omitempty"`
	AllKeys  bool     `json:"allKeys"`
	Optional bool     `json:"optional"`
	Applied  *string  `json:"applied,omitempty"`
	Current  string   `json:"current,omitempty"`
	Status   string   `json:"status"`
	Note     string   `json:"note"`
	Uses     []Use    `json:"uses"`
}

// KeyReaders lists the readers a change of one key would restart.
type KeyReaders struct {
	Key      string   `json:"key"`
	Restarts []string `json:"restarts"`
}

// Workload is a workload object with the configured kind it was listed as.
type Workload struct {
	Kind   config.WorkloadKind
	Object *unstructured.Unstructured
}

// reads reports whether a change of key would reach the reader.
func (r Reader) reads(key string) bool { return r.AllKeys || slices.Contains(r.Keys, key) }

// withMatchOf is w reading the source id too when it exists and an entry
// of w's regex source lists matches its name, as the controller matches them.
func withMatchOf(w *catalog.WorkloadState, id catalog.SourceID, exists bool) *catalog.WorkloadState {
	return w.WithMatches(func(kind string) []string {
		if kind == id.Kind && exists {
			return []string{id.Name}
		}
		return nil
	})
}

// ExplainSource explains a source given its reduced state (nil when it does
// not exist) and the workloads of its namespace, listed with the config's
// workload selector. key, when not empty, keeps only the readers a change of
// that key would restart.
func (c *Config) ExplainSource(kind config.SourceKind, namespace, name string, state *catalog.SourceState,
	workloads []Workload, key string) *SourceReport {
	id := catalog.SourceID{Kind: kind.Name, Namespace: namespace, Name: name}
	r := &SourceReport{
		Source: id.String(), Kind: kind.Name, Namespace: namespace, Name: name,
		Exists: state != nil, Keys: []string{}, Key: key, Readers: []Reader{}, ByKey: []KeyReaders{},
	}
	if state != nil {
		r.Keys = state.Digests.Keys()
	}
	r.NotWatched = c.NamespaceNotWatched(namespace)
	r.Watched = r.NotWatched == ""

	var readers []Reader
	for _, wl := range workloads {
		w := withMatchOf(catalog.ReduceWorkloadObject(wl.Object, wl.Kind, c.Config), id, state != nil)
		i := slices.IndexFunc(w.References, func(ref catalog.Reference) bool { return ref.ID == id })
		if i < 0 {
			continue
		}
		ref := w.References[i]
		if !w.OptedIn {
			r.NotOptedIn = append(r.NotOptedIn, kubectlName(w))
			continue
		}
		rd := Reader{
			Workload: kubectlName(w), Keys: ref.Keys, AllKeys: ref.Keys == nil, Optional: ref.Optional,
			Uses: c.usesByID(wl.Kind, wl.Object, w)[id],
		}
		// Applied is nil when none is recorded or it cannot be read: then
		// no applied checksum is shown.
		if old, known := decision.ReadWorkload(w).Applied[id.String()]; known {
			rd.Applied = &old
		}
		ws := WorkloadSource{Applied: rd.Applied, Optional: ref.Optional, Exists: state != nil}
		if state != nil {
			rd.Current = state.Checksum(c.Sums, ref.Keys)
			ws.Current = rd.Current
			ws.same, ws.incomparable = c.compare(state, ws.Applied, ref.Keys)
		}
		rd.Status, rd.Note = c.readerStatus(kind, ws, state)
		readers = append(readers, rd)
	}
	sort.Slice(readers, func(i, j int) bool { return readers[i].Workload < readers[j].Workload })
	sort.Strings(r.NotOptedIn)

	keys := append([]string(nil), r.Keys...)
	for _, rd := range readers {
		keys = append(keys, rd.Keys...)
	}
	if key != "" {
		keys = []string{key}
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		kr := KeyReaders{Key: k, Restarts: []string{}}
		for _, rd := range readers {
			if r.Watched && rd.reads(k) {
				kr.Restarts = append(kr.Restarts, rd.Workload)
			}
		}
		r.ByKey = append(r.ByKey, kr)
	}
	for _, rd := range readers {
		if key == "" || rd.reads(key) {
			r.Readers = append(r.Readers, rd)
		}
	}
	return r
}
