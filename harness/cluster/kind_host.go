package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// kind attaches its nodes to the Docker network "kind", unless this
// variable names another; HostAddress reads it as kind does so as to look
// at the network the nodes are really on.
const (
	kindNetworkEnv     = "KIND_EXPERIMENTAL_DOCKER_NETWORK"
	defaultKindNetwork = "kind"
)

// dockerCommandTimeout bounds one docker CLI call, so that a wedged engine
// fails the caller instead of hanging it.
const dockerCommandTimeout = 30 * time.Second

// HostAddress returns the IPv4 gateway of the Docker network kind attaches
// its nodes to. With Docker on Linux the gateway is an address of this
// machine (the network's bridge interface), so the nodes, the API server
// among them, reach processes here through it. Elsewhere Docker runs in a
// virtual machine whose gateway is not this machine, and HostAddress
// fails; it also fails when the gateway is not an address of this machine
// (a remote engine, a rootless one whose bridge lives in its own network
// namespace, Docker Desktop for Linux).
func (k *Kind) HostAddress(ctx context.Context) (string, error) {
	if runtime.GOOS != "linux" {
		return "", fmt.Errorf("kind on %s: Docker runs in a virtual machine, whose network gateway is not this machine; a kind cluster reaches processes on this machine only with Docker on Linux", runtime.GOOS)
	}
	if k.provider == nil {
		return "", errors.New("kind cluster not started")
	}
	network := os.Getenv(kindNetworkEnv)
	if network == "" {
		network = defaultKindNetwork
	}
	ctx, cancel := context.WithTimeout(ctx, dockerCommandTimeout)
	defer cancel()
	// kind itself drives Docker through its CLI (Start checked it is on
	// PATH), so this asks the same engine kind used.
	out, err := exec.CommandContext(ctx, "docker", "network", "inspect", network, "--format", "{{json .IPAM.Config}}").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && len(bytes.TrimSpace(exit.Stderr)) > 0 {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(exit.Stderr))
		}
		return "", fmt.Errorf("docker network inspect %s: %w", network, err)
	}
	gateway, err := parseIPAMGateway(out)
	if err != nil {
		return "", fmt.Errorf("docker network %q: %w", network, err)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("listing the addresses of this machine: %w", err)
	}
	if !hasAddress(addrs, gateway) {
		return "", fmt.Errorf("the gateway %s of docker network %q is not an address of this machine: the Docker engine runs elsewhere (a virtual machine, another host, a rootless engine's namespace), so the kind cluster cannot reach processes here", gateway, network)
	}
	return gateway.String(), nil
}

// ipamConfig is one entry of a Docker network's IPAM.Config, as `docker
// network inspect --format '{{json .IPAM.Config}}'` prints it.
type ipamConfig struct {
	Subnet  string `json:"Subnet"`
	Gateway string `json:"Gateway"`
}

// parseIPAMGateway finds the IPv4 gateway in the JSON of a network's
// IPAM.Config.
func parseIPAMGateway(out []byte) (netip.Addr, error) {
	out = bytes.TrimSpace(out)
	var configs []ipamConfig
	if err := json.Unmarshal(out, &configs); err != nil {
		return netip.Addr{}, fmt.Errorf("reading its IPAM config %q: %w", out, err)
	}
	// kind's network is dual-stack, its IPv6 entry sometimes first and
	// without a gateway: look at every entry, keep the IPv4 one.
	for _, c := range configs {
		// Engines report a gateway they chose themselves in CIDR notation
		// until restarted (moby/moby#26522, #49520).
		gw, _, _ := strings.Cut(c.Gateway, "/")
		if a, err := netip.ParseAddr(gw); err == nil && a.Unmap().Is4() {
			return a.Unmap(), nil
		}
	}
	// An engine that chose the subnet itself may leave the gateway out
	// until restarted (moby/moby#26799). Its IPAM gives the gateway the
	// subnet's first address, so that is where the bridge is.
	for _, c := range configs {
		p, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !p.Addr().Unmap().Is4() {
			continue
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked()
		if first := p.Addr().Next(); p.Contains(first) {
			return first, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no IPv4 gateway or subnet in its IPAM config %s", out)
}

// hasAddress reports whether ip is one of addrs (net.InterfaceAddrs's
// answer).
func hasAddress(addrs []net.Addr, ip netip.Addr) bool {
	for _, a := range addrs {
		var raw net.IP
		switch v := a.(type) {
		case *net.IPNet:
			raw = v.IP
		case *net.IPAddr:
			raw = v.IP
		default:
			continue
		}
		if got, ok := netip.AddrFromSlice(raw); ok && got.Unmap() == ip.Unmap() {
			return true
		}
	}
	return false
}
