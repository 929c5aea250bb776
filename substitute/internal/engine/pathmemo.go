package engine

// pathMemo bounds the work of overlapping match attempts. Attempts are
// anchored, so after an attempt the next candidate reads again bytes the
// last one read: a pattern like <a [^>]*> over "<a <a <a ..." would read
// MaxMatch bytes per candidate. But two attempts in the same DFA state at
// the same position go on identically from there. So the stream keeps the
// path of the attempt run furthest (a resolved attempt replaces it if it
// joined it or stopped no earlier):
//
//   - its state at each of the next len(ring) positions (ring);
//   - its state every stride positions as far as it was run (sparse), for
//     attempts that meet it later than len(ring) bytes after their start;
//   - how far it was run (end), its state there (limit, or nil if it died
//     there), and its last match event (match, rule).
//
// A running attempt compares its state with the path at every byte. Once
// they agree at a position p <= end, its fate up to end is the path's: it
// inherits the path's last match event after p, and either dies where the
// path died or jumps to end+1 in state limit and runs on from there (up to
// its own MaxMatch limit, which lies past end since it started later). Its
// path is then the memo for the next attempt.
//
// Each path position is thus run over once, plus once more to refill the
// ring as attempts start further on; an attempt that does not join the
// path within len(ring) bytes pays for its own run. On a hostile body ("<a
// <a <a ..." against <a [^>]*>) attempts join the path after a few bytes
// and each byte costs a small constant number of DFA steps, whatever
// MaxMatch (BenchmarkWorstCase). Attempts whose states stay apart longer,
// as with a bounded repetition like a{1,100}b over "aaaa...", each pay
// until their states meet (about 100 bytes there), plus up to a stride if
// that is past the ring.
//
// The invariant, tested on its own by TestPathMemoJoinKeepsMatchEvents: an
// attempt run along the path ends with the same best match, and stops for
// the same reason in an equivalent state, as the same attempt run alone.
//
// Positions are body offsets; the state at position p is the one before
// byte p. Callers work on a buffer buf whose index i is body offset
// i+delta.
type pathMemo struct {
	ring    []*state // ring[p & (len-1)] for p in [ringLo, ringHi]
	ownRing []*state // the running attempt's own states, same indexing
	// sparse holds the path's state at every stride-th position from
	// ringLo to sparseHi, in slot (p / stride) % len(sparse); ownSparse
	// likewise for the running attempt, up to ownSparseHi.
	sparse      []*state
	ownSparse   []*state
	stride      int64 // a power of two
	sparseHi    int64
	ownSparseHi int64
	ringLo      int64
	ringHi      int64

	ok    bool   // the path is usable
	end   int64  // last byte the path was run over
	limit *state // its state after end; nil if it died there
	match int64  // position of its last match event (-1: none)
	rule  int32  // the rule of that event

	// The running attempt's side (its last match event is its best match).
	merged bool  // it joined the path (ring then describes its path)
	ownHi  int64 // last position it wrote to the ring before joining
}

// memoShape sizes a stream's path memo.
type memoShape struct {
	ring   int // positions in the ring, a power of two; 0 turns the memo off
	stride int // positions between sparse states, a power of two
	slots  int // sparse states, enough to cover MaxMatch
}

const (
	// memoRing is the ring's size: attempts that meet the path within
	// this many bytes of their start join it at the first shared state.
	memoRing = 128
	// memoMinStride and memoMaxSlots: sparse states every 64 positions,
	// or every MaxMatch/64 rounded up to a power of two if larger, so
	// that a stream holds at most 66 of them whatever MaxMatch.
	memoMinStride = 64
	memoMaxSlots  = 64
)

// newMemoShape returns the memo size for MaxMatch maxMatch.
func newMemoShape(maxMatch int) memoShape {
	m := memoShape{ring: memoRing, stride: memoMinStride}
	for maxMatch/m.stride > memoMaxSlots {
		m.stride *= 2
	}
	m.slots = maxMatch/m.stride + 2
	return m
}

func newPathMemo(shape memoShape) pathMemo {
	return pathMemo{
		ring:      make([]*state, shape.ring),
		ownRing:   make([]*state, shape.ring),
		sparse:    make([]*state, shape.slots),
		ownSparse: make([]*state, shape.slots),
		stride:    int64(shape.stride),
	}
}

// reset forgets the path, and lets its states be collected after a cache
// reset.
func (m *pathMemo) reset() {
	m.ok = false
	clear(m.ring)
	clear(m.ownRing)
	clear(m.sparse)
	clear(m.ownSparse)
}

// begin prepares the path for an attempt anchored at buf[j] (buf[start:]
// being the bytes this buffer adds): the path's positions before j+1 are
// forgotten and the ring is refilled from the path's last stored state up
// to end+1 (or the ring's size).
func (m *pathMemo) begin(s *Set, buf []byte, start, j int, delta int64) {
	lo := int64(j+1) + delta
	m.merged = false
	m.ownHi, m.ownSparseHi = lo-1, lo-1
	if m.ok && (len(m.ring) == 0 || lo > m.end || m.ringHi < m.ringLo || m.ringHi-delta < int64(start)) {
		m.ok = false
	}
	if m.ok {
		mask := int64(len(m.ring) - 1)
		hi := min(m.end+1, lo+mask, int64(len(buf))+delta)
		t := m.ring[m.ringHi&mask]
		for p := m.ringHi + 1; p <= hi; p++ {
			t = s.step(t, buf[p-1-delta])
			m.ring[p&mask] = t
		}
		m.ringHi = max(m.ringHi, hi)
	}
	m.ringLo = lo
}

// run goes on with attempt a, anchored at buf[j], over buf[j+a.len:],
// along the path where it joins it. It returns the last state (nil if the
// attempt died where the path died), the index of the last byte consumed
// and why it stopped: never runMerged.
//
// Joining, where walk found the attempt's state equal to the path's at the
// position p after buf[k]: the attempt's own states before p become the
// path's, it takes the path's last match event after p, and it goes on
// from the path's end in the path's state there. (Inline here: a call per
// joining attempt costs several percent on hostile bodies.)
func (m *pathMemo) run(s *Set, a *attempt, buf []byte, j int, delta int64) (*state, int, int) {
	t, k, why := m.walk(s, a, a.state, buf, j, j+a.len, delta)
	if why != runMerged {
		return t, k, why
	}
	p := int64(k+1) + delta
	m.merged = true
	mask := int64(len(m.ring) - 1)
	for q := m.ringLo; q < p && q <= m.ownHi; q++ {
		m.ring[q&mask] = m.ownRing[q&mask]
	}
	if p > m.ringHi { // joined at a sparse position past the ring
		m.ringHi = m.ownHi
	}
	for q := (m.ringLo + m.stride - 1) / m.stride * m.stride; q < p; q += m.stride {
		slot := int(q/m.stride) % len(m.sparse)
		m.sparse[slot] = m.ownSparse[slot]
	}
	if m.match > p {
		a.bestLen, a.bestRule = int(m.match-1-delta)-j, m.rule
	}
	k = int(m.end - delta)
	if m.limit == nil {
		return nil, k, runDead
	}
	// The path's state after end was never stored: store it, so that the
	// sparse states stay contiguous.
	if q := m.end + 1; q%m.stride == 0 && q == m.sparseHi+m.stride {
		m.sparse[int(q/m.stride)%len(m.sparse)] = m.limit
		m.sparseHi = q
	}
	return m.walk(s, a, m.limit, buf, j, k+1, delta)
}

// walk runs attempt a, anchored at buf[j], from state t over buf[k:],
// recording its best match in a and its states in the ring and sparse
// slots, until it dies, reaches MaxMatch, runs out of input or agrees with
// the path. It returns the last state, the index of the last byte consumed
// and why it stopped. (Its loop has Set.step inline: this is the hottest
// loop, and step is over the inlining budget.)
func (m *pathMemo) walk(s *Set, a *attempt, t *state, buf []byte, j, k int, delta int64) (*state, int, int) {
	limit := j + s.maxMatch // the last byte the attempt may consume
	ring := m.ring
	mask := int64(len(ring) - 1)
	winHi := m.ringLo + mask // last position the ring can hold
	joinHi := int64(-1)      // last position where joining the path helps
	sparseJoinHi := int64(-1)
	if m.ok && !m.merged {
		joinHi = min(m.ringHi, m.end)
		sparseJoinHi = min(m.sparseHi, m.end)
	}
	strideMask := m.stride - 1
	for ; k < len(buf); k++ {
		c := int(s.classes[buf[k]])
		n := t.to(c)
		if n == nil {
			n = s.dfa.build(t, c)
		}
		t = n
		pos := int64(k+1) + delta
		if t.match >= 0 {
			a.bestLen, a.bestRule = k-j, t.match
		}
		if t.empty {
			return t, k, runDead
		}
		if k == limit {
			return t, k, runLimit
		}
		if pos&strideMask == 0 {
			slot := int(pos/m.stride) % len(m.sparse)
			switch {
			case pos <= sparseJoinHi && m.sparse[slot] == t:
				return t, k, runMerged
			case !m.merged:
				m.ownSparse[slot] = t
				m.ownSparseHi = pos
			case pos == m.sparseHi+m.stride:
				m.sparse[slot] = t
				m.sparseHi = pos
			}
		}
		switch {
		case pos <= joinHi && ring[pos&mask] == t:
			return t, k, runMerged
		case pos > winHi:
		case !m.merged:
			m.ownRing[pos&mask] = t
			m.ownHi = pos
		case pos == m.ringHi+1:
			ring[pos&mask] = t
			m.ringHi = pos
		}
	}
	return t, k - 1, runStarved
}

// resolve ends attempt a, anchored at buf[j], which stopped after buf[k]
// in state t for reason why: its path becomes the path unless the path was
// run further.
func (m *pathMemo) resolve(a *attempt, j, k int, t *state, why int, delta int64) {
	end := int64(k) + delta
	if !m.merged && m.ok && end < m.end {
		return
	}
	if !m.merged {
		m.ring, m.ownRing = m.ownRing, m.ring
		m.ringHi = m.ownHi
		m.sparse, m.ownSparse = m.ownSparse, m.sparse
		m.sparseHi = m.ownSparseHi
	}
	m.ok = true
	m.end = end
	m.limit = nil
	if why != runDead {
		m.limit = t
	}
	m.match, m.rule = -1, a.bestRule
	if a.bestLen >= 0 {
		m.match = int64(j+a.bestLen+1) + delta
	}
}
