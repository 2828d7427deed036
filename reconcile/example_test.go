package reconcile_test

import (
	"fmt"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

// Two nodes, each an engine attached to its cluster. Node a's hits reach
// node b in a packet (here a's snapshot, what a push/pull carries; a sync
// tick ships the entries that changed, through the Sender), and b's next
// decision counts them: the tier has 5 hits a minute for the domain
// cluster-wide.
func ExampleCluster_HandlePacket() {
	cfg, err := config.Parse([]byte(`
resources:
  api/search:
    kind: tiers
    tiers: "5,60,60,0"
`))
	if err != nil {
		panic(err)
	}
	a, b := local.New(cfg), local.New(cfg)
	ca := reconcile.New(reconcile.Options{Name: "a"})
	cb := reconcile.New(reconcile.Options{Name: "b"})
	a.Attach(ca)
	b.Attach(cb)

	d, _ := a.Request(time.Now(), "api/search", "tenant-42", 3, 3)
	fmt.Println("a grants", d.Granted)

	cb.HandlePacket(ca.Snapshot())
	d, _ = b.Request(time.Now(), "api/search", "tenant-42", 5, 1)
	fmt.Println("b grants", d.Granted, "of 5")
	for _, c := range cb.Contributions("api/search", "tenant-42", time.Now()) {
		fmt.Printf("%s: hits %v (total, tier 1)\n", c.Origin, c.Counts)
	}
	// Output:
	// a grants 3
	// b grants 2 of 5
	// b: hits [2 2] (total, tier 1)
	// a: hits [3 3] (total, tier 1)
}
