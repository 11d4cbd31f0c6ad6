package check

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/restart-controller/restart-controller/internal/config"
)

// Peer is another restart controller whose annotations a team may have on
// its workloads: annotations of its domain that the loaded config does not
// read opt nothing in here, silently. Data, not code: the presets in
// examples/presets map each peer's annotations onto general configuration,
// and a test keeps this list and the presets' domains equal.
type Peer struct {
	// Domain ends the prefix of its annotation keys ("reloader.stakater.com"
	// covers "configmap.reloader.stakater.com/reload" too).
	Domain string
	// Preset is the file under examples/presets that reads them.
	Preset string
	// Marks are keys of its domain that the peer writes itself: no one
	// expects them to be read.
	Marks []string
}

// Peers are the controllers whose presets ship.
func Peers() []Peer {
	return []Peer{
		{Domain: "reloader.stakater.com", Preset: "reloader.yaml", Marks: []string{"reloader.stakater.com/last-reloaded-from"}},
		{Domain: "wave.pusher.com", Preset: "wave.yaml", Marks: []string{"wave.pusher.com/config-hash", "wave.pusher.com/finalizer"}},
	}
}

// workloadAnnotationsRead are the workload and pod-template annotation keys
// the config reads or writes.
func workloadAnnotationsRead(cfg *config.Config) []string {
	a := cfg.Annotations
	keys := []string{a.OptIn, a.AppliedChecksums, a.RestartTimestamp, a.AppliedTemplateHash, a.Rollout, a.Hold, a.IgnoreSources,
		a.RestartStrategy, a.Window, a.MinInterval}
	keys = append(keys, cfg.MinIntervalAnnotations...)
	for _, o := range cfg.OptIns {
		keys = append(keys, o.Annotation)
	}
	for _, l := range cfg.SourceLists {
		keys = append(keys, l.Annotation)
	}
	for _, e := range cfg.Excludes {
		keys = append(keys, e.Annotation)
	}
	return keys
}

// peerOf returns the peer whose domain the annotation key has, if any.
func peerOf(key string) (Peer, bool) {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return Peer{}, false
	}
	for _, p := range Peers() {
		if (prefix == p.Domain || strings.HasSuffix(prefix, "."+p.Domain)) && !slices.Contains(p.Marks, key) {
			return p, true
		}
	}
	return Peer{}, false
}

// PeerAnnotations warns, for each annotation key of a peer found on the
// workloads (their metadata or their pod template's) that the config does
// not read, naming up to three of the workloads that carry it and the
// preset that reads it. kinds are the workloads' configured kinds, by
// index.
func PeerAnnotations(cfg *config.Config, kinds []config.WorkloadKind, workloads []*unstructured.Unstructured) []Result {
	read := workloadAnnotationsRead(cfg)
	carriers := map[string][]string{}
	for i, u := range workloads {
		keys := slices.Collect(maps.Keys(u.GetAnnotations()))
		if template, ok := kinds[i].PodTemplatePath.Object(u.Object); ok {
			metadata, _ := template["metadata"].(map[string]interface{})
			annotations, _ := metadata["annotations"].(map[string]interface{})
			keys = slices.AppendSeq(keys, maps.Keys(annotations))
		}
		name := kinds[i].GVR.Resource + "/" + u.GetNamespace() + "/" + u.GetName()
		for _, k := range keys {
			if _, ok := peerOf(k); ok && !slices.Contains(read, k) && !slices.Contains(carriers[k], name) {
				carriers[k] = append(carriers[k], name)
			}
		}
	}
	var out []Result
	for _, k := range slices.Sorted(maps.Keys(carriers)) {
		names := carriers[k]
		sort.Strings(names)
		shown := strings.Join(names[:min(3, len(names))], ", ")
		if len(names) > 3 {
			shown += fmt.Sprintf(" and %d more", len(names)-3)
		}
		p, _ := peerOf(k)
		out = append(out, Result{LevelWarning, "annotation " + k,
			fmt.Sprintf("on %s, but this config does not read it: it has no effect (examples/presets/%s reads it)", shown, p.Preset)})
	}
	return out
}

// listWorkloads lists the workloads of every configured kind in the watched
// namespaces (all when none is configured), with the config's selector, for
// PeerAnnotations; a kind that cannot be listed is a warning.
func listWorkloads(ctx context.Context, client dynamic.Interface, cfg *config.Config) ([]config.WorkloadKind, []*unstructured.Unstructured, []Result) {
	var kinds []config.WorkloadKind
	var objs []*unstructured.Unstructured
	var problems []Result
	for _, kind := range cfg.Workloads {
		for _, ns := range cfg.WatchedNamespaces() {
			list, err := client.Resource(kind.GVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: cfg.WorkloadSelector.String()})
			if apierrors.IsNotFound(err) {
				break // not served: Served says so
			}
			if err != nil {
				problems = append(problems, Result{LevelWarning, "annotations on " + kind.GVR.GroupResource().String(),
					"cannot list them to look for annotations this config does not read: " + err.Error()})
				break
			}
			for i := range list.Items {
				kinds = append(kinds, kind)
				objs = append(objs, &list.Items[i])
			}
		}
	}
	return kinds, objs, problems
}
