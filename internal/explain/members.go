package explain

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/members"
	"github.com/restart-controller/restart-controller/internal/record"
)

// ErrNoMembers is the fetch error of a source of lifecycle updatesOnly
// none of whose objects names it now (no pod mounts it): the controller
// takes it as unknown, never as absent.
var ErrNoMembers = errors.New("no object of its kind names it now (no pod mounts it)")

// fetchMembers reads a source of lifecycle updatesOnly as the controller's
// caches hold it: the objects of its kind in the namespace (a CRD not
// installed has none), reduced and grouped (members.Group).
func (cl *Cluster) fetchMembers(ctx context.Context, kind config.SourceKind, namespace, name string, selector labels.Selector) (*catalog.SourceState, error) {
	list, err := cl.Dynamic.Resource(kind.GVR).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s/%s/%s: %w", kind.Name, namespace, name, ErrNoMembers)
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", kind.GVR.GroupResource(), namespace, err)
	}
	reduce := members.Reduce(kind.Members)
	var states []*members.State
	for i := range list.Items {
		m, err := reduce(&list.Items[i])
		if err != nil {
			return nil, err
		}
		if m, ok := m.(*members.State); ok {
			states = append(states, m)
		}
	}
	id := catalog.SourceID{Kind: kind.Name, Namespace: namespace, Name: name}
	if state, ok := members.Group(id, states); ok {
		return state, nil
	}
	return nil, fmt.Errorf("%s: %w", id, ErrNoMembers)
}

// readSource reads a source explain is asked about: the object, reduced;
// for a kind of lifecycle updatesOnly, no object (the name is the one its
// members give) and the state of its members, nil without any.
func (cl *Cluster) readSource(ctx context.Context, kind config.SourceKind, namespace, name string,
	selector labels.Selector) (*unstructured.Unstructured, *catalog.SourceState, error) {
	if kind.Members != nil {
		state, err := cl.fetchMembers(ctx, kind, namespace, name, selector)
		if errors.Is(err, ErrNoMembers) {
			return nil, nil, nil
		}
		return nil, state, err
	}
	obj, err := cl.Get(ctx, kind.GVR, namespace, name)
	if err != nil || obj == nil {
		return nil, nil, err
	}
	state, err := catalog.SourceReducer{DataFields: kind.DataFields}.Reduce(obj)
	return obj, state, err
}

// membersStatus is the status of a source of lifecycle updatesOnly where
// it differs from another source's; ok is false where it does not.
func membersStatus(ws WorkloadSource, state *catalog.SourceState, fetchErr error) (status, note string, ok bool) {
	switch {
	case errors.Is(fetchErr, ErrNoMembers):
		return StatusNoMembers, fetchErr.Error() + ": unknown, never absent; nothing restarts for it and what was recorded is kept", true
	case state == nil || !state.Baseline || ws.same:
		return "", "", false
	case ws.Applied == nil || *ws.Applied == record.Absent:
		return StatusBaseline, "none of its members was updated since created: recorded as the first sight, no restart", true
	case *ws.Applied == record.Pending:
		return "", "", false
	default:
		return StatusBaseline, "none of its members was updated since created: their creation restarts nothing, and the applied checksum is kept until a member's update", true
	}
}

// readerStatus is a reader's status (sourceStatus), as a source of
// lifecycle updatesOnly has it where it differs (membersStatus).
func (c *Config) readerStatus(kind config.SourceKind, ws WorkloadSource, state *catalog.SourceState) (string, string) {
	var noMembers error
	if state == nil && kind.Members != nil {
		noMembers = ErrNoMembers
	}
	if s, n, ok := membersStatus(ws, state, noMembers); ok && kind.Members != nil {
		return s, n
	}
	return sourceStatus(ws, nil, c.SourceLifecycle)
}
