package serialconsole

import "time"

// backlogLines is how many of a stream's last lines a subscriber that comes late still hears.
const backlogLines = 4096

// record is what the subscribers were told of one stream, so a late subscriber hears it too.
type record struct {
	started    bool
	lines      []news
	unreadable *news
	ended      *news
}

// news is one line, or a reason, and when it was heard.
type news struct {
	at   time.Time
	text string
}

// Subscribe adds s; the returned function removes it. s first hears every stream already
// followed as if it had been there (its start, its last backlogLines lines, the reason it is
// unreadable, its end), then what happens next.
func (h *Hub) Subscribe(s Subscriber) func() {
	h.say.Lock()
	defer h.say.Unlock()
	h.mu.Lock()
	followed := make([]*follower, 0, len(h.streams))
	for _, f := range h.streams {
		followed = append(followed, f)
	}
	h.mu.Unlock()
	for _, f := range followed {
		r := &f.heard
		if !r.started {
			continue
		}
		s.Started(f.s)
		for _, l := range r.lines {
			s.Line(f.s, l.at, l.text)
		}
		if r.unreadable != nil {
			s.Unreadable(f.s, r.unreadable.at, r.unreadable.text)
		}
		if r.ended != nil {
			s.Ended(f.s, r.ended.at, r.ended.text)
		}
	}
	id := h.nextSub
	h.nextSub++
	h.subs[id] = s
	return func() {
		h.say.Lock()
		defer h.say.Unlock()
		delete(h.subs, id)
	}
}

// The functions below record a stream's news and tell every subscriber, under h.say.

// tellLocked hands news to every subscriber; h.say is held.
func (h *Hub) tellLocked(each func(Subscriber)) {
	for _, s := range h.subs {
		each(s)
	}
}

func (h *Hub) started(f *follower) {
	h.say.Lock()
	defer h.say.Unlock()
	f.s.Start = h.o.Now()
	f.heard.started = true
	h.tellLocked(func(s Subscriber) { s.Started(f.s) })
}

func (h *Hub) line(f *follower, at time.Time, text string) {
	h.say.Lock()
	defer h.say.Unlock()
	r := &f.heard
	if len(r.lines) == backlogLines {
		r.lines = append(r.lines[:0], r.lines[backlogLines/2:]...)
	}
	r.lines = append(r.lines, news{at, text})
	r.unreadable = nil
	h.tellLocked(func(s Subscriber) { s.Line(f.s, at, text) })
}

func (h *Hub) unreadable(f *follower, why string) {
	h.say.Lock()
	defer h.say.Unlock()
	at := h.o.Now()
	f.heard.unreadable = &news{at, why}
	h.tellLocked(func(s Subscriber) { s.Unreadable(f.s, at, why) })
}

func (h *Hub) ended(f *follower, reason string) {
	h.say.Lock()
	defer h.say.Unlock()
	at := h.o.Now()
	f.heard.ended = &news{at, reason}
	h.tellLocked(func(s Subscriber) { s.Ended(f.s, at, reason) })
}
