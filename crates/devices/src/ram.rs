//! Main memory: a fixed latency plus transfer, no queue (it is never the bottleneck here).

use serde::{Deserialize, Serialize};
use tierwise_core::Nanos;

use super::{DevOp, Model, Power, Service};

/// RAM parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RamSpec {
    /// What the preset models.
    #[serde(default)]
    pub description: String,
    /// Access latency, ns.
    pub latency_ns: f64,
    /// Copy bandwidth, MB/s.
    pub mb_s: f64,
    /// Price per GB.
    pub usd_per_gb: f64,
}

/// The RAM model.
#[derive(Clone, Debug)]
pub struct Ram {
    latency_ns: f64,
    ns_per_byte: f64,
    usd_per_gb: f64,
}

impl Ram {
    /// Builds the model.
    pub fn new(spec: &RamSpec) -> Result<Ram, String> {
        if !(spec.latency_ns.is_finite() && spec.latency_ns >= 0.0 && spec.mb_s.is_finite() && spec.mb_s > 0.0) {
            return Err("latency_ns must be >= 0 and mb_s > 0".into());
        }
        Ok(Ram { latency_ns: spec.latency_ns, ns_per_byte: 1e3 / spec.mb_s, usd_per_gb: spec.usd_per_gb })
    }

    /// Latency of one access of `len` bytes.
    pub fn latency(&self, len: u64) -> Nanos {
        Nanos((self.latency_ns + len as f64 * self.ns_per_byte) as u64)
    }
}

impl Model for Ram {
    fn service(&mut self, _start: Nanos, _op: DevOp, _addr: u64, len: u64) -> Service {
        // No occupancy: memory is never the queue.
        Service { occupancy: Nanos::ZERO, latency: self.latency(len) }
    }
    fn power(&self) -> Power {
        Power::default()
    }
    fn usd_per_gb(&self) -> f64 {
        self.usd_per_gb
    }
}
