package main

import (
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (proc(5)); 100 on every Linux architecture Go builds for.
const clockTicks = 100

// proc is one process as /proc/<pid>/stat shows it (proc(5): fields 2, 4, 14, 15, 22, 24).
type proc struct {
	pid, ppid int
	comm      string
	utime     int64
	stime     int64
	start     int64
	rssPages  int64
}

func readStat(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return proc{}, false
	}
	f := strings.Fields(s[closing+1:])
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 22 {
		return proc{}, false
	}
	n := func(field int) int64 { v, _ := strconv.ParseInt(f[field-3], 10, 64); return v }
	return proc{pid: pid, ppid: int(n(4)), comm: s[open+1 : closing], utime: n(14), stime: n(15), start: n(22), rssPages: n(24)}, true
}

// ProcStat is what one process of the run spent, as last seen: CPU seconds and its peak resident
// memory among the samples.
type ProcStat struct {
	Comm    string  `json:"comm"`
	Pid     int     `json:"pid"`
	CPU     float64 `json:"cpuSeconds"`
	PeakMiB float64 `json:"peakRssMiB"`
}

// Sampler reads /proc every interval for the processes under one root (the run's bin/e2e) and
// keeps, per process, its last CPU times and its largest resident set, and the largest sum of the
// tree's resident sets.
type Sampler struct {
	root     int
	interval time.Duration
	mu       sync.Mutex
	procs    map[[2]int64]*ProcStat
	peakTree float64
}

func NewSampler(root int, interval time.Duration) *Sampler {
	return &Sampler{root: root, interval: interval, procs: map[[2]int64]*ProcStat{}}
}

// Run samples until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sampler) sample() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	all := map[int]proc{}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			all[pid] = p
			children[p.ppid] = append(children[p.ppid], pid)
		}
	}
	page := float64(os.Getpagesize()) / (1 << 20)
	tree := 0.0
	s.mu.Lock()
	defer s.mu.Unlock()
	queue := []int{s.root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = append(queue[1:], children[pid]...)
		p, ok := all[pid]
		if !ok {
			continue
		}
		key := [2]int64{int64(p.pid), p.start}
		st := s.procs[key]
		if st == nil {
			st = &ProcStat{Comm: p.comm, Pid: p.pid}
			s.procs[key] = st
		}
		st.Comm = p.comm // a forked child shows its parent's name until it execs
		st.CPU = float64(p.utime+p.stime) / clockTicks
		rss := float64(p.rssPages) * page
		st.PeakMiB = max(st.PeakMiB, rss)
		tree += rss
	}
	s.peakTree = max(s.peakTree, tree)
}

// Result is every process seen, dearest first, and the tree's peak resident memory.
func (s *Sampler) Result() ([]ProcStat, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ProcStat, 0, len(s.procs))
	for _, p := range s.procs {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CPU > out[j].CPU })
	return out, s.peakTree
}

// ByComm sums CPU seconds per process name, and keeps the largest peak of each.
func ByComm(ps []ProcStat) []ProcStat {
	by := map[string]*ProcStat{}
	for _, p := range ps {
		b := by[p.Comm]
		if b == nil {
			b = &ProcStat{Comm: p.Comm}
			by[p.Comm] = b
		}
		b.CPU += p.CPU
		b.PeakMiB = max(b.PeakMiB, p.PeakMiB)
	}
	out := make([]ProcStat, 0, len(by))
	for _, b := range by {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CPU > out[j].CPU })
	return out
}
