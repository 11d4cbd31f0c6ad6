package election

import (
	"context"
	"errors"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Record is what a Lease says of the election: client-go's
// LeaderElectionRecord, without the coordinated-election fields.
type Record struct {
	// HolderIdentity is the leader; empty when the lease was released.
	HolderIdentity       string
	LeaseDurationSeconds int
	AcquireTime          time.Time
	RenewTime            time.Time
	LeaderTransitions    int
}

// equal compares the fields a Lease stores (times to the microsecond).
func (r Record) equal(o Record) bool {
	return r.HolderIdentity == o.HolderIdentity && r.LeaseDurationSeconds == o.LeaseDurationSeconds &&
		r.LeaderTransitions == o.LeaderTransitions &&
		r.AcquireTime.Truncate(time.Microsecond).Equal(o.AcquireTime.Truncate(time.Microsecond)) &&
		r.RenewTime.Truncate(time.Microsecond).Equal(o.RenewTime.Truncate(time.Microsecond))
}

// Lock is where the election record is kept.
type Lock interface {
	// Get reads the record; a NotFound error when there is none.
	Get(ctx context.Context) (Record, error)
	// Create writes the first record.
	Create(ctx context.Context, r Record) error
	// Update replaces the record last read or written through this lock;
	// a Conflict error when someone else wrote it since.
	Update(ctx context.Context, r Record) error
	// Identity is this candidate's.
	Identity() string
	// Describe names the lock in logs.
	Describe() string
}

// LeaseClient reads and writes Leases: internal/kube's Client.
type LeaseClient interface {
	GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	CreateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
	UpdateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
}

// LeaseLock keeps the record in the coordination/v1 Lease Namespace/Name,
// as client-go's resourcelock.LeaseLock does.
type LeaseLock struct {
	Client          LeaseClient
	Namespace, Name string
	ID              string

	mu    sync.Mutex
	lease *coordinationv1.Lease // as last read or written
}

// Get reads the Lease.
func (l *LeaseLock) Get(ctx context.Context) (Record, error) {
	lease, err := l.Client.GetLease(ctx, l.Namespace, l.Name)
	if err != nil {
		return Record{}, err
	}
	l.keep(lease)
	return recordOf(lease.Spec), nil
}

// Create creates the Lease.
func (l *LeaseLock) Create(ctx context.Context, r Record) error {
	lease, err := l.Client.CreateLease(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name},
		Spec:       specOf(r),
	})
	if err != nil {
		return err
	}
	l.keep(lease)
	return nil
}

// Update writes the Lease as last read or written, with r's record: the
// resourceVersion makes it a Conflict when someone else wrote it since.
func (l *LeaseLock) Update(ctx context.Context, r Record) error {
	l.mu.Lock()
	last := l.lease
	l.mu.Unlock()
	if last == nil {
		return errors.New("the lease was not read before it was updated")
	}
	next := last.DeepCopy()
	next.Spec = specOf(r)
	lease, err := l.Client.UpdateLease(ctx, next)
	if err != nil {
		return err
	}
	l.keep(lease)
	return nil
}

// Identity is the candidate's identity.
func (l *LeaseLock) Identity() string { return l.ID }

// Describe is namespace/name.
func (l *LeaseLock) Describe() string { return l.Namespace + "/" + l.Name }

func (l *LeaseLock) keep(lease *coordinationv1.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lease = lease
}

func recordOf(s coordinationv1.LeaseSpec) Record {
	var r Record
	if s.HolderIdentity != nil {
		r.HolderIdentity = *s.HolderIdentity
	}
	if s.LeaseDurationSeconds != nil {
		r.LeaseDurationSeconds = int(*s.LeaseDurationSeconds)
	}
	if s.AcquireTime != nil {
		r.AcquireTime = s.AcquireTime.Time
	}
	if s.RenewTime != nil {
		r.RenewTime = s.RenewTime.Time
	}
	if s.LeaseTransitions != nil {
		r.LeaderTransitions = int(*s.LeaseTransitions)
	}
	return r
}

func specOf(r Record) coordinationv1.LeaseSpec {
	duration, transitions := int32(r.LeaseDurationSeconds), int32(r.LeaderTransitions)
	return coordinationv1.LeaseSpec{
		HolderIdentity:       &r.HolderIdentity,
		LeaseDurationSeconds: &duration,
		AcquireTime:          &metav1.MicroTime{Time: r.AcquireTime},
		RenewTime:            &metav1.MicroTime{Time: r.RenewTime},
		LeaseTransitions:     &transitions,
	}
}
