// Command pacer compares client-side throttles on virtual time, the way
// rate_throttle_client's benchmark does:
//
//	go run ./bench/pacer
//
// Steady run: 10 clients (2 processes × 5 threads; each process shares one
// throttle between its threads, as the Ruby benchmark's process shares one
// client object) against obol's own GCRA (package local) of 4500 requests
// an hour, starting empty, for 30 minutes. Per strategy it reports the
// retry rate (429s ÷ requests, the mean over clients), the longest sleep
// any client was told to take, and the sample standard deviation of the
// clients' request counts.
//
// Clear run: a server holding 4500 requests that never refills, clients
// starting at a 1 s sleep; each client stops once it sees 10 or fewer
// remaining, and the run's time is when the last one stops.
//
// Every request takes 165 ms of virtual time (-request): the published
// clear time of ExponentialBackoff, which never sleeps before its first
// 429, is 74.33 s for 450 requests per client. The strategies are
// rate_throttle_client's ExponentialBackoff and
// ExponentialIncreaseProportionalRemainingDecrease, next to their published
// figures, and obol's KeepReserve. The last line is KeepReserve's:
//
//	RESULT retry_rate=… max_sleep_s=… stdev_requests=… clear_s=…
//
// (retry_rate a fraction). -seed sets the jitter's seed (a run is
// deterministic for a seed); -seeds n runs n seeds and shows the p50 and
// the p10–p90 spread. A run takes about a second.
package main
