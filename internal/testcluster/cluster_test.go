package testcluster

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestClusterRunsDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // includes a first-time build
	defer cancel()

	began := time.Now()
	c, err := Start(ctx, Options{Dir: t.TempDir(), Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start took %s", time.Since(began).Round(time.Millisecond))
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), c.LogTail(30))
	}

	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "demo"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:   []corev1.Container{{Name: "app", Image: "fake"}},
					NodeSelector: map[string]string{NodeLabelKey: NodeLabelValue},
					Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		fail("create deployment: %v", err)
	}

	rolloutBegan := time.Now()
	deadline := time.Now().Add(90 * time.Second)
	var last *appsv1.Deployment
	for {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "demo", metav1.GetOptions{})
		if err == nil {
			last = d
			s := d.Status
			if s.ObservedGeneration == d.Generation && s.UpdatedReplicas == 1 && s.ReadyReplicas == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			out, _ := c.Kubectl(ctx, "get", "deploy,rs,pods,nodes", "-o", "wide")
			fail("deployment not rolled out in 90s: last status %+v (err %v)\n%s", last.Status, err, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("deployment rolled out in %s", time.Since(rolloutBegan).Round(time.Millisecond))

	if out, err := c.Kubectl(ctx, "get", "pods", "-o", "wide"); err != nil {
		fail("kubectl: %v\n%s", err, out)
	} else {
		t.Logf("kubectl get pods:\n%s", out)
	}

	// Outage: the API server goes away and comes back on the same port.
	outageBegan := time.Now()
	if err := c.StopAPIServer(); err != nil {
		fail("StopAPIServer: %v", err)
	}
	t.Logf("API server stopped in %s", time.Since(outageBegan).Round(time.Millisecond))
	if err := c.Ready(ctx); err == nil {
		fail("API server still answers after StopAPIServer")
	}
	restartBegan := time.Now()
	if err := c.StartAPIServer(ctx); err != nil {
		fail("StartAPIServer: %v", err)
	}
	t.Logf("API server restarted in %s", time.Since(restartBegan).Round(time.Millisecond))
	if _, err := cs.AppsV1().Deployments("default").Get(ctx, "demo", metav1.GetOptions{}); err != nil {
		fail("get deployment after API server restart: %v", err)
	}

	stopBegan := time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	t.Logf("Stop took %s", time.Since(stopBegan).Round(time.Millisecond))
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	for name, port := range c.ports {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			conn.Close()
			t.Errorf("%s port %d still open after Stop", name, port)
		}
	}
	for _, p := range c.Components() {
		if p.Running {
			t.Errorf("%s (pid %d) still running after Stop", p.Name, p.PID)
		}
	}
}
