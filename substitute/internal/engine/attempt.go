package engine

// attempt is a match attempt: where it is and the best match it found.
type attempt struct {
	state    *state
	len      int   // bytes consumed
	prev     int   // prevClass of the byte before it
	bestLen  int   // length of the best match so far, -1 if none
	bestRule int32 // its rule
}

// Why a DFA run stopped.
const (
	runDead    = iota // no thread left: the attempt is resolved
	runLimit          // threads alive after MaxMatch+1 bytes
	runStarved        // out of input
	runMerged         // joined the memo path
	runSettled        // reached the guard's last possible match event
)

// step returns the DFA state after t reads b.
func (s *Set) step(t *state, b byte) *state {
	c := int(s.classes[b])
	if n := t.to(c); n != nil {
		return n
	}
	return s.dfa.build(t, c)
}

// runPlain runs attempt a, anchored at buf[j], from state t over buf[k:],
// recording its best match in a, without the memo path (the drop reruns).
// It returns the last state and why it stopped.
func (s *Set) runPlain(a *attempt, t *state, buf []byte, j, k int) (*state, int) {
	limit := j + s.maxMatch // the last byte the attempt may consume
	for ; k < len(buf); k++ {
		t = s.step(t, buf[k])
		if t.match >= 0 {
			a.bestLen, a.bestRule = k-j, t.match
		}
		if t.empty {
			return t, runDead
		}
		if k == limit {
			return t, runLimit
		}
	}
	return t, runStarved
}
