//! Whether a node's head is fresh. A node can stop following its chain (stalled, cut off from
//! its peers, or one backend behind a load balancer that fell behind) and still answer every
//! call: its answers describe the past, so a payment already made looks unpaid, and a
//! transaction already mined looks unknown. Each read records the head the node answered
//! (`db::heads`); once the newest head has stood still for longer than the network's
//! `stale_head_blocks` block times, that node's answers are refused as stale until its head
//! moves again. Nothing is decided on them meanwhile: no deposit is credited or recorded, no
//! checkout's end is decided, and no treasury transaction is taken for mined, failed or
//! dropped.

use super::config::Network;
use super::error::{ChainError, ChainResult};
use crate::ctx::Ctx;
use crate::db::heads::{self, Head};

/// Records the `head` `name`'s node just answered, and refuses it as stale when the newest
/// head has not moved for longer than the network allows.
/// The first time a stall is found, the operator is e-mailed about it (once per stall).
pub async fn fresh(ctx: &Ctx, name: &str, network: &Network, head: u64) -> ChainResult<()> {
    let now = ctx.now();
    let newest = heads::seen(&ctx.db, name, head, now).await?;
    let verdict = judge(name, network, head, newest, now);
    if let Err(ChainError::StaleHead(why)) = &verdict {
        if heads::claim_alert(&ctx.db, name, newest.head, now).await? {
            worker::console_warn!(
                "the {name} node's head stands still at block {}: the operator is told",
                newest.head
            );
            let subject = format!("Payrail: the {name} node's head stands still");
            let body = format!(
                "{why}.\n\nWhile it stands still, no payment on {name} is credited, no \
                 checkout's end is decided and no treasury transaction is taken for mined, \
                 failed or dropped. Check the node (PAYRAIL_CHAINS' rpc_url for {name}) or \
                 point it at another provider; everything resumes by itself once its head \
                 moves. This e-mail is sent once per stall."
            );
            let status = crate::notify::operator(ctx, &subject, &body).await;
            heads::alerted(&ctx.db, name, status).await?;
        }
    }
    verdict
}

/// The rule, pure: the answer is fresh unless the newest head (`newest`) was first seen longer
/// ago than [`Network::stale_after_seconds`].
pub fn judge(name: &str, network: &Network, head: u64, newest: Head, now: i64) -> ChainResult<()> {
    let limit = network.stale_after_seconds();
    let still = now.saturating_sub(newest.first_seen_at);
    if still <= i64::try_from(limit).unwrap_or(i64::MAX) {
        return Ok(());
    }
    let at = if i64::try_from(head).is_ok_and(|h| h < newest.head) {
        format!("answers block {head}, behind block {}", newest.head)
    } else {
        format!("has been at block {}", newest.head)
    };
    Err(ChainError::StaleHead(format!(
        "the {name} node {at}, first seen {still} s ago (its head may stand still for {limit} s: \
         {} blocks of {} s): nothing is decided on its answers until it moves",
        network.stale_head_blocks,
        network.block_time_seconds.unwrap_or(1)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network() -> Network {
        super::super::config::parse(
            r#"{"polygon": {"rpc_url": "https://p.example", "chain_id": 137,
                "stale_head_blocks": 5}}"#,
        )
        .unwrap()
        .remove("polygon")
        .unwrap()
    }

    #[test]
    fn a_head_that_stands_still_too_long_is_stale() {
        let n = network();
        assert_eq!(n.stale_after_seconds(), 10, "5 blocks of Polygon's 2 s");
        let newest = Head {
            head: 100,
            first_seen_at: 1_000,
        };
        assert!(judge("polygon", &n, 100, newest, 1_010).is_ok());
        let stale = judge("polygon", &n, 100, newest, 1_011).unwrap_err();
        assert!(matches!(stale, ChainError::StaleHead(_)));
        assert!(stale.public().contains("at block 100"), "{stale}");
        let behind = judge("polygon", &n, 97, newest, 1_011).unwrap_err();
        assert!(
            behind.public().contains("block 97, behind block 100"),
            "{behind}"
        );
        // A moving head (first seen just now) is fresh.
        let moved = Head {
            head: 101,
            first_seen_at: 1_011,
        };
        assert!(judge("polygon", &n, 101, moved, 1_011).is_ok());
    }
}
