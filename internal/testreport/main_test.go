package main

import (
	"strings"
	"testing"
)

// TestReport: a passing package prints its result line only; a failed test
// prints its output; a package that panics (a -timeout) prints, before its
// dump, the output of the test still running, which had failed and whose
// cleanup then hung.
func TestReport(t *testing.T) {
	in := `{"Action":"start","Package":"a"}
{"Action":"run","Package":"a","Test":"TestA"}
{"Action":"output","Package":"a","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"a","Test":"TestA","Output":"    a_test.go:5: passing noise\n"}
{"Action":"pass","Package":"a","Test":"TestA"}
{"Action":"output","Package":"a","Output":"-test.shuffle 17\n"}
{"Action":"output","Package":"a","Output":"PASS\n"}
{"Action":"output","Package":"a","Output":"ok  \ta\t0.1s\n"}
{"Action":"pass","Package":"a"}
{"Action":"run","Package":"b","Test":"TestFail"}
{"Action":"output","Package":"b","Test":"TestFail","Output":"=== RUN   TestFail\n"}
{"Action":"output","Package":"b","Test":"TestFail","Output":"    b_test.go:7: want 2\n"}
{"Action":"output","Package":"b","Test":"TestFail","Output":"--- FAIL: TestFail (0.00s)\n"}
{"Action":"fail","Package":"b","Test":"TestFail"}
{"Action":"run","Package":"b","Test":"TestHang"}
{"Action":"output","Package":"b","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"b","Test":"TestHang","Output":"    b_test.go:9: the message\n"}
{"Action":"output","Package":"b","Output":"panic: test timed out after 5s\n"}
{"Action":"output","Package":"b","Output":"FAIL\tb\t5.0s\n"}
{"Action":"fail","Package":"b"}
not json
`
	var out strings.Builder
	report(strings.NewReader(in), &out)
	want := "ok  \ta\t0.1s\n" +
		"    b_test.go:7: want 2\n--- FAIL: TestFail (0.00s)\n" +
		"--- UNFINISHED: TestHang (running when the package failed); its output:\n    b_test.go:9: the message\n" +
		"panic: test timed out after 5s\nFAIL\tb\t5.0s\n" +
		"not json\n"
	if got := out.String(); got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}
}
