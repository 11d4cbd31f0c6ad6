package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// contention notes heavy processes that are not part of this benchmark (a
// test run starting its own cluster, say) seen while it runs: their CPU use
// would slow what is measured, so the report names them.
type contention struct {
	mu   sync.Mutex
	seen map[string]bool
}

var heavy = []string{"etcd", "kube-apiserver", "kube-controller-manager", "e2e.test", "restart-controller", "go"}

func watchContention(ctx context.Context, workDir string) *contention {
	c := &contention{seen: map[string]bool{}}
	self := os.Getpid()
	go func() {
		for {
			entries, _ := os.ReadDir("/proc")
			for _, e := range entries {
				pid, err := strconv.Atoi(e.Name())
				if err != nil || pid == self || pid == os.Getppid() {
					continue
				}
				cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
				if err != nil || len(cmdline) == 0 {
					continue
				}
				args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
				name := filepath.Base(string(args[0]))
				if !contains(heavy, name) || bytes.Contains(cmdline, []byte(workDir)) {
					continue
				}
				if name == "go" && (len(args) < 2 || string(args[1]) != "test") {
					continue // go run of this benchmark, go tool pprof
				}
				c.mu.Lock()
				c.seen[name] = true
				c.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
	return c
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// take lists the foreign heavy processes seen since the last call.
func (c *contention) take() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for n := range c.seen {
		names = append(names, n)
	}
	sort.Strings(names)
	c.seen = map[string]bool{}
	return strings.Join(names, ", ")
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
