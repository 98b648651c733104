package lane

import (
	"fmt"
	"math"
	"time"
)

// Duration is a Go duration in a lane file ("29m", "90s").
type Duration time.Duration

// D is the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// Minutes is the duration in whole minutes, rounded up.
func (d Duration) Minutes() int { return int(math.Ceil(time.Duration(d).Minutes())) }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

func (d *Duration) decodeScalar(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (use Go durations such as 29m, 90s, 1h30m)", s)
	}
	if v < 0 {
		return fmt.Errorf("%q is negative", s)
	}
	*d = Duration(v)
	return nil
}
