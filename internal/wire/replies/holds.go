package replies

// The names of the members of the replies other than the decision's, each
// once: the writers below append them as Keys, the readers compare them.
const (
	nError     = "error"
	nCode      = "code"
	nMessage   = "message"
	nResponses = "responses"

	nSession     = "session"
	nTTLMs       = "ttl_ms"
	nGranted     = "granted"
	nHold        = "hold"
	nDomainLimit = "domain_limit"
	nGlobalLimit = "global_limit"
	nDomainHolds = "domain_holds"
	nGlobalHolds = "global_holds"
	nGroups      = "groups"
	nName        = "name"
	nLimit       = "limit"
	nHolds       = "holds"
	nShadow      = "shadow"
	nLenient     = "lenient"
	nReleased    = "released"
	nHeld        = "held"
	nTransfer    = "transfer"
	nResource    = "resource"
	nDomain      = "domain"
	nCopies      = "copies"

	// NameRemaining is the member of the reply of a refund; NameWaitMs the
	// wait of a pacing reply. The client reads each with ReadInt.
	NameRemaining = "remaining"
	NameWaitMs    = "wait_ms"
)

// The keys of the members the agent writes outside this package's
// writers: the one member of a refund's reply (AppendInt), of an ended
// session's ({"released": N}), the wait and remaining calls of a pacing
// reply, and the array of a batch's decisions.
const (
	KeyRemaining Key = `,"` + NameRemaining + `":`
	KeyWaitMs    Key = `,"` + NameWaitMs + `":`
	KeyReleased  Key = kReleased
	KeyResponses Key = `,"` + nResponses + `":`
)

// The keys of those members (granted, global_limit, shadow and lenient are
// the decision's keys).
const (
	kError       Key = `,"` + nError + `":`
	kCode        Key = `,"` + nCode + `":`
	kMessage     Key = `,"` + nMessage + `":`
	kSession     Key = `,"` + nSession + `":`
	kTTLMs       Key = `,"` + nTTLMs + `":`
	kHold        Key = `,"` + nHold + `":`
	kDomainLimit Key = `,"` + nDomainLimit + `":`
	kDomainHolds Key = `,"` + nDomainHolds + `":`
	kGlobalHolds Key = `,"` + nGlobalHolds + `":`
	kGroups      Key = `,"` + nGroups + `":`
	kName        Key = `,"` + nName + `":`
	kLimit       Key = `,"` + nLimit + `":`
	kHolds       Key = `,"` + nHolds + `":`
	kReleased    Key = `,"` + nReleased + `":`
	kHeld        Key = `,"` + nHeld + `":`
	kTransfer    Key = `,"` + nTransfer + `":`
	kResource    Key = `,"` + nResource + `":`
	kDomain      Key = `,"` + nDomain + `":`
	kCopies      Key = `,"` + nCopies + `":`
)

// AppendError appends the error object {"error": {"code", "message"}}.
func AppendError(w Writer, b []byte, code, msg string) []byte {
	b = w.Object(b, 1)
	b = w.Object(w.First(b, kError), 2)
	b = w.String(w.First(b, kCode), code)
	b = w.String(w.Key(b, kMessage), msg)
	return w.End(w.End(b))
}

// AppendInt appends a reply of one integer member, k: {"remaining": N}
// of a refund, {"released": N} of an ended session. ReadInt reads it.
func AppendInt(w Writer, b []byte, k Key, v int64) []byte {
	b = w.Object(b, 1)
	b = w.Int(w.First(b, k), v)
	return w.End(b)
}

// AppendSession appends the reply of opening or renewing a session:
// {"session", "ttl_ms"}.
func AppendSession(w Writer, b []byte, id string, ttlMs int64) []byte {
	b = w.Object(b, 2)
	b = w.String(w.First(b, kSession), id)
	b = w.Int(w.Key(b, kTTLMs), ttlMs)
	return w.End(b)
}

// ReadSession reads the reply of opening a session: its id, required and
// not empty (the client keeps its own ttl: ttl_ms is skipped).
func ReadSession(b []byte) (id string, err error) { return readID(b, nSession) }

// readID reads a reply whose one member that matters is the id named
// name: required and not empty; the other members are skipped.
func readID(b []byte, name string) (id string, err error) {
	s := newReader(b)
	for k := range s.members() {
		if string(k) == name {
			id = s.str()
		} else {
			s.skip()
		}
	}
	if id == "" {
		return "", ErrMalformed
	}
	return id, s.end()
}

// Reservation is the reply of a reserve.
type Reservation struct {
	Granted     int64
	Hold        string // "" when rejected: left out
	DomainLimit int64  // effective; NoLimit: none, left out
	GlobalLimit int64  // NoLimit: none, left out
	DomainHolds int64
	GlobalHolds int64
	Groups      []GroupHolds // written always, empty when the domain is in none
	Shadow      bool         // written only when true
	Lenient     bool         // written only when true
}

// GroupHolds is one domain group's pool as a reservation saw it.
type GroupHolds struct {
	Name  string
	Limit int64 // NoLimit: none, left out
	Holds int64
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// AppendReservation appends the reply of a reserve: "hold" only when
// granted, the limits when there are, "groups" always (each group's
// "limit" when it has one), "shadow" and "lenient" only when true.
func AppendReservation(w Writer, b []byte, r *Reservation) []byte {
	hasHold, hasDomain, hasGlobal := r.Hold != "", r.DomainLimit != NoLimit, r.GlobalLimit != NoLimit
	b = w.Object(b, 4+btoi(hasHold)+btoi(hasDomain)+btoi(hasGlobal)+btoi(r.Shadow)+btoi(r.Lenient))
	b = w.Int(w.First(b, kGranted), r.Granted)
	if hasHold {
		b = w.String(w.Key(b, kHold), r.Hold)
	}
	if hasDomain {
		b = w.Int(w.Key(b, kDomainLimit), r.DomainLimit)
	}
	if hasGlobal {
		b = w.Int(w.Key(b, kGlobalLimit), r.GlobalLimit)
	}
	b = w.Int(w.Key(b, kDomainHolds), r.DomainHolds)
	b = w.Int(w.Key(b, kGlobalHolds), r.GlobalHolds)
	b = w.Array(w.Key(b, kGroups), len(r.Groups))
	for i, g := range r.Groups {
		limited := g.Limit != NoLimit
		b = w.Object(w.Next(b, i), 2+btoi(limited))
		b = w.String(w.First(b, kName), g.Name)
		if limited {
			b = w.Int(w.Key(b, kLimit), g.Limit)
		}
		b = w.Int(w.Key(b, kHolds), g.Holds)
		b = w.End(b)
	}
	b = w.EndArray(b)
	if r.Shadow {
		b = w.Bool(w.Key(b, kShadow), true)
	}
	if r.Lenient {
		b = w.Bool(w.Key(b, kLenient), true)
	}
	return w.End(b)
}

// ReadReservation reads the reply of a reserve into r, which it overwrites
// whole: granted is required, and so is hold when granted is not 0.
func ReadReservation(b []byte, r *Reservation) error {
	*r = Reservation{DomainLimit: NoLimit, GlobalLimit: NoLimit} // absent from the reply: none
	s := newReader(b)
	seen := false
	for k := range s.members() {
		switch string(k) {
		case nGranted:
			r.Granted, seen = s.int(), true
		case nHold:
			r.Hold = s.str()
		case nDomainLimit:
			r.DomainLimit = s.int()
		case nGlobalLimit:
			r.GlobalLimit = s.int()
		case nDomainHolds:
			r.DomainHolds = s.int()
		case nGlobalHolds:
			r.GlobalHolds = s.int()
		case nGroups:
			r.Groups = s.groupHolds()
		case nShadow:
			r.Shadow = s.bool()
		case nLenient:
			r.Lenient = s.bool()
		default:
			s.skip()
		}
	}
	if !seen || (r.Granted > 0 && r.Hold == "") {
		return ErrMalformed
	}
	return s.end()
}

func (s *reader) groupHolds() []GroupHolds {
	var gs []GroupHolds
	for range s.elems() {
		g := GroupHolds{Limit: NoLimit}
		for k := range s.members() {
			switch string(k) {
			case nName:
				g.Name = s.str()
			case nLimit:
				g.Limit = s.int()
			case nHolds:
				g.Holds = s.int()
			default:
				s.skip()
			}
		}
		gs = append(gs, g)
	}
	if s.bad {
		return nil
	}
	return gs
}

// AppendReleased appends the reply of a release: {"released", "held"}.
func AppendReleased(w Writer, b []byte, released, held int64) []byte {
	b = w.Object(b, 2)
	b = w.Int(w.First(b, kReleased), released)
	b = w.Int(w.Key(b, kHeld), held)
	return w.End(b)
}

// ReadReleased reads the reply of a release; released is required.
func ReadReleased(b []byte) (released, held int64, err error) {
	s := newReader(b)
	seen := false
	for k := range s.members() {
		switch string(k) {
		case nReleased:
			released, seen = s.int(), true
		case nHeld:
			held = s.int()
		default:
			s.skip()
		}
	}
	if !seen {
		return 0, 0, ErrMalformed
	}
	return released, held, s.end()
}

// AppendTransfer appends the reply of a transfer: {"transfer": id}.
func AppendTransfer(w Writer, b []byte, id string) []byte {
	b = w.Object(b, 1)
	b = w.String(w.First(b, kTransfer), id)
	return w.End(b)
}

// ReadTransfer reads the reply of a transfer: its id, required and not
// empty.
func ReadTransfer(b []byte) (string, error) { return readID(b, nTransfer) }

// Seized is the reply of a seize: the new hold and what it holds.
type Seized struct {
	Hold     string
	Resource string
	Domain   string
	Groups   []string
	Copies   int64
}

// AppendSeized appends the reply of a seize: {"hold", "resource",
// "domain", "groups", "copies"}.
func AppendSeized(w Writer, b []byte, s *Seized) []byte {
	b = w.Object(b, 5)
	b = w.String(w.First(b, kHold), s.Hold)
	b = w.String(w.Key(b, kResource), s.Resource)
	b = w.String(w.Key(b, kDomain), s.Domain)
	b = w.Array(w.Key(b, kGroups), len(s.Groups))
	for i, g := range s.Groups {
		b = w.String(w.Next(b, i), g)
	}
	b = w.EndArray(b)
	b = w.Int(w.Key(b, kCopies), s.Copies)
	return w.End(b)
}

// ReadSeized reads the reply of a seize into r, which it overwrites whole;
// hold is required and not empty.
func ReadSeized(b []byte, r *Seized) error {
	*r = Seized{}
	s := newReader(b)
	for k := range s.members() {
		switch string(k) {
		case nHold:
			r.Hold = s.str()
		case nResource:
			r.Resource = s.str()
		case nDomain:
			r.Domain = s.str()
		case nGroups:
			r.Groups = s.strings()
		case nCopies:
			r.Copies = s.int()
		default:
			s.skip()
		}
	}
	if r.Hold == "" {
		return ErrMalformed
	}
	return s.end()
}
