// Command abuse replays, against a real agent, the attacks of the hardening
// review, and prints one line per attack with held or broke and its figure,
// beside the decision latency an honest client sees idle and during the
// attack.
//
//	go run ./bench/abuse            # every attack
//	go run ./bench/abuse -attack simulate -d 10s
//
// It builds the agent with `go build`, starts a fresh one per attack on a
// temporary socket with the built-in config, and runs a probe: one client
// asking /v1/request over the socket, one request at a time, whose p50 and
// p99 latency are measured idle and then while the attack runs. An attack
// holds when its own check passes (stated per attack) and the probe's p99
// during the attack is within 2× of idle. With taskset (util-linux) and two
// processors or more, each attack runs pinned (this process on one
// processor, the agent and the probe on another), which judges every
// attack so, and unpinned, whose figure is printed beside it; without, only
// the attacks that flood from outside this process's own work (simulate,
// simcluster, simtiny, rlsreload) are judged by the probe.
// Attacks that need agents of their own (gossip, names, token, hoard) start
// them beside the probed agent, so their latency line is the probed
// agent's. The last line is
//
//	RESULT attacks=N held=H broke=B
package main
