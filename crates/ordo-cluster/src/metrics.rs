//! A node's metrics: clock interval width, `get_ts` wait, sync round trips, leases, etcd.
//!
//! Values are atomics written by the lease thread and the network tasks and read by
//! [`NodeMetrics::snapshot`], which `StatusReply`, `ordo cluster status` and the opt-in
//! Prometheus endpoint ([`serve_http`], `GET /metrics`) all use — one list of names, so the three
//! views cannot disagree.
//!
//! The HTTP endpoint is deliberately tiny: it reads at most 8 KiB of request head, answers
//! `GET /metrics` with text exposition format 0.0.4 and anything else with 404, and closes the
//! connection. It serves nothing else and never blocks the node.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Counters and gauges of one node. All `Relaxed`: each value is independent and only reported.
#[derive(Debug, Default)]
pub struct NodeMetrics {
    /// U − L of the last interval sampled by the lease thread, in ns.
    pub interval_width_nanos: AtomicU64,
    /// Sum of the sampled widths, and how many were sampled (for the mean).
    pub interval_width_sum_nanos: AtomicU64,
    /// Number of interval samples.
    pub interval_samples: AtomicU64,
    /// Clock synchronisations completed by this node (non-CM).
    pub syncs: AtomicU64,
    /// Clock synchronisation requests served (CM).
    pub syncs_served: AtomicU64,
    /// Round trip of the last synchronisation, in ns.
    pub sync_rtt_last_nanos: AtomicU64,
    /// Sum of round trips, in ns (mean = sum / syncs).
    pub sync_rtt_sum_nanos: AtomicU64,
    /// Synchronisations that failed (timeout, peer gone, CM clock disabled).
    pub sync_failures: AtomicU64,
    /// Lease renewals recorded by this node.
    pub lease_renewals: AtomicU64,
    /// Lease expiries detected by this node.
    pub lease_expiries: AtomicU64,
    /// Peers currently suspected (lease expired).
    pub suspects: AtomicU64,
    /// 1 while etcd answers, 0 while it does not.
    pub etcd_connected: AtomicU64,
    /// The configuration sequence number in force.
    pub config_seq: AtomicU64,
    /// 1 while the node's clock is enabled.
    pub clock_enabled: AtomicU64,
    /// `get_ts` calls and the nanoseconds they waited (from the clock's statistics).
    pub get_ts_calls: AtomicU64,
    /// Nanoseconds waited in `get_ts`.
    pub get_ts_wait_sum_nanos: AtomicU64,
    /// The drift monitor's estimate, ppm, as an offset-binary value (see [`NodeMetrics::set_drift_ppm`]).
    drift_ppm_biased: AtomicU64,
    /// Drift alarms raised.
    pub drift_alarms: AtomicU64,
    /// Transactions committed by this node's coordinators.
    pub txn_commits: AtomicU64,
    /// Attempts they aborted.
    pub txn_aborts: AtomicU64,
    /// Network calls its coordinators made to other nodes.
    pub txn_round_trips: AtomicU64,
    /// Parts locked here for other coordinators (gauge).
    pub txn_locked_parts: AtomicU64,
    /// Parts backed up here, waiting for truncation (gauge).
    pub txn_backed_parts: AtomicU64,
    /// Backed-up parts that failed to apply.
    pub txn_backup_apply_failures: AtomicU64,
    /// How far the GC safe point is behind the clock, in ns (gauge).
    pub gc_lag_nanos: AtomicU64,
    /// The configuration installed by the last reconfiguration this node initiated (0: none).
    pub failover_seq: AtomicU64,
    /// How long this node's clock was disabled in that reconfiguration, in µs (0 when the CM
    /// did not change).
    pub failover_clock_disabled_us: AtomicU64,
    /// From its decision to reconfigure to the end of its round, in µs.
    pub failover_total_us: AtomicU64,
}

const DRIFT_BIAS: i64 = 1 << 40;

impl NodeMetrics {
    /// Records a sampled interval width.
    pub fn sample_width(&self, width_nanos: u64) {
        self.interval_width_nanos.store(width_nanos, Relaxed);
        self.interval_width_sum_nanos.fetch_add(width_nanos, Relaxed);
        self.interval_samples.fetch_add(1, Relaxed);
    }

    /// Records a completed synchronisation's round trip.
    pub fn sample_sync(&self, rtt_nanos: u64) {
        self.syncs.fetch_add(1, Relaxed);
        self.sync_rtt_last_nanos.store(rtt_nanos, Relaxed);
        self.sync_rtt_sum_nanos.fetch_add(rtt_nanos, Relaxed);
    }

    /// Sets the drift estimate.
    pub fn set_drift_ppm(&self, ppm: i64) {
        let biased = ppm.clamp(-DRIFT_BIAS + 1, DRIFT_BIAS - 1) + DRIFT_BIAS;
        self.drift_ppm_biased.store(u64::try_from(biased).unwrap_or(0), Relaxed);
    }

    /// The metrics as `(name, value)` pairs, names without the `ordo_` prefix.
    pub fn snapshot(&self) -> Vec<(String, f64)> {
        let get = |a: &AtomicU64| a.load(Relaxed) as f64;
        let mean = |sum: &AtomicU64, n: &AtomicU64| {
            let n = n.load(Relaxed);
            if n == 0 { 0.0 } else { sum.load(Relaxed) as f64 / n as f64 }
        };
        let drift = self.drift_ppm_biased.load(Relaxed);
        let drift = if drift == 0 { 0.0 } else { (drift as f64) - (DRIFT_BIAS as f64) };
        vec![
            ("clock_enabled".into(), get(&self.clock_enabled)),
            ("clock_interval_width_nanos".into(), get(&self.interval_width_nanos)),
            (
                "clock_interval_width_mean_nanos".into(),
                mean(&self.interval_width_sum_nanos, &self.interval_samples),
            ),
            ("clock_get_ts_calls".into(), get(&self.get_ts_calls)),
            (
                "clock_get_ts_wait_mean_nanos".into(),
                mean(&self.get_ts_wait_sum_nanos, &self.get_ts_calls),
            ),
            ("clock_drift_ppm".into(), drift),
            ("clock_drift_alarms".into(), get(&self.drift_alarms)),
            ("sync_count".into(), get(&self.syncs)),
            ("sync_served".into(), get(&self.syncs_served)),
            ("sync_failures".into(), get(&self.sync_failures)),
            ("sync_rtt_last_nanos".into(), get(&self.sync_rtt_last_nanos)),
            ("sync_rtt_mean_nanos".into(), mean(&self.sync_rtt_sum_nanos, &self.syncs)),
            ("lease_renewals".into(), get(&self.lease_renewals)),
            ("lease_expiries".into(), get(&self.lease_expiries)),
            ("lease_suspects".into(), get(&self.suspects)),
            ("etcd_connected".into(), get(&self.etcd_connected)),
            ("config_seq".into(), get(&self.config_seq)),
            ("txn_commits_count".into(), get(&self.txn_commits)),
            ("txn_aborts_count".into(), get(&self.txn_aborts)),
            ("txn_round_trips_count".into(), get(&self.txn_round_trips)),
            ("txn_locked_parts".into(), get(&self.txn_locked_parts)),
            ("txn_backed_parts".into(), get(&self.txn_backed_parts)),
            ("txn_backup_apply_failures".into(), get(&self.txn_backup_apply_failures)),
            ("gc_lag_nanos".into(), get(&self.gc_lag_nanos)),
            ("failover_seq".into(), get(&self.failover_seq)),
            ("failover_clock_disabled_us".into(), get(&self.failover_clock_disabled_us)),
            ("failover_total_us".into(), get(&self.failover_total_us)),
        ]
    }
}

/// Renders `(name, value)` pairs as Prometheus text with a `node` label.
pub fn prometheus_text(node: u64, metrics: &[(String, f64)]) -> String {
    let mut out = String::new();
    for (name, value) in metrics {
        let kind = if name.ends_with("_count")
            || name.ends_with("_calls")
            || name.ends_with("_renewals")
            || name.ends_with("_expiries")
            || name.ends_with("_failures")
            || name.ends_with("_served")
            || name.ends_with("_alarms")
        {
            "counter"
        } else {
            "gauge"
        };
        out.push_str(&format!(
            "# TYPE ordo_{name} {kind}\nordo_{name}{{node=\"{node}\"}} {value}\n"
        ));
    }
    out
}

/// Serves `GET /metrics` on `listener` until the task is dropped.
pub async fn serve_http(listener: tokio::net::TcpListener, node: u64, metrics: Arc<NodeMetrics>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut head = Vec::with_capacity(512);
            let mut buf = [0u8; 1024];
            let read = async {
                while head.len() < 8 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
            };
            if tokio::time::timeout(Duration::from_secs(2), read).await.is_err() {
                return;
            }
            let reply = if head.starts_with(b"GET /metrics ") || head.starts_with(b"GET /metrics?")
            {
                let body = prometheus_text(node, &metrics.snapshot());
                format!(
                    "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string()
            };
            let _ = stream.write_all(reply.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_has_a_type_line_and_a_labelled_sample_per_metric() {
        let m = NodeMetrics::default();
        m.sample_sync(2_000);
        m.sample_sync(4_000);
        m.set_drift_ppm(-37);
        let text = prometheus_text(3, &m.snapshot());
        assert!(text.contains("# TYPE ordo_sync_count counter\nordo_sync_count{node=\"3\"} 2\n"));
        assert!(text.contains("ordo_sync_rtt_mean_nanos{node=\"3\"} 3000\n"));
        assert!(text.contains("ordo_clock_drift_ppm{node=\"3\"} -37\n"));
        assert_eq!(text.lines().count(), 2 * m.snapshot().len());
    }
}
