package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the benchmark reads (k8s.io/apiserver
// v0.35.4 pkg/apis/audit/v1/types.go:72-140).
type auditEvent struct {
	AuditID   string `json:"auditID"`
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource string `json:"resource"`
	} `json:"objectRef"`
}

// Requests are one client's requests to the management apiserver, as its audit log counts them:
// one per request (a watch counts once, however long it streams).
type Requests struct {
	// Agent is the client: the program name its user agent starts with (kubernetes.test is the
	// kubernetes suite, e2e the orchestrator).
	Agent  string         `json:"agent"`
	Total  int            `json:"total"`
	ByVerb map[string]int `json:"byVerb"`
	// ByResource counts verb/resource pairs ("list/machines").
	ByResource map[string]int `json:"byResource"`
}

// ReadAudit counts the requests of user in the audit log at path, per client program.
func ReadAudit(path, user string) ([]Requests, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the management apiserver's audit log: %w", err)
	}
	defer f.Close()
	seen := map[string]bool{}
	by := map[string]*Requests{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: a line that is no audit event: %w", path, err)
		}
		if e.User.Username != user || seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		agent, _, _ := strings.Cut(e.UserAgent, "/")
		r := by[agent]
		if r == nil {
			r = &Requests{Agent: agent, ByVerb: map[string]int{}, ByResource: map[string]int{}}
			by[agent] = r
		}
		r.Total++
		r.ByVerb[e.Verb]++
		res := "-"
		if e.ObjectRef != nil {
			res = e.ObjectRef.Resource
		}
		r.ByResource[e.Verb+"/"+res]++
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]Requests, 0, len(by))
	for _, r := range by {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Total > out[j].Total })
	return out, nil
}
