// Package backoff provides a client that backs off by itself when the
// downstream it calls refuses for overload, so that a fleet of callers does
// not turn one slow replica into a retry storm.
//
// A [Client] makes the calls to one downstream, through [Client.Do] around
// any call, or through [Transport], an http.RoundTripper. It keeps three
// rules, in one core shared by both.
//
// # Honour the downstream's delay
//
// A refusal is an overload answer: for Do, an error with a RetryAfter()
// time.Duration method (every floodgate refusal, such as a semaphore's or a
// breaker's, except those retrying cannot cure: too large, invalid key, no
// identity, no policy, closed) or one Config.Refused says is one; for
// Transport, a response 429 or 503. A refusal that asks for a delay (a
// RetryAfter above 0; a Retry-After header of seconds or an HTTP-date, 0
// included) is retried no earlier than that delay, plus up to a tenth more
// so that clients told the same do not return together; it is returned at
// once when the delay is longer than Config.MaxRetryAfter or would end after
// the context's deadline: waiting could not help the caller. A refusal
// without a delay is retried after a random wait below BaseDelay·2^(n−1),
// at most MaxDelay ("full jitter"). A delay is that call's: it does not
// hold back other calls of the Client, which the throttle slows instead
// (a Retry-After is often per request, and a shared pause would make every
// caller wait for one refusal).
//
// # Throttle when refused (Google SRE book, "Handling Overload")
//
// Over the last Config.Window the Client counts R, the attempts (sent or
// refused by itself), and A, the attempts the downstream did not refuse
// for overload; it refuses an attempt itself with probability
// max(0, (R − K·A)/(R + 1)), at most MaxThrottle (0.9). With K = 2 it
// throttles only when fewer than half the attempts are accepted, and then
// sends about K·A attempts per window: what the downstream takes and a
// margin. (A downstream refusing exactly 1/K of the attempts whatever the
// load sits on that edge, where the throttle wanders.) Only overload refusals are not accepts: a 404, a 500, an
// error without a RetryAfter or a network error is an answer the
// downstream gave (or a failure throttling would not cure), and counts as
// accepted, as in the book, which counts backend rejections only. A call
// the Client refuses returns a *RejectError matching [ErrThrottled] without
// calling the function or sending the request. Two details differ from
// the book. The cap keeps probes going while the downstream refuses
// everything (a tenth of the attempts), so that the Client sees its
// recovery; the formula alone sends about one attempt per Window then. And
// once a tenth of the Window has passed in which the downstream accepted
// attempts and refused none, the Client forgets its own refusals (they
// leave R): counted for the rest of the Window they would keep the
// throttle on for 1.65 Windows after a recovery; forgotten, it is off two
// to three tenths of a Window after it. While the downstream refuses
// anything, nothing is forgotten, so the book's steady state holds. Below
// Config.MinRequests attempts over the Window the Client never throttles.
//
// # Spend a bounded retry budget
//
// Retries over the Window are at most Config.RetryBudget (0.1) × the first
// attempts sent over it, plus Config.MinRetries (10) so that low traffic
// can still retry; a call makes at most MaxAttempts attempts (3). When the
// budget is spent the call returns its refusal (for Transport, the
// response as it came). A retry is decided when the refusal arrives, by
// all three rules at once: a retry the throttle refuses returns the
// refusal, not ErrThrottled.
//
// # Which to use
//
// Transport for HTTP: it retries only requests it can send again
// (idempotent, with a replayable body) and returns every other response
// untouched. Do for any other call (gRPC, a database, a floodgate gate),
// with Config.Refused to say which errors are
// refusals when they carry no RetryAfter. Set MaxAttempts to 1 to keep the
// throttle without retries; a negative K keeps the retries without the
// throttle.
//
// Use one Client per destination, shared by all its callers: the throttle
// and the budget are that downstream's. [Client.Stats] returns the counts,
// and Config.Observer is told of every attempt and refusal (Component
// ComponentBackoff, Part Config.Name). Do allocates nothing when the call
// succeeds at once; waits use timers and the context, so tests can run a
// Client under testing/synctest.
//
//	c := backoff.New(backoff.Config{Name: "billing"})
//	client := &http.Client{Transport: &backoff.Transport{Client: c}}
//	resp, err := client.Get("http://billing.internal/invoices")
//	if errors.Is(err, backoff.ErrThrottled) {
//		// refused by this process: the downstream is refusing most calls
//	}
package backoff
