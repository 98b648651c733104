package diag

import (
	"encoding/json"
	"errors"
	"sync"
)

// jsonl is a JSON lines artifact shared by several goroutines: it is opened on first use, so a
// pool or cluster with nothing to say leaves no empty file.
type jsonl struct {
	a     *Artifacts
	rel   string
	limit int64

	mu    sync.Mutex
	f     *File
	lines int
	err   error
}

func (j *jsonl) write(v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return
	}
	if j.f == nil {
		if j.f, j.err = j.a.Create(j.rel, j.limit); j.err != nil {
			return
		}
	}
	if _, err := j.f.Write(append(data, '\n')); err != nil {
		j.err = err
		return
	}
	j.lines++
}

// close ends the file and tells how it went.
func (j *jsonl) close() (lines int, bytes int64, status Status, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		bytes = j.f.Size()
		if cerr := j.f.Close(); cerr != nil && j.err == nil {
			j.err = cerr
		}
		bytes = max(bytes, j.f.Size())
	}
	switch {
	case errors.Is(j.err, ErrLimit):
		return j.lines, bytes, Truncated, j.err
	case j.err != nil:
		return j.lines, bytes, Failed, j.err
	}
	return j.lines, bytes, Complete, nil
}
