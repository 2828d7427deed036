package gossip

// RepairMessages and RepairBytes bound the ring of recent sync messages a
// node keeps to send again when a peer asks for one it missed: the last
// RepairMessages messages, fewer when they hold more than RepairBytes. A
// peer that asks for one no longer kept is resynced with a push/pull.
const (
	RepairMessages = 4096
	RepairBytes    = 4 << 20
)
