package tenant_test

func equal(a, b any) bool {
	if ab, ok := a.([]any); ok {
		bb, ok := b.([]any)
		if !ok || len(ab) != len(bb) {
			return false
		}
		for i := range ab {
			if !equal(ab[i], bb[i]) {
				return false
			}
		}
		return true
	}
	if am, ok := a.(map[string]any); ok {
		bm, ok := b.(map[string]any)
		if !ok || len(am) != len(bm) {
			return false
		}
		for k := range am {
			if !equal(am[k], bm[k]) {
				return false
			}
		}
		return true
	}
	return a == b
}

type stringer string

func (s stringer) String() string { return string(s) }

// A pool written back after a refusal loses the field the refusal added: the merge patch
// nulls what mutate removed, and touches no other pool.
