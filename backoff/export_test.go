package backoff

// RetryAfter exports retryAfter to the tests.
var RetryAfter = retryAfter
