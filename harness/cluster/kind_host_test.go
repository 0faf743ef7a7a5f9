package cluster

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
)

// The inputs are what `docker network inspect kind --format '{{json
// .IPAM.Config}}'` prints (with its newline) on the engines the parser
// must handle; the docker command itself needs an engine and cannot run in
// unit tests.
func TestParseIPAMGateway(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    string
		wantErr string
	}{
		{
			name: "dual-stack, IPv4 first",
			out:  `[{"Subnet":"172.18.0.0/16","Gateway":"172.18.0.1"},{"Subnet":"fc00:f853:ccd:e793::/64","Gateway":"fc00:f853:ccd:e793::1"}]` + "\n",
			want: "172.18.0.1",
		},
		{
			name: "dual-stack, IPv6 first without a gateway",
			out:  `[{"Subnet":"fc00:f853:ccd:e793::/64"},{"Subnet":"172.18.0.0/16","Gateway":"172.18.0.1"}]` + "\n",
			want: "172.18.0.1",
		},
		{
			name: "IPv4 only, other fields present",
			out:  `[{"Subnet":"172.19.0.0/16","IPRange":"","Gateway":"172.19.0.1","AuxiliaryAddresses":null}]`,
			want: "172.19.0.1",
		},
		{
			name: "gateway in CIDR notation until the engine restarts",
			out:  `[{"Subnet":"172.28.0.0/16","Gateway":"172.28.0.1/16"},{"Subnet":"fdcf:eadc:be2c::/64","Gateway":"fdcf:eadc:be2c::1/64"}]`,
			want: "172.28.0.1",
		},
		{
			name: "a custom gateway is taken as given",
			out:  `[{"Subnet":"10.89.0.0/24","Gateway":"10.89.0.254"}]`,
			want: "10.89.0.254",
		},
		{
			name: "no gateway: the subnet's first address",
			out:  `[{"Subnet":"fc00:f853:ccd:e793::/64","Gateway":"fc00:f853:ccd:e793::1"},{"Subnet":"172.18.0.0/16"}]`,
			want: "172.18.0.1",
		},
		{
			name: "no gateway, subnet written with host bits",
			out:  `[{"Subnet":"172.18.7.9/16"}]`,
			want: "172.18.0.1",
		},
		{
			name: "an explicit gateway wins over a later subnet",
			out:  `[{"Subnet":"172.20.0.0/16"},{"Subnet":"172.21.0.0/16","Gateway":"172.21.0.1"}]`,
			want: "172.21.0.1",
		},
		{
			name:    "IPv6 only",
			out:     `[{"Subnet":"fc00:f853:ccd:e793::/64","Gateway":"fc00:f853:ccd:e793::1"}]`,
			wantErr: "no IPv4 gateway or subnet",
		},
		{name: "no IPAM config", out: "null\n", wantErr: "no IPv4 gateway or subnet"},
		{name: "empty IPAM config", out: "[]\n", wantErr: "no IPv4 gateway or subnet"},
		{name: "a /32 has no address for a gateway", out: `[{"Subnet":"172.18.0.5/32"}]`, wantErr: "no IPv4 gateway or subnet"},
		{name: "not JSON", out: "Error: No such network: kind\n", wantErr: "reading its IPAM config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseIPAMGateway([]byte(tt.out))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseIPAMGateway = %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseIPAMGateway: %v", err)
			}
			if got.String() != tt.want {
				t.Errorf("parseIPAMGateway = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestHasAddress(t *testing.T) {
	ipNet := func(cidr string) net.Addr {
		ip, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return n
	}
	// What net.InterfaceAddrs answers on a Linux machine running kind.
	addrs := []net.Addr{
		ipNet("127.0.0.1/8"),
		ipNet("::1/128"),
		ipNet("192.168.1.20/24"),
		ipNet("172.17.0.1/16"),
		ipNet("172.18.0.1/16"),
		ipNet("fc00:f853:ccd:e793::1/64"),
		&net.IPAddr{IP: net.ParseIP("10.0.0.7")},
	}
	tests := []struct {
		ip   string
		want bool
	}{
		{"172.18.0.1", true},
		{"10.0.0.7", true},
		{"172.18.0.2", false}, // in the bridge's subnet, but a node's, not this machine's
		{"172.19.0.1", false},
		{"fc00:f853:ccd:e793::1", true},
	}
	for _, tt := range tests {
		if got := hasAddress(addrs, netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("hasAddress(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
}

func TestHostAddress(t *testing.T) {
	got, err := NewLocal().HostAddress(context.Background())
	if err != nil || got != "127.0.0.1" {
		t.Errorf("local HostAddress = %q, %v; want 127.0.0.1", got, err)
	}

	// A kind provider that never started has no network to look at, and
	// off Linux none that reaches this machine.
	k, err := New(KindProvider)
	if err != nil {
		t.Fatal(err)
	}
	_, err = k.HostAddress(context.Background())
	want := "kind cluster not started"
	if runtime.GOOS != "linux" {
		want = "only with Docker on Linux"
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("kind HostAddress before Start: error %v, want one containing %q", err, want)
	}
}
