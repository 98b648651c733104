// Package lane loads and validates lane files: the pins, pools, phases and budgets of one e2e lane.
package lane
