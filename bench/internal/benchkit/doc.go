// Package benchkit holds what the benchmark programs under bench/ share, so
// that each rule has one home:
//
//   - proc.go reads what the kernel says about a process: its CPU time
//     (/proc/PID/stat, in clock ticks, whose rate ClockTicks reads from the
//     auxiliary vector), its resident memory and threads (/proc/PID/status);
//   - child.go builds the agent (GoTool, BuildAgent), keeps the last lines a
//     child process prints (TailBuffer), ends a child (Terminate: SIGTERM,
//     then SIGKILL after a grace) or has the kernel end it with its parent
//     on Linux (SetParentDeathSignal), reads the agent's started log line
//     (StartedField), and names the hidden flag that makes a benchmark's
//     binary its own floor (FloorFlag, IsFloor);
//   - wait.go waits for an instant or a context's end (SleepUntil), and
//     polls what gives no event to wait on (Poll, WaitSocket);
//   - flags.go tells the flags given on the command line (SetFlags);
//   - stats.go picks a quantile of a sample by nearest rank (Percentile).
//
// Every reader returns an error that names the value it could not read and
// what it expected. The package is internal to bench/: the agent and the
// client never import it.
package benchkit
