// Package progress carries what a run is doing, as structured events, from where it happens
// (the suite process, the orchestrator's own phases, the substrate) to the one place that
// draws it for a person (Console): a live status line per pool on a terminal, permanent lines
// only when a stage is passed, a failure is decided or a phase ends, a heartbeat per waiting
// pool without a terminal, and every detail in harness.log.
package progress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/join"
)

// EnvFD names the suite's environment variable holding the file descriptor its events go to
// (docs/architecture.md, "Orchestrator → suite"); unset, the suite prints text lines as before.
const EnvFD = "E2E_PROGRESS_FD"

// Kind is what an event says.
type Kind string

const (
	// Detail: what a wait waits for changed (a pool's stage detail, a phase's progress line).
	Detail Kind = "detail"
	// StagePassed: a pool passed a join stage.
	StagePassed Kind = "stage-passed"
	// Failure: a failure was decided.
	Failure Kind = "failure"
	// PhaseStart and PhaseEnd: a lane phase began or ended.
	PhaseStart Kind = "phase-start"
	PhaseEnd   Kind = "phase-end"
)

// Event is one thing a run did. Which fields are set depends on Kind.
type Event struct {
	At   time.Time `json:"at"`
	Kind Kind      `json:"kind"`
	// Phase is the lane phase (phase events; details outside any pool).
	Phase string `json:"phase,omitempty"`
	// Pool and Stage: the pool and its join stage (details, stages passed, pool failures).
	Pool  string `json:"pool,omitempty"`
	Stage string `json:"stage,omitempty"`
	// Detail is what is awaited, a failure's line, or a failed phase's error.
	Detail string `json:"detail,omitempty"`
	// Since is when the pool got to Stage (details), when the stage or phase began (stages
	// passed, phase ends).
	Since time.Time `json:"since,omitzero"`
	// Replicas is how many workers the pool wants, Past how many of them are past Stage.
	Replicas int `json:"replicas,omitempty"`
	Past     int `json:"past,omitempty"`
	// Class is a failure's class; Outcome how a phase ended (ok, failed, deadline, skipped).
	Class   string `json:"class,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	// Ceiling is a phase's ceiling (phase events).
	Ceiling time.Duration `json:"ceiling,omitempty"`
	// Suspects are the pool's suspects now (details): states that would fail it were they
	// final, which upstream still retries or repairs (join.Suspect).
	Suspects []Suspect `json:"suspects,omitempty"`
}

// Suspect is a join.Suspect as the events carry it.
type Suspect struct {
	Class  string    `json:"class"`
	Stage  string    `json:"stage"`
	Object string    `json:"object,omitempty"`
	Detail string    `json:"detail"`
	Since  time.Time `json:"since"`
}

// SuspectsOf are a join's suspects as events carry them.
func SuspectsOf(list []join.Suspect) []Suspect {
	if len(list) == 0 {
		return nil
	}
	out := make([]Suspect, 0, len(list))
	for _, s := range list {
		out = append(out, Suspect{Class: string(s.Class), Stage: string(s.Stage), Object: s.Object, Detail: s.Detail, Since: s.Since})
	}
	return out
}

func (s Suspect) key() string { return s.Class + "|" + s.Stage + "|" + s.Object }

// Sink receives events.
type Sink func(Event)

// Joins is a join's OnProgress (join.Options, testbed.Options): each change of a pool's stage or
// detail becomes a detail event to sink, with the replicas the pool wants (replicas, by pool)
// and how many are past its stage. Nil when sink is nil (no orchestrator listens).
func Joins(sink Sink, replicas map[string]int) func(join.Progress) {
	if sink == nil {
		return nil
	}
	return func(p join.Progress) {
		sink(Event{Kind: Detail, Pool: p.Pool, Stage: string(p.Stage), Detail: p.Detail, Since: p.Since,
			Replicas: replicas[p.Pool], Past: PastOf(p.Detail), Suspects: SuspectsOf(p.Suspects)})
	}
}

// Emitter writes events as JSON lines (the suite's side of the channel). Safe for concurrent
// use; a write error (the orchestrator gone) drops the event: progress never fails a run.
type Emitter struct {
	mu  sync.Mutex
	w   io.Writer
	enc *json.Encoder
	// running are the phases started and not ended, oldest first; last is the last started.
	running []string
	last    string
}

// NewEmitter writes events to w.
func NewEmitter(w io.Writer) *Emitter { return &Emitter{w: w, enc: json.NewEncoder(w)} }

// FromEnv is the emitter of the file descriptor EnvFD names, nil when it is unset.
func FromEnv(getenv func(string) string) (*Emitter, error) {
	v := getenv(EnvFD)
	if v == "" {
		return nil, nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q is not a file descriptor above 2", EnvFD, v)
	}
	return NewEmitter(os.NewFile(uintptr(fd), "progress")), nil
}

// Emit writes ev, stamped now when it has no time. A detail without a phase belongs to the
// oldest phase running (phaseOf).
func (e *Emitter) Emit(ev Event) {
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case ev.Kind == PhaseStart:
		e.running, e.last = append(e.running, ev.Phase), ev.Phase
	case ev.Kind == PhaseEnd:
		e.running = slices.DeleteFunc(e.running, func(p string) bool { return p == ev.Phase })
	case ev.Kind == Detail && ev.Pool == "" && ev.Phase == "":
		ev.Phase = e.phaseOf()
	}
	_ = e.enc.Encode(ev)
}

// Sink is Emit as a Sink.
func (e *Emitter) Sink() Sink { return e.Emit }

// Close closes the emitter's writer when it can be closed.
func (e *Emitter) Close() error {
	if c, ok := e.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Read decodes events from r until it ends, handing each to sink; a line that is not an event
// is handed on as a detail, so nothing the suite says is lost.
func Read(r io.Reader, sink Sink) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Kind == "" {
			sink(Event{At: time.Now(), Kind: Detail, Detail: string(line)})
			continue
		}
		sink(ev)
	}
	return sc.Err()
}

// stamp is the clock a progress line may open with ("15:04:05.000 "); Lines drops it, the
// console stamps every line itself.
var stamp = regexp.MustCompile(`^\d\d:\d\d:\d\d(\.\d+)? `)

// Lines is a writer whose every line becomes a detail event (a progress line written for
// people, by a wait, a substrate or a stand-in). Partial lines wait for their end.
func Lines(sink Sink) io.Writer { return &lineWriter{sink: sink} }

type lineWriter struct {
	mu   sync.Mutex
	sink Sink
	buf  []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimRight(string(l.buf[:i]), "\r")
		l.buf = l.buf[i+1:]
		if line = stamp.ReplaceAllString(line, ""); strings.TrimSpace(line) != "" {
			l.sink(Event{At: time.Now(), Kind: Detail, Detail: line})
		}
	}
}

// ClockObserver turns what a budget.Clock records into events: phase starts and ends, and the
// stages pools pass.
func ClockObserver(sink Sink) budget.Observer { return clockObserver{sink} }

type clockObserver struct{ sink Sink }

func (o clockObserver) PhaseStarted(name string, start, deadline time.Time, ceiling time.Duration) {
	o.sink(Event{At: start, Kind: PhaseStart, Phase: name, Ceiling: ceiling})
}

func (o clockObserver) PhaseEnded(p budget.PhaseTiming) {
	o.sink(Event{At: p.End, Kind: PhaseEnd, Phase: p.Label(), Since: p.Start, Outcome: string(p.Outcome),
		Detail: firstNonEmpty(p.Error, p.Note), Ceiling: p.Ceiling})
}

func (o clockObserver) StagePassed(s budget.StageTiming) {
	o.sink(Event{At: s.End, Kind: StagePassed, Pool: s.Pool, Stage: s.Stage, Since: s.Start})
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// past reads "(N of M Machines past this stage)" from a join detail: how many of a pool's
// workers are past its stage.
var pastRE = regexp.MustCompile(`\((\d+) of (\d+) Machines past this stage\)`)

// PastOf is how many workers a join detail says are past the pool's stage (0 when it says none).
func PastOf(detail string) int {
	m := pastRE.FindStringSubmatch(detail)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
