package testbed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// DeadlineError is a step that ran out of its phase's time: an API call cut short by the
// phase's deadline says nothing about the product.
type DeadlineError struct {
	Phase string
	// Pool is the pool the step was about ("" for none).
	Pool string
	Err  error
	At   time.Time
}

func (e *DeadlineError) Error() string {
	if e.Pool != "" {
		return fmt.Sprintf("pool %s: %s: the phase's time ran out: %v", e.Pool, e.Phase, e.Err)
	}
	return fmt.Sprintf("%s: the phase's time ran out: %v", e.Phase, e.Err)
}

// Judgement is a deadline at the step's phase, when it ran out (verdict.Judge).
func (e *DeadlineError) Judgement() verdict.Judgement {
	return verdict.Judgement{Class: verdict.Deadline, Stage: e.Phase, At: e.At}
}

func (e *DeadlineError) Unwrap() error { return e.Err }

// ConfigurationError is a spec or suite that cannot run on this lane: the lane lacks a phase
// or a timeout it needs, or names something the harness does not know. It is never the
// product's fault.
type ConfigurationError struct {
	// File is the lane file.
	File string
	Err  error
}

func (e *ConfigurationError) Error() string {
	if strings.Contains(e.Err.Error(), e.File) {
		return e.Err.Error()
	}
	return e.File + ": " + e.Err.Error()
}

// Judgement is a configuration failure, never the product's (verdict.Judge).
func (e *ConfigurationError) Judgement() verdict.Judgement {
	return verdict.Judgement{Class: verdict.Configuration}
}

func (e *ConfigurationError) Unwrap() error { return e.Err }

// InPhase is err as a step of lane phase phase reports it: an error that ran out of the
// phase's time (a context deadline) and carries no class of its own becomes a *DeadlineError
// at that phase; any other error is returned as it is, nil as nil.
func InPhase(phase, pool string, err error) error {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if _, typed := verdict.Carried(err); typed {
		return err
	}
	return &DeadlineError{Phase: phase, Pool: pool, Err: err, At: time.Now()}
}
