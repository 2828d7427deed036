// Command adaptive runs the synthetic workload of OpenZiti's adaptive rate
// limiter test on virtual time, with OpenZiti's rules and with obol's
// Predictive rules (package adaptive) side by side:
//
//	go run ./bench/adaptive
//
// 300 callers each retry at once when rejected; one worker runs the calls in
// admission order, 25 ms each; a caller whose call took over 5 s (queueing
// and work) backs off, else it reports a success; the window is in [5, 250].
// The run lasts 116 virtual seconds, which is how long OpenZiti's published
// snapshot had run (4481 completed + 147 timed out at 40 calls a second).
// It prints a table with OpenZiti's published figures, both rules' figures
// and a last line
//
//	RESULT ours_timedout_ratio=… ours_completed=… openziti_timedout_ratio=… openziti_completed=… ours_window_p50=…
//
// where a ratio is timed out ÷ processed (completed + timed out). -overrun
// adds a random overshoot to every call's work (a real sleep's), -slow-at
// and -slow-work slow the worker down mid-run. A run is deterministic for a
// -seed and takes about a second.
package main
