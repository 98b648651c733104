package lane

import "time"

// Arithmetic is the budget sum the lanes check prints and enforces.
type Arithmetic struct {
	Phases time.Duration // sum of the shared phases' ceilings and the longest timeline's
	// Longest is the cluster whose timeline is the longest, when the phases have timelines;
	// Timelines is that timeline's ceiling sum, Beside the sum of the others' (not counted).
	Longest           string
	Timelines, Beside time.Duration
	Diagnostics       time.Duration
	Artifacts         time.Duration
	Margin            time.Duration
	Total             time.Duration // all of the above
	Cap               time.Duration
	Headroom          time.Duration // Cap - Total; negative when the budget does not fit
}

// Arithmetic adds up the budget.
func (b Budget) Arithmetic() Arithmetic {
	a := Arithmetic{
		Diagnostics: b.DiagnosticsReserve.D(),
		Artifacts:   b.ArtifactReserve.D(),
		Margin:      b.Margin.D(),
		Cap:         b.JobCap.D(),
	}
	lay := b.Layout()
	for _, i := range append(lay.Before, lay.After...) {
		a.Phases += b.Phases[i].Ceiling.D()
	}
	if t, ok := lay.Longest(); ok {
		a.Longest, a.Timelines = t.Cluster, t.Ceiling
		a.Phases += t.Ceiling
		for _, o := range lay.Timelines {
			a.Beside += o.Ceiling
		}
		a.Beside -= t.Ceiling
	}
	a.Total = a.Phases + a.Diagnostics + a.Artifacts + a.Margin
	a.Headroom = a.Cap - a.Total
	return a
}

// Phase returns the named phase and whether it exists.
func (b Budget) Phase(name string) (Phase, bool) {
	for _, p := range b.Phases {
		if p.Name == name {
			return p, true
		}
	}
	return Phase{}, false
}
