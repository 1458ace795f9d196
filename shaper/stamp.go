package shaper

import "github.com/floodgate-go/floodgate/internal/stamp"

func init() {
	stamp.Set = func(d *Decision, at int64) { d.at = at }
	stamp.Get = func(d *Decision) int64 { return d.at }
}
