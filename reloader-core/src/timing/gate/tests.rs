//! Every pair of a workload's timing and a write's circumstance, and what the gate does.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::markers::MarkerAction;
use crate::model::{ContentHash, ReloadStrategy, ResourceKey, ResourceKind};
use crate::timing::Windows;

const NOW: &str = "2026-12-01T10:00:00Z";

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn change(action: MarkerAction) -> MarkerChange {
    MarkerChange {
        resource: ResourceKey::new(ResourceKind::ConfigMap, "team-a", "settings"),
        action,
        strategy: ReloadStrategy::EnvVars,
        container: 0,
    }
}

/// What a cell expects.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Go,
    Stop,
    Stopped,
    /// (reason, since, until, the recorded resource `old` kept beside `settings`)
    Hold(HoldReason, &'static str, &'static str, bool),
}

/// The circumstances of a due write, the columns of the table.
const COLUMNS: [&str; 9] = [
    "a change",
    "a coalesced change (first seen 10 s before)",
    "a change 1 min after the last reload",
    "a resume after a pause period",
    "a delete (--reload-on-delete)",
    "a hold recorded by an earlier leader",
    "a recorded hold whose change was reverted",
    "the loop guard trips",
    "the loop guard's stop is on the workload",
];

fn due_of<'a>(
    column: usize,
    timing: &'a Timing,
    changes: &'a [MarkerChange],
    deleted: &'a [MarkerChange],
    record: &'a HeldReload,
) -> DueWrite<'a> {
    let mut due = DueWrite {
        changes,
        timing,
        recorded: None,
        changed_at: at(NOW),
        last_reload: None,
        loop_verdict: Verdict::Allow,
        loop_stopped: false,
        now: at(NOW),
    };
    match column {
        0 => {}
        1 => due.changed_at = at("2026-12-01T09:59:50Z"),
        2 => due.last_reload = Some(at("2026-12-01T09:59:00Z")),
        3 => due.changes = &[],
        4 => due.changes = deleted,
        5 => due.recorded = Some(record),
        6 => {
            due.recorded = Some(record);
            due.changes = &[];
        }
        7 => due.loop_verdict = Verdict::Trip { reloads: 20, within: Duration::from_secs(600) },
        _ => due.loop_stopped = true,
    }
    due
}

#[test]
fn every_timing_against_every_circumstance() {
    use Expect::*;
    use HoldReason::{Delay, MaintenanceWindow as Window, MinInterval};
    let windows = |text: &str| Some(Arc::new(text.parse::<Windows>().unwrap()));
    let timing = |delay: u64, min_interval: u64, windows: Option<Arc<Windows>>| Timing {
        delay: Duration::from_secs(delay),
        min_interval: Duration::from_secs(min_interval),
        windows,
    };
    const TOMORROW_2AM: &str = "2026-12-02T02:00:00Z";
    // Rows: the timing; cells: one per column, in order.
    let rows: Vec<(&str, Timing, [Expect; 9])> = vec![
        ("no timing", Timing::default(), [Go, Go, Go, Go, Go, Go, Go, Stop, Stopped]),
        (
            "delay 5m",
            timing(300, 0, None),
            [
                Hold(Delay, NOW, "2026-12-01T10:05:00Z", false),
                Hold(Delay, "2026-12-01T09:59:50Z", "2026-12-01T10:04:50Z", false),
                Hold(Delay, NOW, "2026-12-01T10:05:00Z", false),
                Go,
                Hold(Delay, NOW, "2026-12-01T10:05:00Z", false),
                Hold(Delay, "2026-12-01T09:58:00Z", "2026-12-01T10:03:00Z", true),
                Go,
                Hold(Delay, NOW, "2026-12-01T10:05:00Z", false),
                Stopped,
            ],
        ),
        (
            "min-interval 10m",
            timing(0, 600, None),
            [
                Go,
                Go,
                Hold(MinInterval, NOW, "2026-12-01T10:09:00Z", false),
                Go,
                Go,
                Hold(MinInterval, "2026-12-01T09:58:00Z", "2026-12-01T10:03:00Z", true),
                Go,
                Stop,
                Stopped,
            ],
        ),
        (
            "a window, closed now",
            timing(0, 0, windows("* 02:00-04:00 UTC")),
            [
                Hold(Window, NOW, TOMORROW_2AM, false),
                Hold(Window, "2026-12-01T09:59:50Z", TOMORROW_2AM, false),
                Hold(Window, NOW, TOMORROW_2AM, false),
                Go,
                Hold(Window, NOW, TOMORROW_2AM, false),
                Hold(Window, "2026-12-01T09:58:00Z", TOMORROW_2AM, true),
                Go,
                Hold(Window, NOW, TOMORROW_2AM, false),
                Stopped,
            ],
        ),
        (
            "a window, open now",
            timing(0, 0, windows("* 09:00-11:00 UTC")),
            [Go, Go, Go, Go, Go, Go, Go, Stop, Stopped],
        ),
        (
            "delay 5m inside a window that closes before it ends",
            timing(300, 0, windows("* 09:00-10:02 UTC")),
            [
                Hold(Window, NOW, "2026-12-02T09:00:00Z", false),
                Hold(Window, "2026-12-01T09:59:50Z", "2026-12-02T09:00:00Z", false),
                Hold(Window, NOW, "2026-12-02T09:00:00Z", false),
                Go,
                Hold(Window, NOW, "2026-12-02T09:00:00Z", false),
                Hold(Window, "2026-12-01T09:58:00Z", "2026-12-02T09:00:00Z", true),
                Go,
                Hold(Window, NOW, "2026-12-02T09:00:00Z", false),
                Stopped,
            ],
        ),
    ];
    let changes = [change(MarkerAction::Set(ContentHash([1; 20])))];
    let deleted = [change(MarkerAction::Remove)];
    // A hold an earlier leader recorded for `old`, by the minimum interval (so a restart can
    // tell when the last reload was).
    let record = HeldReload {
        since: at("2026-12-01T09:58:00Z"),
        until: at("2026-12-01T10:03:00Z"),
        reason: MinInterval,
        resources: vec![(ResourceKind::ConfigMap, "old".to_owned())],
    };
    for (row, timing, cells) in &rows {
        for (column, expect) in cells.iter().enumerate() {
            let due = due_of(column, timing, &changes, &deleted, &record);
            let expected = match *expect {
                Go => Gate::Go,
                Stopped => Gate::Stopped,
                Stop => Gate::Stop(LoopStop {
                    at: at(NOW),
                    reloads: 20,
                    within: Duration::from_secs(600),
                    resource: "ConfigMap/settings".to_owned(),
                }),
                Hold(reason, since, until, with_old) => {
                    let mut resources = vec![(ResourceKind::ConfigMap, "settings".to_owned())];
                    if with_old {
                        resources.insert(0, (ResourceKind::ConfigMap, "old".to_owned()));
                    }
                    Gate::Hold(HeldReload { since: at(since), until: at(until), reason, resources })
                }
            };
            assert_eq!(gate(&due), expected, "{row} × {}", COLUMNS[column]);
        }
    }
}
