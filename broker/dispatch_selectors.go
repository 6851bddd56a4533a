package broker

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strconv"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// hashRangeSize is the Key_Shared hash space, Apache Pulsar's: sticky-key
// hashes and STICKY ranges live in [0, 65535].
const hashRangeSize = 65536

// stickyKeyHash is Murmur3_32 of the sticky key (ordering key, else
// partition key), folded into the hash range as Apache Pulsar 4.0 does.
func stickyKeyHash(key []byte) int32 {
	return int32((murmur3(key, 0) & 0x7fffffff) % hashRangeSize)
}

type hashRange struct{ lo, hi int32 } // inclusive

// ksSelector maps a sticky-key hash to the consumer that owns it.
type ksSelector interface {
	add(c *consumer) error
	remove(c *consumer)
	pick(hash int32) *consumer
}

// ringSelector is AUTO_SPLIT: consistent hashing, each consumer on the
// ring at `points` places derived from its name (Murmur3 of
// name + NUL + i), so a joining consumer takes a share of hashes from
// each of the others and no hash moves between two old consumers.
type ringSelector struct {
	points int
	ring   []ringPoint // sorted by hash
}

type ringPoint struct {
	hash int32
	cs   []*consumer // colliding consumers, best first
}

func newRingSelector(points int) *ringSelector { return &ringSelector{points: points} }

func ringHash(name string, i int) int32 {
	return stickyKeyHash([]byte(name + "\x00" + strconv.Itoa(i)))
}

// better orders colliding consumers: priority level, then name, then
// arrival.
func better(a, b *consumer) int {
	switch {
	case a.priority != b.priority:
		return int(a.priority) - int(b.priority)
	case a.name != b.name:
		if a.name < b.name {
			return -1
		}
		return 1
	case a.order < b.order:
		return -1
	case a.order > b.order:
		return 1
	}
	return 0
}

func (r *ringSelector) add(c *consumer) error {
	for i := 0; i < r.points; i++ {
		h := ringHash(c.name, i)
		j := sort.Search(len(r.ring), func(j int) bool { return r.ring[j].hash >= h })
		if j == len(r.ring) || r.ring[j].hash != h {
			r.ring = slices.Insert(r.ring, j, ringPoint{hash: h})
		}
		p := &r.ring[j]
		if slices.Contains(p.cs, c) {
			continue
		}
		k, _ := slices.BinarySearchFunc(p.cs, c, better)
		p.cs = slices.Insert(p.cs, k, c)
	}
	return nil
}

func (r *ringSelector) remove(c *consumer) {
	out := r.ring[:0]
	for _, p := range r.ring {
		p.cs = slices.DeleteFunc(p.cs, func(x *consumer) bool { return x == c })
		if len(p.cs) > 0 {
			out = append(out, p)
		}
	}
	clear(r.ring[len(out):])
	r.ring = out
}

func (r *ringSelector) pick(h int32) *consumer {
	if len(r.ring) == 0 {
		return nil
	}
	j := sort.Search(len(r.ring), func(j int) bool { return r.ring[j].hash >= h })
	if j == len(r.ring) {
		j = 0
	}
	return r.ring[j].cs[0]
}

// stickySelector is STICKY: each consumer brings its own hash ranges, and
// they may not overlap.
type stickySelector struct {
	ranges []ownedRange // sorted by lo
}

type ownedRange struct {
	hashRange
	c *consumer
}

func (s *stickySelector) add(c *consumer) error {
	if len(c.ranges) == 0 {
		return pulsarwire.NewServerError(pb.ServerError_ConsumerAssignError, "Key_Shared STICKY consumer without hash ranges")
	}
	for _, r := range c.ranges {
		if r.lo < 0 || r.hi >= hashRangeSize || r.lo > r.hi {
			return pulsarwire.NewServerError(pb.ServerError_ConsumerAssignError, fmt.Sprintf("Invalid hash range [%d, %d]", r.lo, r.hi))
		}
		for _, o := range s.ranges {
			if r.lo <= o.hi && o.lo <= r.hi {
				return pulsarwire.NewServerError(pb.ServerError_ConsumerAssignError,
					fmt.Sprintf("Range conflict with consumer %s: [%d, %d] overlaps [%d, %d]", o.c.name, r.lo, r.hi, o.lo, o.hi))
			}
		}
	}
	for _, r := range c.ranges {
		s.ranges = append(s.ranges, ownedRange{r, c})
	}
	slices.SortFunc(s.ranges, func(a, b ownedRange) int { return int(a.lo) - int(b.lo) })
	return nil
}

func (s *stickySelector) remove(c *consumer) {
	s.ranges = slices.DeleteFunc(s.ranges, func(r ownedRange) bool { return r.c == c })
}

func (s *stickySelector) pick(h int32) *consumer {
	j := sort.Search(len(s.ranges), func(j int) bool { return s.ranges[j].hi >= h })
	if j < len(s.ranges) && s.ranges[j].lo <= h {
		return s.ranges[j].c
	}
	return nil
}

// murmur3 is MurmurHash3 x86 32-bit.
func murmur3(data []byte, seed uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	h := seed
	n := len(data)
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
		data = data[4:]
	}
	var k uint32
	switch len(data) {
	case 3:
		k ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(data[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
