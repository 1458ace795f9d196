package distsem

import (
	"encoding/binary"
	"math"
	"strconv"
)

// stateFields are the values of a semaphore's state (the hash {name}:s), in
// the order of its packed form: field p, eight little-endian float64s
// (struct '<dddddddd' in the scripts; see lua/head.lua). Versions before the
// packed state wrote one text field each, under these names.
var stateFields = [...]string{"limit", "used", "fence", "nq", "tn", "ta", "he", "seq"}

// packedStateLen is the length of the packed state (field p).
const packedStateLen = 8 * len(stateFields)

// unpackState decodes the packed state p; ok is false unless p is
// packedStateLen bytes long (a missing or foreign field: the scripts then
// read the text fields).
func unpackState(p string) (st [len(stateFields)]int64, ok bool) {
	if len(p) != packedStateLen {
		return st, false
	}
	for i := range st {
		st[i] = int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(p[8*i : 8*i+8]))))
	}
	return st, true
}

// stateLimitUsed returns the limit and the weight in use of a state read as
// HMGET p limit used: the packed form when there is one, else the text
// fields (0 when missing).
func stateLimitUsed(vals []any) (limit, used int64) {
	if p, _ := vals[0].(string); p != "" {
		if st, ok := unpackState(p); ok {
			return st[0], st[1]
		}
	}
	return atoi(vals[1]), atoi(vals[2])
}

func atoi(v any) int64 {
	str, _ := v.(string)
	n, _ := strconv.ParseInt(str, 10, 64)
	return n
}
