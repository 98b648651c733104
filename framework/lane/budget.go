package lane

import "time"

// Arithmetic is the budget sum the lanes check prints and enforces.
type Arithmetic struct {
	Phases      time.Duration // sum of phase ceilings
	Diagnostics time.Duration
	Artifacts   time.Duration
	Margin      time.Duration
	Total       time.Duration // all of the above
	Cap         time.Duration
	Headroom    time.Duration // Cap - Total; negative when the budget does not fit
}

// Arithmetic adds up the budget.
func (b Budget) Arithmetic() Arithmetic {
	a := Arithmetic{
		Diagnostics: b.DiagnosticsReserve.D(),
		Artifacts:   b.ArtifactReserve.D(),
		Margin:      b.Margin.D(),
		Cap:         b.JobCap.D(),
	}
	for _, p := range b.Phases {
		a.Phases += p.Ceiling.D()
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
