package stream

// HeartbeatPeers is the default of how many peers a node sends its idle
// heartbeat to in one heartbeat period, at most: in a larger mesh each
// peer gets one every Stretch periods, so that what an idle mesh sends
// per node does not grow with its size.
const HeartbeatPeers = 100

// Stretch returns how many heartbeat periods pass between two idle
// heartbeats a node sends each peer, in a mesh of live members (self
// included) where a node heartbeats at most peers of them a period: 1
// while live−1 ≤ peers, else ⌈(live−1)/peers⌉. A receiver reads a
// silence of that many periods as normal (it scales its resync threshold
// by the same factor). peers ≤ 0 never stretches: 1.
func Stretch(live, peers int) int {
	if peers <= 0 || live-1 <= peers {
		return 1
	}
	return (live - 1 + peers - 1) / peers
}
