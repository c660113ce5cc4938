package owner

import (
	"hash/fnv"
	"slices"
	"strconv"
)

// Assign divides partitions 0..parts-1 among sessions and returns the
// session each partition falls to ("" for all when there is none). Every
// runner that sees the same live sessions computes the same assignment, so
// they agree without talking.
//
// The rule is rendezvous hashing with a capacity: each (partition,
// session) pair has a score, hash(session, partition), and pairs are
// taken best score first, a pair only when its partition is still free
// and its session below its capacity: ⌈parts/R⌉ while fewer than parts
// mod R sessions have reached it, ⌊parts/R⌋ after. So every session gets
// ⌊parts/R⌋ or ⌈parts/R⌉, max/mean ≤ ⌈parts/R⌉/(parts/R), and the capacities
// add up to parts, so every partition is taken. The scores keep it stable:
// a join or a leave moves mostly the partitions whose best pair changed,
// not a reshuffle: about 1.3 times the least that must move (P/R) on
// average for P = 64 and 2 to 13 runners, 3 times at worst
// (TestAssign_movement). Quotas filled in two passes, ⌊parts/R⌋ for all
// first, move more (1.44 on average, 4.3 at worst), as the first pass
// spreads every session's losses; a capacity looser than ⌈parts/R⌉ moves
// less (1.1 at 1.25⌈parts/R⌉) but breaks the bound above.
func Assign(parts int, sessions []string) []string {
	out := make([]string, parts)
	ss := slices.Compact(slices.Sorted(slices.Values(sessions)))
	if len(ss) > 0 && ss[0] == "" {
		ss = ss[1:]
	}
	if len(ss) == 0 || parts <= 0 {
		return out
	}
	type pair struct {
		score uint64
		p, s  int
	}
	pairs := make([]pair, 0, parts*len(ss))
	for si, s := range ss {
		for p := range parts {
			pairs = append(pairs, pair{score(s, p), p, si})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		switch {
		case a.score != b.score:
			if a.score > b.score {
				return -1
			}
			return 1
		case a.s != b.s:
			return a.s - b.s
		}
		return a.p - b.p
	})
	count := make([]int, len(ss))
	owner := make([]int, parts)
	for i := range owner {
		owner[i] = -1
	}
	base, extra := parts/len(ss), parts%len(ss)
	for left, i := parts, 0; left > 0; i++ {
		pr := pairs[i]
		quota := base
		if extra > 0 {
			quota++
		}
		if owner[pr.p] < 0 && count[pr.s] < quota {
			owner[pr.p] = pr.s
			count[pr.s]++
			left--
			if count[pr.s] == base+1 {
				extra--
			}
		}
	}
	for p, si := range owner {
		out[p] = ss[si]
	}
	return out
}

// score is the rendezvous score of partition p for session s: FNV-1a 64
// of "s/p", mixed by splitmix64's finalizer, as FNV alone spreads ids that
// differ in their last bytes poorly.
func score(s string, p int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	h.Write([]byte{'/'})
	h.Write(strconv.AppendInt(nil, int64(p), 10))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Moved counts the partitions whose session differs between two
// assignments of the same partitions.
func Moved(a, b []string) int {
	n := 0
	for p := range a {
		if a[p] != b[p] {
			n++
		}
	}
	return n
}
