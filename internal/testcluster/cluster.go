// Package testcluster starts and stops a real Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) plus kwok, which
// simulates a kubelet on one fake node, on free loopback ports. It is used by
// end-to-end tests, the demo (hack/localcluster) and benchmarks.
//
// The binaries come from hack/build-cluster-bins.sh (see BinDir). Everything a
// run writes (etcd data, certs, logs, kubeconfig, pid file) lives in Options.Dir.
package testcluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
)

// Component names, in start order. They are also the binary names and the
// log file names (Dir/logs/<name>.log).
const (
	etcdName      = "etcd"
	apiserverName = "kube-apiserver"
	kcmName       = "kube-controller-manager"
	schedulerName = "kube-scheduler"
	kwokName      = "kwok"
	kubectlName   = "kubectl"
)

var components = []string{etcdName, apiserverName, kcmName, schedulerName, kwokName, kubectlName}

// NodeName is the fake node kwok manages; NodeLabel selects it.
const (
	NodeName       = "kwok-node-0"
	NodeLabelKey   = "type"
	NodeLabelValue = "kwok"
)

// Deadlines. Generous for a loaded 2-core machine; each is also bounded by ctx.
const (
	etcdTimeout      = 60 * time.Second
	apiserverTimeout = 120 * time.Second
	nodeTimeout      = 60 * time.Second
	saTimeout        = 90 * time.Second
	stopGrace        = 10 * time.Second
	tailLines        = 40
)

// Options configures Start.
type Options struct {
	Dir    string                           // run folder: data, certs, logs, kubeconfig; created if missing
	BinDir string                           // empty = BinDir(ctx)
	Detach bool                             // processes get their own session (setsid) and survive this process; used by `make demo`
	Log    func(format string, args ...any) // progress lines; may be nil
	// Extra flags appended to those of etcd and kube-apiserver (a later flag
	// wins), e.g. a larger etcd "--quota-backend-bytes" for benchmarks.
	EtcdArgs, APIServerArgs []string
}

// Cluster is a running (or stopped) local control plane.
type Cluster struct {
	Dir, Kubeconfig string // Kubeconfig is a file path (token auth, insecure-skip-tls-verify)
	RESTConfig      *rest.Config
	BinDir          string

	mu            sync.Mutex
	detach        bool
	attached      bool
	logf          func(format string, args ...any)
	token         string
	apiPort       int
	ports         map[string]int // component port name -> port, for tests
	apiserverArgs []string
	procs         []*proc // start order
	stopped       bool
}

// Start starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler
// and kwok, and returns when the API server is ready, the kwok node is Ready
// and untainted, and the `default` ServiceAccount exists in namespace default.
// If it fails, it stops whatever it started.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	began := time.Now()
	c, err := newCluster(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	etcdPort, etcdPeerPort := ports[0], ports[1]
	c.apiPort = ports[2]
	c.ports = map[string]int{"etcd-client": etcdPort, "etcd-peer": etcdPeerPort, "kube-apiserver": c.apiPort}
	if err := c.writeSecrets(); err != nil {
		return nil, err
	}
	etcdURL, err := c.startEtcd(ctx, etcdPort, etcdPeerPort, opts.EtcdArgs)
	if err != nil {
		return nil, err
	}
	c.logf("testcluster: etcd ready on %s (%s)", etcdURL, since(began))
	if err := c.startAPIServer(ctx, etcdURL, opts.APIServerArgs); err != nil {
		return nil, err
	}
	c.logf("testcluster: kube-apiserver ready on %s (%s)", c.RESTConfig.Host, since(began))
	if err := c.startNodeSide(); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	if err := c.createNode(ctx, cs); err != nil {
		return nil, err
	}
	c.logf("testcluster: node %s ready (%s)", NodeName, since(began))
	if err := c.waitDefaultServiceAccount(ctx, cs); err != nil {
		return nil, err
	}
	c.logf("testcluster: cluster ready in %s; kubeconfig %s", since(began), c.Kubeconfig)
	return c, nil
}

// newCluster prepares the cluster's directory: fresh state every time (old
// etcd data would hold objects signed with an old key), and no cluster of
// this directory still running.
func newCluster(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("testcluster: Options.Dir is empty")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = BinDir(ctx); err != nil {
			return nil, err
		}
	}
	c := &Cluster{
		Dir:        dir,
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
		BinDir:     binDir,
		detach:     opts.Detach,
		logf:       logf,
		ports:      map[string]int{},
	}
	if old, err := readPids(c.pidsPath()); err == nil {
		for _, p := range old {
			if p.running() {
				return nil, fmt.Errorf("testcluster: a cluster is already running in %s (%s pid %d); stop it first", dir, p.name, p.pid)
			}
		}
	}
	for _, sub := range []string{"etcd", "certs", "logs"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	_ = os.Remove(c.pidsPath())
	return c, nil
}

// startEtcd starts etcd and waits until it is healthy; it returns its URL.
func (c *Cluster) startEtcd(ctx context.Context, port, peerPort int, extra []string) (string, error) {
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	args := []string{
		"--name=testcluster",
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testcluster=" + peerURL,
		"--unsafe-no-fsync=true", // throwaway data; fsync dominates on slow disks
		"--log-level=warn",
	}
	if err := c.startProc(etcdName, append(args, extra...)...); err != nil {
		return "", err
	}
	return etcdURL, c.waitHTTP(ctx, etcdName, etcdTimeout, etcdURL+"/health", "")
}

// startAPIServer starts kube-apiserver on etcd and waits until it is ready.
func (c *Cluster) startAPIServer(ctx context.Context, etcdURL string, extra []string) error {
	c.apiserverArgs = []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.apiPort),
		"--cert-dir=" + filepath.Join(c.Dir, "certs"),
		"--service-account-key-file=" + c.saKeyPath(),
		"--service-account-signing-key-file=" + c.saKeyPath(),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--token-auth-file=" + filepath.Join(c.Dir, "certs", "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		// The endpoints of Service "kubernetes" may not be loopback; nothing
		// in this cluster reaches the API server through that Service.
		"--endpoint-reconciler-type=none",
		// Without this, SIGTERM leaves the server waiting on its clients'
		// open watches for --request-timeout (60s) before it exits.
		"--shutdown-watch-termination-grace-period=2s",
	}
	c.apiserverArgs = append(c.apiserverArgs, extra...)
	if err := c.startProc(apiserverName, c.apiserverArgs...); err != nil {
		return err
	}
	return c.waitAPIServer(ctx)
}

// startNodeSide starts the controllers, the scheduler and the fake kubelet.
func (c *Cluster) startNodeSide() error {
	if err := c.startProc(kcmName,
		"--kubeconfig="+c.Kubeconfig,
		"--service-account-private-key-file="+c.saKeyPath(),
		"--controllers=deployment,replicaset,statefulset,daemonset,job,cronjob,garbagecollector,serviceaccount,serviceaccount-token,namespace",
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps=100",
		"--kube-api-burst=200",
	); err != nil {
		return err
	}
	if err := c.startProc(schedulerName,
		"--kubeconfig="+c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	); err != nil {
		return err
	}
	return c.startProc(kwokName,
		"--kubeconfig="+c.Kubeconfig,
		"--config="+filepath.Join(c.Dir, "kwok.yaml"), // not ~/.kwok/kwok.yaml
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--manage-nodes-with-label-selector=",
		"--cidr=10.0.0.1/16",
		"--node-ip=10.0.0.1",
	)
}

// Attach reopens a detached cluster from its Dir (reads the pid file and
// kubeconfig) so `down` can stop it. Processes are stopped by pid only if the
// pid still runs the named component.
func Attach(dir string) (*Cluster, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), attached: true, logf: func(string, ...any) {}}
	if c.procs, err = readPids(c.pidsPath()); err != nil {
		return nil, fmt.Errorf("testcluster: no cluster in %s: %w", dir, err)
	}
	if c.RESTConfig, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, fmt.Errorf("testcluster: %w", err)
	}
	c.token = c.RESTConfig.BearerToken
	for _, p := range c.procs {
		if !p.running() {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.pid)); err == nil {
			c.BinDir = filepath.Dir(exe)
			break
		}
	}
	return c, nil
}

// Stop stops the processes this Cluster started (or found with Attach), by
// pid, in reverse start order: SIGTERM, then SIGKILL after a grace period.
// It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		if err := c.procs[i].stop(stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	c.stopped = true
	return errors.Join(errs...)
}

// StopAPIServer stops kube-apiserver only, for outage tests.
func (c *Cluster) StopAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.proc(apiserverName)
	if p == nil {
		return errors.New("testcluster: kube-apiserver was never started")
	}
	return p.stop(stopGrace)
}

// StartAPIServer starts kube-apiserver again on the same port with the same
// flags and waits for /readyz.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	if c.attached {
		c.mu.Unlock()
		return errAttached
	}
	if c.stopped {
		c.mu.Unlock()
		return errors.New("testcluster: cluster is stopped")
	}
	if p := c.proc(apiserverName); p != nil && p.running() {
		c.mu.Unlock()
		return errors.New("testcluster: kube-apiserver is already running")
	}
	p, err := c.spawn(apiserverName, c.apiserverArgs...)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	for i, q := range c.procs {
		if q.name == apiserverName {
			c.procs[i] = p
		}
	}
	err = c.writePids()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.waitAPIServer(ctx)
}

// LogTail returns the last n lines of every component's log, labelled, for
// test failure output.
func (c *Cluster) LogTail(n int) string {
	return c.tail(n, etcdName, apiserverName, kcmName, schedulerName, kwokName)
}

func (c *Cluster) tail(n int, names ...string) string {
	var b strings.Builder
	for _, name := range names {
		s, err := TailFile(c.logPath(name), n)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			s = err.Error()
		}
		fmt.Fprintf(&b, "----- %s (last %d lines of %s) -----\n%s\n", name, n, c.logPath(name), s)
	}
	return b.String()
}

// Kubectl runs the cached kubectl with this cluster's kubeconfig and returns
// its combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	kubectl := kubectlName
	if c.BinDir != "" {
		kubectl = filepath.Join(c.BinDir, kubectlName)
	}
	cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// ComponentStatus is one component process as listed in Dir/pids.
type ComponentStatus struct {
	Name    string
	PID     int
	Running bool
}

// Components lists the component processes and whether each is running.
func (c *Cluster) Components() []ComponentStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ComponentStatus
	for _, p := range c.procs {
		out = append(out, ComponentStatus{Name: p.name, PID: p.pid, Running: p.running()})
	}
	return out
}

// Ready checks the API server's /readyz once.
func (c *Cluster) Ready(ctx context.Context) error {
	return probe(ctx, c.RESTConfig.Host+"/readyz", c.token)
}

// ---- internals ----

func (c *Cluster) logPath(name string) string { return filepath.Join(c.Dir, "logs", name+".log") }
func (c *Cluster) pidsPath() string           { return filepath.Join(c.Dir, "pids") }
func (c *Cluster) saKeyPath() string          { return filepath.Join(c.Dir, "certs", "sa.key") }

func (c *Cluster) proc(name string) *proc {
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

func (c *Cluster) startProc(name string, args ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.spawn(name, args...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return c.writePids()
}

// writeSecrets writes the bearer token file, the service-account key, the
// kubeconfig and an empty kwok config, and sets RESTConfig.
func (c *Cluster) writeSecrets() error {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	c.token = hex.EncodeToString(tok)
	if err := os.WriteFile(filepath.Join(c.Dir, "certs", "tokens.csv"),
		[]byte(c.token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return err
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(c.saKeyPath(), keyPEM, 0o600); err != nil {
		return err
	}

	host := fmt.Sprintf("https://127.0.0.1:%d", c.apiPort)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testcluster"] = &clientcmdapi.Cluster{Server: host, InsecureSkipTLSVerify: true}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.token}
	kc.Contexts["testcluster"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "testcluster"
	if err := clientcmd.WriteToFile(*kc, c.Kubeconfig); err != nil {
		return err
	}
	// kwok otherwise reads ~/.kwok/kwok.yaml; an empty file means built-in defaults.
	if err := os.WriteFile(filepath.Join(c.Dir, "kwok.yaml"), nil, 0o644); err != nil {
		return err
	}

	c.RESTConfig = &rest.Config{
		Host:            host,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             100,
		Burst:           200,
	}
	return nil
}

// waitAPIServer waits for /readyz and returns early if the process dies.
func (c *Cluster) waitAPIServer(ctx context.Context) error {
	return c.waitHTTP(ctx, apiserverName, apiserverTimeout, c.RESTConfig.Host+"/readyz", c.token)
}

// waitHTTP polls url until it answers 200, the component exits, or the
// deadline passes.
func (c *Cluster) waitHTTP(ctx context.Context, name string, timeout time.Duration, url, token string) error {
	var last error
	return c.poll(ctx, timeout, fmt.Sprintf("%s at %s", name, url), []string{name}, func(ctx context.Context) bool {
		last = probe(ctx, url, token)
		return last == nil
	}, func() error { return last })
}

// poll runs cond every 200ms until it returns true, one of the components
// named in tailOf exits, or the deadline passes. Errors include the log
// tail of those components.
func (c *Cluster) poll(ctx context.Context, timeout time.Duration, what string, tailOf []string,
	cond func(context.Context) bool, lastErr func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond(ctx) {
			return nil
		}
		c.mu.Lock()
		for _, p := range c.procs {
			if slices.Contains(tailOf, p.name) && !p.running() {
				c.mu.Unlock()
				return fmt.Errorf("testcluster: waiting for %s: %s (pid %d) %s\n%s", what, p.name, p.pid, p.exitStatus(), c.tail(tailLines, p.name))
			}
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			msg := ctx.Err().Error()
			if lastErr != nil && lastErr() != nil {
				msg += "; last error: " + lastErr().Error()
			}
			return fmt.Errorf("testcluster: waiting for %s: gave up after %s: %s\n%s", what, since(began), msg, c.tail(tailLines, tailOf...))
		case <-tick.C:
		}
	}
}

var probeClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
}

func probe(ctx context.Context, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// createNode creates the kwok node, removes the not-ready taint the
// admission plugin adds (nothing else would: no node-lifecycle controller
// runs), and waits for kwok to report it Ready.
func (c *Cluster) createNode(ctx context.Context, cs kubernetes.Interface) error {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("10000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				NodeLabelKey:             NodeLabelValue,
				"kubernetes.io/hostname": NodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	tails := []string{apiserverName, kwokName}
	if err := c.poll(ctx, nodeTimeout, "node "+NodeName+" to be created", tails, func(ctx context.Context) bool {
		_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err)
	}, nil); err != nil {
		return err
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool {
			return t.Key == corev1.TaintNodeNotReady
		})
		if len(taints) == len(n.Spec.Taints) {
			return nil
		}
		n.Spec.Taints = taints
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("testcluster: removing taint %s from %s: %w\n%s", corev1.TaintNodeNotReady, NodeName, err, c.tail(tailLines, tails...))
	}
	var state string
	return c.poll(ctx, nodeTimeout, "node "+NodeName+" to be Ready and untainted", tails, func(ctx context.Context) bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			state = err.Error()
			return false
		}
		ready := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		state = fmt.Sprintf("ready=%v taints=%v allocatable=%v", ready, n.Spec.Taints, n.Status.Allocatable)
		return ready && len(n.Spec.Taints) == 0 && !n.Status.Allocatable.Pods().IsZero()
	}, func() error { return errors.New(state) })
}

func (c *Cluster) waitDefaultServiceAccount(ctx context.Context, cs kubernetes.Interface) error {
	var last error
	return c.poll(ctx, saTimeout, "ServiceAccount default/default", []string{kcmName, apiserverName},
		func(ctx context.Context) bool {
			_, last = cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
			return last == nil
		}, func() error { return last })
}

// FreePorts reserves n distinct free loopback ports by listening on
// 127.0.0.1:0 (all at once, so they differ) and releases them.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testcluster: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }
