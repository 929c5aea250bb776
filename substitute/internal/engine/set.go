package engine

import (
	"errors"
	"fmt"
)

// Priority chooses between matches that start at the same position.
type Priority int

const (
	// Longest: leftmost, then longest, then the rule declared first.
	Longest Priority = iota
	// First: leftmost, then the rule declared first, then leftmost-first
	// inside that rule's regexp (Perl and nginx replace_filter semantics).
	First
)

// Rule is one find-and-replace rule.
type Rule struct {
	Pattern     string // literal text if Literal, else RE2 syntax
	Literal     bool
	Replacement string // {placeholder} variables; regex rules also $1, ${name}, $$ (regexp.Expand)
	Once        bool   // the rule stops taking part after its first match
}

// Options tune a rule set. Zero values select the defaults.
type Options struct {
	Priority Priority
	// MaxMatch is the longest match, in bytes, that can be replaced: a
	// candidate that would grow past it is dropped (see Stream.Dropped).
	// It also bounds the bytes a stream holds back. Default 16 KiB.
	MaxMatch int
	// MaxInstructions bounds the size of the compiled automaton (NFA
	// instructions over all rules). Default 200,000.
	MaxInstructions int
	// CacheSize bounds the memory of the lazy DFA in bytes; when it is full
	// it is emptied and rebuilt on demand. Default 8 MiB.
	CacheSize int
}

// Defaults.
const (
	DefaultMaxMatch        = 16 << 10
	DefaultMaxInstructions = 200_000
	DefaultCacheSize       = 8 << 20
)

// Set is a compiled rule set. It is immutable apart from its internal DFA
// cache, and safe for concurrent use by any number of streams.
type Set struct {
	rules    []Rule
	prio     Priority
	maxMatch int
	prog     nfa
	dfa      *dfa
	classes  [256]uint8
	all      Mask
	full     [4]*state // start states with every rule active, by prevClass
	pre      *prefilter

	tmpl     []template
	caps     []*capProg // per rule whose replacement uses groups, else nil
	maxCap   int        // largest capProg.ncap
	varNames []string

	minLen    int // a lower bound of every match's length
	cacheSize int
	guardA    guardAutomata // built when a stream first needs its guard
	// guardMode lets tests turn every stream's guard on from the first
	// byte, or never on.
	guardMode guardMode
	guardRing int // tests: a smaller ring, so that scans run in more segments
	// guardCrossed: tests, a smaller crossed window (guardAutomata.crossed).
	guardCrossed int

	// memoShape sizes each stream's path memo (tests shrink it, or set
	// its ring to 0 to turn the memo off).
	memoShape memoShape
}

// cacheMinStates is how many of the largest possible DFA states the cache
// must hold: fewer, and a body could reset it at every byte.
const cacheMinStates = 4

// Compile compiles rules into a Set. It refuses, naming the rule (1-based),
// patterns that do not parse, rules that can match the empty string,
// replacements that refer to missing groups, and rule sets whose automaton
// would exceed its bounds.
func Compile(rules []Rule, opts Options) (*Set, error) {
	if len(rules) == 0 {
		return nil, errors.New("no rules")
	}
	if opts.MaxMatch <= 0 {
		opts.MaxMatch = DefaultMaxMatch
	}
	if opts.MaxInstructions <= 0 {
		opts.MaxInstructions = DefaultMaxInstructions
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.Priority != Longest && opts.Priority != First {
		return nil, fmt.Errorf("unknown priority %d", opts.Priority)
	}
	s := &Set{
		rules:     append([]Rule(nil), rules...),
		prio:      opts.Priority,
		maxMatch:  opts.MaxMatch,
		all:       NewMask(len(rules)),
		memoShape: newMemoShape(opts.MaxMatch),
	}
	minLen, err := s.compileRules(opts.MaxInstructions)
	if err != nil {
		return nil, err
	}
	s.minLen, s.cacheSize = minLen, opts.CacheSize
	s.buildClasses()
	s.dfa = newDFA(&s.prog, s.prio == First, &s.classes, s.classReps(), opts.CacheSize)
	if need := cacheMinStates * s.dfa.stateSize(len(s.prog.insts)); need > opts.CacheSize {
		// Set-wide: every rule adds to the states, so no rule is to blame.
		return nil, fmt.Errorf("rules: the %d rules need DFA states of up to %d bytes, more than the %d-byte DFA cache can hold %d of: use fewer or simpler rules",
			len(rules), need/cacheMinStates, opts.CacheSize, cacheMinStates)
	}
	if err := s.checkEmpty(); err != nil {
		return nil, err
	}
	for p := range s.full {
		s.full[p] = s.dfa.start(s.all, p, true)
	}
	s.pre = newPrefilter(s, minLen)
	return s, nil
}

// MaxMatch returns the longest match the set replaces.
func (s *Set) MaxMatch() int { return s.maxMatch }

// CacheResets returns how many times the DFA cache filled up and was
// emptied; a steadily growing figure means the rule set thrashes its cache.
func (s *Set) CacheResets() int64 { return s.dfa.resets.Load() }
