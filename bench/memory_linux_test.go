package bench

import (
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"unsafe"
)

// BenchmarkMemoryLatency is the machine's floor for BenchmarkKeyedMeter: a chase
// of dependent loads, one per 64-byte line, through a random cycle over a buffer
// of the given size, so each load waits for the one before (no prefetching, no
// overlap). pages=4k is the Go heap as it comes; pages=2m asks the kernel for
// transparent huge pages (madvise), which removes most TLB misses.
func BenchmarkMemoryLatency(b *testing.B) {
	for _, mb := range []int{1, 8, 96} {
		for _, huge := range []bool{false, true} {
			name := "size=" + strconv.Itoa(mb) + "MB/pages=4k"
			if huge {
				name = "size=" + strconv.Itoa(mb) + "MB/pages=2m"
			}
			b.Run(name, func(b *testing.B) {
				const line = 64 / 8 // int64s per cache line
				buf := make([]int64, mb<<20/8+1<<21/8)
				if huge {
					// Align to 2 MiB and ask for huge pages before the first touch.
					off := (1<<21 - int(uintptr(unsafe.Pointer(&buf[0]))&(1<<21-1))) & (1<<21 - 1) / 8
					buf = buf[off : off+mb<<20/8]
					raw := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)
					if err := syscall.Madvise(raw, 14 /* MADV_HUGEPAGE */); err != nil {
						b.Skip("madvise:", err)
					}
				} else {
					buf = buf[:mb<<20/8]
				}
				n := len(buf) / line
				perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
				for i := range n {
					buf[perm[i]*line] = int64(perm[(i+1)%n] * line)
				}
				p := int64(perm[0] * line)
				for b.Loop() {
					p = buf[p]
				}
				sink = p
			})
		}
	}
}

var sink int64
