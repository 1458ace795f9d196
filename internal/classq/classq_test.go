package classq

import (
	"math/rand/v2"
	"testing"
)

// TestRoom: the reservation rules, case by case, for limit 10 and classes
// reserving 3, 2 and 0.
func TestRoom(t *testing.T) {
	for _, tc := range []struct {
		name    string
		running [3]int64
		class   int
		n       int64
		want    bool
	}{
		{"idle, unreserved class: 10 - 5 reserved leaves 5", [3]int64{0, 0, 0}, 2, 5, true},
		{"idle, unreserved class: 6 would eat a reservation", [3]int64{0, 0, 0}, 2, 6, false},
		{"within its own reservation, whatever the rest", [3]int64{0, 1, 5}, 0, 3, true},
		{"past its reservation, the rest full", [3]int64{3, 0, 5}, 0, 1, false},
		{"past its reservation, room beyond the others'", [3]int64{3, 0, 4}, 0, 1, true},
		{"partly reserved: 2 left of its own, 1 beyond", [3]int64{1, 0, 5}, 0, 3, false},
		{"partly reserved: 2 left of its own, 2 wanted", [3]int64{1, 0, 5}, 0, 2, true},
		{"a lower class never takes a higher's reservation", [3]int64{0, 2, 5}, 1, 1, false},
		{"a higher class never takes a lower's reservation", [3]int64{3, 0, 5}, 0, 1, false},
		{"the unreserved class with the others using theirs", [3]int64{3, 2, 4}, 2, 1, true},
		{"full", [3]int64{3, 2, 5}, 2, 1, false},
	} {
		s := New[int]([]int64{3, 2, 0})
		for c, r := range tc.running {
			s.Start(c, r)
		}
		if got := s.Room(tc.class, tc.n, 10); got != tc.want {
			t.Errorf("%s: running %v, Room(%d, %d, 10) = %v, want %v", tc.name, tc.running, tc.class, tc.n, got, tc.want)
		}
	}
}

// TestRoomLimitBelowReservations: where a moving limit has fallen to the
// reservations (3 and 2) or below, they keep the other classes out, except
// while nothing runs: then any class may start.
func TestRoomLimitBelowReservations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   int64
		running [3]int64
		class   int
		want    bool
	}{
		{"limit 1, idle: the unreserved class may start", 1, [3]int64{0, 0, 0}, 2, true},
		{"limit 1, idle: a reserved class may start", 1, [3]int64{0, 0, 0}, 1, true},
		{"limit 5, idle: the unreserved class may start", 5, [3]int64{0, 0, 0}, 2, true},
		{"limit 5, one running: the reservations keep the rest", 5, [3]int64{0, 0, 1}, 2, false},
		{"limit 5, one critical running: the unreserved class waits", 5, [3]int64{1, 0, 0}, 2, false},
		{"limit 2, one running: within its own reservation", 2, [3]int64{0, 0, 1}, 0, true},
		{"limit 6, one running: room beyond the reservations", 6, [3]int64{0, 0, 0}, 2, true},
	} {
		s := New[int]([]int64{3, 2, 0})
		for c, r := range tc.running {
			s.Start(c, r)
		}
		if got := s.Room(tc.class, 1, tc.limit); got != tc.want {
			t.Errorf("%s: running %v, Room(%d, 1, %d) = %v, want %v", tc.name, tc.running, tc.class, tc.limit, got, tc.want)
		}
	}
}

// TestNextIsStrictPriorityFIFO: Next picks the highest class with a queued
// entry and room, and Pop its first entry.
func TestNextIsStrictPriorityFIFO(t *testing.T) {
	s := New[int]([]int64{0, 0, 0})
	s.Push(2, 20)
	s.Push(1, 10)
	s.Push(1, 11)
	s.Push(2, 21)
	var got []int
	for c := s.Next(1, 10); c >= 0; c = s.Next(1, 10) {
		got = append(got, s.Pop(c))
		s.Start(c, 1)
	}
	want := []int{10, 11, 20, 21}
	if len(got) != len(want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	if s.Queued() != 0 || s.Remove(1, 10) {
		t.Errorf("Queued = %d after popping everything", s.Queued())
	}
}

// TestRandomNeverPastTheLimit: starting only what Room allows, under a
// limit that moves, running plus the unused reservations never exceed the
// largest limit, running never exceeds the limit a start was allowed under,
// and a class within its reservation always has room.
func TestRandomNeverPastTheLimit(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		k := 1 + r.IntN(4)
		reserved := make([]int64, k)
		limit := int64(1 + r.IntN(20))
		for i := range reserved {
			reserved[i] = int64(r.IntN(4))
		}
		n := int64(1 + r.IntN(2))
		if _, p := Check(reserved, n, limit); p != "" {
			continue
		}
		s := New[int](reserved)
		var held []int
		for range 2000 {
			if len(held) > 0 && r.IntN(2) == 0 {
				i := r.IntN(len(held))
				s.Done(held[i], n)
				held = append(held[:i], held[i+1:]...)
				continue
			}
			c := r.IntN(k)
			if s.Classes[c].Running+n <= s.Classes[c].Reserved && !s.Room(c, n, limit) {
				t.Fatalf("class %d within its reservation has no room", c)
			}
			if s.Room(c, n, limit) {
				s.Start(c, n)
				held = append(held, c)
				if s.Running > limit || s.Running+s.unused() > limit {
					t.Fatalf("reserved %v, limit %d: running %d, unused %d", reserved, limit, s.Running, s.unused())
				}
			}
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		reserved []int64
		n, limit int64
		class    int
		ok       bool
	}{
		{[]int64{2, 2}, 1, 4, -1, true},
		{[]int64{3, 2}, 1, 4, -1, false},
		{[]int64{4, 0}, 1, 4, 1, false},
		{[]int64{2, 1, 0}, 1, 4, -1, true},
		{[]int64{2, 1, 0}, 2, 4, 2, false}, // class 1 has 1 of its 2 and 2 beyond the others' 2; class 2 needs 2 beyond 3
	} {
		c, p := Check(tc.reserved, tc.n, tc.limit)
		if (p == "") != tc.ok || c != tc.class {
			t.Errorf("Check(%v, %d, %d) = %d, %q", tc.reserved, tc.n, tc.limit, c, p)
		}
	}
}
