package engine

import "io"

// emit writes out the attempt's match at buf[j] (process and
// processGuarded): the bytes from buf[emit] up to it, then its
// replacement. It returns the match's end, where the scan resumes. (One
// call per match: the bytes before the match are written here, not by the
// loops, so that their common tail is one function, not two copies.)
func (st *Stream) emit(buf []byte, start, emit, j int) int {
	s := st.set
	e, r := j+st.run.bestLen, int(st.run.bestRule)
	st.write(buf[emit:j])
	st.matched.Add(r)
	if s.rules[r].Once {
		st.active.Remove(r)
		st.activeChanged()
	}
	t := &s.tmpl[r]
	if t.constant != nil {
		st.write(t.constant)
		return e
	}
	var idx []int
	if t.groups {
		idx = st.submatches(buf, start, j, e, r)
	}
	for _, p := range t.parts {
		switch p.kind {
		case partText:
			st.writeString(p.text)
		case partGroup:
			if p.group == 0 {
				st.write(buf[j:e])
			} else if idx != nil {
				// The first group of that name that took part, as Expand.
				g := p.group
				for k := 0; idx[2*g] < 0 && k < len(p.more); k++ {
					g = p.more[k]
				}
				if idx[2*g] >= 0 {
					st.write(idx2bytes(buf, idx, g))
				}
			}
		case partVar:
			st.write(st.lookup(p))
		}
	}
	return e
}

func idx2bytes(buf []byte, idx []int, g int) []byte { return buf[idx[2*g]:idx[2*g+1]] }

func (st *Stream) writeString(s string) {
	if st.err != nil || len(s) == 0 {
		return
	}
	_, st.err = io.WriteString(st.dst, s)
}

// submatches returns the group offsets (in buf) of rule r's match buf[j:e],
// or nil.
func (st *Stream) submatches(buf []byte, start, j, e, r int) []int {
	next := -1
	if e < len(buf) {
		next = int(buf[e])
	}
	cp := st.set.caps[r]
	idx := st.idx[:cp.ncap]
	if !cp.submatch(idx, buf[j:e], st.prevByte(buf, start, j), next) {
		return nil // cannot happen: the DFA matched this text
	}
	for i := range idx {
		if idx[i] >= 0 {
			idx[i] += j
		}
	}
	return idx
}

// lookup resolves a placeholder once per stream.
func (st *Stream) lookup(p part) []byte {
	i := p.group
	switch st.varKnown[i] {
	case 0:
		st.varKnown[i] = 2
		if st.vars != nil {
			if v, ok := st.vars(st.set.varNames[i]); ok {
				st.varKnown[i] = 1
				st.varVals[i] = append(st.varVals[i][:0], v...)
			}
		}
	}
	if st.varKnown[i] == 1 {
		return st.varVals[i]
	}
	return []byte(p.text)
}
