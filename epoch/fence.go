package epoch

// Fence is the one fencing rule shared by the coordinator, the fetcher and the reconciler
// (KIP-1279 §9.6, STYLE.md practice 3): stored is the highest epoch seen so far, requested
// the epoch a request carries.
//
//   - requested == UndefinedEpoch (-1, "not given") → (stored, true): no check, nothing changes.
//   - requested < stored → (stored, false): the request is fenced (FENCED_LEADER_EPOCH or
//     FENCED_STATE_EPOCH for the caller to answer).
//   - otherwise → (requested, true): accepted, and requested is the new highest epoch
//     (an equal epoch is accepted).
//
// Fence does not allocate and does not panic.
func Fence(stored, requested int32) (next int32, ok bool) {
	if requested == UndefinedEpoch {
		return stored, true
	}
	if requested < stored {
		return stored, false
	}
	return requested, true
}
