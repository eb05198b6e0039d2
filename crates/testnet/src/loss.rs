//! Loss the Linux tests put between Rusty and its peer: nftables rules that drop a
//! share of the packets at random (`numgen random`), in the namespace's kernel or on
//! the bridge of [`TestNet::bridge_peer`], each with a counter the test reads back.

use super::TestNet;

impl TestNet {
    /// Make the namespace's kernel drop `percent`% of the packets it sends, at random
    /// (nftables `numgen random`, table `rusty_drop` of the `inet` family, so IPv4 and
    /// IPv6 alike). Needs the `nft` tool.
    pub fn drop_outgoing_percent(&self, percent: u32) {
        let nft = self.tools.get("nft").to_path_buf();
        let limit = percent.to_string();
        for args in [
            &["add", "table", "inet", "rusty_drop"][..],
            &[
                "add",
                "chain",
                "inet",
                "rusty_drop",
                "out",
                "{ type filter hook output priority 0; }",
            ],
            &[
                "add",
                "rule",
                "inet",
                "rusty_drop",
                "out",
                "numgen",
                "random",
                "mod",
                "100",
                "<",
                &limit,
                "counter",
                "drop",
            ],
        ] {
            let (ok, out) = self.ns_quick(&nft, args);
            if !ok {
                self.fail(&format!("nft {}: {out}", args.join(" ")));
            }
        }
    }

    /// How many packets the rule of [`drop_outgoing_percent`](Self::drop_outgoing_percent)
    /// has dropped; fails the test when it dropped none.
    pub fn dropped_outgoing(&self) -> u64 {
        let nft = self.tools.get("nft").to_path_buf();
        let (_, rules) = self.ns_quick(&nft, &["list", "table", "inet", "rusty_drop"]);
        let dropped: u64 = rules
            .split_whitespace()
            .skip_while(|w| *w != "packets")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if dropped == 0 {
            self.fail(&format!("the nft rule dropped nothing:\n{rules}"));
        }
        dropped
    }

    /// Make the bridge of [`bridge_peer`](Self::bridge_peer) drop `percent`% of the TCP
    /// packets (over IPv4 or IPv6; ARP and Neighbor Discovery pass) it forwards towards
    /// the peer and, drawn independently, `percent`% of those from the peer (nftables
    /// `numgen random`, bridge table `rusty_drop`, one counter per direction). Needs the
    /// `nft` tool.
    pub fn drop_bridged_percent(&self, percent: u32) {
        let draw = format!("meta l4proto tcp numgen random mod 100 < {percent}");
        let rules = [
            "table bridge rusty_drop {".to_string(),
            "  chain to_peer {\n    counter drop\n  }".into(),
            "  chain from_peer {\n    counter drop\n  }".into(),
            "  chain pass {".into(),
            "    type filter hook forward priority filter; policy accept;".into(),
            format!("    oifname \"rtpeer\" {draw} jump to_peer"),
            format!("    iifname \"rtpeer\" {draw} jump from_peer"),
            "  }\n}\n".into(),
        ]
        .join("\n");
        let file = self.write("loss.nft", &rules);
        let nft = self.tools.get("nft").to_path_buf();
        let (ok, out) = self.ns_quick(&nft, &["-f", &file.display().to_string()]);
        if !ok {
            self.fail(&format!("nft -f {}: {out}\n{rules}", file.display()));
        }
    }

    /// How many packets the rules of [`drop_bridged_percent`](Self::drop_bridged_percent)
    /// have dropped, (towards the peer, from it); fails the test when either dropped none.
    pub fn dropped_bridged(&self) -> (u64, u64) {
        let nft = self.tools.get("nft").to_path_buf();
        let count = |chain: &str| {
            let (_, rules) = self.ns_quick(&nft, &["list", "chain", "bridge", "rusty_drop", chain]);
            let n: u64 = rules
                .split_whitespace()
                .skip_while(|w| *w != "packets")
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            if n == 0 {
                self.fail(&format!("the bridge dropped nothing in {chain}:\n{rules}"));
            }
            n
        };
        (count("to_peer"), count("from_peer"))
    }
}
