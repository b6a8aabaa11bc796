//! Free loopback ports for the plane's components and the processes under test.
//!
//! A port from `bind(127.0.0.1:0)` lies in the kernel's ephemeral range, which outgoing
//! connections draw from too: between choosing it and the component binding it, a connection
//! (kube-apiserver to etcd, a test's client) can take it, and the component fails with "address
//! already in use" (kube-controller-manager did, in CI). So ports are drawn below that range,
//! where only listeners live, checked free by binding, and never handed out twice by one process.

use std::collections::BTreeSet;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

/// Below this, ports tend to belong to well-known services.
const LISTENER_FLOOR: u16 = 10_000;
/// Where Linux's ephemeral range starts by default, when `/proc` does not say.
const DEFAULT_EPHEMERAL_START: u16 = 32_768;
const DRAWS: usize = 200;
/// `<lane>/<lanes>` (from 0), set by hack/test when it runs test binaries side by side: each
/// process draws from its own slice of the range, so two of them never choose the same port
/// between one's check and its component's bind.
pub const LANE_VAR: &str = "RELOADER_TEST_PORT_LANE";

/// A port on 127.0.0.1 free right now and not handed out before by this process. Released at
/// once, so the process it is meant for can bind it.
///
/// # Panics
///
/// When not even the kernel can find a free port.
pub fn free_port() -> u16 {
    try_free_port().expect("a free port on 127.0.0.1")
}

/// [`free_port`], returning the error.
pub fn try_free_port() -> io::Result<u16> {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    let range = lane_range(listener_range(ephemeral_start()), std::env::var(LANE_VAR).ok().as_deref())?;
    let seed = RandomState::new();
    for draw in 0..DRAWS {
        let mut hasher = seed.build_hasher();
        hasher.write_usize(draw);
        let port = pick(&range, hasher.finish());
        if !handed_out.contains(&port) && TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            handed_out.insert(port);
            return Ok(port);
        }
    }
    // Every draw taken (a crowded machine or an odd ephemeral range): let the kernel choose.
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
    handed_out.insert(port);
    Ok(port)
}

fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(DEFAULT_EPHEMERAL_START)
}

/// The ports below the ephemeral range, or every port from the floor up when too few lie below.
fn listener_range(ephemeral_start: u16) -> Range<u16> {
    if ephemeral_start > LISTENER_FLOOR + 1_000 {
        LISTENER_FLOOR..ephemeral_start
    } else {
        LISTENER_FLOOR..u16::MAX
    }
}

/// This process's slice of `range` when [`LANE_VAR`] names one.
fn lane_range(range: Range<u16>, lane: Option<&str>) -> io::Result<Range<u16>> {
    let Some(lane) = lane else { return Ok(range) };
    let invalid = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{LANE_VAR}={lane:?}: expected <lane>/<lanes> with lane < lanes, e.g. 0/2"),
        )
    };
    let (index, count) = lane.split_once('/').ok_or_else(invalid)?;
    let (index, count): (u16, u16) =
        (index.trim().parse().map_err(|_| invalid())?, count.trim().parse().map_err(|_| invalid())?);
    if count == 0 || index >= count {
        return Err(invalid());
    }
    let width = (range.end - range.start) / count;
    let start = range.start + index * width;
    let end = if index + 1 == count { range.end } else { start + width };
    Ok(start..end)
}

fn pick(range: &Range<u16>, random: u64) -> u16 {
    let width = u64::from(range.end - range.start);
    let offset = u16::try_from(random % width).expect("an offset within a u16 range");
    range.start + offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_lie_below_the_ephemeral_range_and_are_never_repeated() {
        let start = ephemeral_start();
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        if start > LISTENER_FLOOR + 1_000 {
            assert!(ports.iter().all(|port| (LISTENER_FLOOR..start).contains(port)), "{ports:?} vs {start}");
        }
    }

    #[test]
    fn the_range_falls_back_when_little_lies_below_the_ephemeral_start() {
        assert_eq!(listener_range(32_768), 10_000..32_768);
        assert_eq!(listener_range(1_024), 10_000..u16::MAX);
        assert_eq!(pick(&(10_000..10_003), 7), 10_001);
    }

    #[test]
    fn lanes_split_the_range_without_overlap() {
        let range = 10_000..32_768;
        assert_eq!(lane_range(range.clone(), None).unwrap(), range);
        assert_eq!(lane_range(range.clone(), Some("0/1")).unwrap(), range);
        assert_eq!(lane_range(range.clone(), Some("0/2")).unwrap(), 10_000..21_384);
        assert_eq!(lane_range(range.clone(), Some("1/2")).unwrap(), 21_384..32_768);
        assert_eq!(lane_range(range.clone(), Some("2/3")).unwrap(), 25_178..32_768);
        for bad in ["", "1", "2/2", "0/0", "a/2", "-1/2"] {
            let error = lane_range(range.clone(), Some(bad)).unwrap_err().to_string();
            assert!(error.contains(LANE_VAR) && error.contains(&format!("{bad:?}")), "{error}");
        }
    }
}
