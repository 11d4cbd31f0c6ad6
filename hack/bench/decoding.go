package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	goruntime "runtime"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// digestState is what a reducing transform keeps of a config: the same work
// as the controller's (one SHA-256 per key), for a like-for-like sync.
type digestState struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	digests map[string][32]byte
}

func (d *digestState) DeepCopyObject() runtime.Object {
	out := &digestState{TypeMeta: d.TypeMeta, digests: d.digests}
	d.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// protobufSync measures, in this process, how long typed ConfigMap and Secret
// informers that speak protobuf take to sync every config (all namespaces,
// objects reduced to per-key digests at cache time), and the CPU they use.
// It answers what the controller's sync would cost if it did not decode
// configs from JSON (--compare-decoding).
func protobufSync(ctx context.Context, base *rest.Config) (wall time.Duration, cpu float64, err error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = 50, 100
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reduce := func(obj any) (any, error) {
		var meta metav1.ObjectMeta
		d := map[string][32]byte{}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			meta = o.ObjectMeta
			for k, v := range o.Data {
				d[k] = sha256.Sum256([]byte(v))
			}
			for k, v := range o.BinaryData {
				d[k] = sha256.Sum256(v)
			}
		case *corev1.Secret:
			meta = o.ObjectMeta
			for k, v := range o.Data {
				d[k] = sha256.Sum256(v)
			}
		default:
			return obj, nil
		}
		return &digestState{ObjectMeta: metav1.ObjectMeta{Name: meta.Name, Namespace: meta.Namespace, UID: meta.UID, ResourceVersion: meta.ResourceVersion}, digests: d}, nil
	}
	goruntime.GC()
	cpu0 := selfCPU()
	began := time.Now()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(reduce))
	cms := factory.Core().V1().ConfigMaps().Informer()
	secrets := factory.Core().V1().Secrets().Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), cms.HasSynced, secrets.HasSynced) {
		return 0, 0, fmt.Errorf("protobuf informers did not sync")
	}
	wall = time.Since(began)
	cpu = selfCPU() - cpu0
	n := len(cms.GetStore().ListKeys()) + len(secrets.GetStore().ListKeys())
	cancel()
	factory.Shutdown()
	logf("protobuf typed informers synced %d configs in %s, %.2f CPU seconds (this process)", n, wall.Round(time.Millisecond), cpu)
	return wall, cpu, nil
}

func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
