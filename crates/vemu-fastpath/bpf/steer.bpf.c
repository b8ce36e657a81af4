// vemu's kernel fast path: one TC ingress program (direct action) on every device of a
// lab's plane namespace. The device a frame came in by names its route in `routes`:
// to the ingress of a veth peer in another namespace (a node's interface), to the
// egress of a device here (the engine's TAP; or, for a direction the kernel shapes, the
// far node's plane device, whose root qdisc is a token bucket), or on into the device's
// own receive path (a LAN port: the LAN's bridge) — for a LAN port whose node's frames
// the kernel shapes, first to the egress of the port's IFB device, whose root qdisc is
// a token bucket and which hands them back to the port's receive path, past this
// program. What the engine writes for a LAN's node goes to the egress of the port's
// plane device, marked as the engine's; a frame the engine writes once for several
// LAN ports (its fan-out device) names them at its end, and a clone goes to each
// (`fan_out`). Frames of devices without a route are dropped. A second program, on the
// egress of LAN ports, lets out (and counts) what the bridge sends while the LAN is
// switched by the kernel, and the engine's marked frames, and nothing else. A link
// whose other end is on another machine goes, while its direction from here needs no
// emulation, through the kernel's VXLAN device of the lab (in the plane, its socket on
// the machine's underlay): the frame gets the link's tunnel key and is sent; what that
// device receives goes by its VNI to the node interface it is for, if it came from the
// machine that end's link leads to. Built by build.rs with clang; loaded by src/lib.rs.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ROUTE_PEER 1   /* to the ingress of ifindex's veth peer (another namespace) */
#define ROUTE_COUNT 2  /* count the frames (a fast-path direction) */
#define ROUTE_PASS 4   /* on to the device's receive path: its bridge */
#define ROUTE_SHAPED 8 /* counted apart: to the egress of ifindex, through its token bucket
                        * (with ROUTE_PASS: an IFB device that brings them back here) */
#define ROUTE_OUT_SHAPED 16 /* a LAN port: what its bridge sends goes through the token
                             * bucket at its root: counted apart */
#define ROUTE_MARKED 32 /* to the egress of ifindex (a LAN port), marked as the engine's */
#define ROUTE_FANOUT 64 /* the engine's fan-out device: each frame names its LAN ports */
#define ROUTE_STAMP 128 /* to the engine's TAP device: a frame that is not a GSO
                         * super-frame gets a `struct stamp` appended: the time it arrived
                         * here and the CPU it arrived on (its sender's: a veth hands a
                         * frame to its peer on the sending CPU); the engine takes it off
                         * and times the frame from it, not from when it read it */
#define ROUTE_TUNNEL 256 /* to the lab's VXLAN device (ifindex), with the tunnel key of
                          * the device the frame came by (`tunnel_out`) */
#define ROUTE_TUNNEL_IN 512 /* the lab's VXLAN device: by the frame's VNI (`tunnel_in`)
                             * to the ingress of a veth peer (a node's interface) */
#define ROUTE_SPLIT 1024 /* with ROUTE_TUNNEL: the underlay carries this link's frames only
                          * in pieces (the kernel fragments the tunnel's IP packets). A
                          * GSO super-frame (bulk TCP: fragments cost the kernel more than
                          * the engine's tunnel, which carries super-frames whole) lends
                          * the direction to the engine: it and every later frame go to
                          * the engine's TAP device (`tunnel_out.tap`, stamped as by
                          * ROUTE_STAMP) until vemu writes the route again — so its frames
                          * stay in order (the engine writes it again once the direction
                          * has been idle) */
#define ROUTE_LENT 2048 /* with ROUTE_SPLIT: lent to the engine (set here, atomically) */
/* The top 16 bits of a route's flags: the MTU of the link's interfaces (bytes of IP
 * packet; 0: none). A route to a veth peer or a tunnel drops a frame longer than that
 * and its Ethernet header, as the engine does (a node that raised its interface's MTU
 * does not get past the link's): `bpf_redirect_peer` checks no MTU. */
#define ROUTE_MTU_SHIFT 16

/* What ROUTE_STAMP appends (host order; vemu_fastpath::STAMP_LEN bytes). */
struct stamp {
	__u64 ns;  /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u32 cpu;
	__u32 zero;
};

/* The mark of frames the engine delivers to LAN ports (the ports' egress program lets
 * them out uncounted and takes the mark off): "vemu". */
#define ENGINE_MARK 0x76656d75u

/* A frame on the fan-out device ends with the plane devices it goes to: a __u32 index
 * each (host order), then a __u16 count, then FANOUT_MAGIC (__u16). */
#define FANOUT_MAGIC 0xfa17
#define FANOUT_MAX 64

/* Key of the counts of what leaves a device (the device's index with this bit). */
#define OUT 0x80000000u
/* Key of the counts of what a device's frames took to a token bucket. */
#define SHAPED 0x40000000u

struct route {
	__u32 ifindex;
	__u32 flags;
} __attribute__((aligned(8)));
/* Where `flags` sits in a route read as one 64-bit word. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FLAGS_SHIFT_IN_ROUTE 32
#else
#define FLAGS_SHIFT_IN_ROUTE 0
#endif

/* What a fast-path direction carried: wire frames (a TCP super-frame counts its
 * segments) and wire bytes (every segment with its own headers). */
struct count {
	__u64 frames;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct route);
} routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct count);
} counts SEC(".maps");

/* A machine's underlay address: IPv4 in addr[0], host order (v6 = 0), or IPv6 as its
 * 16 bytes in network order (v6 = 1), as struct bpf_tunnel_key has them. */
struct underlay {
	__u32 addr[4];
	__u32 v6;
};

/* A link end whose far side is on another machine: the tunnel key of its frames. */
struct tunnel_out {
	struct underlay to;
	__u32 vni;
	__u32 tap; /* the engine's TAP device of the link end (ROUTE_SPLIT) */
};

/* What arrives on the lab's VXLAN device with a VNI: whose veth peer it goes to, and
 * the only machine it may come from. */
struct tunnel_in {
	struct underlay from;
	__u32 peer_of;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32); /* plane device */
	__type(value, struct tunnel_out);
} tunnels_out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32); /* VNI */
	__type(value, struct tunnel_in);
} tunnels_in SEC(".maps");

/* The far ends of the nodes' interfaces have the indexes DENSE_BASE + n, which vemu
 * chooses: their routes and counts are in arrays, by n (a route with no flag is none),
 * looked up without hashing — a hash lookup and its bucket walk per frame and hop cost
 * ~1.5 µs of an idle round trip per hop here. Their sizes are set when the program is
 * loaded (the lab's number of such devices). Other devices (the engine's TAP devices,
 * IFB devices, ...) keep the hashes. */
#define DENSE_BASE (1u << 24)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct route);
} routes_dense SEC(".maps");

/* Four counters a device: in, in to a token bucket, out, out to a token bucket. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct count);
} counts_dense SEC(".maps");

/* The route of frames arriving at device `ifindex`, if it has one. */
static __always_inline struct route *route_of(__u32 ifindex)
{
	if (ifindex >= DENSE_BASE) {
		__u32 i = ifindex - DENSE_BASE;
		struct route *r = bpf_map_lookup_elem(&routes_dense, &i);
		return r && r->flags ? r : NULL;
	}
	return bpf_map_lookup_elem(&routes, &ifindex);
}

/* Length of the Ethernet, IP and TCP headers of a TCP super-frame, 0 if unknown. */
static __always_inline __u32 tcp_headers(struct __sk_buff *skb)
{
	__u8 b;
	__u32 off = ETH_HLEN;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (bpf_skb_load_bytes(skb, off, &b, 1))
			return 0;
		off += (b & 0x0f) * 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		off += 40;
	} else {
		return 0;
	}
	if (bpf_skb_load_bytes(skb, off + 12, &b, 1))
		return 0;
	return off + (b >> 4) * 4;
}

/* Count a frame (wire frames and bytes) under `key`, if counted. */
static __always_inline void count(struct __sk_buff *skb, __u32 key)
{
	__u32 dev = key & ~(OUT | SHAPED);
	struct count *c;
	if (dev >= DENSE_BASE) {
		__u32 i = (dev - DENSE_BASE) * 4 + (key & OUT ? 2 : 0) + (key & SHAPED ? 1 : 0);
		c = bpf_map_lookup_elem(&counts_dense, &i);
	} else {
		c = bpf_map_lookup_elem(&counts, &key);
	}
	if (c) {
		__u32 segs = skb->gso_segs > 1 ? skb->gso_segs : 1;
		c->frames += segs;
		c->bytes += skb->len;
		if (segs > 1)
			c->bytes += (__u64)(segs - 1) * tcp_headers(skb);
	}
}

/* A frame of the fan-out device: its list of LAN ports taken off its end, then a copy
 * to the egress of each, marked as the engine's. */
static __always_inline int fan_out(struct __sk_buff *skb)
{
	__u32 len = skb->len;
	__u16 tail[2];
	__u32 targets[FANOUT_MAX];
	if (len < 4 || bpf_skb_load_bytes(skb, len - 4, tail, sizeof(tail)))
		return TC_ACT_SHOT;
	__u32 n = tail[0];
	if (tail[1] != FANOUT_MAGIC || n == 0 || n > FANOUT_MAX || len < ETH_HLEN + 4 + 4 * n)
		return TC_ACT_SHOT;
	__u32 start = len - 4 - 4 * n;
	for (__u32 i = 0; i < FANOUT_MAX && i < n; i++) {
		if (bpf_skb_load_bytes(skb, start + 4 * i, &targets[i], sizeof(__u32)))
			return TC_ACT_SHOT;
	}
	if (bpf_skb_change_tail(skb, start, 0))
		return TC_ACT_SHOT;
	skb->mark = ENGINE_MARK;
	/* A clone to each but the last, which takes the frame itself (each clone makes the
	 * kernel copy the frame's head once more). */
	for (__u32 i = 0; i + 1 < FANOUT_MAX && i + 1 < n; i++)
		bpf_clone_redirect(skb, targets[i], 0);
	return bpf_redirect(targets[(n - 1) & (FANOUT_MAX - 1)], 0);
}

/* A frame the lab's VXLAN device received: to the node interface its VNI names, if it
 * came from the machine that names. */
static __always_inline int from_tunnel(struct __sk_buff *skb)
{
	struct bpf_tunnel_key k = {};
	__u32 v6 = 0;
	/* (The key of an IPv6 tunnel is refused without the flag, and the other way.) */
	if (bpf_skb_get_tunnel_key(skb, &k, sizeof(k), 0)) {
		if (bpf_skb_get_tunnel_key(skb, &k, sizeof(k), BPF_F_TUNINFO_IPV6))
			return TC_ACT_SHOT;
		v6 = 1;
	}
	__u32 vni = k.tunnel_id;
	struct tunnel_in *t = bpf_map_lookup_elem(&tunnels_in, &vni);
	if (!t || t->from.v6 != v6)
		return TC_ACT_SHOT;
	if (v6 ? (t->from.addr[0] != k.remote_ipv6[0] || t->from.addr[1] != k.remote_ipv6[1] || t->from.addr[2] != k.remote_ipv6[2] ||
		  t->from.addr[3] != k.remote_ipv6[3])
	       : t->from.addr[0] != k.remote_ipv4)
		return TC_ACT_SHOT;
	return bpf_redirect_peer(t->peer_of, 0);
}

/* A frame for another machine: its link's tunnel key, then to the VXLAN device. */
static __always_inline int to_tunnel(struct __sk_buff *skb, __u32 dev, __u32 vxlan)
{
	struct tunnel_out *t = bpf_map_lookup_elem(&tunnels_out, &dev);
	if (!t)
		return TC_ACT_SHOT;
	struct bpf_tunnel_key k = {};
	__u64 flags = 0;
	if (t->to.v6) {
		k.remote_ipv6[0] = t->to.addr[0];
		k.remote_ipv6[1] = t->to.addr[1];
		k.remote_ipv6[2] = t->to.addr[2];
		k.remote_ipv6[3] = t->to.addr[3];
		flags = BPF_F_TUNINFO_IPV6;
	} else {
		k.remote_ipv4 = t->to.addr[0];
	}
	k.tunnel_id = t->vni;
	k.tunnel_ttl = 64;
	if (bpf_skb_set_tunnel_key(skb, &k, sizeof(k), flags))
		return TC_ACT_SHOT;
	return bpf_redirect(vxlan, 0);
}

/* To the engine's TAP device `tap`: a frame that is not a GSO super-frame gets its
 * stamp (ROUTE_STAMP). */
static __always_inline int to_engine(struct __sk_buff *skb, __u32 tap)
{
	if (skb->gso_size == 0) {
		/* Every such frame carries its stamp, or none goes: the engine takes the last
		 * 16 bytes of each for it. */
		struct stamp st = { .ns = bpf_ktime_get_ns(), .cpu = bpf_get_smp_processor_id() };
		__u32 len = skb->len;
		if (bpf_skb_change_tail(skb, len + sizeof(st), 0) || bpf_skb_store_bytes(skb, len, &st, sizeof(st), 0))
			return TC_ACT_SHOT;
	}
	return bpf_redirect(tap, 0);
}

/* A frame of a ROUTE_SPLIT tunnel route that the engine carries: the direction is lent
 * to it (from this frame, a super-frame, on), or already was. */
static __always_inline int lent(struct __sk_buff *skb, __u32 dev, struct route *r)
{
	struct tunnel_out *t = bpf_map_lookup_elem(&tunnels_out, &dev);
	if (!t || !t->tap)
		return TC_ACT_SHOT;
	/* (Atomically: vemu may be writing the route meanwhile. The whole route as one
	 * 64-bit word — clang has no 32-bit atomic OR here — whose half the flags are
	 * depends on the byte order.) */
	if (!(r->flags & ROUTE_LENT))
		__sync_fetch_and_or((__u64 *)r, (__u64)ROUTE_LENT << FLAGS_SHIFT_IN_ROUTE);
	return to_engine(skb, t->tap);
}

/* Longer than the route's MTU allows (a GSO super-frame is cut to its segments later:
 * never). At TC ingress a VLAN tag is normally out of the frame already (skb->len
 * without it); one still in it is allowed its 4 bytes. */
static __always_inline int too_big(struct __sk_buff *skb, __u32 flags)
{
	__u32 mtu = flags >> ROUTE_MTU_SHIFT;
	if (!mtu || skb->gso_size)
		return 0;
	__u32 hdr = ETH_HLEN;
	if (skb->protocol == bpf_htons(ETH_P_8021Q) || skb->protocol == bpf_htons(ETH_P_8021AD))
		hdr += 4;
	return skb->len > mtu + hdr;
}

SEC("classifier")
int steer(struct __sk_buff *skb)
{
	__u32 key = skb->ifindex;
	struct route *r = route_of(key);
	if (!r)
		return TC_ACT_SHOT;
	if (r->flags & ROUTE_TUNNEL_IN)
		return from_tunnel(skb);
	if (r->flags & ROUTE_FANOUT)
		return fan_out(skb);
	if (r->flags & ROUTE_MARKED) {
		skb->mark = ENGINE_MARK;
		return bpf_redirect(r->ifindex, 0);
	}
	if (too_big(skb, r->flags))
		return TC_ACT_SHOT;
	if ((r->flags & ROUTE_SPLIT) && ((r->flags & ROUTE_LENT) || skb->gso_size))
		return lent(skb, key, r);
	if (r->flags & ROUTE_COUNT)
		count(skb, r->flags & ROUTE_SHAPED ? key | SHAPED : key);
	if ((r->flags & (ROUTE_PASS | ROUTE_SHAPED)) == ROUTE_PASS)
		return TC_ACT_OK;
	if (r->flags & ROUTE_PEER)
		return bpf_redirect_peer(r->ifindex, 0);
	if (r->flags & ROUTE_TUNNEL)
		return to_tunnel(skb, key, r->ifindex);
	if (r->flags & ROUTE_STAMP)
		return to_engine(skb, r->ifindex);
	return bpf_redirect(r->ifindex, 0);
}

/* On the egress of a LAN port: what its bridge sends to the node, let out and counted
 * (apart when a token bucket at the port's root takes it next) while the LAN is the
 * kernel's (the port's route passes frames to the bridge), dropped while it is the
 * engine's (the bridge's own queries and the like would come twice). */
SEC("classifier")
int leave(struct __sk_buff *skb)
{
	__u32 key = skb->ifindex;
	if (skb->mark == ENGINE_MARK) {
		skb->mark = 0;
		return TC_ACT_OK;
	}
	struct route *r = route_of(key);
	if (!r || !(r->flags & ROUTE_PASS))
		return TC_ACT_SHOT;
	count(skb, r->flags & ROUTE_OUT_SHAPED ? key | OUT | SHAPED : key | OUT);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
