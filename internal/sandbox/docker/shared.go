package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

	"github.com/steward-evals/steward/internal/sandbox"
)

// shared is what one provider's Prepare and Gateway made for the whole run:
// the run's networks and the address sandboxes reach the model gateway on.
// The supervisor prepares once per run and hands it to the providers of its
// worker processes (W1), so a run has one gateway network (and one bridge
// network) however many workers it has, and builds each build: directory
// once.
type shared struct {
	GW      *sharedNet           `json:"gw,omitempty"`
	Out     *sharedNet           `json:"out,omitempty"`
	Gateway *sandbox.GatewayAddr `json:"gateway,omitempty"`
}

type sharedNet struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Gateway string `json:"gateway"`
}

// SharedState returns what this provider prepared for the run (after
// Prepare and Gateway), for AdoptShared in another process's provider.
func (p *Provider) SharedState() (json.RawMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.netGW == nil {
		return nil, errors.New("share docker run resources: not prepared")
	}
	s := shared{GW: toShared(p.netGW), Out: toShared(p.netOut), Gateway: p.gateway}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("share docker run resources: %w", err)
	}
	return b, nil
}

func toShared(n *runNet) *sharedNet {
	if n == nil {
		return nil
	}
	return &sharedNet{ID: n.ID, Name: n.Name, Gateway: n.Gateway.String()}
}

// AdoptShared makes this provider use the networks another provider of the
// same run prepared (SharedState) instead of creating its own. It does not
// own them: its Finalize leaves them to the provider that made them.
func (p *Provider) AdoptShared(b json.RawMessage) error {
	var s shared
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("adopt docker run resources: %w", err)
	}
	if s.GW == nil {
		return errors.New("adopt docker run resources: no gateway network")
	}
	conv := func(n *sharedNet) (*runNet, error) {
		if n == nil {
			return nil, nil
		}
		gw, err := netip.ParseAddr(n.Gateway)
		if err != nil {
			return nil, fmt.Errorf("adopt docker run resources: network %s: %w", n.Name, err)
		}
		return &runNet{ID: n.ID, Name: n.Name, Gateway: gw}, nil
	}
	gw, err := conv(s.GW)
	if err != nil {
		return err
	}
	out, err := conv(s.Out)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.netGW, p.netOut, p.gateway, p.adopted = gw, out, s.Gateway, true
	return nil
}
